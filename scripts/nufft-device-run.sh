#!/usr/bin/env bash
# Runs on the device machine (see scripts/nufft-device-build.sh): the NUFFT
# tests in their CUDA and CPU groups, again under compute-sanitizer
# (memcheck, racecheck), the simulate-and-send end-to-end test, a server on
# the GPU reconstructing simulated radial, spiral and 3D data, `mr-bench
# nufft`, and Nsight Compute profiles of the spreading and interpolation
# kernels. Everything lands under $OUT; a summary is printed last. Exit
# status 0 when every step passed.
set -uo pipefail
out=${OUT:-out}
mkdir -p "$out"
tar -C build-nufft-gpu -xJf build-nufft-gpu/nufft-device.tar.xz
d=$PWD/build-nufft-gpu/device
export LD_LIBRARY_PATH=$d/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MR_BINARY_DIR=$d MR_SOURCE_DIR=$PWD
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

step nufft-cuda 60 "$d/tests/test_gpu_nufft" --cuda
step nufft-cpu 60 "$d/tests/test_gpu_nufft"
step simulate-e2e 60 "$d/tests/test_client_simulate_e2e"
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step memcheck 150 "$san" --tool memcheck --error-exitcode 99 "$d/tests/test_gpu_nufft" --cuda
step racecheck 150 "$san" --tool racecheck --error-exitcode 99 "$d/tests/test_gpu_nufft" --cuda

# The server grids on the GPU (the e2e test's server is CPU-only).
"$d/bin/reconserver" --listen 127.0.0.1:9400 --configs configs --gpus all >"$out/server.log" 2>&1 &
server=$!
sleep 1
data=$(mktemp -d)
client=$d/bin/reconclient
step sim-radial 60 "$client" simulate --trajectory radial --matrix 128 --coils 8 -o "$data/r.h5"
step send-radial 60 "$client" send "$data/r.h5" -p 9400 -c radial -o "$data/r-out.h5"
step sim-spiral 60 "$client" simulate --trajectory spiral --matrix 128 --coils 8 -o "$data/s.h5"
step send-spiral 60 "$client" send "$data/s.h5" -p 9400 -c spiral -o "$data/s-out.h5"
step sim-3d 120 "$client" simulate --trajectory golden --3d --matrix 48 --coils 4 -o "$data/g.h5"
step send-3d 60 "$client" send "$data/g.h5" -p 9400 -c radial -o "$data/g-out.h5"
kill "$server"
wait "$server"

step bench 300 "$d/bin/mr-bench" nufft --json "$out/bench.json"

ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
profile() { # profile NAME CASE KERNEL
  export MR_BENCH_NUFFT_CASE=$2
  step "ncu-$1" 120 "$ncu" --set full -k "regex:$3" -c 1 "$d/bin/mr-bench" nufft --json /dev/null
  unset MR_BENCH_NUFFT_CASE
}
profile spread2d 2 spread_kernel
profile spread3d 6 spread_kernel
# Which shared-memory atomics the spreading compiled to (native or a loop).
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
"$cuobjdump" -sass "$d/bin/mr-bench" 2>/dev/null | grep -oE "(ATOMS|RED|ATOM)\.[A-Z0-9.]+" | sort | uniq -c \
  >"$out/atomics.txt"

echo "== summary"
cat "$out/summary.txt"
grep -hE "rel error|NRMSE|refused|FAILED" "$out"/nufft-cuda.log "$out"/simulate-e2e.log | head -40
grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$out"/memcheck.log "$out"/racecheck.log
grep -E "config=" "$out/server.log"
grep -E "mr-bench: nufft|  gpu" "$out/bench.log"
cat "$out/atomics.txt"
exit $failed
