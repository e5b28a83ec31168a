#!/usr/bin/env bash
# Builds the NUFFT test and mr-bench for the H100 (sm_90) in BUILD (default
# the git-ignored build-nufft-gpu/, Release when it is new; any configured
# CUDA build folder will do), and stages in DEST (default BUILD/device) what
# a run on the device machine needs: nufft-device.tar.xz (the programs, and
# the shared libraries they need that a bare GPU machine lacks: libxml2's
# ICU data and OpenBLAS alone pass the 64 MiB a run may carry, packed they
# take about a third), scripts/nufft-device-run.sh beside it, and, when
# REFERENCE names it, the reference library's tarball (cufinufft-sm90.tar.xz,
# for mr-bench to time beside ours). Then call the device tool's `run` with
# DEST carried and the command DEST/nufft-device-run.sh.
#   BUILD=build DEST=/work/main/.dev-nufft REFERENCE=.../cufinufft-sm90.tar.xz \
#     scripts/nufft-device-build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-nufft-gpu}
dest=${DEST:-$build/device}
targets="test_gpu_nufft mr-bench ${EXTRA_TARGETS:-}"

[ -f "$build/CMakeCache.txt" ] ||
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' "$build/CMakeCache.txt" || { echo "MR_CUDA is off" >&2; exit 1; }
grep -q '^CMAKE_CUDA_ARCHITECTURES:.*90' "$build/CMakeCache.txt" ||
  { echo "$build does not build for sm_90" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/device/bin" "$stage/device/lib"
cp "$build/tests/test_gpu_nufft" "$build/bin/mr-bench" "$stage/device/bin/"
for t in ${EXTRA_TARGETS:-}; do cp "$build"/*/"$t" "$stage/device/bin/"; done
strip --strip-debug "$stage"/device/bin/*
# The libraries the device machine lacks: everything but glibc, the C++
# runtime and CUDA's own, which it has in newer versions.
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnvidia-|libcudart\.so|libcublas|libcublasLt|libcufft|libcusolver|libcusparse|libcurand|libnvJitLink)'
for f in "$stage"/device/bin/*; do
  ldd "$f" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $system ]] || [ -e "$stage/device/lib/$name" ] || cp -L "$path" "$stage/device/lib/"
  done
done
mkdir -p "$dest"
tar -C "$stage" -cJf "$dest/nufft-device.tar.xz" device
cp scripts/nufft-device-run.sh "$dest/"
[ -z "${REFERENCE:-}" ] || install -m 644 "$REFERENCE" "$dest/cufinufft-sm90.tar.xz"
du -sh "$dest"/*
