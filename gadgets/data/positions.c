#include "positions.h"

#include <math.h>

int mr_positions_check(mr_gadget_ctx *ctx, const mr_kspace *k, int rank, int weights,
                       const size_t n[3], const char *matrix) {
  size_t d = (size_t)k->traj_dims;
  for (size_t l = 0; l < k->ne1 * k->ne2; l++) {
    if (!k->sampled[l])
      continue;
    for (size_t i = 0; i < k->nro; i++) {
      const float *t = k->traj + (l * k->nro + i) * d;
      for (int a = 0; a < rank; a++)
        if (!(fabsf(t[a]) <= MR_POSITIONS_LIMIT))
          return mr_gadget_fail(ctx, MR_EDATA,
                                "the readout at line %zu (partition %zu) of repetition %u, "
                                "sample %zu: trajectory component %d is %g, outside [-%g, %g] "
                                "(cycles per pixel of the %zu-wide %s matrix: k-space spans "
                                "[-0.5, 0.5))",
                                l % k->ne1, l / k->ne1, k->ref.idx.repetition, i, a,
                                (double)t[a], MR_POSITIONS_LIMIT, MR_POSITIONS_LIMIT, n[a],
                                matrix);
      if (weights && !isfinite(t[rank]))
        return mr_gadget_fail(ctx, MR_EDATA,
                              "the readout at line %zu (partition %zu) of repetition %u, "
                              "sample %zu: density weight %g is not finite",
                              l % k->ne1, l / k->ne1, k->ref.idx.repetition, i,
                              (double)t[rank]);
    }
  }
  return 0;
}
