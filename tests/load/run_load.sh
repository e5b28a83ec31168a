#!/bin/sh
# Starts a server and runs mr-load against it; prints mr-load's JSON.
#   run_load.sh BUILD_DIR SOURCE_DIR [mr-load options]
set -eu
build=$1
src=$2
shift 2
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
start_server "$build" "$src/configs"
status=0
"$build/bin/mr-load" -p "$port" "$@" || status=$?
kill -TERM "$server"
wait "$server" || status=1
exit $status
