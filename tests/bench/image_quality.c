#include "image_quality.h"

#include <math.h>

image_quality image_quality_of(const float complex *x, const float *mag, const float *ref,
                               size_t n) {
  double xr = 0, xx = 0, rr = 0, peak = 0;
  for (size_t i = 0; i < n; i++) {
    double m = x != NULL ? cabsf(x[i]) : mag[i];
    xr += m * ref[i];
    xx += m * m;
    rr += (double)ref[i] * ref[i];
    peak = fmax(peak, ref[i]);
  }
  double a = xx > 0 ? xr / xx : 0, err = 0;
  for (size_t i = 0; i < n; i++) {
    double m = x != NULL ? cabsf(x[i]) : mag[i], d = a * m - ref[i];
    err += d * d;
  }
  image_quality q = {.scale = a, .nrmse = sqrt(err / rr),
                     .psnr_db = 20 * log10(peak / sqrt(err / (double)n))};
  return q;
}

void image_quality_json(bench_json *j, const image_quality *q) {
  json_num(j, "psnr_db", q->psnr_db);
  json_num(j, "nrmse", q->nrmse);
  json_num(j, "scale", q->scale);
}
