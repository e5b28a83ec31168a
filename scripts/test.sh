#!/bin/sh
# Installs what is missing, builds, and runs every test: the normal build
# (GPU tests skip without a GPU; the end-to-end run under valgrind), the
# clang static analyzer over the C sources, the scale-out and container
# tests (scripts/scaleout-test.sh, scripts/container-test.sh), the whole
# suite again under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# libFuzzer drivers briefly. The one test command of README.md
# and CI.
set -eu
cd "$(dirname "$0")/.."
scripts/install-deps.sh tests
jobs=$(nproc)

# Warnings are errors in every build of the test command.
MR_CMAKE_ARGS="-DMR_WERROR=ON -DBUILD_TESTING=ON" scripts/build.sh
ctest --test-dir build --output-on-failure -j"$jobs"

# The clang static analyzer over the product's C sources (not the tests,
# no CUDA), each file with the flags CMake gives it; any finding fails. A
# finding that is not a bug is silenced where it stands, with a comment
# saying why. About a minute on 2 cores.
CC=clang CXX=clang++ cmake -S . -B build-analyze -DMR_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
python3 - build-analyze/compile_commands.json <<'EOF' | xargs -0 -n1 -P"$jobs" sh -c ||
import json, os, re, shlex, sys
for e in json.load(open(sys.argv[1])):
    rel = os.path.relpath(e["file"])
    if not rel.endswith(".c") or rel.startswith(("tests/", "build")):
        continue
    cmd = re.sub(r" -o \S+", " -o /dev/null", e["command"])
    cmd = cmd.replace(" -c ", " --analyze -Xclang -analyzer-werror -Xanalyzer "
                      "-analyzer-output=text ", 1)
    sys.stdout.write("cd %s && %s\0" % (shlex.quote(e["directory"]), cmd))
EOF
  { echo "clang static analyzer: findings above" >&2; exit 1; }

# Deployment: three replicas behind HAProxy (seconds), then the container
# image built and run with podman (minutes the first time: the Debian base
# is made once per machine, podman caches the build). Each says "skipped"
# and why where the host cannot run it.
skippable() {
  rc=0
  "$@" || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || exit "$rc"
}
skippable scripts/scaleout-test.sh build
skippable scripts/container-test.sh build

cmake -S . -B build-asan -DMR_SANITIZE=ON -DMR_CUDA=OFF -DMR_WERROR=ON -DCMAKE_BUILD_TYPE=Debug \
  >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE valgrind

CC=clang CXX=clang++ cmake -S . -B build-fuzz -DMR_FUZZ=ON -DMR_CUDA=OFF -DMR_WERROR=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_decoder fuzz_session fuzz_nhlbi fuzz_xml mr-fuzz-corpus
ctest --test-dir build-fuzz --output-on-failure -R '^fuzz_'
