#!/bin/bash
# reconserver --warm DIR: a scan stored by the ismrmrd_dump config (HEADER
# to CLOSE), saved as DIR/cartesian.mrd, and a file of garbage are
# replayed to the server itself before it is ready: the dump runs through
# the cartesian chain (its session line, 1 image, counted in /metrics),
# the garbage is skipped with a warning, "warm-up done" is logged, and only
# then does /readyz answer 200; a client's scan is served after.
#   warm.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
get() { http_get "$http_port" "$1"; }
fail() { echo "FAIL: $*"; cat "$tmp/server.log"; exit 1; }

# A dump of a small Cartesian scan.
"$build/bin/reconclient" simulate --trajectory cartesian --matrix 32 --coils 4 -o "$tmp/scan.h5" \
  >/dev/null || fail "simulate"
SERVER_ARGS="--state-dir $tmp/state" start_server "$build" "$src/configs"
# (reconclient exits non-zero: the dump answers no image)
"$build/bin/reconclient" send "$tmp/scan.h5" -c ismrmrd_dump -p "$port" -o "$tmp/dump-out.h5" \
  >/dev/null 2>&1 || true
kill -TERM "$server"
wait "$server" || fail "server exit"
mkdir "$tmp/warm"
dump=$(find "$tmp/state/dumps" -name '*.mrd' | head -1)
[ -n "$dump" ] || fail "no dump stored"
cp "$dump" "$tmp/warm/cartesian.mrd"
head -c 1000 /dev/urandom >"$tmp/warm/zz-garbage.mrd"

SERVER_ARGS="--warm $tmp/warm --http 127.0.0.1:0" start_server "$build" "$src/configs"
http_port=$(http_port_in_log)
for _ in $(seq 600); do
  get /readyz | grep -q '^HTTP/1.[01] 200' && break
  sleep 0.1
done
get /readyz | grep -q '^HTTP/1.[01] 200' || fail "never ready: $(get /readyz)"
# Ready only after the warm-up: its lines are all in the log by now.
grep -q 'warm-up: cartesian.mrd: 1 at once, 1 images' "$tmp/server.log" || fail "dump not replayed"
grep -q 'warm-up: zz-garbage.mrd: ' "$tmp/server.log" || fail "garbage not reported"
grep -q 'warm-up done: 1 of 2 session(s)' "$tmp/server.log" || fail "no warm-up done line"
m=$(get /metrics)
echo "$m" | grep -q '^mrrecon_sessions_total{config="cartesian",outcome="ok"} 1$' ||
  fail "the warm-up session did not run through the chain"
"$build/bin/reconclient" send "$tmp/scan.h5" -c cartesian -p "$port" -o "$tmp/out.h5" \
  >/dev/null 2>&1 || fail "a client's scan after the warm-up"
kill -TERM "$server"
wait "$server" || fail "server exit"
echo "ok: warmed from a dump, then ready"
