# GRAPPA calibration and filling (grappa.h): the plan, both backends.
target_sources(mr_gpu PRIVATE grappa.c grappa_cpu.c)
if(MR_HAVE_CUDA)
  target_sources(mr_gpu PRIVATE grappa_cuda.cu grappa_chol_cuda.cu)
endif()
