#!/bin/bash
# The end-to-end run under valgrind memcheck: reconserver and reconclient
# both, a phantom through the Cartesian chain and a client that vanishes
# mid-stream, and neither may leak or touch memory it should not.
#   valgrind_e2e.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 77; }
command -v ismrmrd_generate_cartesian_shepp_logan >/dev/null || { echo "no ismrmrd tools: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
vg="valgrind --quiet --suppressions=$src/tests/valgrind.supp --leak-check=full
    --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 --track-fds=no"
. "$src/tests/support/server.sh"
# shellcheck disable=SC2086
start_server "$build" "$src/configs" $vg --log-file="$tmp/server.vg"
(cd "$tmp" && ismrmrd_generate_cartesian_shepp_logan -m 64 -c 4 -r 2 -o phantom.h5 >/dev/null)
# shellcheck disable=SC2086
$vg --log-file="$tmp/client.vg" "$build/bin/reconclient" send "$tmp/phantom.h5" -p "$port" \
    -o "$tmp/out.h5" -t 60000
# A client that goes away in the middle of an acquisition: CONFIG_FILE
# "default.xml", then 100 bytes of an ACQUISITION (id 1008) header.
exec 3<>"/dev/tcp/127.0.0.1/$port"
{ printf '\001\000default.xml'; head -c 1013 /dev/zero; printf '\360\003'; head -c 100 /dev/zero; } >&3
exec 3>&-
kill -TERM "$server"
status=0
wait "$server" || status=$?
echo "-- reconserver"; cat "$tmp/server.vg"
echo "-- reconclient"; cat "$tmp/client.vg"
if [ "$status" -ne 0 ]; then
  echo "reconserver exited $status under valgrind"
  cat "$tmp/server.log"
  exit 1
fi
echo "valgrind: no errors, no leaks"
