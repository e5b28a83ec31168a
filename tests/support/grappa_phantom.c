#include "fft.h"
#include "grappa_phantom.h"
#include "test_err.h"

#include <complex.h>
#include <math.h>
#include <stdlib.h>

/* Ellipses: centre, half axes, angle (fractions of the field of view),
 * intensity. */
static const double ellipses[][6] = {
    {0.0, 0.0, 0.69, 0.92, 0.0, 1.0},       {0.0, -0.0184, 0.6624, 0.874, 0.0, -0.8},
    {0.22, 0.0, 0.11, 0.31, -0.31, -0.2},   {-0.22, 0.0, 0.16, 0.41, 0.31, -0.2},
    {0.0, 0.35, 0.21, 0.25, 0.0, 0.1},      {0.0, 0.1, 0.046, 0.046, 0.0, 0.1},
    {-0.08, -0.605, 0.046, 0.023, 0.0, 0.1}, {0.06, -0.605, 0.023, 0.046, 0.0, 0.1},
};

static double phantom(double x, double y) {
  double v = 0;
  for (size_t e = 0; e < sizeof ellipses / sizeof *ellipses; e++) {
    const double *p = ellipses[e];
    double c = cos(p[4]), s = sin(p[4]), dx = x - p[0], dy = y - p[1];
    double u = (dx * c + dy * s) / p[2], w = (-dx * s + dy * c) / p[3];
    if (u * u + w * w <= 1)
      v += p[5];
  }
  return v;
}

/* Coil c of nc: a Gaussian profile centred on a ring of radius 1.2 around
 * the object, with a phase that varies smoothly across the image. */
static double complex sensitivity(int c, int nc, double x, double y) {
  double a = 2 * M_PI * c / nc, cx = 1.2 * cos(a), cy = 1.2 * sin(a);
  double d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy);
  return exp(-d2 / 1.5) * cexp(I * (a + 0.8 * (x * cos(a) - y * sin(a))));
}

/* Gaussian samples by Box-Muller from a small LCG: reproducible per seed. */
static double gauss(uint64_t *state) {
  double u[2];
  for (int k = 0; k < 2; k++) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    u[k] = ((*state >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

void grappa_phantom_truth(int nx, int ny, int nc, float *object, mr_cfloat *maps) {
  size_t per = (size_t)nx * ny;
  for (int y = 0; y < ny; y++)
    for (int x = 0; x < nx; x++) {
      double px = 2.0 * (x - nx / 2) / nx, py = 2.0 * (y - ny / 2) / ny;
      if (object != NULL)
        object[(size_t)y * nx + x] = (float)phantom(px, py);
      for (int c = 0; maps != NULL && c < nc; c++)
        maps[c * per + (size_t)y * nx + x] = (float complex)sensitivity(c, nc, px, py);
    }
}

int grappa_phantom_kspace(mr_device *cpu, int nx, int ny, int nc, double noise, unsigned seed,
                          mr_cfloat *kspace) {
  size_t per = (size_t)nx * ny;
  for (int c = 0; c < nc; c++)
    for (int y = 0; y < ny; y++)
      for (int x = 0; x < nx; x++) {
        double px = 2.0 * (x - nx / 2) / nx, py = 2.0 * (y - ny / 2) / ny;
        kspace[c * per + (size_t)y * nx + x] =
            (float complex)(phantom(px, py) * sensitivity(c, nc, px, py));
      }
  mr_fft_opts o = {.rank = 2, .dims = {(size_t)nx, (size_t)ny, 1}, .batch = (size_t)nc};
  mr_fft_plan *plan = NULL;
  int rc = mr_fft_plan_create(cpu, &o, &plan, TERR);
  if (rc == 0)
    rc = mr_fft_execute(plan, MR_FFT_FORWARD, kspace, kspace, TERR);
  mr_fft_plan_destroy(plan);
  if (rc < 0 || noise <= 0)
    return rc;
  double power = 0;
  for (size_t i = 0; i < per * nc; i++)
    power += crealf(kspace[i]) * crealf(kspace[i]) + cimagf(kspace[i]) * cimagf(kspace[i]);
  double sigma = noise * sqrt(power / (double)(per * nc));
  uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < per * nc; i++) {
    double re = gauss(&state), im = gauss(&state);
    kspace[i] += (float complex)(sigma * (re + I * im));
  }
  return 0;
}

int grappa_phantom_acs_start(int ny, int nacs) { return ny / 2 - nacs / 2; }

void grappa_phantom_pattern(int ny, int accel, int phase, int nacs, uint8_t *sampled) {
  int a0 = grappa_phantom_acs_start(ny, nacs);
  for (int y = 0; y < ny; y++)
    sampled[y] = (y % accel == phase) || (y >= a0 && y < a0 + nacs);
}

double grappa_rel_error_51(const mr_cfloat *z, const mr_cfloat *ref, size_t n) {
  double sum = 0;
  size_t count = 0;
  for (size_t i = 0; i < n; i++) {
    double r = cabs(ref[i]);
    if (r > 0) {
      sum += cabs(z[i] - ref[i]) / r;
      count++;
    }
  }
  return count > 0 ? sum / count : 0;
}
