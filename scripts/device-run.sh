#!/usr/bin/env bash
# shellcheck disable=SC2317 # the area_* functions are called by name
# The check on the GPU device machine, part 2 (there, from the repository
# root, with build-device/stage carried; see scripts/device-build.sh). Each
# area's steps, results under $OUT (the logs in $OUT/logs.tar.gz), a
# summary printed last; exit 0 when every step passed. Benchmarks write
# $OUT/<subcommand>-h100.json, the names of tests/bench/results/.
#
# usage: scripts/device-run.sh [AREA...]      (no AREA: tests)
#   tests   every CUDA group behind ctest's gpu label (gpu/'s tests and the
#           gadgets' with one: configs, gridding, epi),
#           the installed configs' images on the GPU against the stored
#           ones; then e2e (not with TESTS_E2E=0)
#   e2e     the server and client end-to-end tests against a GPU server;
#           GRAPPA end to end (mr-grappa-e2e); mr-load's 32 clients x 20
#           scans on a GPU server
#   bench   stream, and `mr-bench nufft`
#   stream  `mr-bench stream`: GPU and CPU servers against a raw loopback copy
#   gpu     gpu/'s core tests, CPU and CUDA groups, the CUDA groups under
#           compute-sanitizer memcheck; `mr-bench gpu`
#   grappa  test_gpu_grappa (CPU and CUDA); `mr-bench grappa`; mr-grappa-e2e;
#           test_gpu_slice_grappa (CPU and CUDA) and `mr-bench sms`
#   nufft   test_gpu_nufft --cuda, then under memcheck, racecheck and
#           initcheck; `mr-bench nufft` (beside the reference library when
#           staged); an nsys timeline of one 3D case where nsys exists
#   fhd     the fhd, toeplitz and cg tests (CPU and CUDA) and the fhd_cg
#           gadget's; memcheck; `mr-bench fhd`; an Nsight Compute profile of
#           the recurrence kernel on the book's problem where ncu exists
#   multigpu  the pool, placement and split tests on every GPU; then per GPU
#           count (1, 2, 4, ... up to the machine's; on one GPU: 1, and 2
#           logical devices of it) `mr-bench split` (one 3D CG-SENSE scan
#           split by coils), and where each GPU is a GPU of its own, against
#           a server on those GPUs: mr-load's 32 clients x 20 scans of
#           256x256x16 and `mr-bench load`'s GPU-bound cases (16 realtime_cg
#           streams, 16 GRAPPA series, 16 3D CG-SENSE scans at once); on
#           GPU 0 alone, a real-time stream beside a heavy neighbour:
#           split-<N>gpu.json, load-<case>-<N>gpu.json (case cartesian,
#           realtime_cg, grappa, cgsense3d, realtime_neighbour)
#           GPU_COUNTS="1 2": only these counts (to split the area over
#           calls of the device's 10-minute limit)
#   sparse  the CUDA groups of the compressed sensing, ESPIRiT and coil
#           compression tests (test_gpu_sparse, test_gpu_espirit,
#           test_gpu_compress: those staged); `mr-bench sparse` on the 2D,
#           radial and real-time cases, ours against BART (staged beside
#           mr-bench, OMP_NUM_THREADS = the host's cores): sparse-h100.json;
#           `mr-bench espirit` (espirit-h100.json); `mr-bench stream --case
#           realtime_cs` (stream-realtime_cs-h100.json)
#   sparse3d  `mr-bench sparse --case cartesian_3d --rounds 1` (256x256x128,
#           32 coils; BART alone takes minutes there): sparse-3d-h100.json
# Runs what scripts/device-build.sh staged for those areas (STAGE=dir: a
# stage elsewhere).
set -uo pipefail
# shellcheck source=scripts/device-areas.sh
. "$(dirname "$0")/device-areas.sh"
device_check_args "$0" "$@"
areas=${*:-tests}
out=${OUT:-out}
mkdir -p "$out"
stage=$(cd "${STAGE:-build-device/stage}" 2>/dev/null && pwd) ||
  { echo "device-run.sh: no stage (run scripts/device-build.sh, carry build-device/stage)" >&2; exit 1; }
