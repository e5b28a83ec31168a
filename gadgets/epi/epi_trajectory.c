#include "epi_trajectory.h"

#include <math.h>

static int param(const mr_trajectory_description *d, const char *name, double *out,
                 mr_err *err) {
  const mr_trajectory_param *p = mr_trajectory_description_param(d, name);
  if (p == NULL || !(p->value >= 0))
    return mr_err_set(err, MR_EHEADER,
                      "the trajectoryDescription (%s) %s '%s': the EPI readout cannot be "
                      "regridded without it", d->identifier, p == NULL ? "lacks" : "has a negative",
                      name);
  *out = p->value;
  return 0;
}

int mr_epi_positions(const mr_trajectory_description *d, int nx, int samples, double *fwd,
                     double *rev, mr_err *err) {
  if (d == NULL || !mr_trajectory_description_is_epi(d)) {
    if (samples != nx)
      return mr_err_set(err, MR_EDATA,
                        "EPI readouts of %d samples for an encoded readout of %d: ramp-sampled "
                        "EPI needs the encoding's trajectoryDescription (ConventionalEPI: "
                        "rampUpTime, flatTopTime, rampDownTime, acqDelayTime, numSamples, "
                        "dwellTime), and this header has none",
                        samples, nx);
    for (int q = 0; q < samples; q++) {
      fwd[q] = q - nx / 2;
      rev[q] = (samples - 1 - q) - nx / 2;
    }
    return 0;
  }
  double up = 0, flat = 0, down = 0, delay = 0, count = 0, dwell = 0;
  int rc;
  if ((rc = param(d, "rampUpTime", &up, err)) < 0 || (rc = param(d, "flatTopTime", &flat, err)) < 0 ||
      (rc = param(d, "rampDownTime", &down, err)) < 0 ||
      (rc = param(d, "acqDelayTime", &delay, err)) < 0 ||
      (rc = param(d, "numSamples", &count, err)) < 0 || (rc = param(d, "dwellTime", &dwell, err)) < 0)
    return rc;
  if (count != samples)
    return mr_err_set(err, MR_EDATA,
                      "EPI readouts of %d samples, where the trajectoryDescription says "
                      "numSamples %g", samples, count);
  double total_time = up + flat + down, read_time = dwell * samples;
  double tail = total_time - (delay + read_time);
  if (!(dwell > 0) || !(flat > 0) || tail < -1e-6 * total_time || tail > down || delay > up)
    return mr_err_set(err, MR_EHEADER,
                      "the trajectoryDescription's readout (%g samples %g us apart from %g us "
                      "on) does not fit its trapezoid (%g + %g + %g us)",
                      count, dwell, delay, up, flat, down);
  double total_area = 0.5 * up + flat + 0.5 * down, read_area = total_area;
  if (up > 0)
    read_area -= 0.5 * delay * delay / up;
  if (down > 0 && tail > 0)
    read_area -= 0.5 * tail * tail / down;
  double scale = nx / read_area;
  for (int q = 0; q < samples; q++) {
    double t = (q + 1.0) * dwell + delay, k;
    if (t <= up)
      k = 0.5 / up * t * t;
    else if (t <= up + flat)
      k = 0.5 * up + (t - up);
    else {
      double v = total_time - t;
      k = total_area - (down > 0 ? 0.5 / down * v * v : 0);
    }
    fwd[q] = scale * (k - 0.5 * total_area);
    rev[q] = -fwd[q];
  }
  return 0;
}
