#!/bin/sh
# Installs what is missing, builds, and runs every test (GPU tests skip
# without a GPU). The one test command of README.md and CI.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
