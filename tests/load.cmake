# mr-load: concurrent clients against one server, each scan checked by
# content (tests/load/mr_load.c). CI runs a small load as a test.
add_executable(mr-load load/mr_load.c)
target_link_libraries(mr-load PRIVATE mr_wire_client mr_gadget_harness Threads::Threads)

add_test(NAME load_small COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/load/run_load.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} -c 8 -n 3 -m 32 -k 4)
set_tests_properties(load_small PROPERTIES TIMEOUT 120)

# Every program's --help and refusal of unknown options, and mr-load
# counting only successful scans. With MR_FUZZ the fuzz targets are
# libFuzzer's programs, which have options of their own.
if(MR_FUZZ)
  set(MR_FUZZ_DRIVERS ON)
else()
  set(MR_FUZZ_DRIVERS OFF)
endif()
add_test(NAME programs_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/load/programs_cli.sh
         ${CMAKE_BINARY_DIR} ${MR_FUZZ_DRIVERS})
set_tests_properties(programs_cli PROPERTIES TIMEOUT 180)

# Several GPUs in one server without a GPU: --fake-gpus, one left out with
# --gpus; sessions spread over the rest (/metrics per GPU).
add_test(NAME load_fake_gpus COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/load/fake_gpus.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(load_fake_gpus PROPERTIES TIMEOUT 120)

# Several loop threads (--loops 3): every client served, connections spread
# round robin, counted once; --max-connections holds across the loops.
add_test(NAME load_loops COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/load/loops.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(load_loops PROPERTIES TIMEOUT 120)

# --warm DIR: a stored dump replayed through its chain before /readyz is 200.
add_test(NAME load_warm COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/load/warm.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(load_warm PROPERTIES TIMEOUT 120)
