add_library(mr_wire_client STATIC support/wire_client.c)
target_link_libraries(mr_wire_client PUBLIC mr_test_support)
# A whole small scan over the wire, for client threads.
add_library(mr_wire_scan STATIC support/wire_scan.c)
target_link_libraries(mr_wire_scan PUBLIC mr_wire_client mr_gadget_harness)

# The server's connections in the test's process, for blocking clients.
add_library(mr_inproc_server STATIC support/inproc_server.c)
target_link_libraries(mr_inproc_server PUBLIC mr_server mr_wire_client PkgConfig::CMOCKA)
target_compile_definitions(mr_inproc_server PRIVATE MR_VERSION="${PROJECT_VERSION}")

mr_add_test(test_server_session SOURCES server/test_server_session.c
  LIBS mr_inproc_server mr_gadget_harness TIMEOUT 120)
mr_add_test(test_server_limits SOURCES server/test_server_limits.c
  LIBS mr_inproc_server mr_gadget_harness TIMEOUT 120)

# The end-to-end run under valgrind memcheck (skips without valgrind).
add_test(NAME valgrind_e2e COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/valgrind_e2e.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(valgrind_e2e PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS valgrind)
mr_add_test(test_server_faults SOURCES server/test_server_faults.c
  LIBS mr_wire_scan Threads::Threads TIMEOUT 300)
mr_add_test(test_server_budget SOURCES server/test_server_budget.c
  LIBS mr_wire_client mr_gadget_harness TIMEOUT 300)
mr_add_test(test_server_cgroup SOURCES server/test_server_cgroup.c LIBS mr_server)
# Issue 12: outside clients and abusive sessions.
mr_add_test(test_server_robust SOURCES server/test_server_robust.c
  LIBS mr_wire_scan Threads::Threads TIMEOUT 300)
mr_add_test(test_server_write_bufs SOURCES server/test_server_write_bufs.c LIBS mr_server)
mr_add_test(test_server_envelope SOURCES server/test_server_envelope.c LIBS mr_server)
# Issue 13: the health and metrics listener (--http).
mr_add_test(test_server_metrics SOURCES server/test_server_metrics.c LIBS mr_server)
mr_add_test(test_server_http SOURCES server/test_server_http.c LIBS mr_wire_scan TIMEOUT 120)
if(MR_HAVE_CUDA) # a build with CUDA on a machine without a driver says so
  target_compile_definitions(test_server_http PRIVATE MR_HAVE_CUDA)
endif()
add_test(NAME test_server_http_cuda COMMAND test_server_http)
set_tests_properties(test_server_http_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS gpu
  ENVIRONMENT "MR_TEST_GPUS=all;MR_SOURCE_DIR=${CMAKE_SOURCE_DIR};MR_BINARY_DIR=${CMAKE_BINARY_DIR}")
# Issue 14: NHLBI-compressed streams (Gadgetron's client -P / -T).
mr_add_test(test_server_nhlbi SOURCES server/test_server_nhlbi.c
  LIBS mr_inproc_server mr_gadget_harness mr_client TIMEOUT 120)

# The external step through reconserver and reconclient (examples/external).
add_test(NAME external_e2e COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/external_e2e.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(external_e2e PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# scripts/wait-server.sh (scripts/demo.sh's wait): ready, a taken port, silence.
add_test(NAME demo_wait COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/demo_wait.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(demo_wait PROPERTIES TIMEOUT 120)
# server/conn.c in process: a uv_loop_t over a socketpair, callbacks counted.
mr_add_test(test_server_conn SOURCES server/test_server_conn.c
  LIBS mr_server mr_gadget_harness TIMEOUT 120)
