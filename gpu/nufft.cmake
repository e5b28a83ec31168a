# NUFFT plans (gridding) and density compensation, part of mr_gpu.
target_sources(mr_gpu PRIVATE nufft.c nufft_kernel.c nufft_points.c nufft_cpu.c nufft_sigma.c
  density.c)
if(MR_HAVE_CUDA)
  target_sources(mr_gpu PRIVATE nufft_cuda.cu nufft_points_cuda.cu)
endif()
