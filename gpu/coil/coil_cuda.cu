// Coil combination on a GPU: one thread per pixel, looping over coils;
// neighbouring threads read neighbouring pixels of each coil.
#include "coil_impl.h"
#include "cuda_internal.cuh"

namespace {

constexpr unsigned BLOCK = 256;

// The root sum of squares as a magnitude (float) or as a complex value
// with zero phase (float2).
__device__ inline void put(float *out, float v) { *out = v; }
__device__ inline void put(float2 *out, float v) { *out = make_float2(v, 0); }

template <typename T>
__global__ void rss(const float2 *x, size_t ncoils, size_t npixels, T *out) {
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < npixels;
       p += size_t(gridDim.x) * blockDim.x) {
    float sum = 0;
    for (size_t c = 0; c < ncoils; c++) {
      float2 v = x[c * npixels + p];
      sum += v.x * v.x + v.y * v.y;
    }
    put(&out[p], sqrtf(sum));
  }
}

__global__ void combine(const float2 *x, const float2 *s, size_t ncoils, size_t npixels,
                        float2 *out) {
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < npixels;
       p += size_t(gridDim.x) * blockDim.x) {
    float2 num = make_float2(0, 0);
    float den = 0;
    for (size_t c = 0; c < ncoils; c++) {
      float2 v = x[c * npixels + p], w = s[c * npixels + p];
      num.x += w.x * v.x + w.y * v.y; // conj(w) v
      num.y += w.x * v.y - w.y * v.x;
      den += w.x * w.x + w.y * w.y;
    }
    out[p] = den > 0 ? make_float2(num.x / den, num.y / den) : make_float2(0, 0);
  }
}

// win: the x factors, then y, then z.
__global__ void window(float2 *x, size_t nx, size_t ny, size_t nz, size_t total,
                       const float *win) {
  const float *wy = win + nx, *wz = wy + ny;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total;
       i += size_t(gridDim.x) * blockDim.x) {
    size_t xi = i % nx, row = i / nx;
    float f = win[xi] * (wy[row % ny] * wz[row / ny % nz]);
    float2 v = x[i];
    x[i] = make_float2(v.x * f, v.y * f);
  }
}

// Each pixel's root sum of squares (summed in double, as the CPU does) and
// the largest of them: non-negative floats order like their bit patterns.
__global__ void map_rss(const float2 *maps, size_t ncoils, size_t npixels, float *rss,
                        unsigned *peak) {
  float best = 0;
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < npixels;
       p += size_t(gridDim.x) * blockDim.x) {
    double ss = 0;
    for (size_t c = 0; c < ncoils; c++) {
      float2 v = maps[c * npixels + p];
      ss += double(v.x * v.x + v.y * v.y);
    }
    float r = float(sqrt(ss));
    rss[p] = r;
    best = fmaxf(best, r);
  }
  atomicMax(peak, __float_as_uint(best));
}

__global__ void map_scale(float2 *maps, size_t ncoils, size_t npixels, const float *rss,
                          const unsigned *peak, double floor_rel) {
  float floor_ = float(floor_rel * double(__uint_as_float(*peak)));
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < npixels;
       p += size_t(gridDim.x) * blockDim.x) {
    float s = rss[p] > floor_ ? 1.0f / rss[p] : 0.0f;
    for (size_t c = 0; c < ncoils; c++) {
      float2 v = maps[c * npixels + p];
      maps[c * npixels + p] = make_float2(v.x * s, v.y * s);
    }
  }
}

int launch_rss(mr_cuda_ctx *c, const void *x, size_t ncoils, size_t npixels, float *out,
               mr_err *err) {
  rss<float><<<mr_grid_for(c, npixels, BLOCK), BLOCK, 0, c->compute>>>(
      static_cast<const float2 *>(x), ncoils, npixels, out);
  MR_LAUNCHED(rss);
  return 0;
}

int launch_combine(mr_cuda_ctx *c, const void *x, const void *s, size_t ncoils, size_t npixels,
                   void *out, mr_err *err) {
  combine<<<mr_grid_for(c, npixels, BLOCK), BLOCK, 0, c->compute>>>(
      static_cast<const float2 *>(x), static_cast<const float2 *>(s), ncoils, npixels,
      static_cast<float2 *>(out));
  MR_LAUNCHED(combine);
  return 0;
}

