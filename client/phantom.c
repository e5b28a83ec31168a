#include "phantom.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

/* One ellipse (ellipsoid): intensity, semi-axes and centre in units of the
 * half field of view, rotation about z in degrees. */
typedef struct shape {
  double intensity, a, b, c, x0, y0, z0, degrees;
} shape;

static const shape shepp_logan[] = {
    {1.0, 0.69, 0.92, 0.81, 0.0, 0.0, 0.0, 0},
    {-0.8, 0.6624, 0.874, 0.78, 0.0, -0.0184, 0.0, 0},
    {-0.2, 0.11, 0.31, 0.22, 0.22, 0.0, 0.0, -18},
    {-0.2, 0.16, 0.41, 0.28, -0.22, 0.0, 0.0, 18},
    {0.1, 0.21, 0.25, 0.41, 0.0, 0.35, -0.15, 0},
    {0.1, 0.046, 0.046, 0.05, 0.0, 0.1, 0.25, 0},
    {0.1, 0.046, 0.046, 0.05, 0.0, -0.1, 0.25, 0},
    {0.1, 0.046, 0.023, 0.05, -0.08, -0.605, 0.0, 0},
    {0.1, 0.023, 0.023, 0.02, 0.0, -0.606, 0.0, 0},
    {0.1, 0.023, 0.046, 0.02, 0.06, -0.605, 0.0, 0},
};

#define NSHAPES (sizeof shepp_logan / sizeof *shepp_logan)

/* A shape in pixels: semi-axes, centre, rotation. */
typedef struct placed {
  double axis[3], centre[3], cosine, sine;
} placed;

static placed place(const shape *s, int rank, int n) {
  assert(rank == 2 || rank == 3);
  double half = 0.5 * n, t = s->degrees * M_PI / 180.0;
  placed p = {.axis = {s->a * half, s->b * half, rank == 3 ? s->c * half : 1.0},
              .centre = {s->x0 * half, s->y0 * half, rank == 3 ? s->z0 * half : 0.0},
              .cosine = cos(t),
              .sine = sin(t)};
  return p;
}

/* v in the shape's own axes: R^T v, R the rotation about z. */
static void unrotate(const placed *p, const double v[3], double out[3]) {
  out[0] = p->cosine * v[0] + p->sine * v[1];
  out[1] = -p->sine * v[0] + p->cosine * v[1];
  out[2] = v[2];
}

double mr_phantom_value(int rank, int n, const double r[3]) {
  assert(rank == 2 || rank == 3);
  double sum = 0;
  for (size_t i = 0; i < NSHAPES; i++) {
    placed p = place(&shepp_logan[i], rank, n);
    double d[3] = {r[0] - p.centre[0], r[1] - p.centre[1], rank == 3 ? r[2] - p.centre[2] : 0}, u[3];
    unrotate(&p, d, u);
    double q = 0;
    for (int a = 0; a < rank; a++)
      q += u[a] * u[a] / (p.axis[a] * p.axis[a]);
    if (q <= 1)
      sum += shepp_logan[i].intensity;
  }
  return sum;
}

/* Fourier transforms of the unit disc and the unit ball at radius rho:
 * J1(2 pi rho) / rho and (sin x - x cos x) 4 pi / x^3 with x = 2 pi rho,
 * by their series where the closed forms cancel. */
static double unit_disc_ft(double rho) {
  return rho < 1e-12 ? M_PI : j1(2 * M_PI * rho) / rho;
}

static double unit_ball_ft(double rho) {
  double x = 2 * M_PI * rho;
  if (x < 1e-2)
    return 4 * M_PI * (1.0 / 3 - x * x / 30 + x * x * x * x / 840);
  return 4 * M_PI * (sin(x) - x * cos(x)) / (x * x * x);
}

double complex mr_phantom_ft(int rank, int n, const double k[3]) {
  double complex sum = 0;
  for (size_t i = 0; i < NSHAPES; i++) {
    placed p = place(&shepp_logan[i], rank, n);
    double kk[3] = {k[0], k[1], rank == 3 ? k[2] : 0}, u[3];
    unrotate(&p, kk, u);
    double rho2 = 0, volume = shepp_logan[i].intensity, phase = 0;
    for (int a = 0; a < rank; a++) {
      rho2 += u[a] * p.axis[a] * u[a] * p.axis[a];
      volume *= p.axis[a];
      phase += kk[a] * p.centre[a];
    }
    double rho = sqrt(rho2);
    double f = rank == 2 ? unit_disc_ft(rho) : unit_ball_ft(rho);
    sum += volume * f * cexp(-2 * M_PI * I * phase);
  }
  return sum;
}

/* Coil c's direction u, its cross direction v and its phase. */
static void coil_axes(int rank, int c, int ncoils, double u[3], double v[3], double *phase) {
  assert(rank == 2 || rank == 3);
  double t = 2 * M_PI * c / ncoils;
  double up = rank == 3 && ncoils > 1 ? (c % 2 ? -0.5 : 0.5) : 0.0;
  double norm = sqrt(1 + up * up);
  u[0] = cos(t) / norm;
  u[1] = sin(t) / norm;
  u[2] = up / norm;
  v[0] = -sin(t);
  v[1] = cos(t);
  v[2] = 0;
  *phase = 2 * M_PI * 0.37 * c;
}

#define BRIGHTNESS 0.6
#define PHASE 0.3

double complex mr_phantom_coil(int rank, int n, int c, int ncoils, const double r[3]) {
  assert(rank == 2 || rank == 3);
  double u[3], v[3], phase, us = 0, vs = 0;
  coil_axes(rank, c, ncoils, u, v, &phase);
  for (int a = 0; a < rank; a++) {
    double s = sin(M_PI * r[a] / n);
    us += u[a] * s;
    vs += v[a] * s;
  }
  return cexp(I * phase) * (1 + BRIGHTNESS * us + I * PHASE * vs);
}

/* F of the object moved by shift pixels, at k. */
static double complex shifted_ft(int rank, int n, const double k[3], const double shift[3]) {
  assert(rank == 2 || rank == 3);
  double phase = 0;
  for (int a = 0; a < rank; a++)
    phase += k[a] * shift[a];
  return mr_phantom_ft(rank, n, k) * cexp(-2 * M_PI * I * phase);
}

void mr_phantom_kspace_moved(int rank, int n, int ncoils, const double k[3],
                             const double shift[3], double complex *out) {
  /* F at k, and the transforms of s_a f: (F(k - e_a/2n) - F(k + e_a/2n)) / 2i. */
  double complex base = shifted_ft(rank, n, k, shift), sine[3] = {0, 0, 0};
  for (int a = 0; a < rank; a++) {
    double lo[3] = {k[0], k[1], k[2]}, hi[3] = {k[0], k[1], k[2]};
    lo[a] -= 0.5 / n;
    hi[a] += 0.5 / n;
    sine[a] = (shifted_ft(rank, n, lo, shift) - shifted_ft(rank, n, hi, shift)) / (2 * I);
  }
  for (int c = 0; c < ncoils; c++) {
    double u[3], v[3], phase;
    coil_axes(rank, c, ncoils, u, v, &phase);
    double complex sum = base;
    for (int a = 0; a < rank; a++)
      sum += (BRIGHTNESS * u[a] + I * PHASE * v[a]) * sine[a];
    out[c] = cexp(I * phase) * sum;
  }
}

void mr_phantom_kspace(int rank, int n, int ncoils, const double k[3], double complex *out) {
  const double still[3] = {0, 0, 0};
  mr_phantom_kspace_moved(rank, n, ncoils, k, still, out);
}
