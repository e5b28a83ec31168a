# ctest bench_stream_quick (cmake -P): runs `mr-bench stream --quick`
# against the CPU server only and checks that its JSON is complete: every
# case is there, either with a skip reason or with the raw copy's and the
# CPU server's figures as numbers (for real-time cases also paced ones; the
# fMRI case's per volume, every volume answered by all its slices' images).
# Timings are not judged.
#   cmake -DBENCH=mr-bench -DCONFIGS=dir -DOUT=file.json -P stream_quick.cmake
execute_process(COMMAND ${BENCH} stream --quick --gpus none --configs ${CONFIGS} --json ${OUT}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mr-bench stream --quick exited ${rc}; its JSON is in ${OUT}")
endif()
file(READ ${OUT} json)

include(${CMAKE_CURRENT_LIST_DIR}/json_expect.cmake)

string(JSON gpu ERROR_VARIABLE err GET "${json}" stream servers gpu skipped)
if(err)
  message(FATAL_ERROR "--gpus none, yet the GPU server is not reported as skipped: ${err}")
endif()
foreach(name cartesian cartesian_external cartesian_cpu4 grappa realtime realtime_cg realtime_cs fmri)
  string(JSON case ERROR_VARIABLE err GET "${json}" stream cases ${name})
  if(err)
    message(FATAL_ERROR "case ${name} is missing from ${OUT}")
  endif()
  string(JSON why ERROR_VARIABLE err GET "${case}" skipped)
  if(NOT err)
    if(why STREQUAL "")
      message(FATAL_ERROR "case ${name} is skipped without a reason")
    endif()
    message(STATUS "${name}: skipped: ${why}")
    continue()
  endif()
  string(JSON frames ERROR_VARIABLE no_frames GET "${case}" frames)
  string(JSON volumes ERROR_VARIABLE no_volumes GET "${case}" volumes)
  set(unit slices)
  if(NOT no_frames)
    set(unit frames)
  elseif(NOT no_volumes)
    set(unit volumes)
  endif()
  expect_number(stream cases ${name} ${unit})
  expect_number(stream cases ${name} bytes)
  expect_number(stream cases ${name} raw_copy wall_ms)
  foreach(key wall_ms first_round_ms cold_first_round_ms mb_per_s ${unit}_per_s images
              last_acquisition_to_last_image_ms
              last_acquisition_to_close_ms ratio_to_raw)
    expect_number(stream cases ${name} cpu ${key})
  endforeach()
  foreach(key p50 p99 max)
    expect_number(stream cases ${name} cpu latency_ms ${key})
  endforeach()
  if(name STREQUAL "cartesian")
    expect_number(stream cases ${name} reconclient_send cpu wall_ms)
  endif()
  if(unit STREQUAL "volumes") # every volume complete: no volume without its images
    string(JSON missing ERROR_VARIABLE complete GET "${case}" cpu without_image)
    if(NOT complete)
      message(FATAL_ERROR "case ${name}: ${missing} volumes lack some of their images")
    endif()
  endif()
  if(unit STREQUAL "frames") # real-time cases: once more at a scanner's frame rate
    foreach(key offered_per_s wall_ms frames_per_s)
      expect_number(stream cases ${name} cpu_paced ${key})
    endforeach()
    expect_number(stream cases ${name} cpu_paced latency_ms p99)
  endif()
  string(JSON wall GET "${case}" cpu wall_ms)
  string(JSON ratio GET "${case}" cpu ratio_to_raw)
  message(STATUS "${name}: CPU server ${wall} ms, ${ratio}x the raw copy")
endforeach()
