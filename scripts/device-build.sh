#!/usr/bin/env bash
# The whole project's check on the H100, part 1 (here): builds for sm_90
# (Release) into build-device/, stages the programs the device run needs
# in build-device/stage/ (bin/ for the servers and tools, tests/ for the
# test programs, as MR_BINARY_DIR expects), and bundles their shared
# libraries — and ISMRMRD's reference tools with theirs, which that
# machine lacks — into stage/libs.tar.xz (compressed: OpenBLAS and ICU
# alone would overrun the 64 MiB a run may carry). Part 2 is
# scripts/device-run.sh.
#
# usage: scripts/device-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
programs="reconserver reconclient mr-load mr-grappa-e2e mr-bench"
tests="test_server_session test_server_limits test_server_faults test_server_http test_client_e2e
       test_client_simulate_e2e test_configs_images test_gadgets_configs test_gadgets_gridding"

cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' build-device/CMakeCache.txt || { echo "build-device has MR_CUDA off" >&2; exit 1; }
# The programs behind ctest's `gpu` label (test_gpu_fft_cuda runs test_gpu_fft).
gpu_tests=$(ctest --test-dir build-device -N -L gpu | sed -n 's/.*Test *#[0-9]*: \(test_gpu_[a-z_]*\)_cuda$/\1/p')
cmake --build build-device -j"$(nproc)" --target $programs $tests $gpu_tests

stage=build-device/stage
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/tests"
for p in $programs; do cp "build-device/bin/$p" "$stage/bin/"; done
for t in $tests; do cp "build-device/tests/$t" "$stage/tests/"; done
for t in $gpu_tests; do cp "build-device/tests/$t" "$stage/tests/"; done
cp /usr/bin/ismrmrd_generate_cartesian_shepp_logan /usr/bin/ismrmrd_recon_cartesian_2d "$stage/bin/"
strip "$stage"/bin/* "$stage"/tests/*
rm -rf build-device/libs
scripts/bundle-libs.sh build-device/libs "$stage"/bin/* "$stage"/tests/*
tar -cJf "$stage/libs.tar.xz" -C build-device/libs .
du -sh "$stage"

cat <<'CALL'

Now call the device tool's `run` with:
  command:   scripts/device-run.sh tests     (then again with: bench)
  carry:     ["build-device/stage"]
  timeout_s: 600
CALL
