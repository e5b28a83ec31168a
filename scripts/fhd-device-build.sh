#!/usr/bin/env bash
# Builds the iterative-reconstruction tests (gpu/fhd, toeplitz, cg, the
# fhd_cg gadget) and mr-bench for the H100 (sm_90, Release) into the
# git-ignored build-fhd-gpu/, stages those programs and the shared
# libraries they need in build-fhd-gpu/device/, packs that into
# build-fhd-gpu/device.tar.xz (OpenBLAS and ICU alone would overrun the
# carry limit unpacked), and prints the `run` call for
# scripts/fhd-device-run.sh.
#
# usage: scripts/fhd-device-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tests="test_gpu_fhd test_gpu_toeplitz test_gpu_cg test_gadgets_fhd_cg"

cmake -S . -B build-fhd-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' build-fhd-gpu/CMakeCache.txt || { echo "MR_CUDA is off" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build build-fhd-gpu -j"$(nproc)" --target mr-bench $tests

stage=build-fhd-gpu/device
rm -rf "$stage"
mkdir -p "$stage/libs"
cp build-fhd-gpu/bin/mr-bench "$stage/"
for t in $tests; do cp "build-fhd-gpu/tests/$t" "$stage/"; done
scripts/bundle-libs.sh "$stage/libs" "$stage"/mr-bench "$stage"/test_*
tar -C build-fhd-gpu -cJf build-fhd-gpu/device.tar.xz device
du -sh "$stage" build-fhd-gpu/device.tar.xz

cat <<'CALL'

Now call the device tool's `run` with:
  command:   scripts/fhd-device-run.sh
  carry:     ["build-fhd-gpu/device.tar.xz"]
Results come back under $OUT: device.txt, tests.log, summary.txt,
sanitizer.log, bench.json, bench.log, ncu.txt.
CALL
