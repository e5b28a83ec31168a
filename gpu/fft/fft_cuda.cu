// The GPU transform: one centering kernel (two for odd shapes; none for
// plain plans) around an in-place cuFFT plan from the worker's cache.
#include "cuda_internal.cuh"
#include "fft_impl.h"

namespace {

struct fft_cuda {
  float2 *ramp; // odd shapes: the centering factors (fft_impl.h), on the GPU
};

// Index arithmetic in 32 bits when the batch allows (64-bit division is
// many instructions on a GPU), 64 bits otherwise.
template <class I>
__global__ void swap_pairs(const float2 *in, float2 *out, I hx, I ny, I nz, I pairs,
                           float scale) {
  I nx = 2 * hx, hy = ny / 2, hz = nz / 2;
  for (I p = blockIdx.x * I(blockDim.x) + threadIdx.x; p < pairs;
       p += I(gridDim.x) * blockDim.x) {
    I x = p % hx, row = p / hx;
    I y = row % ny, z = row / ny % nz, b = row / ny / nz;
    I y2 = y + hy < ny ? y + hy : y + hy - ny;
    I z2 = z + hz < nz ? z + hz : z + hz - nz;
    I i = ((b * nz + z) * ny + y) * nx + x;
    I i2 = ((b * nz + z2) * ny + y2) * nx + x + hx;
    float2 v = in[i], v2 = in[i2];
    float s = (x + y + z) & 1 ? -scale : scale;
    float s2 = (x + hx + y2 + z2) & 1 ? -scale : scale;
    out[i] = make_float2(s * v2.x, s * v2.y);
    out[i2] = make_float2(s2 * v.x, s2 * v.y);
  }
}

__device__ inline float2 cmul(float2 a, float2 b) {
  return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// out = scale * rx[x] ry[y] rz[z] * in (in may be out).
template <class I>
__global__ void apply_ramp(const float2 *in, float2 *out, const float2 *ramp, I nx, I ny,
                           I nz, I total, float scale) {
  const float2 *rx = ramp, *ry = ramp + nx, *rz = ry + ny;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < total;
       i += I(gridDim.x) * blockDim.x) {
    I x = i % nx, y = i / nx % ny, z = i / nx / ny % nz;
    float2 f = cmul(cmul(rx[x], ry[y]), rz[z]);
    float2 v = cmul(f, in[i]);
    out[i] = make_float2(scale * v.x, scale * v.y);
  }
}

constexpr unsigned BLOCK = 256;

template <class I>
int centre(mr_cuda_ctx *c, const mr_fft_shape *s, const float2 *ramp, const float2 *in, float2 *out,
           size_t batch, int stage, mr_err *err) {
  I nx = I(s->n[0]), ny = I(s->n[1]), nz = I(s->n[2]);
  if (s->even) {
    I pairs = I(batch * s->len / 2);
    swap_pairs<I><<<mr_grid_for(c, pairs, BLOCK), BLOCK, 0, c->compute>>>(
        in, out, nx / 2, ny, nz, pairs, s->scale);
  } else {
    I total = I(batch * s->len);
    apply_ramp<I><<<mr_grid_for(c, total, BLOCK), BLOCK, 0, c->compute>>>(
        in, out, ramp, nx, ny, nz, total, stage == 0 ? s->scale : 1.0f);
  }
  MR_LAUNCHED(centre);
  return 0;
}

// One centering stage over `batch` arrays; stage 0 reads in, 1 works in
// place on out.
int centre_stage(mr_cuda_ctx *c, const mr_fft_plan *p, mr_fft_direction dir, const float2 *in,
                 float2 *out, size_t batch, int stage, mr_err *err) {
  const mr_fft_shape *s = &p->shape;
  const fft_cuda *f = static_cast<const fft_cuda *>(p->impl);
  const float2 *ramp = nullptr;
  if (!s->even)
    ramp = f->ramp + (size_t(dir == MR_FFT_FORWARD ? 0 : 2) + size_t(stage)) * s->ramp_len;
  // Below 2^31 a grid-stride step can never wrap a 32-bit index.
  if (batch * s->len < (size_t(1) << 31))
    return centre<uint32_t>(c, s, ramp, in, out, batch, stage, err);
  return centre<uint64_t>(c, s, ramp, in, out, batch, stage, err);
}

// The whole transform of `batch` arrays, queued on the compute stream.
int transform(mr_cuda_ctx *c, const mr_fft_plan *p, mr_fft_direction dir, const float2 *in,
              float2 *out, size_t batch, mr_err *err) {
  const mr_fft_shape *s = &p->shape;
  long long n[3] = {1, 1, 1};
  for (int d = 0; d < s->rank; d++)
    n[d] = (long long)s->n[s->rank - 1 - d]; // cuFFT wants the slowest first
  cufftHandle h;
  int rc = mr_cuda_fft_plan(c, s->rank, n, (long long)batch, &h, err);
  if (rc < 0)
    return rc;
  if (!s->plain)
    rc = centre_stage(c, p, dir, in, out, batch, 0, err);
  else if (in != out) // the transform below is in place, in out
    MR_CU(cudaMemcpyAsync(out, in, batch * s->len * sizeof(float2), cudaMemcpyDeviceToDevice,
                          c->compute));
  if (rc < 0)
    return rc;
  cufftComplex *data = reinterpret_cast<cufftComplex *>(out);
  MR_CUFFT(cufftExecC2C(h, data, data, dir == MR_FFT_FORWARD ? CUFFT_FORWARD : CUFFT_INVERSE));
  return s->even || s->plain ? 0 : centre_stage(c, p, dir, out, out, batch, 1, err);
}

} // namespace

