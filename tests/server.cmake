add_library(mr_wire_client STATIC support/wire_client.c)
target_link_libraries(mr_wire_client PUBLIC mr_test_support)

mr_add_test(test_server_session SOURCES test_server_session.c
  LIBS mr_wire_client mr_gadget_harness TIMEOUT 120)
mr_add_test(test_server_limits SOURCES test_server_limits.c
  LIBS mr_wire_client mr_gadget_harness TIMEOUT 120)
