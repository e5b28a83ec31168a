# ctest bench_load_quick (cmake -P): runs `mr-bench load --quick` against a
# server on 2 fake GPUs and checks that its JSON is complete: every case
# with its rates, its raw copy, its warm round (--rounds 2) and latency percentiles as
# numbers, every session served,
# the real-time stream's latency alone and beside each neighbour (with its
# late frames), the gadgets' time per session, each GPU lane's busy share
# and each GPU's busy share (from fake-nvidia-smi/, first in PATH). Timings are not judged.
#   cmake -DBENCH=mr-bench -DCONFIGS=dir -DOUT=file.json -P load_quick.cmake
# nvidia-smi's stand-in first in PATH: the GPUs' busy share is read from it.
execute_process(COMMAND ${CMAKE_COMMAND} -E env
                        "PATH=${CMAKE_CURRENT_LIST_DIR}/fake-nvidia-smi:$ENV{PATH}"
                        ${BENCH} load --quick --fake-gpus 2 --gpus 0,1 --rounds 2
                        --configs ${CONFIGS} --json ${OUT}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mr-bench load --quick exited ${rc}; its JSON is in ${OUT}")
endif()
file(READ ${OUT} json)

include(${CMAKE_CURRENT_LIST_DIR}/json_expect.cmake)

string(JSON count GET "${json}" load gpu_count)
if(NOT count EQUAL 2)
  message(FATAL_ERROR "gpu_count is ${count}, not the 2 fake GPUs, in ${OUT}")
endif()
foreach(name realtime_cg grappa cgsense3d)
  foreach(key first_session_ms wall_ms sessions_per_s mb_per_s ratio_to_raw)
    expect_number(load cases ${name} ${key})
  endforeach()
  expect_number(load cases ${name} raw_copy mb_per_s)
  expect_number(load cases ${name} warm_round_wall_ms 0)
  foreach(key p50 p99 max)
    expect_number(load cases ${name} latency_ms ${key})
    expect_number(load cases ${name} session_ms ${key})
  endforeach()
  string(JSON n GET "${json}" load cases ${name} sessions)
  string(JSON ok GET "${json}" load cases ${name} sessions_ok)
  if(NOT n EQUAL 4 OR NOT ok EQUAL n)
    message(FATAL_ERROR "${name}: ${ok} of ${n} sessions served (4 expected) in ${OUT}")
  endif()
  # Where the time went: every session's line, each GPU's lane 0.
  string(JSON gn GET "${json}" load cases ${name} gadget_sessions)
  if(NOT gn EQUAL n)
    message(FATAL_ERROR "${name}: gadget times of ${gn} sessions, not ${n}, in ${OUT}")
  endif()
  expect_number(load cases ${name} gadget_ms_per_session image_out)
  expect_number(load cases ${name} lane_busy_share gpu0 0)
  expect_number(load cases ${name} lane_busy_share gpu1 0)
  expect_number(load cases ${name} server_cpu mr-loop cores)
  # A case shorter than the stand-in's start has no sample (a loaded
  # machine): then no member, which at least one case must have.
  string(JSON busy0 ERROR_VARIABLE none GET "${json}" load cases ${name} gpu_kernel_busy_share gpu0)
  if(NOT none)
    string(JSON busy1 GET "${json}" load cases ${name} gpu_kernel_busy_share gpu1)
    if(NOT busy0 EQUAL 0.5 OR NOT busy1 EQUAL 0.25)
      message(FATAL_ERROR "${name}: GPU busy shares ${busy0}, ${busy1} (0.5 and 0.25 from the stand-in) in ${OUT}")
    endif()
    set(busy_seen 1)
  endif()
  string(JSON rate GET "${json}" load cases ${name} sessions_per_s)
  message(STATUS "${name}: ${n} sessions at once, ${rate} sessions/s")
endforeach()
if(NOT busy_seen)
  message(FATAL_ERROR "no case has the GPUs' busy share (fake-nvidia-smi/ first in PATH) in ${OUT}")
endif()
expect_number(load cases realtime_cg frames_per_s)
expect_number(load cases grappa slices_per_s)
foreach(run alone beside_grappa beside_cgsense3d)
  expect_number(load cases realtime_neighbour ${run} frames_per_s)
  expect_number(load cases realtime_neighbour ${run} latency_ms p99)
  expect_number(load cases realtime_neighbour ${run} latency_after_start_ms p99)
  expect_number(load cases realtime_neighbour ${run} late_units 0 1)
endforeach()
foreach(run beside_grappa beside_cgsense3d)
  expect_number(load cases realtime_neighbour ${run} p99_ratio_to_alone)
  string(JSON n GET "${json}" load cases realtime_neighbour ${run} neighbour_sessions)
  if(n LESS 1)
    message(FATAL_ERROR "realtime_neighbour ${run}: no neighbour session completed in ${OUT}")
  endif()
endforeach()
