#!/usr/bin/env bash
# Builds the NUFFT tests, the server, the client and mr-bench for the H100
# (sm_90, Release) into the git-ignored build-nufft-gpu/, stages just those
# programs in build-nufft-gpu/device/{bin,tests} with the shared libraries
# they need in build-nufft-gpu/device/lib, and packs that folder into
# build-nufft-gpu/nufft-device.tar.xz (libxml2's ICU data and OpenBLAS alone
# pass the 64 MiB a run may carry; packed they take about a third). Then
# call the device tool's `run` with command scripts/nufft-device-run.sh and
# carry ["build-nufft-gpu/nufft-device.tar.xz"].
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared}
tests="test_gpu_nufft test_client_simulate_e2e"
programs="reconserver reconclient mr-bench"

cmake -S . -B build-nufft-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' build-nufft-gpu/CMakeCache.txt || { echo "MR_CUDA is off" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build build-nufft-gpu -j"$(nproc)" --target $programs $tests

rm -rf build-nufft-gpu/device
mkdir -p build-nufft-gpu/device/bin build-nufft-gpu/device/tests
for p in $programs; do cp "build-nufft-gpu/bin/$p" build-nufft-gpu/device/bin/; done
for t in $tests; do cp "build-nufft-gpu/tests/$t" build-nufft-gpu/device/tests/; done
"$shared/device/bundle-libs.sh" build-nufft-gpu/device/lib build-nufft-gpu/device/bin/* \
  build-nufft-gpu/device/tests/*
tar -C build-nufft-gpu -cJf build-nufft-gpu/nufft-device.tar.xz device
du -sh build-nufft-gpu/device build-nufft-gpu/nufft-device.tar.xz
