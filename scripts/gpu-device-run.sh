#!/usr/bin/env bash
# Runs on the device machine (see scripts/gpu-device-build.sh): every gpu/
# test program in its CPU and its CUDA group, the CUDA groups again under
# compute-sanitizer memcheck, then `mr-bench gpu`. Everything is written
# under $OUT; a short summary is printed last. Exit status: 0 when every
# test passed (a CUDA group that skips counts as a failure here).
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.device-libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=build-gpu/device

{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,memory.used,memory.total --format=csv
  nproc
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

failed=0
: >"$out/tests-summary.txt"
for t in "$bin"/test_gpu_*; do
  name=$(basename "$t")
  for group in cpu cuda; do
    arg=; [ $group = cuda ] && arg=--cuda
    start=$(date +%s%N)
    timeout 120 "$t" $arg >>"$out/tests.log" 2>&1
    rc=$?
    echo "$name $group rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms" >>"$out/tests-summary.txt"
    [ $rc -eq 0 ] || failed=1
  done
done

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$sanitizer" ]; then
  for t in "$bin"/test_gpu_*; do
    # The pool test runs the GPU out of memory on purpose: those API errors
    # are its subject, not findings.
    api=all; [ "$(basename "$t")" = test_gpu_pool ] && api=no
    timeout 150 "$sanitizer" --tool memcheck --report-api-errors $api --error-exitcode 99 \
      "$t" --cuda >>"$out/sanitizer.log" 2>&1
    rc=$?
    echo "$(basename "$t") memcheck rc=$rc" >>"$out/tests-summary.txt"
    [ $rc -eq 0 ] || failed=1
  done
else
  echo "compute-sanitizer not found" >>"$out/tests-summary.txt"
fi

"$bin/mr-bench" gpu --json "$out/bench.json" 2>"$out/bench.log"
echo "mr-bench rc=$?" >>"$out/tests-summary.txt"

echo "== tests"
cat "$out/tests-summary.txt"
echo "== bench"
tail -n 12 "$out/bench.log"
exit $failed
