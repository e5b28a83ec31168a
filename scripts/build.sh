#!/bin/sh
# Configures and builds into build/ (CUDA when nvcc is found): everything,
# or the targets named (scripts/build.sh reconserver reconclient).
set -eu
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ${MR_CMAKE_ARGS:-} >/dev/null
targets=""
for t in "$@"; do targets="$targets --target $t"; done
# shellcheck disable=SC2086
cmake --build build -j"$(nproc)" $targets
