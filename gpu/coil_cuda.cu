// Coil combination on a GPU: one thread per pixel, looping over coils;
// neighbouring threads read neighbouring pixels of each coil.
#include "coil_impl.h"
#include "cuda_internal.cuh"

namespace {

constexpr unsigned BLOCK = 256;

__global__ void rss(const float2 *x, size_t ncoils, size_t npixels, float *out) {
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < npixels;
       p += size_t(gridDim.x) * blockDim.x) {
    float sum = 0;
    for (size_t c = 0; c < ncoils; c++) {
      float2 v = x[c * npixels + p];
      sum += v.x * v.x + v.y * v.y;
    }
    out[p] = sqrtf(sum);
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

int launch_rss(mr_cuda_ctx *c, const void *x, size_t ncoils, size_t npixels, float *out) {
  rss<<<mr_grid_for(c, npixels, BLOCK), BLOCK, 0, c->compute>>>(
      static_cast<const float2 *>(x), ncoils, npixels, out);
  MR_LAUNCHED(rss);
  return 0;
}

int launch_combine(mr_cuda_ctx *c, const void *x, const void *s, size_t ncoils,
                   size_t npixels, void *out) {
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

int mr_coil_cuda_rss(mr_device *dev, const mr_cfloat *x, size_t ncoils, size_t npixels,
                     float *out) {
  return mr_on_worker(dev, [&] {
    return launch_rss(mr_device_cuda(dev), x, ncoils, npixels, out);
  });
}

int mr_coil_cuda_combine(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                         size_t ncoils, size_t npixels, mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
    return launch_combine(mr_device_cuda(dev), x, s, ncoils, npixels, out);
  });
}

int mr_coil_cuda_rss_host(mr_device *dev, const mr_cfloat *x, size_t ncoils,
                          size_t npixels, float *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    scratch d(c);
    size_t in_bytes = ncoils * npixels * sizeof(float2), out_bytes = npixels * sizeof(float);
    int rc = mr_cuda_alloc(c, &d.p[0], in_bytes);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[1], out_bytes);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[0], x, in_bytes);
    if (rc == 0)
      rc = launch_rss(c, d.p[0], ncoils, npixels, static_cast<float *>(d.p[1]));
    if (rc == 0)
      rc = mr_cuda_download(dev, out, d.p[1], out_bytes);
    if (rc < 0)
      mr_cuda_ctx_sync(c); // no copy may still touch the scratch once freed
    return rc;
  });
}

int mr_coil_cuda_combine_host(mr_device *dev, const mr_cfloat *x, const mr_cfloat *s,
                              size_t ncoils, size_t npixels, mr_cfloat *out) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    scratch d(c);
    size_t in_bytes = ncoils * npixels * sizeof(float2), out_bytes = npixels * sizeof(float2);
    int rc = mr_cuda_alloc(c, &d.p[0], in_bytes);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[1], in_bytes);
    if (rc == 0)
      rc = mr_cuda_alloc(c, &d.p[2], out_bytes);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[0], x, in_bytes);
    if (rc == 0)
      rc = mr_cuda_upload(dev, d.p[1], s, in_bytes);
    if (rc == 0)
      rc = launch_combine(c, d.p[0], d.p[1], ncoils, npixels, d.p[2]);
    if (rc == 0)
      rc = mr_cuda_download(dev, out, d.p[2], out_bytes);
    if (rc < 0)
      mr_cuda_ctx_sync(c);
    return rc;
  });
}
