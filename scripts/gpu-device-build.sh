#!/usr/bin/env bash
# Builds the gpu/ tests and mr-bench for the H100 (sm_90, Release) into the
# git-ignored build-gpu/, stages just those programs in build-gpu/device/,
# bundles the shared libraries they need into .device-libs/, and prints the
# `run` call that executes scripts/gpu-device-run.sh on the device machine.
#
# usage: scripts/gpu-device-build.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
tests="test_gpu_pool test_gpu_host test_gpu_fft test_gpu_coil test_gpu_blas test_gpu_solve test_gpu_vec test_gpu_block"

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' build-gpu/CMakeCache.txt || { echo "build-gpu has MR_CUDA off" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build build-gpu -j"$(nproc)" --target mr-bench $tests

rm -rf build-gpu/device
mkdir -p build-gpu/device
cp build-gpu/bin/mr-bench build-gpu/device/
for t in $tests; do cp "build-gpu/tests/$t" build-gpu/device/; done
scripts/bundle-libs.sh .device-libs build-gpu/device/*
du -sh build-gpu/device .device-libs

cat <<'CALL'

Now call the device tool's `run` with:
  command:   scripts/gpu-device-run.sh
  carry:     ["build-gpu/device", ".device-libs"]
  timeout_s: 600
Results come back under $OUT: tests.log, tests-summary.txt, sanitizer.log,
bench.json, bench.log, device.txt.
CALL
