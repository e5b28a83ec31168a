#!/usr/bin/env bash
# The whole project's check on the H100, part 2 (on the device machine; see
# scripts/device-build.sh): every gpu/ test's CUDA group; the server and
# client end-to-end tests with a GPU server; GRAPPA end to end; a 256x256,
# 32-coil, 10-repetition dataset through a GPU and a CPU server (ingest
# rate and time); mr-load's 32 clients x 20 scans. Results under $OUT,
# a summary printed last; exit 0 when every step passed.
set -uo pipefail
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

for t in "$stage"/tests/test_gpu_*; do
  step "$(basename "$t") --cuda" 240 "$out/gpu-tests.log" "$t" --cuda
done
for t in test_server_session test_server_limits test_server_faults test_client_e2e \
         test_client_simulate_e2e; do
  MR_TEST_GPUS=all step "$t (GPU server)" 300 "$out/e2e-tests.log" "$stage/tests/$t"
done
step "mr-grappa-e2e" 180 "$out/grappa-e2e.log" "$stage/bin/mr-grappa-e2e" --gpus all \
  --json "$out/grappa-e2e.json"

. "$PWD/tests/support/server.sh"
(cd "$tmp" && ismrmrd_generate_cartesian_shepp_logan -m 256 -c 32 -r 10 -o big.h5 >/dev/null)
for gpus in all none; do
  GPUS=$gpus start_server "$stage" "$PWD/configs"
  for i in 1 2 3; do
    rm -f "$tmp/out.h5"
    step "big dataset, --gpus $gpus, run $i" 120 "$out/big-$gpus.log" \
      "$stage/bin/reconclient" send "$tmp/big.h5" -p "$port" -o "$tmp/out.h5"
  done
  if [ "$gpus" = all ]; then
    step "mr-load 32 x 20 (GPU server)" 300 "$out/load.json" "$stage/bin/mr-load" -p "$port" -c 32 -n 20
  fi
  kill -TERM "$server"; wait "$server"
  cp "$tmp/server.log" "$out/server-$gpus.log"
done

echo "---- failures"; grep -E "FAILED|ERROR" "$out"/*-tests.log | head -20
echo "---- big"; grep -h "images ->" "$out"/big-*.log
echo "---- load"; cat "$out/load.json"
echo "---- grappa e2e"; cat "$out/grappa-e2e.json" 2>/dev/null
echo "---- summary"; cat "$summary"
rm -rf "$tmp"
exit $failed
