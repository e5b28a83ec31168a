// The SENSE operator's passes on a GPU: one thread per pixel (looping
// over the coils) or per k-space sample.
#include <cstdlib>

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

// The combine's last step: y times scale (a sign, or the transforms'
// 1 / n), or with z the gradient step z - step (y scale - ahb).
__device__ inline float2 finish(float2 y, float scale, const float2 *z, const float2 *ahb,
                                float step, unsigned i) {
  y = make_float2(y.x * scale, y.y * scale);
  if (z == nullptr)
    return y;
  float2 zi = z[i], b = ahb[i];
  return make_float2(zi.x - step * (y.x - b.x), zi.y - step * (y.y - b.y));
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
    out[i] = finish(y, sign_of(a, i), z, ahb, step, i);
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

// The lines layout (sense_impl.h): coil c of pixel (y, x) at
// (y ncoils + c) nx + x.
__global__ void expand_lines(pass_arg a, const float2 *x, float2 *out) {
  PIXELS(i) {
    float2 v = x[i];
    unsigned row = i / a.nx, px = i - row * a.nx;
    size_t at = size_t(row) * a.ncoils * a.nx + px;
    for (unsigned c = 0; c < a.ncoils; c++) {
      float2 m = a.maps[c * size_t(a.n) + i];
      out[at + size_t(c) * a.nx] = make_float2(m.x * v.x - m.y * v.y, m.x * v.y + m.y * v.x);
    }
  }
}

// Zeroes the k-space lines the mask (plain order) does not keep: only
// their samples are written, nothing is read but the mask.
__global__ void zero_lines(unsigned per_line, size_t total, const float *mask, float2 *k) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x)
    if (mask[i / per_line] == 0.0f)
      k[i] = make_float2(0, 0);
}

__global__ void combine_lines(pass_arg a, const float2 *k, float scale, const float2 *z,
                              const float2 *ahb, float step, float2 *out) {
  PIXELS(i) {
    unsigned row = i / a.nx, px = i - row * a.nx;
    size_t at = size_t(row) * a.ncoils * a.nx + px;
    float2 y = make_float2(0, 0);
    for (unsigned c = 0; c < a.ncoils; c++) {
      float2 m = a.maps[c * size_t(a.n) + i], v = k[at + size_t(c) * a.nx];
      y.x += m.x * v.x + m.y * v.y;
      y.y += m.x * v.y - m.y * v.x;
    }
    out[i] = finish(y, scale, z, ahb, step, i);
  }
}

} // namespace

struct mr_sense_lines {
  cufftHandle plan;
  float scale; // 1 / ny
};

int mr_sense_cuda_lines_create(mr_device *dev, const mr_sense_pass *p, mr_sense_lines **out,
                               mr_err *err) {
  *out = nullptr;
  auto *l = static_cast<mr_sense_lines *>(calloc(1, sizeof(mr_sense_lines)));
  if (l == nullptr)
    return mr_err_set(err, MR_ENOMEM, "sense: out of memory");
  int rc = mr_on_worker(dev, err, [&] {
    // every (coil, x) column a batch, one sample apart, ncoils nx between
    // the samples of a column
    long long n[1] = {(long long)p->dims[1]}, stride = (long long)(p->ncoils * p->dims[0]);
    size_t work = 0;
    MR_CUFFT(cufftCreate(&l->plan));
    cufftResult r = cufftMakePlanMany64(l->plan, 1, n, n, stride, 1, n, stride, 1, CUFFT_C2C,
                                        stride, &work);
    if (r != CUFFT_SUCCESS) {
      cufftDestroy(l->plan);
      return mr_cufft_fail(r, "cufftMakePlanMany64", __FILE__, __LINE__, err);
    }
    return 0;
  });
  if (rc < 0) {
    free(l);
    return rc;
  }
  l->scale = 1.0f / float(p->dims[1]);
  *out = l;
  return 0;
}

void mr_sense_cuda_lines_destroy(mr_device *dev, mr_sense_lines *l) {
  if (l == nullptr)
    return;
  mr_on_worker(dev, nullptr, [&] {
    cufftDestroy(l->plan);
    return 0;
  });
  free(l);
}

int mr_sense_cuda_lines_normal(mr_device *dev, mr_sense_lines *l, const mr_sense_pass *p,
                               const float *mask_plain, mr_cfloat *scratch, const mr_cfloat *x,
                               const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out,
                               mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    auto k = reinterpret_cast<float2 *>(scratch);
    auto ck = reinterpret_cast<cufftComplex *>(scratch);
    size_t total = size_t(a.n) * a.ncoils;
    unsigned per_line = a.ncoils * a.nx;
    expand_lines<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, reinterpret_cast<const float2 *>(x), k);
    MR_LAUNCHED(expand_lines);
    MR_CUFFT(cufftSetStream(l->plan, c->compute));
    MR_CUFFT(cufftExecC2C(l->plan, ck, ck, CUFFT_FORWARD));
    zero_lines<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(per_line, total,
                                                                      mask_plain, k);
    MR_LAUNCHED(zero_lines);
    MR_CUFFT(cufftExecC2C(l->plan, ck, ck, CUFFT_INVERSE));
    combine_lines<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, k, l->scale, reinterpret_cast<const float2 *>(z),
        reinterpret_cast<const float2 *>(ahb), step, reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(combine_lines);
    return 0;
  });
}

int mr_sense_cuda_expand(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *x, mr_cfloat *out,
                         mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    expand<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, reinterpret_cast<const float2 *>(x), reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(expand);
    return 0;
  });
}

int mr_sense_cuda_mask(mr_device *dev, const mr_sense_pass *p, const float *m, float scale,
                       const mr_cfloat *in, mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    mask<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, m, scale, reinterpret_cast<const float2 *>(in), reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(mask);
    return 0;
  });
}

int mr_sense_cuda_combine(mr_device *dev, const mr_sense_pass *p, const mr_cfloat *k,
                          const mr_cfloat *z, const mr_cfloat *ahb, float step, mr_cfloat *out,
                          mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    combine<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, reinterpret_cast<const float2 *>(k), reinterpret_cast<const float2 *>(z),
        reinterpret_cast<const float2 *>(ahb), step, reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(combine);
    return 0;
  });
}

int mr_sense_cuda_power(mr_device *dev, const mr_sense_pass *p, mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    pass_arg a = arg_of(p);
    power<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(a, reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(power);
    return 0;
  });
}