int mr_fft_cuda_create(mr_fft_plan *p, mr_err *err) {
  fft_cuda *f = static_cast<fft_cuda *>(calloc(1, sizeof *f));
  if (f == nullptr)
    return mr_err_set(err, MR_ENOMEM, "fft: out of memory");
  p->impl = f;
  int rc = mr_on_worker(p->dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(p->dev);
    const mr_fft_shape *s = &p->shape;
    if (s->ramp != NULL) {
      size_t bytes = 4 * s->ramp_len * sizeof(float2);
      int r = mr_cuda_alloc(c, reinterpret_cast<void **>(&f->ramp), bytes, err);
      if (r == 0)
        r = mr_cuda_upload(p->dev, f->ramp, s->ramp, bytes, err);
      if (r < 0)
        return r;
    }
    // Warm the cache: a shape the GPU cannot hold fails here, not later.
    long long n[3] = {1, 1, 1};
    for (int d = 0; d < s->rank; d++)
      n[d] = (long long)s->n[s->rank - 1 - d];
    cufftHandle h;
    return mr_cuda_fft_plan(c, s->rank, n, (long long)s->batch, &h, err);
  });
  if (rc < 0)
    mr_fft_cuda_destroy(p);
  return rc;
}

void mr_fft_cuda_destroy(mr_fft_plan *p) {
  fft_cuda *f = static_cast<fft_cuda *>(p->impl);
  if (f->ramp != nullptr)
    mr_on_worker(p->dev, nullptr, [&] {
      mr_cuda_free(mr_device_cuda(p->dev), f->ramp);
      return 0;
    });
  free(f);
  p->impl = nullptr;
}

int mr_fft_cuda_execute(mr_fft_plan *p, mr_fft_direction dir, const mr_cfloat *in, mr_cfloat *out,
                        mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    return transform(mr_device_cuda(p->dev), p, dir, reinterpret_cast<const float2 *>(in),
                     reinterpret_cast<float2 *>(out), p->shape.batch, err);
  });
}

// Host memory in and out: chunks of whole arrays go up on the upload
// stream, are transformed on compute and come back on the download stream,
// so chunk i+1 crosses the bus up while chunk i is transformed and chunk
// i-1 comes down. Pageable memory passes through the staging slots, pinned
// memory (mr_host_alloc) goes to the copy engine directly. Arrays larger
// than a staging slot go through in one piece (staged, without the overlap).
int mr_fft_cuda_execute_host(mr_fft_plan *p, mr_fft_direction dir, const mr_cfloat *in,
                             mr_cfloat *out, mr_err *err) {
  return mr_on_worker(p->dev, err, [&] {
    mr_device *dev = p->dev;
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t array = p->shape.len * sizeof(float2), batch = p->shape.batch;
    float2 *d;
    int rc = mr_cuda_alloc(c, reinterpret_cast<void **>(&d), array * batch, err);
    if (rc < 0)
      return rc;
    if (array > MR_STAGE_SLOT) {
      rc = mr_cuda_upload(dev, d, in, array * batch, err);
      if (rc == 0)
        rc = transform(c, p, dir, d, d, batch, err);
      if (rc == 0)
        rc = mr_cuda_download(dev, out, d, array * batch, err);
      if (rc < 0)
        mr_cuda_ctx_sync(c, err); // no copy may still touch d once it is freed
      mr_cuda_free(c, d);
      return rc;
    }
    bool in_pinned = mr_cuda_is_pinned(in), out_pinned = mr_cuda_is_pinned(out);
    size_t per = MR_STAGE_SLOT / array, chunks = (batch + per - 1) / per;
    rc = mr_cuda_after(c, c->upload, c->compute, err); // d is allocated
    const char *src = reinterpret_cast<const char *>(in);
    char *dst = reinterpret_cast<char *>(out);
    for (size_t i = 0; rc == 0 && i <= chunks; i++) {
      if (i < chunks) {
        size_t first = i * per, count = batch - first < per ? batch - first : per;
        float2 *chunk = d + first * p->shape.len;
        rc = mr_cuda_upload_piece(dev, chunk, src + first * array, count * array, in_pinned, err);
        if (rc == 0)
          rc = mr_cuda_after(c, c->compute, c->upload, err);
        if (rc == 0)
          rc = transform(c, p, dir, chunk, chunk, count, err);
        if (rc == 0)
          rc = mr_cuda_after(c, c->download, c->compute, err);
        if (rc == 0)
          rc = mr_cuda_download_issue(c, int(i & 1), dst + first * array, chunk, count * array,
                                      out_pinned, err);
      }
      if (rc == 0 && i > 0) {
        size_t first = (i - 1) * per, count = batch - first < per ? batch - first : per;
        rc = mr_cuda_download_finish(dev, int((i - 1) & 1), dst + first * array, count * array,
                                     out_pinned, err);
      }
    }
    // Every copy out of d has finished (each finish waited for its piece,
    // and the uploads precede the transforms those pieces came from), so
    // freeing on compute is safe; after a failure, copies may be in flight.
    if (rc < 0)
      mr_cuda_ctx_sync(c, err);
    mr_cuda_free(c, d);
    return rc;
  });
}
