# Simultaneous multi-slice: gpu/sms/slice_grappa.h (CPU, and the GPU against
# it with --cuda) and the slice_grappa gadget on the simulator's scans.
mr_add_test(test_gpu_slice_grappa SOURCES gpu/test_gpu_slice_grappa.c
            LIBS mr_test_gpu_common mr_gpu m TIMEOUT 120)
target_link_libraries(test_gpu_slice_grappa PRIVATE mr_gpu_internal) # its internal/ headers
add_test(NAME test_gpu_slice_grappa_cuda COMMAND test_gpu_slice_grappa --cuda)
set_tests_properties(test_gpu_slice_grappa_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS gpu)

mr_add_test(test_gadgets_slice_grappa SOURCES gadgets/epi/test_gadgets_slice_grappa.c
            LIBS mr_test_dataset_chain mr_gpu TIMEOUT 300)
