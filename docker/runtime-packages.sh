#!/bin/bash
# Prints the distribution packages that provide the shared libraries the
# given programs link (what ldd resolves, found with dpkg -S), one a line,
# for the runtime stage to install from its own archive: the image never
# carries copies of the build image's files. The CUDA libraries are left
# out: the CUDA runtime image has them. Fails on a library ldd cannot find
# or no package provides.
#   runtime-packages.sh PROGRAM...
set -euo pipefail
cuda='lib(cuda|cudart|cublas|cublasLt|cufft|cufftw|cusolver|cusparse|curand|nvJitLink|nvrtc)\.so'
out=$(ldd "$@")
if grep "not found" <<<"$out" | grep -qvE "$cuda"; then
  echo "runtime-packages.sh: unresolved libraries:" >&2
  grep "not found" <<<"$out" >&2
  exit 1
fi
awk '/=> \// {print $3}' <<<"$out" | sort -u | grep -vE "/$cuda" | while read -r lib; do
  owner=""
  # merged /usr: a library may be registered under /lib or /usr/lib
  for path in "$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}"; do
    owner=$(dpkg -S "$path" 2>/dev/null | head -n 1) && break
  done
  if [ -z "$owner" ]; then
    echo "runtime-packages.sh: no package provides $lib" >&2
    exit 1
  fi
  echo "${owner%%:*}"
done | sort -u
