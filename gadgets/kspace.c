#include "kspace.h"

#include <stdlib.h>

mr_kspace *mr_kspace_new(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims) {
  mr_kspace *k = calloc(1, sizeof *k);
  if (k == NULL)
    return NULL;
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
    return NULL;
  }
  return k;
}

void mr_kspace_free(mr_kspace *k) {
  if (k == NULL)
    return;
  mr_kspace_free(k->calib);
  free(k->data);
  free(k->sampled);
  free(k->traj);
  free(k);
}

static void free_kspace(void *p) { mr_kspace_free(p); }

mr_message *mr_kspace_message(mr_kspace *k) {
  return mr_message_new_object(MR_MSG_KSPACE, k, free_kspace);
}
