# Issue 14, items 1 and 5: the noise store and measurement dependencies,
# Gadgetron XML configs.
mr_add_test(test_gadgets_noise_store SOURCES gadgets/store/test_gadgets_noise_store.c LIBS mr_gadgets)
mr_add_test(test_gadgets_gadgetron_xml SOURCES gadgets/runtime/test_gadgets_gadgetron_xml.c
  LIBS mr_gadget_harness)
mr_add_test(test_server_dependencies SOURCES server/test_server_dependencies.c
  LIBS mr_wire_client mr_gadget_harness TIMEOUT 120)
# Issue 27, items 3 and 8: the state directory under concurrency, the
# dumps' byte limit over all dumps.
mr_add_test(test_gadgets_state_dir SOURCES gadgets/store/test_gadgets_state_dir.c LIBS mr_gadgets)
