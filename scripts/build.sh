#!/bin/sh
# Configures and builds into build/ (CUDA when nvcc is found).
set -eu
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo ${MR_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$(nproc)"
