# Fuzzing. With MR_FUZZ (clang) the libFuzzer drivers are built and ctest
# runs each briefly from the seed corpus; in every other build the same
# targets are linked to a replay main that runs the corpus and the saved
# regressions (tests/fuzz/regressions/<target>/: every crash found becomes
# one), so the normal and sanitizer runs replay them too. The nhlbi target
# (the NHLBI decoder) and the xml target (every XML reader) read their
# own seeds (seed/nhlbi_*, seed/xml_*, written by mr-fuzz-corpus); the
# others take them as one more odd input.
add_executable(mr-fuzz-corpus fuzz/fuzz_corpus.c)
target_link_libraries(mr-fuzz-corpus PRIVATE mr_client mr_gadget_harness)
set_target_properties(mr-fuzz-corpus PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)

set(MR_FUZZ_CORPUS ${CMAKE_BINARY_DIR}/fuzz-corpus)
add_test(NAME fuzz_corpus
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/make_corpus.sh $<TARGET_FILE:mr-fuzz-corpus>
          ${MR_FUZZ_CORPUS})
set_tests_properties(fuzz_corpus PROPERTIES FIXTURES_SETUP fuzz_corpus)

set(MR_FUZZ_SECONDS 30 CACHE STRING "How long ctest runs each fuzzer")
foreach(target decoder session nhlbi xml)
  set(regressions ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/${target})
  if(MR_FUZZ)
    add_executable(fuzz_${target} fuzz/fuzz_${target}.c)
    target_link_options(fuzz_${target} PRIVATE -fsanitize=fuzzer)
    set(run fuzz_${target} -max_total_time=${MR_FUZZ_SECONDS} -timeout=20 -rss_limit_mb=2048
        -print_final_stats=1 ${MR_FUZZ_CORPUS}/${target} ${MR_FUZZ_CORPUS}/seed ${regressions})
    set(name fuzz_${target}_short)
  else()
    add_executable(fuzz_${target} fuzz/fuzz_${target}.c fuzz/replay_main.c)
    set(run fuzz_${target} ${MR_FUZZ_CORPUS}/seed ${regressions})
    set(name fuzz_${target}_replay)
  endif()
  target_link_libraries(fuzz_${target} PRIVATE mr_server)
  target_compile_definitions(fuzz_${target} PRIVATE
    MR_FUZZ_CONFIG_DIR="${CMAKE_SOURCE_DIR}/configs")
  set_target_properties(fuzz_${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${run})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED fuzz_corpus TIMEOUT 600)
endforeach()
