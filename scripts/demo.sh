#!/bin/sh
# The main job: install, build, start reconserver on loopback, generate a
# Shepp-Logan phantom, reconstruct it through the server, write out/out.h5
# and a PNG of the image, stop the server.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh

out="$PWD/out"
mkdir -p "$out"
rm -f "$out/phantom.h5" "$out/out.h5" "$out"/*.png
port=${MR_DEMO_PORT:-9002}

build/bin/reconserver --listen "127.0.0.1:$port" --configs configs 2>"$out/reconserver.log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  build/bin/reconclient ping -p "$port" >/dev/null 2>&1 && break
  sleep 0.1
done

(cd "$out" && ismrmrd_generate_cartesian_shepp_logan -m 256 -c 8 -o phantom.h5 >/dev/null)
build/bin/reconclient send "$out/phantom.h5" -c default.xml -p "$port" -o "$out/out.h5" --png "$out"

kill -TERM "$server"
wait "$server"
trap - EXIT
echo "images: $out/out.h5 ($(ls "$out"/*.png | wc -l) PNG in $out), server log: $out/reconserver.log"
