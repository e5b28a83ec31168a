#include "epi_trajectory.h"

#include "epi_trapezoid.h"

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
  double values[6] = {0};
  static const char *const names[6] = {"rampUpTime", "flatTopTime", "rampDownTime",
                                       "acqDelayTime", "numSamples", "dwellTime"};
  for (int i = 0; i < 6; i++) {
    int rc = param(d, names[i], &values[i], err);
    if (rc < 0)
      return rc;
  }
  if (values[4] != samples)
    return mr_err_set(err, MR_EDATA,
                      "EPI readouts of %d samples, where the trajectoryDescription says "
                      "numSamples %g", samples, values[4]);
  mr_epi_trapezoid t = {.ramp_up = values[0], .flat_top = values[1], .ramp_down = values[2],
                        .acq_delay = values[3], .samples = samples, .dwell = values[5]};
  if (!mr_epi_trapezoid_valid(&t))
    return mr_err_set(err, MR_EHEADER,
                      "the trajectoryDescription's readout (%d samples %g us apart from %g us "
                      "on) does not fit its trapezoid (%g + %g + %g us)",
                      samples, t.dwell, t.acq_delay, t.ramp_up, t.flat_top, t.ramp_down);
  for (int q = 0; q < samples; q++) {
    fwd[q] = mr_epi_trapezoid_position(&t, nx, q);
    rev[q] = -fwd[q];
  }
  return 0;
}
