#!/bin/bash
# reconserver with several fake GPUs (--fake-gpus: the CPU's code placed as
# GPUs), one left out with --gpus: /metrics shows exactly the ones kept,
# and 4 sessions open at once (mr-load -w: each waits before its CLOSE)
# are placed 2 and 2 (the least loaded GPU each time), all succeed, and
# give their places back.
#   fake_gpus.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
GPUS=0,2 SERVER_ARGS="--fake-gpus 3 --fake-gpu-memory 512 --http 127.0.0.1:0" \
  start_server "$build" "$src/configs"
http_port=$(http_port_in_log)

metrics() { http_get "$http_port" /metrics; }
fail() { echo "FAIL: $*"; cat "$tmp/server.log"; exit 1; }

m=$(metrics)
echo "$m" | grep -q '^mrrecon_gpu_memory_total_bytes{gpu="0"} 536870912$' || fail "gpu 0 memory"
echo "$m" | grep -q '^mrrecon_gpu_sessions{gpu="2"} 0$' || fail "gpu 2 listed"
echo "$m" | grep -q 'gpu="1"' && fail "gpu 1 was left out with --gpus"
echo "$m" | grep -q '^mrrecon_gpu_lane_busy_seconds_total{gpu="2",lane="0"} ' || fail "gpu 2 lane busy"

# Watch /metrics while the 4 sessions are open together.
"$build/bin/mr-load" -p "$port" -c 4 -n 1 -m 32 -k 4 -w 3000 >"$tmp/load.json" &
load=$!
spread=0
while kill -0 "$load" 2>/dev/null && [ $spread = 0 ]; do
  m=$(metrics)
  echo "$m" | grep -q '^mrrecon_gpu_sessions{gpu="0"} 2$' &&
    echo "$m" | grep -q '^mrrecon_gpu_sessions{gpu="2"} 2$' && spread=1
  sleep 0.05
done
wait "$load" || fail "mr-load: $(cat "$tmp/load.json")"
grep -q '"errors": *0' "$tmp/load.json" || fail "load errors: $(cat "$tmp/load.json")"
[ $spread = 1 ] || fail "4 open sessions were never placed 2 and 2: $(echo "$m" | grep gpu_sessions)"
m=$(metrics)
echo "$m" | grep -q '^mrrecon_gpu_sessions{gpu="0"} 0$' || fail "gpu 0 load not given back"
echo "$m" | grep -q '^mrrecon_gpu_sessions{gpu="2"} 0$' || fail "gpu 2 load not given back"
kill -TERM "$server"
wait "$server" || fail "server exit"
echo "ok: sessions on fake GPUs 0 and 2"
