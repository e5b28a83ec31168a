# Tests of gpu/. Each program runs its CPU group by default and its CUDA
# group with --cuda; the CUDA runs carry the label `gpu` and skip (exit 77)
# on machines without a usable GPU.
add_library(mr_test_gpu_common STATIC support/test_gpu_common.c)
target_link_libraries(mr_test_gpu_common PUBLIC mr_gpu mr_test_support PkgConfig::CMOCKA)

foreach(noun pool placement host fft coil blas solve spectral vec block epi)
  mr_add_test(test_gpu_${noun} SOURCES gpu/test_gpu_${noun}.c
              LIBS mr_test_gpu_common mr_gpu m)
  add_test(NAME test_gpu_${noun}_cuda COMMAND test_gpu_${noun} --cuda)
  set_tests_properties(test_gpu_${noun}_cuda PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 300 LABELS gpu)
endforeach()

# The host SVD (CPU only: no device).
mr_add_test(test_gpu_host_svd SOURCES gpu/test_gpu_host_svd.c LIBS mr_test_gpu_common mr_gpu m)

# Tests that reach gpu/'s internals (a room's internal/ headers).
foreach(t test_gpu_pool test_gpu_spectral)
  target_link_libraries(${t} PRIVATE mr_gpu_internal)
endforeach()
if(MR_HAVE_CUDA) # the GPU group also looks into each lane's cuFFT plan cache
  target_compile_definitions(test_gpu_pool PRIVATE MR_HAVE_CUDA)
endif()

# The GPU worker thread's queue (plain threads: no GPU needed).
mr_add_test(test_gpu_worker SOURCES gpu/test_gpu_worker.c LIBS mr_gpu_internal Threads::Threads)

add_subdirectory(bench)
