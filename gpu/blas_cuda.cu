// GEMM and HERK on a GPU through cuBLAS.
#include "blas_impl.h"
#include "cuda_internal.cuh"

namespace {

const cublasOperation_t trans[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};

constexpr int TILE = 32, ROWS = 8;

// Writes the strict upper triangle of the n x n matrix c from its lower
// one, c(i, j) = conj(c(j, i)), a 32 x 32 tile per block through shared
// memory so that both the reads and the writes are coalesced. Only tiles on
// or above the diagonal have work; blockIdx.z walks the batch.
__global__ void mirror_lower(float2 *c0, int n, int ld, size_t stride) {
  __shared__ float2 tile[TILE][TILE + 1];
  int col_tile = blockIdx.x, row_tile = blockIdx.y;
  if (row_tile > col_tile)
    return;
  float2 *c = c0 + blockIdx.z * stride;
  int tx = threadIdx.x;
  for (int k = threadIdx.y; k < TILE; k += ROWS) {
    int r = col_tile * TILE + tx, s = row_tile * TILE + k; // lower element (r, s)
    if (r < n && s < n)
      tile[k][tx] = c[size_t(s) * ld + r];
  }
  __syncthreads();
  for (int k = threadIdx.y; k < TILE; k += ROWS) {
    int i = row_tile * TILE + tx, j = col_tile * TILE + k; // upper element (i, j)
    if (i < j && j < n) {
      float2 v = tile[tx][k];
      c[size_t(j) * ld + i] = make_float2(v.x, -v.y);
    }
  }
}

} // namespace

int mr_blas_cuda_gemm(mr_device *dev, const mr_gemm_args *g) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    const cuComplex alpha = make_cuComplex(g->alpha.re, g->alpha.im);
    const cuComplex beta = make_cuComplex(g->beta.re, g->beta.im);
    MR_CUBLAS(cublasCgemmStridedBatched(
        c->blas, trans[g->op_a], trans[g->op_b], g->m, g->n, g->k, &alpha,
        reinterpret_cast<const cuComplex *>(g->a.data), g->a.ld, (long long)g->a.stride,
        reinterpret_cast<const cuComplex *>(g->b.data), g->b.ld, (long long)g->b.stride,
        &beta, reinterpret_cast<cuComplex *>(g->c.data), g->c.ld, (long long)g->c.stride,
        g->batch));
    return 0;
  });
}

int mr_blas_cuda_herk(mr_device *dev, const mr_herk_args *h) {
  return mr_on_worker(dev, [&] {
    mr_cuda_ctx *c = mr_device_cuda(dev);
    cublasOperation_t op = h->op == MR_BLAS_N ? CUBLAS_OP_N : CUBLAS_OP_C;
    for (int i = 0; i < h->batch; i++)
      MR_CUBLAS(cublasCherk(c->blas, CUBLAS_FILL_MODE_LOWER, op, h->n, h->k, &h->alpha,
                            reinterpret_cast<const cuComplex *>(h->a.data + i * h->a.stride),
                            h->a.ld, &h->beta,
                            reinterpret_cast<cuComplex *>(h->c.data + i * h->c.stride),
                            h->c.ld));
    if (h->n > 1) {
      unsigned tiles = unsigned((h->n + TILE - 1) / TILE);
      mirror_lower<<<dim3(tiles, tiles, unsigned(h->batch)), dim3(TILE, ROWS), 0,
                     c->compute>>>(reinterpret_cast<float2 *>(h->c.data), h->n, h->c.ld,
                                   h->c.stride);
      MR_LAUNCHED(mirror_lower);
    }
    return 0;
  });
}
