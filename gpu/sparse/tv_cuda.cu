// Total variation's two passes on a GPU: one thread per pixel.
#include "cuda_internal.cuh"
#include "tv_impl.h"

namespace {

constexpr unsigned BLOCK = 256;

struct shape_arg {
  unsigned dims[3];
  int naxes;
  int axis[3];
  size_t n;
  int time; // mr_tv_time
  float weight;
  const float2 *reference;
};

// Pixel i's frame along dims[2]: whether it has a predecessor and a
// successor (the temporal differences are not periodic).
__device__ inline void frame_of(const shape_arg &s, size_t i, bool &prev, bool &next) {
  size_t pos = i / (size_t(s.dims[0]) * s.dims[1]);
  prev = pos > 0;
  next = pos + 1 < s.dims[2];
}

__device__ inline size_t neighbour(const shape_arg &s, size_t i, int a, bool up) {
  size_t st = a == 0 ? 1 : a == 1 ? size_t(s.dims[0]) : size_t(s.dims[0]) * s.dims[1];
  size_t len = s.dims[a], pos = i / st % len;
  if (up)
    return pos + 1 == len ? i - pos * st : i + st;
  return pos == 0 ? i + (len - 1) * st : i - st;
}

__global__ void primal(shape_arg s, float t, const float2 *u, const float2 *p, float2 *x) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < s.n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 div = make_float2(0, 0);
    for (int k = 0; k < s.naxes; k++) {
      float2 a = p[k * s.n + neighbour(s, i, s.axis[k], false)], b = p[k * s.n + i];
      div.x += a.x - b.x;
      div.y += a.y - b.y;
    }
    if (s.time != MR_TV_SPATIAL) { // w T^H p_t
      const float2 *pt = p + s.naxes * s.n;
      float2 a = make_float2(0, 0), b = pt[i];
      if (s.time == MR_TV_FRAMES) {
        bool prev, next;
        frame_of(s, i, prev, next);
        size_t st = size_t(s.dims[0]) * s.dims[1];
        a = prev ? pt[i - st] : make_float2(0, 0);
        b = next ? b : make_float2(0, 0);
        div.x += s.weight * (a.x - b.x);
        div.y += s.weight * (a.y - b.y);
      } else {
        div.x += s.weight * b.x;
        div.y += s.weight * b.y;
      }
    }
    float2 v = u != nullptr ? u[i] : make_float2(0, 0);
    x[i] = make_float2(v.x - t * div.x, v.y - t * div.y);
  }
}

__global__ void dual(shape_arg s, float tau, int project, const float2 *x, float2 *p) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < s.n;
       i += size_t(gridDim.x) * blockDim.x) {
    float2 q[3];
    float norm2 = 0;
    float2 xi = x[i];
    for (int k = 0; k < s.naxes; k++) {
      float2 up = x[neighbour(s, i, s.axis[k], true)], old = p[k * s.n + i];
      q[k] = make_float2(old.x + tau * (up.x - xi.x), old.y + tau * (up.y - xi.y));
      norm2 += q[k].x * q[k].x + q[k].y * q[k].y;
    }
    float f = project && norm2 > 1 ? rsqrtf(norm2) : 1.0f;
    for (int k = 0; k < s.naxes; k++)
      p[k * s.n + i] = make_float2(q[k].x * f, q[k].y * f);
    if (s.time != MR_TV_SPATIAL) { // p_t += tau (w T x - c), to unit magnitude
      float2 d = make_float2(0, 0);
      if (s.time == MR_TV_REFERENCE) {
        float2 r = project && s.reference != nullptr ? s.reference[i] : make_float2(0, 0);
        d = make_float2(xi.x - r.x, xi.y - r.y);
      } else {
        bool prev, next;
        frame_of(s, i, prev, next);
        if (next) {
          float2 up = x[i + size_t(s.dims[0]) * s.dims[1]];
          d = make_float2(up.x - xi.x, up.y - xi.y);
        }
      }
      float2 *pt = p + s.naxes * s.n, old = pt[i];
      float2 v = make_float2(old.x + tau * s.weight * d.x, old.y + tau * s.weight * d.y);
      float m2 = v.x * v.x + v.y * v.y, g = project && m2 > 1 ? rsqrtf(m2) : 1.0f;
      pt[i] = make_float2(v.x * g, v.y * g);
    }
  }
}

shape_arg arg_of(const mr_tv_shape *s) {
  shape_arg a;
  for (int d = 0; d < 3; d++) {
    a.dims[d] = unsigned(s->dims[d]);
    a.axis[d] = s->axis[d];
  }
  a.naxes = s->naxes;
  a.n = s->dims[0] * s->dims[1] * s->dims[2];
  a.time = int(s->time);
  a.weight = s->weight;
  a.reference = reinterpret_cast<const float2 *>(s->reference);
  return a;
}

} // namespace

int mr_tv_cuda_primal(mr_device *dev, const mr_tv_shape *s, float t, const mr_cfloat *u,
                      const mr_cfloat *p, mr_cfloat *x, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    shape_arg a = arg_of(s);
    primal<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, t, reinterpret_cast<const float2 *>(u), reinterpret_cast<const float2 *>(p),
        reinterpret_cast<float2 *>(x));
    MR_LAUNCHED(primal);
    return 0;
  });
}

int mr_tv_cuda_dual(mr_device *dev, const mr_tv_shape *s, float tau, int project,
                    const mr_cfloat *x, mr_cfloat *p, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    shape_arg a = arg_of(s);
    dual<<<mr_grid_for(c, a.n, BLOCK), BLOCK, 0, c->compute>>>(
        a, tau, project, reinterpret_cast<const float2 *>(x), reinterpret_cast<float2 *>(p));
    MR_LAUNCHED(dual);
    return 0;
  });
}
