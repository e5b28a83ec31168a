#include "epi_trapezoid.h"

int mr_epi_trapezoid_valid(const mr_epi_trapezoid *t) {
  double total = t->ramp_up + t->flat_top + t->ramp_down;
  double tail = total - (t->acq_delay + t->dwell * t->samples);
  return t->samples > 0 && t->dwell > 0 && t->flat_top > 0 && t->ramp_up >= 0 &&
         t->ramp_down >= 0 && t->acq_delay >= 0 && t->acq_delay <= t->ramp_up &&
         tail >= -1e-6 * total && tail <= t->ramp_down;
}

double mr_epi_trapezoid_position(const mr_epi_trapezoid *t, int nx, int q) {
  double up = t->ramp_up, flat = t->flat_top, down = t->ramp_down, delay = t->acq_delay;
  double total_time = up + flat + down, total_area = 0.5 * up + flat + 0.5 * down;
  double tail = total_time - (delay + t->dwell * t->samples), read_area = total_area;
  if (up > 0)
    read_area -= 0.5 * delay * delay / up;
  if (down > 0 && tail > 0)
    read_area -= 0.5 * tail * tail / down;
  double time = (q + 1.0) * t->dwell + delay, k;
  if (time <= up)
    k = 0.5 / up * time * time;
  else if (time <= up + flat)
    k = 0.5 * up + (time - up);
  else {
    double v = total_time - time;
    k = total_area - (down > 0 ? 0.5 / down * v * v : 0);
  }
  return nx / read_area * (k - 0.5 * total_area);
}