for a in $areas; do
  grep -qx "$a" "$stage/areas" ||
    { echo "device-run.sh: area $a was not staged (staged: $(tr '\n' ' ' <"$stage/areas"))" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/libs" "$tmp/programs" && tar -xJf "$stage/libs.tar.xz" -C "$tmp/libs" &&
  tar -xJf "$stage/programs.tar.xz" -C "$tmp/programs" || exit 1
export LD_LIBRARY_PATH=$tmp/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# MR_BINARY_DIR: where the tests look for bin/ and tests/ (unpacked, not the stage)
export PATH=$tmp/programs/bin:$PATH MR_SOURCE_DIR=$PWD MR_BINARY_DIR=$tmp/programs
export DCMDICTPATH=$stage/dcmtk/dicom.dic:$stage/dcmtk/private.dic
bin=$tmp/programs/bin
tests=$tmp/programs/tests

{
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,memory.used,memory.total --format=csv
  nproc
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

# Files already in $OUT (the caller's own log, say) are left out of the
# logs' archive at the end.
before=$(find "$out" -maxdepth 1 -type f -printf '%f\n')
failed=0
summary=$out/summary.txt
: >"$summary"
step() { # NAME LIMIT_S LOG COMMAND...: runs it, its output appended to LOG
  local name=$1 limit=$2 log=$3 t0=$SECONDS
  shift 3
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  [ "$rc" -eq 0 ] || failed=1
  echo "$name: rc $rc, $((SECONDS - t0)) s" | tee -a "$summary"
}
# optional NAME LIMIT_S LOG COMMAND...: a step whose failure is reported but
# fails nothing (a profiler that stops the program it profiles).
optional() {
  local was=$failed
  step "$@"
  failed=$was
}
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# sanitize NAME LIMIT_S LOG TOOL PROGRAM ARGS...: under compute-sanitizer.
sanitize() {
  local name=$1 limit=$2 log=$3 tool=$4
  shift 4
  if [ -x "$sanitizer" ]; then
    step "$name $tool" "$limit" "$log" "$sanitizer" --tool "$tool" --error-exitcode 99 "$@"
  else
    echo "$name $tool: compute-sanitizer not found" | tee -a "$summary"
  fi
}
# cpu_and_cuda LOG TEST...: each test program's CPU group, then its CUDA group.
cpu_and_cuda() {
  local log=$1 t
  shift
  for t in "$@"; do
    step "$t (CPU)" 120 "$log" "$tests/$t"
    step "$t --cuda" 240 "$log" "$tests/$t" --cuda
  done
}

area_tests() {
  local t
  while read -r t; do
    step "$t --cuda" 240 "$out/gpu-tests.log" "$tests/$t" --cuda
  done <"$stage/gpu-tests"
  MR_TEST_GPUS=all step "test_configs_images (GPU)" 240 "$out/gpu-tests.log" \
    "$tests/test_configs_images"
  echo "---- config images"; grep -E "relative L2" "$out/gpu-tests.log"
  [ "${TESTS_E2E:-1}" = 0 ] || area_e2e
}

area_e2e() {
  local t
  for t in test_server_session test_server_limits test_server_faults test_server_http \
           test_client_e2e test_client_simulate_e2e; do
    MR_TEST_GPUS=all step "$t (GPU server)" 300 "$out/e2e-tests.log" "$tests/$t"
  done
  step "mr-grappa-e2e" 180 "$out/grappa-e2e.log" "$bin/mr-grappa-e2e" --gpus all \
    --json "$out/grappa-e2e.json"
  # shellcheck disable=SC1091,SC2154 # server.sh sets $server and $port
  (
    . "$PWD/tests/support/server.sh"
    GPUS=all start_server "$tmp/programs" "$PWD/configs" || exit 1
    step "mr-load 32 x 20 (GPU server)" 300 "$out/load.json" "$bin/mr-load" -p "$port" -c 32 -n 20
    kill -TERM "$server"; wait "$server"
    cp "$tmp/server.log" "$out/server-load.log"
    exit "$failed"
  ) || failed=1
  # cmocka's own failure lines only: the servers log ERROR for the bad input the tests send on purpose
  echo "---- failures"; grep -E "\[  (FAILED|ERROR) +\]" "$out"/*-tests.log | head -20
  echo "---- load"; cat "$out/load.json"
  echo "---- grappa e2e"; cat "$out/grappa-e2e.json" 2>/dev/null
}

area_stream() {
  step "mr-bench stream" 480 "$out/stream.log" "$bin/mr-bench" stream --configs "$PWD/configs" \
    --json "$out/stream-h100.json"
}

area_bench() {
  area_stream
  step "mr-bench nufft" 100 "$out/nufft.log" "$bin/mr-bench" nufft --json "$out/nufft-h100.json"
}

area_gpu() {
  local t names="test_gpu_pool test_gpu_host test_gpu_fft test_gpu_coil test_gpu_blas
                 test_gpu_solve test_gpu_vec test_gpu_block"
  # shellcheck disable=SC2086
  cpu_and_cuda "$out/gpu-tests.log" $names
  for t in $names; do
    # The pool test runs the GPU out of memory on purpose: those API errors
    # are its subject, not findings.
    local api=all
    [ "$t" = test_gpu_pool ] && api=no
    sanitize "$t" 150 "$out/sanitizer.log" memcheck --report-api-errors "$api" "$tests/$t" --cuda
  done
  step "mr-bench gpu" 300 "$out/gpu-bench.log" "$bin/mr-bench" gpu --json "$out/gpu-h100.json"
}

area_grappa() {
  cpu_and_cuda "$out/grappa-tests.log" test_gpu_grappa
  step "mr-bench grappa" 300 "$out/grappa-bench.log" "$bin/mr-bench" grappa \
    --json "$out/grappa-h100.json"
  step "mr-grappa-e2e" 120 "$out/grappa-e2e.log" "$bin/mr-grappa-e2e" --gpus all \
    --json "$out/grappa-e2e.json"
  cpu_and_cuda "$out/sms-tests.log" test_gpu_slice_grappa
  step "mr-bench sms" 120 "$out/sms-bench.log" "$bin/mr-bench" sms --json "$out/sms-h100.json"
}

area_nufft() {
  local tool
  step "test_gpu_nufft --cuda" 90 "$out/nufft-tests.log" \
    "$tests/test_gpu_nufft" --cuda
  for tool in memcheck racecheck initcheck; do
    sanitize test_gpu_nufft 150 "$out/sanitizer.log" "$tool" \
      "$tests/test_gpu_nufft" --cuda
  done
  if [ -f "$stage/cufinufft-sm90.tar.xz" ]; then
    tar -xJf "$stage/cufinufft-sm90.tar.xz" -C "$tmp"
    export LD_LIBRARY_PATH=$tmp/cufpkg:$LD_LIBRARY_PATH MR_BENCH_CUFINUFFT=$tmp/cufpkg/libcufinufft.so
  fi
  step "mr-bench nufft" 200 "$out/nufft-bench.log" "$bin/mr-bench" nufft \
    --json "$out/nufft-h100.json"
  local nsys
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null || true)
  [ -z "$nsys" ] || MR_BENCH_NUFFT_CASE=8 optional "nsys (3D case)" 200 \
    "$out/nsys.log" "$nsys" profile --stats=true -o "$out/nsys-3d" "$bin/mr-bench" nufft \
    --json /dev/null
}

area_fhd() {
  local t
  cpu_and_cuda "$out/fhd-tests.log" test_gpu_fhd test_gpu_toeplitz test_gpu_cg
  step "test_gadgets_fhd_cg" 60 "$out/fhd-tests.log" "$tests/test_gadgets_fhd_cg"
  for t in test_gpu_toeplitz test_gpu_fhd; do
    sanitize "$t" 90 "$out/sanitizer.log" memcheck "$tests/$t" --cuda
  done
  step "mr-bench fhd" 200 "$out/fhd-bench.log" "$bin/mr-bench" fhd --json "$out/fhd-h100.json"
  # The 13th recurrence launch of the bench is the book's problem
  # (128^3 x 284,592); the profiler stops the bench there.
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  [ -z "$ncu" ] || optional "ncu (recurrence kernel)" 90 "$out/ncu.txt" "$ncu" --set full \
    -k regex:recurrence --launch-skip 12 --launch-count 1 --kill yes "$bin/mr-bench" fhd \
    --json /dev/null
}

area_sparse() {
  local t
  while read -r t; do
    step "$t --cuda" 240 "$out/sparse-tests.log" "$tests/$t" --cuda
  done <"$stage/sparse-tests"
  step "mr-bench espirit" 120 "$out/sparse-bench.log" "$bin/mr-bench" espirit \
    --json "$out/espirit-h100.json"
  step "mr-bench sparse" 540 "$out/sparse-bench.log" "$bin/mr-bench" sparse --configs "$PWD/configs" \
    --case cartesian_2d_8,cartesian_2d_32,radial_2d,realtime_radial --json "$out/sparse-h100.json"
  step "mr-bench stream realtime_cs" 240 "$out/sparse-bench.log" "$bin/mr-bench" stream \
    --configs "$PWD/configs" --case realtime_cs --json "$out/stream-realtime_cs-h100.json"
}

area_sparse3d() {
  step "mr-bench sparse (3D)" 580 "$out/sparse-bench.log" "$bin/mr-bench" sparse \
    --configs "$PWD/configs" --case cartesian_3d --rounds 1 --json "$out/sparse-3d-h100.json"
}

area_multigpu() {
  cpu_and_cuda "$out/multigpu-tests.log" test_gpu_pool test_gpu_placement test_gpu_toeplitz_split
  local n lists="" list i
  n=$(nvidia-smi -L | grep -c '^GPU')
  if [ "$n" -le 1 ]; then
    lists="0 0,0" # the split's code path on two logical devices of one GPU
  else
    for i in ${GPU_COUNTS:-1 2 4 8}; do
      [ "$i" -le "$n" ] && lists="$lists $(seq -s, 0 $((i - 1)))"
    done
  fi
  for list in $lists; do
    local tag c
    tag="$(echo "$list" | tr ',' '\n' | wc -l)gpu"
    [ "$list" = 0,0 ] && tag=2shared
    step "mr-bench split --gpus $list" 200 "$out/multigpu-bench.log" "$bin/mr-bench" split \
      --gpus "$list" --json "$out/split-$tag.json"
    # Sessions per second per GPU count; reconserver takes each GPU once.
    [ "$tag" = 2shared ] && continue
    # shellcheck disable=SC1091,SC2154 # server.sh sets $server and $port
    (
      . "$PWD/tests/support/server.sh"
      GPUS=$list start_server "$tmp/programs" "$PWD/configs" || exit 1
      step "mr-load 32 x 20 --gpus $list" 300 "$out/load-cartesian-$tag.json" "$bin/mr-load" \
        -p "$port" -c 32 -n 20 -m 256 -k 16
      kill -TERM "$server"; wait "$server"
      exit "$failed"
    ) || failed=1
    for c in realtime_cg grappa cgsense3d; do
      step "mr-bench load $c --gpus $list" 240 "$out/multigpu-bench.log" "$bin/mr-bench" load \
        --case "$c" --gpus "$list" --json "$out/load-$c-$tag.json"
    done
    if [ "$tag" = 1gpu ]; then # the stream and its neighbour on one GPU
      step "mr-bench load realtime_neighbour --gpus 0" 240 "$out/multigpu-bench.log" \
        "$bin/mr-bench" load --case realtime_neighbour --gpus 0 \
        --json "$out/load-realtime_neighbour-1gpu.json"
    fi
  done
  echo "---- split and load per GPU count"
  for f in "$out"/split-*.json "$out"/load-*.json; do [ -f "$f" ] && echo "$f" && cat "$f"; done
}

for a in $areas; do
  echo "==== $a"
  "area_$a"
done
echo "---- summary"; cat "$summary"
# The run tool brings back only a few files from $OUT: the results (the
# benchmarks' JSON, the summary) stay as they are, the logs go into one
# archive beside them.
(
  cd "$out" || exit
  logs=$(find . -maxdepth 1 -type f ! -name '*-h100.json' ! -name 'split-*.json' \
    ! -name 'load-*.json' ! -name summary.txt ! -name logs.tar.gz -printf '%f\n' |
    grep -vxF -e "$before" -e logs.tar.gz)
  # shellcheck disable=SC2086 # file names made here, without spaces
  [ -z "$logs" ] || tar -czf logs.tar.gz --remove-files $logs
)
exit $failed
