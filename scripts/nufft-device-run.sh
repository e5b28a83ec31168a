#!/usr/bin/env bash
# Runs on the device machine, from the folder scripts/nufft-device-build.sh
# staged: the NUFFT test's CUDA group, `mr-bench nufft` (with the reference
# library beside ours when its tarball was staged), the CUDA group again
# under compute-sanitizer memcheck, racecheck and initcheck, and, where
# nsys is installed, a timeline summary of one 3D case (kernel and API
# times, set_points' among them). Everything lands under $OUT; a summary is
# printed last. Exit status 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-out}
mkdir -p "$out"
tar -xJf nufft-device.tar.xz
d=$PWD/device
export LD_LIBRARY_PATH=$d/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -f cufinufft-sm90.tar.xz ]; then
  tar -xJf cufinufft-sm90.tar.xz
  export LD_LIBRARY_PATH=$PWD/cufpkg:$LD_LIBRARY_PATH
  export MR_BENCH_CUFINUFFT=$PWD/cufpkg/libcufinufft.so
fi
{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  nproc
} >"$out/device.txt" 2>&1

failed=0
: >"$out/summary.txt"
step() { # step NAME TIMEOUT COMMAND...: runs it, logs into $out/NAME.log
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s%N)
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms" >>"$out/summary.txt"
  [ $rc -eq 0 ] || failed=1
}

step nufft-cuda "${TEST_LIMIT:-90}" "$d/bin/test_gpu_nufft" --cuda
step bench "${BENCH_LIMIT:-200}" "$d/bin/mr-bench" nufft --json "$out/bench.json"
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck initcheck; do
  step "$tool" "${SANITIZER_LIMIT:-150}" "$san" --tool "$tool" --error-exitcode 99 \
    "$d/bin/test_gpu_nufft" --cuda
done
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null || true)
if [ -n "$nsys" ]; then
  MR_BENCH_NUFFT_CASE=4 step nsys "${BENCH_LIMIT:-200}" "$nsys" profile --stats=true \
    -o "$out/nsys-3d" "$d/bin/mr-bench" nufft --json /dev/null
fi

echo "== summary"
cat "$out/summary.txt"
grep -hE "FAILED|Error|error:|not finite|entries|GPU vs CPU|automatic" "$out/nufft-cuda.log" | head -40
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$out"/*check.log 2>/dev/null
grep -E "mr-bench: nufft|  gpu|  set_points" "$out/bench.log"
exit $failed
