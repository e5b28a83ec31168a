// Slice-GRAPPA on a GPU: im2col and the CAIPI phase ramp as grid-stride
// kernels (the products and the solve are cuBLAS and cuSOLVER, through
// blas.h and solve.h).
#include "cuda_internal.cuh"
#include "slice_grappa_impl.h"

namespace {

// One thread per element of the source matrix, rows fastest (coalesced
// writes; the reads of one column are a shifted box of one coil).
__global__ void im2col_kernel(mr_sg_window w, const float2 *k, float2 *out, size_t total) {
  size_t bx = size_t(w.x1 - w.x0), rows = bx * size_t(w.y1 - w.y0);
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    size_t s = e / rows, p = e % rows;
    int x = w.x0 + int(p % bx), y = w.y0 + int(p / bx);
    size_t wi = size_t(w.i1 - w.i0), wj = size_t(w.j1 - w.j0);
    int i = w.i0 + int(s % wi), j = w.j0 + int(s / wi % wj), c = int(s / (wi * wj));
    int xs = x + i - w.kx / 2, ys = y + (j - w.ky / 2) * w.ystep;
    float2 v = make_float2(0.f, 0.f);
    if (xs >= 0 && xs < w.nx && ys >= 0 && ys < w.ny)
      v = k[(size_t(c) * w.ny + ys) * w.nx + xs];
    out[e] = v;
  }
}

__global__ void caipi_kernel(int nc, int nx, int ny, int caipi, int first, int direction,
                             float2 *k, size_t total) {
  for (size_t e = blockIdx.x * size_t(blockDim.x) + threadIdx.x; e < total;
       e += size_t(gridDim.x) * blockDim.x) {
    size_t r = e / size_t(nx);
    int y = int(r % size_t(ny));
    int slice = first + int(r / (size_t(ny) * nc));
    long turns = (long(y - ny / 2) * slice) % caipi;
    double t = -direction * 2.0 * 3.14159265358979323846 * double(turns) / caipi;
    float c = float(cos(t)), s = float(sin(t));
    float2 v = k[e];
    k[e] = make_float2(v.x * c - v.y * s, v.x * s + v.y * c);
  }
}

} // namespace

int mr_sg_cuda_im2col(mr_device *dev, const mr_sg_window *w, const mr_cfloat *kspace,
                      mr_cfloat *out, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = size_t(w->x1 - w->x0) * size_t(w->y1 - w->y0) * size_t(w->i1 - w->i0) *
                   size_t(w->j1 - w->j0) * w->nc;
    im2col_kernel<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        *w, reinterpret_cast<const float2 *>(kspace), reinterpret_cast<float2 *>(out), total);
    MR_LAUNCHED(im2col_kernel);
    return 0;
  });
}

int mr_sg_cuda_caipi(mr_device *dev, int nc, int nx, int ny, int caipi, int first, int count,
                     int direction, mr_cfloat *kspace, mr_err *err) {
  return mr_on_worker(dev, err, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    size_t total = size_t(count) * nc * ny * nx;
    caipi_kernel<<<mr_grid_for(c, total, 256), 256, 0, c->compute>>>(
        nc, nx, ny, caipi, first, direction, reinterpret_cast<float2 *>(kspace), total);
    MR_LAUNCHED(caipi_kernel);
    return 0;
  });
}
