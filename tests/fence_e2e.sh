#!/bin/bash
# The CPU server under the fenced allocator (support/fence_malloc.c: every
# block of 4 KiB or more ends at inaccessible address space) through the
# fMRI chain, a small EPI multiband series through configs/epi_sms: a read
# past a buffer's end anywhere in the chain, OpenBLAS's included, kills
# the server (gpu/README.md, "OpenBLAS reads past its operands"). The
# server must answer every image, then exit 0 on SIGTERM.
#   fence_e2e.sh BUILD_DIR SOURCE_DIR FENCE_LIBRARY
set -eu
build=$1
src=$2
fence=$3
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
. "$src/tests/support/server.sh"
"$build/bin/reconclient" simulate --trajectory epi --ramp --ghost 0.6,3 --matrix 32 --coils 8 \
  --inplane-accel 2 --multiband 2 --caipi 2 --slices 4 --volumes 2 -o "$tmp/fmri.h5" >/dev/null
start_server "$build" "$src/configs" env LD_PRELOAD="$fence"
status=0
"$build/bin/reconclient" send "$tmp/fmri.h5" -p "$port" -c epi_sms -o "$tmp/out.h5" \
  -t 120000 >"$tmp/client.log" 2>&1 || status=$?
cat "$tmp/client.log"
if ! kill -0 "$server" 2>/dev/null; then
  wait "$server" || echo "reconserver died under the fence: exit $?"
  cat "$tmp/server.log"
  exit 1
fi
[ "$status" -eq 0 ] || { echo "reconclient failed ($status)"; cat "$tmp/server.log"; exit 1; }
# 4 slices a volume, 2 volumes (the single-band reference makes none).
grep -q '^8 images' "$tmp/client.log" || { echo "expected 8 images"; exit 1; }
kill -TERM "$server"
wait "$server" || { echo "reconserver exited $? after SIGTERM"; cat "$tmp/server.log"; exit 1; }
echo "fenced server: every image, no read past a block"
