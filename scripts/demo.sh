#!/bin/sh
# The main job: install what the server and client need, build them, start
# reconserver on loopback, generate a Shepp-Logan phantom, reconstruct it
# through the server, write out/out.h5 and a PNG of the image, stop the
# server.
#
# The server listens on a free port (the one its log names) unless
# MR_DEMO_PORT says which; the demo goes on once the server answers a ping
# (scripts/wait-server.sh: a cold start pages in some 340 MB of CUDA
# libraries), and stops with the server's log if it exits first (a port
# already taken, say) or does not answer within MR_DEMO_WAIT seconds
# (default 300).
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh demo
# Without cmocka (the tests' package) only the server and client can be
# configured; scripts/test.sh turns the tests back on.
pkg-config --exists cmocka || MR_CMAKE_ARGS="${MR_CMAKE_ARGS:-} -DBUILD_TESTING=OFF"
export MR_CMAKE_ARGS="${MR_CMAKE_ARGS:-}"
scripts/build.sh reconserver reconclient

out="$PWD/out"
mkdir -p "$out"
rm -f "$out/phantom.h5" "$out/out.h5" "$out"/*.png
log="$out/reconserver.log"
: >"$log"

build/bin/reconserver --listen "127.0.0.1:${MR_DEMO_PORT:-0}" --configs configs 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT

port=$(scripts/wait-server.sh "$server" "$log" build/bin/reconclient "${MR_DEMO_WAIT:-300}") ||
  { echo "demo: the server did not start (above: why, and its log)" >&2; exit 1; }
echo "demo: reconserver ready on 127.0.0.1:$port" >&2

(cd "$out" && ismrmrd_generate_cartesian_shepp_logan -m 256 -c 8 -o phantom.h5 >/dev/null)
build/bin/reconclient send "$out/phantom.h5" -c default.xml -p "$port" -o "$out/out.h5" --png "$out"

kill -TERM "$server"
wait "$server"
trap - EXIT
echo "images: $out/out.h5 ($(ls "$out"/*.png | wc -l) PNG in $out), server log: $log"
