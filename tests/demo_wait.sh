#!/bin/sh
# scripts/wait-server.sh, as scripts/demo.sh uses it: a server on a free
# port is waited for until it answers (its port printed), also when its
# log does not exist yet as the wait begins; one whose port
# is already taken (by another reconserver, which must not be mistaken for
# it) fails at once with the reason and its log; so does one that never
# comes up within the wait.
#   demo_wait.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
first=""
second=""
trap 'kill $first $second 2>/dev/null || true; rm -rf "$tmp"' EXIT
wait_server="$src/scripts/wait-server.sh"
client="$build/bin/reconclient"

# Its log is made only as it starts, a moment after the wait begins (as
# a busy machine's shell may: the wait once failed on the missing file).
(sleep 0.5; exec "$build/bin/reconserver" --listen 127.0.0.1:0 --configs "$src/configs" \
  --gpus none 2>"$tmp/first.log") &
first=$!
port=$("$wait_server" "$first" "$tmp/first.log" "$client" 60)
"$client" ping -p "$port" >/dev/null

# The same port again: the second server cannot listen and exits; the
# wait says so with its log, and never pings the first one in its place.
"$build/bin/reconserver" --listen "127.0.0.1:$port" --configs "$src/configs" --gpus none \
  2>"$tmp/second.log" &
second=$!
if "$wait_server" "$second" "$tmp/second.log" "$client" 60 >"$tmp/out" 2>"$tmp/err"; then
  echo "wait-server.sh took a server whose port was taken for ready:" && cat "$tmp/out"
  exit 1
fi
grep -q "exited before it was ready" "$tmp/err" || { cat "$tmp/err"; exit 1; }
grep -qi "in use" "$tmp/err" || { echo "the log's reason is not shown:"; cat "$tmp/err"; exit 1; }
wait "$second" || true
second=""

# A process that never serves: given up after the wait, with the log.
sleep 30 &
second=$!
echo "(nothing)" >"$tmp/silent.log"
if "$wait_server" "$second" "$tmp/silent.log" "$client" 1 2>"$tmp/err"; then
  echo "wait-server.sh took a silent process for ready" && exit 1
fi
grep -q "did not answer within 1 s" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "ok"
