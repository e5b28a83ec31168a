#include "kspace.h"

#include <stdio.h>
#include <stdlib.h>

#include "budget.h"

/* What a buffer of this shape costs (its budget share). */
static uint64_t footprint(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims) {
  uint64_t n = (uint64_t)nro * ne1 * ne2;
  return n * nch * sizeof(float complex) + (uint64_t)ne1 * ne2 +
         n * (uint64_t)(traj_dims > 0 ? traj_dims : 0) * sizeof(float);
}

mr_kspace *mr_kspace_new(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims,
                         mr_err *err) {
  uint64_t bytes = footprint(nro, ne1, ne2, nch, traj_dims);
  char what[128];
  snprintf(what, sizeof what, "a %zux%zux%zu x %zu-channel k-space buffer", nro, ne1, ne2, nch);
  if (mr_budget_take(bytes, what, err) < 0)
    return NULL;
  mr_kspace *k = calloc(1, sizeof *k);
  if (k == NULL) {
    mr_budget_give(bytes);
    mr_err_set(err, MR_ENOMEM, "out of memory for %s", what);
    return NULL;
  }
  k->nro = nro;
  k->ne1 = ne1;
  k->ne2 = ne2;
  k->nch = nch;
  k->traj_dims = traj_dims;
  size_t n = nro * ne1 * ne2;
  k->data = calloc(n * nch, sizeof *k->data);
  k->sampled = calloc(ne1 * ne2, 1);
  if (traj_dims > 0)
    k->traj = calloc(n * (size_t)traj_dims, sizeof *k->traj);
  if (k->data == NULL || k->sampled == NULL || (traj_dims > 0 && k->traj == NULL)) {
    mr_kspace_free(k);
    mr_err_set(err, MR_ENOMEM, "out of memory for %s", what);
    return NULL;
  }
  return k;
}

void mr_kspace_free(mr_kspace *k) {
  if (k == NULL)
    return;
  mr_kspace_free(k->calib);
  mr_budget_give(footprint(k->nro, k->ne1, k->ne2, k->nch, k->traj_dims));
  free(k->data);
  free(k->sampled);
  free(k->traj);
  free(k);
}

static void free_kspace(void *p) { mr_kspace_free(p); }

mr_message *mr_kspace_message(mr_kspace *k) {
  return mr_message_new_object(MR_MSG_KSPACE, k, free_kspace);
}
