#include "density.h"

#include <math.h>

#include "device_impl.h"
#include "error.h"
#include "nufft_impl.h"

int mr_density_pipe_menon(mr_nufft_plan *p, int iterations, float *weights, mr_err *err) {
  if (!p->have_points)
    return mr_err_set(err, MR_EINVAL, "density: no points set on the plan");
  if (iterations < 1)
    return mr_err_set(err, MR_EINVAL, "density: %d iterations", iterations);
  int rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(p->dev))
    rc = mr_nufft_cuda_pipe_menon(p, iterations, weights, err);
  else
#endif
    rc = mr_nufft_cpu_pipe_menon(p, iterations, weights, err);
  if (rc < 0)
    return rc;
  /* Grid units to cycles per pixel: the integral of psi = phi * phi is the
   * square of phi's integral per dimension; a grid step is 1/nf of k. */
  const mr_nufft_geom *g = &p->geom;
  double scale = 1;
  for (int d = 0; d < g->rank; d++)
    scale *= p->kernel_integral * p->kernel_integral / g->nf[d];
  for (size_t j = 0; j < p->points.npoints; j++)
    weights[j] = (float)(weights[j] * scale);
  return 0;
}

int mr_density_radial(int rank, size_t npoints, const float *k, size_t spokes, double dk,
                      float *weights, mr_err *err) {
  if ((rank != 2 && rank != 3) || spokes == 0 || !(dk > 0))
    return mr_err_set(err, MR_EINVAL,
                      "density: radial weights need rank 2 or 3, spokes and dk > 0");
  for (size_t j = 0; j < npoints; j++) {
    double r2 = 0;
    for (int d = 0; d < rank; d++)
      r2 += (double)k[j * rank + d] * k[j * rank + d];
    double r = sqrt(r2), w;
    if (r < 0.25 * dk) /* the centre sample, which every spoke repeats */
      w = rank == 2 ? M_PI * dk * dk / 4 / spokes : M_PI * dk * dk * dk / 6 / spokes;
    else /* ring [r - dk/2, r + dk/2] (shell), shared by 2 samples per spoke */
      w = rank == 2 ? M_PI * r * dk / spokes : 2 * M_PI * (r2 * dk + dk * dk * dk / 12) / spokes;
    weights[j] = (float)w;
  }
  return 0;
}
