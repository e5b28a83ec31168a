#!/bin/sh
# Starts a server and runs mr-load against it; prints mr-load's JSON.
#   run_load.sh BUILD_DIR SOURCE_DIR [--gpus SPEC] [--fake-gpus N] [mr-load options]
# --gpus (default none: the CPU) and --fake-gpus go to the server: run once
# per GPU count (--gpus 0, --gpus 0,1, ...) for sessions per second and
# latency per count.
set -eu
build=$1
src=$2
shift 2
GPUS=none
SERVER_ARGS=""
while [ $# -ge 2 ]; do
  case $1 in
  --gpus) GPUS=$2 ;;
  --fake-gpus) SERVER_ARGS="$SERVER_ARGS --fake-gpus $2" ;;
  *) break ;;
  esac
  shift 2
done
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
start_server "$build" "$src/configs"
status=0
"$build/bin/mr-load" -p "$port" "$@" || status=$?
kill -TERM "$server"
wait "$server" || status=1
exit $status
