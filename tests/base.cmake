# base/: the ground floor.
mr_add_test(test_base_channel SOURCES base/test_base_channel.c LIBS mr_base TIMEOUT 120)
mr_add_test(test_base_error SOURCES base/test_base_error.c LIBS mr_base)
mr_add_test(test_base_budget SOURCES base/test_base_budget.c LIBS mr_base)
