#!/usr/bin/env bash
# Copies the shared libraries that the given programs need, but that a bare
# GPU machine lacks, into one folder, so that they run there with
# LD_LIBRARY_PATH=<folder>. That machine has glibc, libstdc++ and the CUDA
# driver and runtime of its own (newer: those must win); everything else
# (libuv, libismrmrd, HDF5, cJSON, FFTW, OpenBLAS, libxml2, ...) comes from
# here.
#   usage: scripts/bundle-libs.sh OUT_DIR PROGRAM...
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 OUT_DIR PROGRAM..." >&2; exit 2; }
out=$1
shift
mkdir -p "$out"
system='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libresolv\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libnvidia-|libcudart\.so|libcublas|libcublasLt|libcufft|libcusolver|libcusparse|libcurand|libnvJitLink)'
for f in "$@"; do
  [ -f "$f" ] || continue
  ldd "$f" 2>/dev/null | awk '/=> \//{print $1, $3}' | while read -r name path; do
    [[ $name =~ $system ]] || [ -e "$out/$name" ] || cp -L "$path" "$out/$name"
  done
done
