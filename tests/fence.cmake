# Runs of CPU tests with every block of 4 KiB or more ending at an
# inaccessible page (support/fence_malloc.c, loaded with LD_PRELOAD): a
# read past a buffer's end faults there, also inside OpenBLAS, which no
# sanitizer sees (gpu/README.md, "OpenBLAS reads past its operands").
# Not in the sanitizer build: its allocator must come first.
if(NOT MR_SANITIZE)
  add_library(mr_fence_malloc MODULE support/fence_malloc.c)
  target_link_libraries(mr_fence_malloc PRIVATE ${CMAKE_DL_LIBS})
  # The CPU groups of the tests that reach LAPACK, and what calls it.
  foreach(t test_gpu_host_svd test_gpu_epi test_gpu_compress test_gpu_espirit test_gpu_coil
          test_gpu_solve test_gpu_spectral test_gpu_grappa test_gpu_slice_grappa
          test_gadgets_epi test_gadgets_slice_grappa)
    add_test(NAME ${t}_fenced COMMAND ${t})
    set_tests_properties(${t}_fenced PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
      ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:mr_fence_malloc>;MR_SOURCE_DIR=${CMAKE_SOURCE_DIR};MR_BINARY_DIR=${CMAKE_BINARY_DIR}")
  endforeach()
  # The CPU server through the fMRI chain under the fence.
  add_test(NAME fence_e2e COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/fence_e2e.sh
    ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} $<TARGET_FILE:mr_fence_malloc>)
  set_tests_properties(fence_e2e PROPERTIES TIMEOUT 300)
endif()
