#!/usr/bin/env bash
# The whole project's check on the H100, part 2 (on the device machine; see
# scripts/device-build.sh), in two calls that each fit one run:
#   tests: every gpu/ test's CUDA group; every installed config's images on
#          the GPU against the stored ones; the server and client end-to-end
#          tests with a GPU server; GRAPPA end to end; mr-load's 32 clients x
#          20 scans on a GPU server.
#   bench: `mr-bench stream` (GPU and CPU servers against a raw loopback
#          copy, JSON in $OUT/stream-h100.json) and `mr-bench nufft`.
# Results under $OUT, a summary printed last; exit 0 when every step passed.
#   usage: scripts/device-run.sh tests|bench
set -uo pipefail
mode=${1:-tests}
out=${OUT:-out}
mkdir -p "$out"
stage=$PWD/build-device/stage
tmp=$(mktemp -d)
mkdir "$tmp/libs" && tar -xJf "$stage/libs.tar.xz" -C "$tmp/libs"
export LD_LIBRARY_PATH=$tmp/libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$stage/bin:$PATH MR_SOURCE_DIR=$PWD MR_BINARY_DIR=$stage

nvidia-smi -L | tee "$out/device.txt"
failed=0
summary=$out/summary.txt
: >"$summary"
step() { # name, limit (s), log, command...
  local name=$1 limit=$2 log=$3 t0=$SECONDS
  shift 3
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || failed=1
  echo "$name: rc $rc, $((SECONDS - t0)) s" | tee -a "$summary"
}

if [ "$mode" = bench ]; then
  step "mr-bench stream" 480 "$out/stream.log" "$stage/bin/mr-bench" stream --configs "$PWD/configs" \
    --json "$out/stream-h100.json"
  step "mr-bench nufft" 100 "$out/nufft.log" "$stage/bin/mr-bench" nufft --json "$out/nufft-h100.json"
  echo "---- summary"; cat "$summary"
  rm -rf "$tmp"
  exit $failed
fi

for t in "$stage"/tests/test_gpu_*; do
  step "$(basename "$t") --cuda" 240 "$out/gpu-tests.log" "$t" --cuda
done
MR_TEST_GPUS=all step "test_configs_images (GPU)" 240 "$out/gpu-tests.log" \
  "$stage/tests/test_configs_images"
for t in test_gadgets_configs test_gadgets_gridding; do
  step "$t --cuda" 240 "$out/gpu-tests.log" "$stage/tests/$t" --cuda
done
for t in test_server_session test_server_limits test_server_faults test_server_http \
         test_client_e2e test_client_simulate_e2e; do
  MR_TEST_GPUS=all step "$t (GPU server)" 300 "$out/e2e-tests.log" "$stage/tests/$t"
done
step "mr-grappa-e2e" 180 "$out/grappa-e2e.log" "$stage/bin/mr-grappa-e2e" --gpus all \
  --json "$out/grappa-e2e.json"

. "$PWD/tests/support/server.sh"
GPUS=all start_server "$stage" "$PWD/configs"
step "mr-load 32 x 20 (GPU server)" 300 "$out/load.json" "$stage/bin/mr-load" -p "$port" -c 32 -n 20
kill -TERM "$server"; wait "$server"
cp "$tmp/server.log" "$out/server-load.log"

echo "---- failures"; grep -E "FAILED|ERROR" "$out"/*-tests.log | head -20
echo "---- config images"; grep -E "relative L2" "$out/gpu-tests.log"
echo "---- load"; cat "$out/load.json"
echo "---- grappa e2e"; cat "$out/grappa-e2e.json" 2>/dev/null
echo "---- summary"; cat "$summary"
rm -rf "$tmp"
exit $failed
