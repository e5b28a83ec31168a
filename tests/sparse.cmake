# Tests of compressed sensing: gpu/sparse (the CPU group by default, the
# CUDA group with --cuda, label gpu, exit 77 without a GPU) and the cs
# gadget.
mr_add_test(test_gpu_sparse SOURCES gpu/test_gpu_sparse.c LIBS mr_test_iterative mr_test_gpu_common mr_gpu m)
add_test(NAME test_gpu_sparse_cuda COMMAND test_gpu_sparse --cuda)
set_tests_properties(test_gpu_sparse_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS gpu)
# The temporal terms: temporal TV, the series operator, a dynamic series.
mr_add_test(test_gpu_sparse_temporal SOURCES gpu/test_gpu_sparse_temporal.c
            LIBS mr_test_gpu_common mr_test_bart_cfl mr_gpu m)
add_test(NAME test_gpu_sparse_temporal_cuda COMMAND test_gpu_sparse_temporal --cuda)
set_tests_properties(test_gpu_sparse_temporal_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS gpu)
add_test(NAME test_gpu_sparse_temporal_bart COMMAND test_gpu_sparse_temporal --bart)
set_tests_properties(test_gpu_sparse_temporal_bart PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

mr_add_test(test_gadgets_cs SOURCES gadgets/sparse/test_gadgets_cs.c
            LIBS mr_test_dataset_chain mr_gadget_harness m TIMEOUT 120)
# cs on a simulated dynamic series (temporal_lambda, configs/cs_dynamic).
mr_add_test(test_gadgets_cs_series SOURCES gadgets/sparse/test_gadgets_cs_series.c
            LIBS mr_test_dataset_chain mr_gadget_harness m TIMEOUT 300)

# mr-sparse-timing: the solve's time on the GPU and the CPU (JSON; not a
# test: performance is measured by programs, never asserted).
add_executable(mr-sparse-timing gpu/time_gpu_sparse.c)
target_include_directories(mr-sparse-timing PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(mr-sparse-timing PRIVATE mr_gpu m)
set_target_properties(mr-sparse-timing PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
