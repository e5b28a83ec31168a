#!/bin/bash
# reconserver with several loop threads (--loops 3): 36 scans from 12
# clients are all served (mr-load checks every image by content), handed
# round robin (12 to each loop, /metrics), counted once each (sessions
# total, none left active); then --max-connections counts across the
# loops: 8 sessions open at once against --max-connections 4 spread over 3
# loops, and exactly 4 are turned away as busy. SIGTERM drains every loop.
#   loops.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
metrics() { http_get "$http_port" /metrics; }
fail() { echo "FAIL: $*"; cat "$tmp/server.log"; exit 1; }
stop() {
  kill -TERM "$server"
  wait "$server" || fail "server exit"
  grep -q "reconserver stopped" "$tmp/server.log" || fail "no clean stop"
}

SERVER_ARGS="--loops 3 --http 127.0.0.1:0" start_server "$build" "$src/configs"
http_port=$(http_port_in_log)
grep -q "3 loop threads" "$tmp/server.log" || fail "not 3 loop threads"
"$build/bin/mr-load" -p "$port" -c 12 -n 3 -m 32 -k 4 >"$tmp/load.json" ||
  fail "mr-load: $(cat "$tmp/load.json")"
grep -q '"ok": 36, "errors": 0, "mismatched": 0' "$tmp/load.json" ||
  fail "not every scan served: $(cat "$tmp/load.json")"
m=$(metrics)
for loop in 0 1 2; do
  echo "$m" | grep -q "^mrrecon_loop_connections_total{loop=\"$loop\"} 12$" ||
    fail "loop $loop was not handed 12 connections: $(echo "$m" | grep loop_connections)"
done
echo "$m" | grep -q '^mrrecon_sessions_total{config="cartesian",outcome="ok"} 36$' ||
  fail "36 sessions not counted: $(echo "$m" | grep sessions_total | grep -v ' 0$')"
echo "$m" | grep -q '^mrrecon_sessions_active 0$' || fail "sessions still counted active"
stop

# 8 sessions held open together (-w: each waits before its CLOSE) against
# --max-connections 4, round robin over 3 loops: 4 served, 4 busy.
SERVER_ARGS="--loops 3 --max-connections 4 --http 127.0.0.1:0" \
  start_server "$build" "$src/configs"
http_port=$(http_port_in_log)
"$build/bin/mr-load" -p "$port" -c 8 -n 1 -m 32 -k 4 -w 1500 >"$tmp/busy.json" 2>"$tmp/busy.err" &&
  fail "8 sessions served past --max-connections 4: $(cat "$tmp/busy.json")"
grep -q '"ok": 4, "errors": 4, "mismatched": 0' "$tmp/busy.json" ||
  fail "not 4 served and 4 refused: $(cat "$tmp/busy.json")"
[ "$(grep -c 'server busy' "$tmp/busy.err")" = 4 ] || fail "not 4 told busy: $(cat "$tmp/busy.err")"
m=$(metrics)
echo "$m" | grep -q '^mrrecon_errors_total{kind="busy"} 4$' || fail "busy not counted 4 times"
echo "$m" | grep -q '^mrrecon_sessions_active 0$' || fail "sessions still counted active"
stop
echo "ok: 3 loops served and counted every connection"
