#!/usr/bin/env bash
# Runs on the device machine (see scripts/grappa-device-build.sh): the CPU
# and CUDA groups of test_gpu_grappa, `mr-bench grappa` (CPU and GPU in the
# same run, with the library-chain reference), and the end-to-end run
# through reconserver (32 coils, R 4, 20 slices). Everything goes under
# $OUT; a summary is printed last. Exit status 0 when every step passed.
#
# usage: [BUILD=dir] scripts/grappa-device-run.sh   (BUILD as for the build)
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
build=${BUILD:-build-grappa-gpu}
tar -C "$build" -xJf "$build/device.tar.xz" || exit 1
bin=$build/device
export LD_LIBRARY_PATH=$PWD/$bin/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MR_SOURCE_DIR=$PWD MR_BINARY_DIR=$PWD/$bin

{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  nproc
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

failed=0
summary=$out/summary.txt
: >"$summary"
step() { # name, limit (s), log, command...
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  echo "$name: rc $rc, $((SECONDS - t0)) s" | tee -a "$summary"
}

step "test_gpu_grappa (CPU)" 60 "$out/tests.log" "$bin/test_gpu_grappa"
step "test_gpu_grappa --cuda" 240 "$out/tests.log" "$bin/test_gpu_grappa" --cuda
step "mr-bench grappa" 300 "$out/bench.log" "$bin/bin/mr-bench" grappa --json "$out/bench.json"
step "mr-grappa-e2e" 120 "$out/e2e.log" "$bin/bin/mr-grappa-e2e" --gpus all --json "$out/e2e.json"

echo "---- tests"; grep -E "eq\. 5\.1|rel error|OK|FAIL|PASS|ERROR|error" "$out/tests.log" | head -60
echo "---- bench"; grep -E "mr-bench grappa" "$out/bench.log" | tail -20
echo "---- e2e"; cat "$out/e2e.json" 2>/dev/null; tail -3 "$out/e2e.log"
echo "---- summary"; cat "$summary"
exit $failed
