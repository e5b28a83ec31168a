# Tests of the NUFFT, density compensation, the gridding gadget and the
# non-Cartesian simulator.
add_library(mr_test_nufft_support STATIC support/nufft_support.c)
target_include_directories(mr_test_nufft_support PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(mr_test_nufft_support PUBLIC m)

mr_add_test(test_gpu_nufft SOURCES gpu/test_gpu_nufft.c
            LIBS mr_test_gpu_common mr_test_nufft_support mr_gpu m)
target_link_libraries(test_gpu_nufft PRIVATE mr_gpu_internal) # its internal/ headers
if(MR_HAVE_CUDA) # the GPU group also compares the device's binning with the host's
  target_compile_definitions(test_gpu_nufft PRIVATE MR_HAVE_CUDA)
endif()
add_test(NAME test_gpu_nufft_cuda COMMAND test_gpu_nufft --cuda)
set_tests_properties(test_gpu_nufft_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS gpu)

mr_add_test(test_client_simulate SOURCES client/test_client_simulate.c LIBS mr_client ISMRMRD::ISMRMRD)
# The phantom as a Cartesian reconstruction shows it (reference images).
add_library(mr_test_phantom_support STATIC support/phantom_support.c)
target_include_directories(mr_test_phantom_support PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(mr_test_phantom_support PUBLIC mr_client mr_test_support)

mr_add_test(test_gadgets_gridding SOURCES gadgets/noncartesian/test_gadgets_gridding.c
            LIBS mr_gadget_harness mr_client mr_test_nufft_support mr_test_phantom_support)
add_test(NAME test_gadgets_gridding_cuda COMMAND test_gadgets_gridding --cuda)
set_tests_properties(test_gadgets_gridding_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                     LABELS gpu)

mr_add_test(test_client_simulate_e2e SOURCES client/test_client_simulate_e2e.c
            LIBS mr_test_client_env mr_test_phantom_support TIMEOUT 240)
add_dependencies(test_client_simulate_e2e reconclient reconserver)