// Device copies of host arrays for the _host variants, freed on scope exit
// (stream-ordered, after the work that reads them).
struct scratch {
  mr_cuda_ctx *c;
  void *p[3] = {nullptr, nullptr, nullptr};
  explicit scratch(mr_cuda_ctx *ctx) : c(ctx) {}
  ~scratch() {
    for (void *q : p)
      mr_cuda_free(c, q);
  }
};

} // namespace

int mr_coil_cuda_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels, float *out,
                     mr_err *err) {
  return mr_on_worker(
      dev, err, [&] { return launch_rss(mr_device_cuda(dev), x, ncoils, npixels, out, err); });
}

int mr_coil_cuda_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                         size_t npixels, mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    return launch_combine(mr_device_cuda(dev), x, s, ncoils, npixels, out, err);
  });
}

int mr_coil_cuda_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                          float *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    scratch d(c);
    size_t in_bytes = ncoils * npixels * sizeof(float2), out_bytes = npixels * sizeof(float);
    int rc = mr_cuda_alloc(c, &d.p[0], in_bytes, err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[1], out_bytes, err);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[0], x, in_bytes, err);
    if (rc == 0)
      rc = launch_rss(c, d.p[0], ncoils, npixels, static_cast<float *>(d.p[1]), err);
    if (rc == 0)
      rc = mr_cuda_download(dev, out, d.p[1], out_bytes, err);
    if (rc < 0)
      mr_cuda_ctx_sync(c, err); // no copy may still touch the scratch once freed
    return rc;
  });
}

int mr_coil_cuda_combine_host(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s, size_t ncoils,
                              size_t npixels, mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    scratch d(c);
    size_t in_bytes = ncoils * npixels * sizeof(float2), out_bytes = npixels * sizeof(float2);
    int rc = mr_cuda_alloc(c, &d.p[0], in_bytes, err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[1], in_bytes, err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[2], out_bytes, err);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[0], x, in_bytes, err);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[1], s, in_bytes, err);
    if (rc == 0)
      rc = launch_combine(c, d.p[0], d.p[1], ncoils, npixels, d.p[2], err);
    if (rc == 0)
      rc = mr_cuda_download(dev, out, d.p[2], out_bytes, err);
    if (rc < 0)
      mr_cuda_ctx_sync(c, err);
    return rc;
  });
}

int mr_coil_cuda_rss_complex(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                             mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    rss<float2><<<mr_grid_for(c, npixels, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<const float2 *>(x), ncoils, npixels, reinterpret_cast<float2 *>(out));
    MR_LAUNCHED(rss);
    return 0;
  });
}

int mr_coil_cuda_window(mr_device *dev, mr_cfloat *x, size_t ncoils, const size_t dims[3],
                        const float *win, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    scratch d(c);
    size_t bytes = (dims[0] + dims[1] + dims[2]) * sizeof(float);
    size_t total = ncoils * dims[0] * dims[1] * dims[2];
    int rc = mr_cuda_alloc(c, &d.p[0], bytes, err);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[0], win, bytes, err);
    if (rc < 0) {
      mr_cuda_ctx_sync(c, err);
      return rc;
    }
    window<<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        reinterpret_cast<float2 *>(x), dims[0], dims[1], dims[2], total,
        static_cast<const float *>(d.p[0]));
    MR_LAUNCHED(window);
    return 0;
  });
}

int mr_coil_cuda_normalise(mr_device *dev, mr_cfloat *maps, size_t ncoils, size_t npixels,
                           double floor, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    scratch d(c);
    int rc = mr_cuda_alloc(c, &d.p[0], npixels * sizeof(float), err);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[1], sizeof(unsigned), err);
    if (rc < 0)
      return rc;
    float2 *m = reinterpret_cast<float2 *>(maps);
    float *rss = static_cast<float *>(d.p[0]);
    unsigned *peak = static_cast<unsigned *>(d.p[1]);
    MR_CU(cudaMemsetAsync(peak, 0, sizeof *peak, c->compute));
    unsigned grid = mr_grid_for(c, npixels, BLOCK);
    map_rss<<<grid, BLOCK, 0, c->compute>>>(m, ncoils, npixels, rss, peak);
    MR_LAUNCHED(map_rss);
    map_scale<<<grid, BLOCK, 0, c->compute>>>(m, ncoils, npixels, rss, peak,
                                               floor);
    MR_LAUNCHED(map_scale);
    return 0;
  });
}
