/* Internal: what a NUFFT plan holds, and the backend functions behind
 * nufft.h and density.h. */
#ifndef MR_GPU_NUFFT_IMPL_H
#define MR_GPU_NUFFT_IMPL_H

#include <stddef.h>

#include "nufft.h"
#include "nufft_geom.h"
#include "nufft_points.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mr_nufft_plan {
  mr_device *dev;
  mr_nufft_geom geom;
  size_t batch;
  double upsampling;
  /* Deapodization: 1 / phi_hat at each image index, n[0] + n[1] + n[2]
   * floats (x first; 1 past rank), with the FFT's scale folded into x's. */
  float *deapod;
  double kernel_integral; /* integral of phi over one dimension, phi_hat(0) */
  double float_floor;     /* the least relative error single precision allows */
  mr_nufft_opts opts;     /* as asked for */
  double candidates[3]; /* automatic upsampling: those that reach the tolerance */
  int ncandidates;
  mr_nufft_points points;
  int have_points;
  void *impl; /* the backend's state */
};

/* The automatic upsampling (nufft_sigma.c): the CPU's rule by rank; on a
 * GPU, the choice remembered for this shape and device, else a
 * measurement of the candidates on uniformly spread points (o->max_points
 * of them, else one per pixel), remembered; while another thread measures
 * this shape, *upsampling (the caller's default) is left as it is. */
double mr_nufft_sigma_rule(int rank);
int mr_nufft_sigma_choose(mr_device *dev, const mr_nufft_opts *o, const double *candidates,
                          int ncandidates, double *upsampling, mr_err *err);
/* Measurements begun since the process started: for tests. */
int mr_nufft_sigma_measurements(void);

/* The backends. create: grid memory, and on a GPU the binning's memory
 * for opts.max_points and its kernels loaded; set_points: place and
 * bin the positions on the device (k in host memory when k_on_host, else
 * device memory), filling the plan's points with counts only (the arrays
 * stay on the device); execute: as mr_nufft_execute; pipe_menon: as
 * mr_density_pipe_menon without the final scaling. */
int mr_nufft_cpu_create(mr_nufft_plan *p, mr_err *err);
int mr_nufft_cpu_execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                         mr_cfloat *out, mr_err *err);
int mr_nufft_cpu_pipe_menon(mr_nufft_plan *p, int iterations, float *weights, mr_err *err);
void mr_nufft_cpu_destroy(mr_nufft_plan *p);

int mr_nufft_cuda_create(mr_nufft_plan *p, mr_err *err);
int mr_nufft_cuda_set_points(mr_nufft_plan *p, size_t npoints, const float *k, int k_on_host,
                             mr_err *err);
/* The device's binned points as host arrays into *out (each bin's entries
 * listed from its sources, nufft_geom.h; bin_start left NULL: the
 * subproblems carry the bins' ranges), for tests comparing them with
 * mr_nufft_points_build. The caller frees *out. */
int mr_nufft_cuda_points_download(mr_nufft_plan *p, mr_nufft_points *out, mr_err *err);
int mr_nufft_cuda_execute(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                          mr_cfloat *out, mr_err *err);
int mr_nufft_cuda_execute_host(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                               mr_cfloat *out, mr_err *err);
int mr_nufft_cuda_pipe_menon(mr_nufft_plan *p, int iterations, float *weights, mr_err *err);
/* One execute with its stages timed by CUDA events: spreading (or
 * deapodize and pad), FFT, deapodize and crop (or interpolation), in ms. For
 * benchmarks. */
int mr_nufft_cuda_stage_times(mr_nufft_plan *p, mr_nufft_direction dir, const mr_cfloat *in,
                              mr_cfloat *out, float ms[3], mr_err *err);
/* One set_points from device memory with its stages timed by CUDA events:
 * placing (the slots), the scan, the finish (scatter and subproblems), in
 * ms. For benchmarks. */
int mr_nufft_cuda_set_points_stage_times(mr_nufft_plan *p, size_t n, const float *k, float ms[3],
                                         mr_err *err);
void mr_nufft_cuda_destroy(mr_nufft_plan *p);

#ifdef __cplusplus
}
#endif

#endif
