#!/bin/sh
# Three reconserver replicas behind HAProxy on loopback, with
# deploy/haproxy/haproxy.cfg as it ships (only the addresses changed)
# (issue 13, item 4):
#   1. mr-load 32 clients x 20 scans (128x128, 8 coils) through HAProxy:
#      0 errors, every image checked by content;
#   2. the same with SIGTERM to one replica mid-run: 0 failed scans (its
#      running scans finish, /readyz turns it away, refusals are
#      redispatched), and it exits 0;
#   3. the same with SIGKILL to another: only the scans it had in flight
#      fail, each with a clear client error, the rest complete, and HAProxy
#      marks it down within 2 s.
# Prints one JSON line with the three runs. Exits 77 when haproxy is not
# installed and cannot be.
#   scripts/scaleout-test.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
src=$PWD
build=$(cd "${1:-build}" && pwd)
command -v haproxy >/dev/null || { echo "scaleout-test: skipped: haproxy is not installed"; exit 77; }
command -v curl >/dev/null || { echo "scaleout-test: curl is missing"; exit 1; }
for prog in reconserver mr-load; do
  [ -x "$build/bin/$prog" ] || { echo "scaleout-test: $build/bin/$prog is missing"; exit 1; }
done

work=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "scaleout-test: FAILED: $*" >&2
  for i in 1 2 3; do
    echo "--- replica $i log (tail)" >&2
    tail -5 "$work/r$i.log" >&2 || true
  done
  echo "--- haproxy log (tail)" >&2
  tail -20 "$work/haproxy.log" >&2 || true
  exit 1
}

# Replicas on free ports; each log says where it listens.
for i in 1 2 3; do
  "$build/bin/reconserver" --listen 127.0.0.1:0 --http 127.0.0.1:0 --gpus none \
    --configs "$src/configs" --drain-timeout 60000 2>"$work/r$i.log" &
  eval "pid$i=$!"
  pids="$pids $!"
done
for i in 1 2 3; do
  for _ in $(seq 300); do
    grep -q " listening on " "$work/r$i.log" && break
    sleep 0.05
  done
  eval "port$i=$(sed -n 's/.* listening on 127.0.0.1:\([0-9]*\) .*/\1/p' "$work/r$i.log")"
  eval "http$i=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\) .*|\1|p' "$work/r$i.log")"
done
[ -n "$port3" ] && [ -n "$http3" ] || fail "replicas did not start"

# HAProxy on free ports: a few random tries (it fails fast when taken).
up=""
for _ in 1 2 3 4 5; do
  lb=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 30000))
  stats=$((lb + 1))
  sed -e "s|bind :9002|bind 127.0.0.1:$lb|" -e "s|bind 127.0.0.1:8404|bind 127.0.0.1:$stats|" \
    -e "s|recon1:9002 check port 9102|127.0.0.1:$port1 check port $http1|" \
    -e "s|recon2:9002 check port 9102|127.0.0.1:$port2 check port $http2|" \
    -e "s|recon3:9002 check port 9102|127.0.0.1:$port3 check port $http3|" \
    deploy/haproxy/haproxy.cfg >"$work/haproxy.cfg"
  haproxy -db -f "$work/haproxy.cfg" >"$work/haproxy.log" 2>&1 &
  haproxy=$!
  for _ in $(seq 100); do
    if curl -sf "http://127.0.0.1:$stats/stats;csv" >"$work/stats.csv" 2>/dev/null &&
       [ "$(grep -c '^reconservers,recon[123],.*,UP,' "$work/stats.csv")" = 3 ]; then
      up=1
      break
    fi
    kill -0 "$haproxy" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$up" ] && break
  kill "$haproxy" 2>/dev/null || true
  wait "$haproxy" 2>/dev/null || true
done
[ -n "$up" ] || fail "haproxy did not start with three replicas up"
pids="$pids $haproxy"

