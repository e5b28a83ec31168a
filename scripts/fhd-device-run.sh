#!/usr/bin/env bash
# Runs on the device machine (see scripts/fhd-device-build.sh): each test
# program's CPU and CUDA groups, the small CUDA groups again under
# compute-sanitizer memcheck, `mr-bench fhd`, then an Nsight Compute profile
# of the recurrence kernel on the book's problem (128^3 x 284,592: the
# 13th recurrence launch of the bench; the profiler stops the bench there).
# Everything goes under $OUT; a summary is printed last. Exit status 0 when
# every test passed.
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
tar -C /tmp -xJf build-fhd-gpu/device.tar.xz ||
  python3 -c 'import tarfile; tarfile.open("build-fhd-gpu/device.tar.xz").extractall("/tmp")' ||
  exit 1
bin=/tmp/device
export LD_LIBRARY_PATH=$bin/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  nproc
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

failed=0
summary=$out/summary.txt
: >"$summary"
step() { # name, limit (s), command...
  local name=$1 limit=$2
  shift 2
  local start rc
  start=$(date +%s%N)
  timeout "$limit" "$@" >>"$out/tests.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$summary"
  [ $rc -eq 0 ] || failed=1
}

for t in test_gpu_fhd test_gpu_toeplitz test_gpu_cg; do
  step "$t cpu" 60 "$bin/$t"
  step "$t cuda" 90 "$bin/$t" --cuda
done
step "test_gadgets_fhd_cg" 60 "$bin/test_gadgets_fhd_cg"

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for t in test_gpu_toeplitz test_gpu_fhd; do
  start=$(date +%s%N)
  timeout 90 "$sanitizer" --tool memcheck --error-exitcode 99 "$bin/$t" --cuda \
    >>"$out/sanitizer.log" 2>&1
  rc=$?
  echo "$t memcheck rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$summary"
  [ $rc -eq 0 ] || failed=1
done

start=$(date +%s%N)
timeout 200 "$bin/mr-bench" fhd --json "$out/bench.json" 2>"$out/bench.log"
echo "mr-bench fhd rc=$? $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$summary"

ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 90 "$ncu" --set full -k regex:recurrence --launch-skip 12 --launch-count 1 --kill yes \
  "$bin/mr-bench" fhd --json /dev/null >"$out/ncu.txt" 2>&1
echo "ncu rc=$?" | tee -a "$summary"

echo "== summary"
cat "$summary"
echo "== bench"
grep -v "^mr-bench: fhd .* cpu" "$out/bench.log" | tail -n 40
exit $failed
