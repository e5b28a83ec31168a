#include "ghost_fit.h"

#include <complex.h>
#include <math.h>
#include <stddef.h>

/* t(x) = sum_c rev conj(fwd) at pixel j: the reversed profile's phase
 * against the forward one's, weighted by the signal. */
static double complex phase_product(const mr_cfloat *fwd, const mr_cfloat *rev, int nx,
                                    int ncoils, int j) {
  double complex t = 0;
  for (int c = 0; c < ncoils; c++) {
    size_t at = (size_t)c * (size_t)nx + (size_t)j;
    t += rev[at] * conjf(fwd[at]);
  }
  return t;
}

mr_ghost_fit mr_ghost_fit_profiles(const mr_cfloat *fwd, const mr_cfloat *rev, int nx,
                                   int ncoils) {
  double peak = 0;
  for (int j = 0; j < nx; j++) {
    double m = cabs(phase_product(fwd, rev, nx, ncoils, j));
    peak = m > peak ? m : peak;
  }
  /* only where there is signal: outside the object the profiles hold what
   * the regridding could not determine, at phases of its own */
  double floor = MR_GHOST_SIGNAL_FLOOR * peak;
  double complex neighbours = 0, constant = 0, prev = 0;
  for (int j = 0; j < nx; j++) {
    double complex t = phase_product(fwd, rev, nx, ncoils, j);
    if (j > 0 && cabs(t) > floor && cabs(prev) > floor)
      neighbours += t * conj(prev);
    prev = t;
  }
  double slope = carg(neighbours);
  for (int j = 0; j < nx; j++) {
    double complex t = phase_product(fwd, rev, nx, ncoils, j);
    if (cabs(t) > floor)
      constant += t * cexp(-I * slope * (j - nx / 2));
  }
  return (mr_ghost_fit){carg(constant), slope};
}

mr_ghost_fit mr_ghost_history_add(mr_ghost_history *h, mr_ghost_fit fit, int filter) {
  h->fits[h->next] = fit;
  h->next = (h->next + 1) % MR_GHOST_FILTER_MAX;
  if (h->count < MR_GHOST_FILTER_MAX)
    h->count++;
  int n = filter < h->count ? filter : h->count;
  double complex unit = 0;
  double slope = 0;
  for (int i = 1; i <= n; i++) {
    const mr_ghost_fit *f = &h->fits[(h->next - i + MR_GHOST_FILTER_MAX) % MR_GHOST_FILTER_MAX];
    unit += cexp(I * f->constant);
    slope += f->slope;
  }
  return (mr_ghost_fit){carg(unit), slope / n};
}

void mr_ghost_correction(mr_ghost_fit fit, int nx, mr_cfloat *factors) {
  for (int j = 0; j < nx; j++)
    factors[j] = (mr_cfloat)cexp(-I * (fit.constant + fit.slope * (j - nx / 2)));
}
