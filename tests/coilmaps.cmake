# Coil maps and coil compression: gpu/coil/espirit.h, gpu/coil/compress.h,
# the coil_compress gadget. CPU groups by default, CUDA groups with --cuda
# (label gpu, 77 without a GPU), and the comparisons against BART with
# --bart (77 without bart on the PATH; Debian's package).
pkg_check_modules(COILMAPS_LAPACKE REQUIRED IMPORTED_TARGET lapacke)
add_library(mr_test_bart_cfl STATIC support/bart_cfl.c)
target_include_directories(mr_test_bart_cfl PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_link_libraries(mr_test_bart_cfl PUBLIC mr_test_gpu_common mr_test_support PkgConfig::CMOCKA)

foreach(noun espirit compress)
  mr_add_test(test_gpu_${noun} SOURCES gpu/test_gpu_${noun}.c
              LIBS mr_test_gpu_common mr_test_grappa_phantom mr_test_bart_cfl mr_gpu
                   PkgConfig::COILMAPS_LAPACKE m)
  add_test(NAME test_gpu_${noun}_cuda COMMAND test_gpu_${noun} --cuda)
  set_tests_properties(test_gpu_${noun}_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    LABELS gpu)
  add_test(NAME test_gpu_${noun}_bart COMMAND test_gpu_${noun} --bart)
  set_tests_properties(test_gpu_${noun}_bart PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

mr_add_test(test_gadgets_coil_compress SOURCES gadgets/cartesian/test_gadgets_coil_compress.c
            LIBS mr_test_dataset_chain TIMEOUT 300)

# Real-time maps that follow a moving object (realtime_cg on simulate --moving data).
mr_add_test(test_gadgets_realtime_maps SOURCES gadgets/noncartesian/test_gadgets_realtime_maps.c
            LIBS mr_test_dataset_chain mr_test_phantom_support TIMEOUT 600)
