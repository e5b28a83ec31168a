#include "bench_sparse_ours.h"

#include <string.h>

#include "bench.h"

#ifdef MR_BENCH_HAVE_SPARSE /* gpu/sparse and gpu/coil/espirit are in this tree */

#include "espirit.h"
#include "sparse.h"

int bench_sparse_ours_available(void) { return 1; }

static int regularizer_of(const char *name, mr_sparse_regularizer *out) {
  if (strcmp(name, "wavelet") == 0)
    *out = MR_SPARSE_WAVELET;
  else if (strcmp(name, "tv") == 0)
    *out = MR_SPARSE_TV;
  else if (strcmp(name, "l2") == 0)
    *out = MR_SPARSE_L2;
  else
    return MR_EINVAL;
  return 0;
}

int bench_sparse_ours_solve(mr_device *dev, const sparse_scan *scan, const sparse_ours_run *run,
                            float complex *image, sparse_ours_result *result, mr_err *err) {
  size_t grid = scan->dims[0] * scan->dims[1] * scan->dims[2];
  size_t kbytes = grid * scan->coils * sizeof(mr_cfloat);
  mr_sparse_opts o;
  mr_sparse_opts_default(&o);
  memcpy(o.dims, scan->dims, sizeof o.dims);
  o.ncoils = scan->coils;
  o.lambda = run->lambda;
  o.iterations = run->iterations;
  int rc = regularizer_of(run->regularizer, &o.regularizer);
  if (rc < 0)
    return mr_err_set(err, rc, "no regularizer '%s'", run->regularizer);
  mr_espirit_opts eo; /* as the cs step: the region no larger than what was sampled */
  mr_espirit_opts_default(&eo);
  eo.calib = scan->calibration < eo.calib ? scan->calibration : eo.calib;
  eo.kernel = eo.kernel < eo.calib ? eo.kernel : eo.calib;
  mr_buf *k = NULL, *maps = NULL, *img = NULL;
  mr_sparse_plan *plan = NULL;
  mr_sparse_report report = {0};
  rc = mr_buf_create(dev, kbytes, &k, err);
  if (rc == 0)
    rc = mr_buf_create(dev, kbytes, &maps, err);
  if (rc == 0)
    rc = mr_buf_create(dev, grid * sizeof(mr_cfloat), &img, err);
  if (rc == 0)
    rc = mr_buf_upload(k, 0, scan->kspace, kbytes, err);
  if (rc == 0)
    rc = mr_sparse_plan_create(dev, &o, &plan, err);
  if (rc == 0 && run->maps != NULL)
    rc = mr_buf_upload(maps, 0, run->maps, kbytes, err);
  double t0 = bench_now_ms();
  if (rc == 0 && run->maps == NULL)
    rc = mr_espirit_maps(dev, mr_buf_data(k), scan->dims, scan->coils, &eo, mr_buf_data(maps), err);
  double t1 = bench_now_ms();
  if (rc == 0)
    rc = mr_sparse_solve(plan, mr_buf_data(k), scan->mask, mr_buf_data(maps), mr_buf_data(img),
                         NULL, &report, err);
  double t2 = bench_now_ms();
  if (rc == 0)
    rc = mr_buf_download(img, 0, image, grid * sizeof(mr_cfloat), err);
  if (rc == 0 && run->maps_out != NULL)
    rc = mr_buf_download(maps, 0, run->maps_out, kbytes, err);
  *result = (sparse_ours_result){.maps_ms = t1 - t0, .solve_ms = t2 - t1,
                                 .iterations = report.iterations};
  mr_sparse_plan_destroy(plan);
  mr_buf_destroy(img);
  mr_buf_destroy(maps);
  mr_buf_destroy(k);
  return rc;
}

#else /* before gpu/sparse lands: the bench reports these rows as missing */

int bench_sparse_ours_available(void) { return 0; }

int bench_sparse_ours_solve(mr_device *dev, const sparse_scan *scan, const sparse_ours_run *run,
                            float complex *image, sparse_ours_result *result, mr_err *err) {
  (void)dev;
  (void)scan;
  (void)run;
  (void)image;
  (void)result;
  return mr_err_set(err, MR_EINVAL, "this build has no gpu/sparse solver");
}

#endif
