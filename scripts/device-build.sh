#!/usr/bin/env bash
# The check on the GPU device machine, part 1 (here): builds for the H100
# (sm_90, Release) into build-device/ what the named areas run, stages it in
# build-device/stage/ (programs.tar.xz: bin/ for the servers and tools, tests/ for the test
# programs, as MR_BINARY_DIR expects) and bundles their shared libraries -
# and ISMRMRD's reference tools with theirs, which that machine lacks - into
# stage/libs.tar.xz (compressed: OpenBLAS and ICU alone would overrun the
# 64 MiB a run may carry). Part 2, on the device: scripts/device-run.sh.
#
# usage: scripts/device-build.sh [AREA...]     (no AREA: every area)
#   areas: tests e2e stream bench gpu grappa nufft fhd multigpu sparse sparse3d
#          (scripts/device-run.sh --help says what each runs)
#   REFERENCE=FILE  the reference NUFFT library's tarball (cufinufft-sm90.tar.xz),
#                   staged for the nufft area to time beside ours
set -euo pipefail
# shellcheck source=scripts/device-areas.sh
. "$(dirname "$0")/device-areas.sh"
device_check_args "$0" "$@"
cd "$(dirname "$0")/.."
areas=${*:-$device_areas}

build="build-device"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
grep -q '^MR_CUDA:BOOL=ON' "$build/CMakeCache.txt" || { echo "$build has MR_CUDA off" >&2; exit 1; }

# What each area runs (scripts/device-run.sh). The gpu/ test programs are
# those behind ctest's `gpu` label (test_gpu_fft_cuda runs test_gpu_fft
# --cuda), so a new one is staged without editing this list; the gadget
# tests with a CUDA group (test_gadgets_epi_cuda, ...) likewise.
gpu_tests=$(ctest --test-dir "$build" -N -L gpu |
  sed -n 's/.*Test *#[0-9]*: \(test_gpu_[a-z_]*\)_cuda$/\1/p' | sort -u)
gadget_gpu_tests=$(ctest --test-dir "$build" -N -L gpu |
  sed -n 's/.*Test *#[0-9]*: \(test_gadgets_[a-z_]*\)_cuda$/\1/p' | sort -u)
# The sparse areas' tests: the gpu-labelled ones of compressed sensing,
# ESPIRiT and coil compression, those of them this tree has.
sparse_tests=$(printf '%s\n' "$gpu_tests" | grep -E '^test_gpu_(sparse|espirit|compress)' || true)
e2e="reconserver reconclient mr-load mr-grappa-e2e test_server_session test_server_limits
     test_server_faults test_server_http test_client_e2e test_client_simulate_e2e"
targets=""
for a in $areas; do
  case $a in
  tests) targets="$targets $e2e $gpu_tests $gadget_gpu_tests
                  test_configs_images" ;;
  e2e) targets="$targets $e2e" ;;
  stream | bench) targets="$targets mr-bench reconserver reconclient" ;;
  gpu) targets="$targets mr-bench test_gpu_pool test_gpu_host test_gpu_fft test_gpu_coil
                test_gpu_blas test_gpu_solve test_gpu_vec test_gpu_block" ;;
  grappa) targets="$targets mr-bench mr-grappa-e2e reconserver test_gpu_grappa test_gpu_slice_grappa" ;;
  nufft) targets="$targets mr-bench test_gpu_nufft" ;;
  fhd) targets="$targets mr-bench test_gpu_fhd test_gpu_toeplitz test_gpu_cg test_gadgets_fhd_cg" ;;
  sparse | sparse3d) targets="$targets mr-bench reconserver reconclient $sparse_tests" ;;
  multigpu) targets="$targets mr-bench reconserver reconclient mr-load test_gpu_pool
                     test_gpu_placement test_gpu_toeplitz_split" ;;
  esac
done
# shellcheck disable=SC2086 # one target a word
targets=$(printf '%s\n' $targets | sort -u | tr '\n' ' ')
# shellcheck disable=SC2086
cmake --build "$build" -j"$(nproc)" --target $targets

stage=$build/stage
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/tests"
for t in $targets; do
  if [ -x "$build/bin/$t" ]; then cp "$build/bin/$t" "$stage/bin/"; else cp "$build/tests/$t" "$stage/tests/"; fi
done
cp /usr/bin/ismrmrd_generate_cartesian_shepp_logan /usr/bin/ismrmrd_recon_cartesian_2d "$stage/bin/"
# DCMTK's data dictionary (the client's and dicom_out's DICOM files need it;
# that machine has no DCMTK): read there through DCMDICTPATH.
mkdir -p "$stage/dcmtk"
cp /usr/share/libdcmtk17/dicom.dic /usr/share/libdcmtk17/private.dic "$stage/dcmtk/"
case " $areas " in # BART, the sparse bench's reference, with its libraries (below)
*" sparse "* | *" sparse3d "*) cp /usr/bin/bart "$stage/bin/" ;;
esac
find "$stage/bin" "$stage/tests" -type f -exec strip {} + # tests/ may be empty (sparse)
rm -rf "$build/libs"
scripts/bundle-libs.sh "$build/libs" "$stage"/bin/* "$stage"/tests/*
tar -cJf "$stage/libs.tar.xz" -C "$build/libs" .
[ -z "${REFERENCE:-}" ] || install -m 644 "$REFERENCE" "$stage/cufinufft-sm90.tar.xz"
echo "$areas" | tr ' ' '\n' | sed '/^$/d' >"$stage/areas"
for t in $gpu_tests $gadget_gpu_tests; do # the tests whose CUDA group the tests area runs
  [ -x "$stage/tests/$t" ] && echo "$t"
done >"$stage/gpu-tests"
for t in $sparse_tests; do
  [ -x "$stage/tests/$t" ] && echo "$t"
done >"$stage/sparse-tests"
# The programs as one xz stream with a dictionary larger than all of them:
# each links the same CUDA kernels, so the copies compress to almost
# nothing (every area: 40 MB of programs in 2 MB), where the folders alone
# would overrun the 64 MiB a run may carry. device-run.sh unpacks them.
tar -cf - -C "$stage" bin tests | xz -9 -T1 >"$stage/programs.tar.xz"
rm -rf "$stage/bin" "$stage/tests"
du -sh "$stage"

cat <<CALL

Now call the device tool's \`run\`, once per area or a few areas a call (a
call must end within its 600 s; tests alone takes most of one), with:
  command:   scripts/device-run.sh AREA...     (staged: $areas)
  carry:     ["$stage"]
  timeout_s: 600
CALL
