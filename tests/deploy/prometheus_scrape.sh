#!/bin/sh
# A real Prometheus (Debian's prometheus package) scrapes reconserver
# --http: the target is up and a reconstructed scan shows in its series.
# Skips (77) when prometheus is not installed.
#   prometheus_scrape.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
command -v prometheus >/dev/null || { echo "skipped: prometheus is not installed"; exit 77; }
tmp=$(mktemp -d)
prom=""
trap 'kill "$server" 2>/dev/null || true; [ -z "$prom" ] || kill "$prom" 2>/dev/null || true
      wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
SERVER_ARGS="--http 127.0.0.1:0" start_server "$build" "$src/configs"
http=$(sed -n 's|.*health and metrics on http://\(127.0.0.1:[0-9]*\) .*|\1|p' "$tmp/server.log")
[ -n "$http" ] || { echo "no --http address in the log"; cat "$tmp/server.log"; exit 1; }

cat >"$tmp/prometheus.yml" <<EOC
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: mrrecon
    static_configs:
      - targets: ["$http"]
EOC
: >"$tmp/prometheus.log" # there before the first look at it (made after the fork otherwise)
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address=127.0.0.1:0 2>"$tmp/prometheus.log" &
prom=$!

# One scan through the server, so that a counter moves.
"$build/bin/mr-load" -p "$port" -c 1 -n 1 -m 32 -k 2 >/dev/null

query() { # PromQL -> the first sample's value, or nothing
  curl -sf --get "http://$api/api/v1/query" --data-urlencode "query=$1" |
    sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p'
}
api=""
for _ in $(seq 300); do
  [ -n "$api" ] || api=$(sed -n 's/.*msg="Listening on" address=\([0-9.:]*\).*/\1/p' "$tmp/prometheus.log")
  if [ -n "$api" ] && [ "$(query 'up{job="mrrecon"}')" = "1" ] &&
     [ "$(query 'sum(mrrecon_sessions_total{config="cartesian",outcome="ok"})')" = "1" ]; then
    echo "prometheus scraped $http: up, 1 cartesian session"
    exit 0
  fi
  sleep 0.1
done
echo "prometheus did not scrape the expected series; up=$(query 'up{job="mrrecon"}')"
tail -20 "$tmp/prometheus.log"
exit 1