# status of replica i in HAProxy's CSV (UP, DOWN, ...)
state() {
  curl -sf "http://127.0.0.1:$stats/stats;csv" | awk -F, -v s="recon$1" '$1 == "reconservers" && $2 == s {print $18}'
}
# Waits until replica i has finished 20 scans of this run and has one
# running: mid-run, with something in flight.
mid_run() {
  eval "h=\$http$1"
  before=$(curl -sf "http://127.0.0.1:$h/metrics" | awk '/^mrrecon_sessions_total/ {n += $2} END {print n + 0}')
  for _ in $(seq 600); do
    m=$(curl -sf "http://127.0.0.1:$h/metrics") || return 1
    done_now=$(echo "$m" | awk '/^mrrecon_sessions_total/ {n += $2} END {print n + 0}')
    active=$(echo "$m" | sed -n 's/^mrrecon_sessions_active //p')
    [ "$((done_now - before))" -ge 20 ] && [ "${active:-0}" -ge 1 ] && return 0
    sleep 0.02
  done
  return 1
}
field() { sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p" "$1" | head -n 1; }
now() { date +%s.%N; }
one_line() { tr -d '\n' <"$1" | tr -s ' '; }

load="-c 32 -n 20 -m 128 -k 8"
# shellcheck disable=SC2086
"$build/bin/mr-load" -p "$lb" $load >"$work/steady.json" 2>"$work/steady.err" ||
  { cat "$work/steady.json" "$work/steady.err" >&2; fail "steady load had errors"; }

# SIGTERM to replica 1 once the run is under way.
# shellcheck disable=SC2086
"$build/bin/mr-load" -p "$lb" $load >"$work/term.json" 2>"$work/term.err" &
run=$!
mid_run 1 || fail "replica 1 got no scans"
kill -TERM "$pid1"
kill -0 "$run" 2>/dev/null || fail "the run ended before the SIGTERM: make it longer"
status=0
wait "$run" || status=$?
[ "$status" -eq 0 ] || { cat "$work/term.json" "$work/term.err" >&2; fail "scans failed around SIGTERM"; }
r1=0
wait "$pid1" || r1=$?
[ "$r1" -eq 0 ] || fail "replica 1 exited $r1 after SIGTERM"

# SIGKILL to replica 2 mid-run: what it had in flight fails, nothing else.
log_from=$(($(wc -l <"$work/haproxy.log") + 1))
# shellcheck disable=SC2086
"$build/bin/mr-load" -p "$lb" $load >"$work/kill.json" 2>"$work/kill.err" &
run=$!
mid_run 2 || fail "replica 2 got no scans"
kill -KILL "$pid2"
kill -0 "$run" 2>/dev/null || fail "the run ended before the SIGKILL: make it longer"
killed=$(now)
down_s=""
for _ in $(seq 100); do
  if [ "$(state 2)" = "DOWN" ]; then
    down_s=$(echo "$(now) $killed" | awk '{printf "%.2f", $1 - $2}')
    break
  fi
  sleep 0.05
done
wait "$run" || true
wait "$pid2" 2>/dev/null || true
errors=$(field "$work/kill.json" errors)
ok=$(field "$work/kill.json" ok)
mismatched=$(field "$work/kill.json" mismatched)
[ -n "$down_s" ] || fail "haproxy did not mark the killed replica down within 5 s"
awk -v d="$down_s" 'BEGIN {exit !(d <= 2.0)}' || fail "marked down after $down_s s (> 2 s)"
[ "$mismatched" = 0 ] || fail "wrong images after SIGKILL"
[ "$((ok + errors))" -eq 640 ] || fail "scans unaccounted for after SIGKILL"
# In flight when it died: HAProxy's log of this run names, for each
# connection, its replica, the bytes the client got and how it ended
# ("--": normally). A scan cut short got fewer bytes than a whole one (all
# scans of the run answer the same size, the most common figure), or ended
# abnormally. The failed scans must be exactly those on replica 2.
tail -n "+$log_from" "$work/haproxy.log" | grep " mrd reconservers/" >"$work/kill.log" || true
whole=$(awk '{print $6}' "$work/kill.log" | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
cut_on_2=$(awk -v w="$whole" '$4 == "reconservers/recon2" && ($7 != "--" || $6 != w)' "$work/kill.log" | wc -l)
cut_elsewhere=$(awk -v w="$whole" '$4 != "reconservers/recon2" && ($7 != "--" || $6 != w)' "$work/kill.log" | wc -l)
[ "$cut_elsewhere" -eq 0 ] || { cat "$work/kill.log" >&2; fail "connections to other replicas failed"; }
[ "$errors" -eq "$cut_on_2" ] ||
  { grep recon2 "$work/kill.log" >&2; fail "$errors scans failed, $cut_on_2 were in flight on the killed replica"; }
if grep "mr-load:" "$work/kill.err" | grep -qv "no CLOSE from the server\|cannot connect"; then
  cat "$work/kill.err" >&2
  fail "unexpected client errors after SIGKILL"
fi

echo "{\"steady\": $(one_line "$work/steady.json"), \"sigterm\": $(one_line "$work/term.json")," \
  "\"sigkill\": {\"in_flight\": $cut_on_2, \"marked_down_s\": $down_s," \
  "\"load\": $(one_line "$work/kill.json")}}"
echo "scaleout-test: passed" >&2
