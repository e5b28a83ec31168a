# GRAPPA: gpu/grappa.h, the noise_adjust and grappa gadgets, weighted coil
# combination. A synthetic multi-coil phantom serves the tests and mr-bench.
add_library(mr_test_grappa_phantom STATIC support/grappa_phantom.c)
target_include_directories(mr_test_grappa_phantom PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(mr_test_grappa_phantom PUBLIC mr_gpu m)

mr_add_test(test_gpu_grappa SOURCES gpu/test_gpu_grappa.c
            LIBS mr_test_gpu_common mr_test_grappa_phantom mr_gpu m)
target_link_libraries(test_gpu_grappa PRIVATE mr_gpu_internal) # its internal/ headers
add_test(NAME test_gpu_grappa_cuda COMMAND test_gpu_grappa --cuda)
set_tests_properties(test_gpu_grappa_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS gpu)

mr_add_test(test_gadgets_noise_adjust SOURCES gadgets/cartesian/test_gadgets_noise_adjust.c LIBS mr_gadget_harness)
mr_add_test(test_gadgets_grappa SOURCES gadgets/cartesian/test_gadgets_grappa.c
            LIBS mr_test_dataset_chain mr_test_grappa_phantom TIMEOUT 120)

# GRAPPA end to end through reconserver (a benchmark program, not a test).
add_executable(mr-grappa-e2e bench/grappa_e2e.c)
target_link_libraries(mr-grappa-e2e PRIVATE mr_wire_client mr_gadget_harness mr_test_grappa_phantom)
add_dependencies(mr-grappa-e2e reconserver)
# A small scan through a CPU server twice: every image of every session.
add_test(NAME grappa_e2e_quick COMMAND mr-grappa-e2e --gpus none --slices 2 --coils 4 --matrix 32
                                       --accel 2 --acs 8 --sessions 2)
set_tests_properties(grappa_e2e_quick PROPERTIES
  ENVIRONMENT "MR_SOURCE_DIR=${CMAKE_SOURCE_DIR};MR_BINARY_DIR=${CMAKE_BINARY_DIR}")
