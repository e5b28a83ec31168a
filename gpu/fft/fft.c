#include <stdlib.h>

#include "error.h"
#include "fft_impl.h"

int mr_fft_plan_create(mr_device *dev, const mr_fft_opts *opts, mr_fft_plan **out, mr_err *err) {
  mr_fft_plan *plan = calloc(1, sizeof *plan);
  if (plan == NULL)
    return mr_err_set(err, MR_ENOMEM, "fft: out of memory");
  plan->dev = dev;
  int rc = mr_fft_shape_init(&plan->shape, opts, err);
  if (rc == 0) {
#ifdef MR_HAVE_CUDA
    if (mr_device_is_gpu(dev))
      rc = mr_fft_cuda_create(plan, err);
    else
#endif
      rc = mr_fft_cpu_create(plan, err);
  }
  if (rc < 0) {
    mr_fft_shape_free(&plan->shape);
    free(plan);
    return rc;
  }
  *out = plan;
  return 0;
}

int mr_fft_plan_keep(mr_device *dev, const mr_fft_opts *opts, mr_fft_plan **plan, mr_err *err) {
  const mr_fft_plan *p = *plan;
  int same = p != NULL && p->dev == dev && p->shape.rank == opts->rank &&
             p->shape.batch == opts->batch && p->shape.plain == (opts->plain != 0);
  for (int d = 0; same && d < 3; d++)
    same = p->shape.n[d] == (d < opts->rank ? opts->dims[d] : 1);
  if (same)
    return 0;
  mr_fft_plan_destroy(*plan);
  *plan = NULL;
  return mr_fft_plan_create(dev, opts, plan, err);
}

static int check_direction(mr_fft_direction dir, mr_err *err) {
  if (dir != MR_FFT_FORWARD && dir != MR_FFT_BACKWARD)
    return mr_err_set(err, MR_EINVAL, "fft: direction %d", (int)dir);
  return 0;
}

int mr_fft_execute(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                   mr_err *err) {
  int rc = check_direction(dir, err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(plan->dev))
    return mr_fft_cuda_execute(plan, dir, in, out, err);
#endif
  return mr_fft_cpu_execute(plan, dir, in, out, err);
}

int mr_fft_execute_host(mr_fft_plan *plan, mr_fft_direction dir, const mr_cfloat *in,
                        mr_cfloat *out, mr_err *err) {
  int rc = check_direction(dir, err);
  if (rc < 0)
    return rc;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(plan->dev))
    return mr_fft_cuda_execute_host(plan, dir, in, out, err);
#endif
  return mr_fft_cpu_execute(plan, dir, in, out, err);
}

void mr_fft_plan_destroy(mr_fft_plan *plan) {
  if (plan == NULL)
    return;
#ifdef MR_HAVE_CUDA
  if (mr_device_is_gpu(plan->dev))
    mr_fft_cuda_destroy(plan);
  else
#endif
    mr_fft_cpu_destroy(plan);
  mr_fft_shape_free(&plan->shape);
  free(plan);
}
