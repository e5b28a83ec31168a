// The SENSE operator's passes on a GPU: one thread per pixel (looping
// over the coils) or per k-space sample.
#include "cuda_internal.cuh"
#include "sense_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

// Pixel indices are 32-bit (sense.c bounds an image below 2^32 pixels);
// coil offsets are size_t.
struct pass_arg {
  unsigned nx, ny, lines; // lines: ny nz
  unsigned n;             // pixels
  unsigned ncoils;
  int sign;
  const float2 *maps;
};

pass_arg arg_of(const mr_sense_pass *p) {
  return pass_arg{unsigned(p->dims[0]), unsigned(p->dims[1]), unsigned(p->dims[1] * p->dims[2]),
                  unsigned(p->dims[0] * p->dims[1] * p->dims[2]), unsigned(p->ncoils), p->sign,
                  reinterpret_cast<const float2 *>(p->maps)};
}

// (-1)^(x + y + z) of pixel i when the pass takes signs.
__device__ inline float sign_of(const pass_arg &a, unsigned i) {
  if (!a.sign)
    return 1.0f;
  unsigned row = i / a.nx, x = i - row * a.nx, z = row / a.ny, y = row - z * a.ny;
  return ((x + y + z) & 1) ? -1.0f : 1.0f;
}

#define PIXELS(i)                                                                                \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)

__global__ void expand(pass_arg a, const float2 *x, float2 *out) {
  PIXELS(i) {
    float2 v = x[i];
    float sg = sign_of(a, i);
    v.x *= sg;
    v.y *= sg;
    for (unsigned c = 0; c < a.ncoils; c++) {
      float2 m = a.maps[c * size_t(a.n) + i];
      out[c * size_t(a.n) + i] = make_float2(m.x * v.x - m.y * v.y, m.x * v.y + m.y * v.x);
    }
  }
}

__global__ void mask(pass_arg a, const float *m, float scale, const float2 *in, float2 *out) {
  PIXELS(i) {
    float f = m[(i / a.nx) % a.lines] * scale;
    for (unsigned c = 0; c < a.ncoils; c++) {
      float2 v = in[c * size_t(a.n) + i];
      out[c * size_t(a.n) + i] = make_float2(v.x * f, v.y * f);
    }
  }
}

__global__ void combine(pass_arg a, const float2 *k, const float2 *z, const float2 *ahb,
                        float step, float2 *out) {
  PIXELS(i) {
    float2 y = make_float2(0, 0);
    for (unsigned c = 0; c < a.ncoils; c++) {
      float2 m = a.maps[c * size_t(a.n) + i], v = k[c * size_t(a.n) + i];
      y.x += m.x * v.x + m.y * v.y;
      y.y += m.x * v.y - m.y * v.x;
    }
    float sg = sign_of(a, i);
    y.x *= sg;
    y.y *= sg;
    if (z != nullptr) {
      float2 zi = z[i], b = ahb[i];
      y = make_float2(zi.x - step * (y.x - b.x), zi.y - step * (y.y - b.y));
    }
    out[i] = y;
  }
}

__global__ void power(pass_arg a, float2 *out) {
  PIXELS(i) {
    float s = 0;
    for (unsigned c = 0; c < a.ncoils; c++) {
      float2 m = a.maps[c * size_t(a.n) + i];
      s += m.x * m.x + m.y * m.y;
    }
    out[i] = make_float2(s, 0);
  }
}

} // namespace

int mr_sense_cuda_expand(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *x,
                         mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    expand<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, reinterpret_cast<const float2 *>(x), reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(expand);
    return 0;
  });
}

int mr_sense_cuda_mask(mr_device *dev, const mr_sense_pass *p, const float *m, float scale,
                       const mr_cfloat *in, mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    mask<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, m, scale, reinterpret_cast<const float2 *>(in), reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(mask);
    return 0;
  });
}

int mr_sense_cuda_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                          const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    combine<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, reinterpret_cast<const float2 *>(k), reinterpret_cast<const float2 *>(z),
        reinterpret_cast<const float2 *>(ahb), step, reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(combine);
    return 0;
  });
}

int mr_sense_cuda_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    power<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(a, reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(power);
    return 0;
  });
}
