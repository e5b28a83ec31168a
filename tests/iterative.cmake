# Tests of the iterative reconstruction: gpu/fhd, gpu/toeplitz, gpu/cg and
# the fhd_cg gadget. Like gpu.cmake's: the CPU group by default, the CUDA
# group with --cuda (label gpu, exit 77 without a GPU).
add_library(mr_test_iterative STATIC support/iterative_support.c)
target_link_libraries(mr_test_iterative PUBLIC mr_test_gpu_common mr_gpu)

foreach(noun fhd toeplitz toeplitz_split cg)
  mr_add_test(test_gpu_${noun} SOURCES gpu/test_gpu_${noun}.c LIBS mr_test_iterative m)
  add_test(NAME test_gpu_${noun}_cuda COMMAND test_gpu_${noun} --cuda)
  set_tests_properties(test_gpu_${noun}_cuda PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 300 LABELS gpu)
endforeach()

mr_add_test(test_gadgets_fhd_cg SOURCES gadgets/noncartesian/test_gadgets_fhd_cg.c
            LIBS mr_gadget_harness mr_test_iterative m)

# PSNR of the iterative reconstruction against the book's baseline and
# density-compensated gridding (simulated data); --table prints them all.
mr_add_test(test_iterative_psnr SOURCES gadgets/noncartesian/test_iterative_psnr.c
            LIBS mr_gadget_harness mr_test_iterative m)
