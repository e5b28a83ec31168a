#!/usr/bin/env bash
# Builds the GRAPPA GPU test, mr-bench, mr-grappa-e2e and reconserver for
# the H100 (sm_90, Release) into the git-ignored build-grappa-gpu/ (or
# BUILD), stages them with the shared libraries they need in BUILD/device/,
# packs that into BUILD/device.tar.xz (OpenBLAS and ICU alone would overrun
# the carry limit unpacked), and prints the `run` call for
# scripts/grappa-device-run.sh.
#
# usage: [BUILD=dir] scripts/grappa-device-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-grappa-gpu}
programs="test_gpu_grappa mr-bench mr-grappa-e2e reconserver"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' "$build/CMakeCache.txt" || { echo "MR_CUDA is off" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $programs

stage=$build/device
rm -rf "$stage"
mkdir -p "$stage/libs" "$stage/bin"
cp "$build/tests/test_gpu_grappa" "$stage/"
cp "$build/bin/mr-bench" "$build/bin/mr-grappa-e2e" "$build/bin/reconserver" "$stage/bin/"
scripts/bundle-libs.sh "$stage/libs" "$stage"/test_gpu_grappa "$stage"/bin/*
tar -C "$build" -cJf "$build/device.tar.xz" device
du -sh "$stage" "$build/device.tar.xz"

cat <<CALL

Now call the device tool's \`run\` with:
  command:   BUILD=$build scripts/grappa-device-run.sh
  carry:     ["$build/device.tar.xz"]
Results come back under \$OUT: device.txt, tests.log, bench.json, bench.log,
e2e.json, e2e.log, summary.txt.
CALL
