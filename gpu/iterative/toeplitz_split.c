/* The Toeplitz operator split across devices by coils (toeplitz_split.h). */
#include "toeplitz_split.h"

#include <stdio.h>
#include <stdlib.h>

#include "buf.h"
#include "device_impl.h"
#include "error.h"
#include "vec.h"
#include "worker.h"
#include "thread_name.h"

#define MAX_PARTS 16

typedef struct part {
  struct mr_toeplitz_split *s;
  mr_device *dev;
  size_t first, coils; /* its coils: first .. first + coils - 1 */
  mr_toeplitz *op;
  /* Devices after the first: the thread that drives this one, x as sent
   * to it, its partial y, and where that y goes on the first device. */
  mr_worker *helper;
  mr_buf *x, *y;
  mr_cfloat *y_on_first;
  int rc;     /* the last apply's, read after waiting for it, */
  mr_err why; /* with its line (a posted call has no caller's mr_err) */
} part;

struct mr_toeplitz_split {
  mr_toeplitz_opts o;
  size_t nvox, nparts;
  part parts[MAX_PARTS];
  /* On the first device: the others' partial sums, one image each (at
   * least one image: the combination's scratch), and every coil's map. */
  mr_buf *partials;
  mr_buf *maps_all;
  int have_maps;
  const mr_cfloat *q, *maps; /* during create and set_maps */
};

static size_t bytes_of(const mr_toeplitz_split *s) { return s->nvox * sizeof(mr_cfloat); }

static int nothing(void *arg, mr_err *err) {
  (void)arg;
  (void)err;
  return 0;
}

/* A helper's start: its GPU calls go to the helpers' lanes. */
static int become_helper(void *arg, mr_err *err) {
  (void)arg;
  (void)err;
  mr_device_become_helper();
  mr_thread_name("mr-split");
  return 0;
}

/* Makes part p's operator (on its helper, when it has one, so the device
 * sees the thread that will drive it). */
static int make_part(void *arg, mr_err *err) {
  part *p = arg;
  mr_toeplitz_split *s = p->s;
  mr_toeplitz_opts o = s->o;
  o.coils = p->coils;
  if (p != &s->parts[0])
    o.lambda = 0; /* lambda R once, on the first device */
  int rc = mr_toeplitz_create(p->dev, &o, s->q, &p->op, err);
  if (rc == 0 && p != &s->parts[0]) {
    rc = mr_buf_create(p->dev, bytes_of(s), &p->x, err);
    if (rc == 0)
      rc = mr_buf_create(p->dev, bytes_of(s), &p->y, err);
  }
  return rc;
}

static int free_part(void *arg, mr_err *err) {
  (void)err;
  part *p = arg;
  mr_toeplitz_destroy(p->op);
  mr_buf_destroy(p->x);
  mr_buf_destroy(p->y);
  return 0;
}

static int set_part_maps(void *arg, mr_err *err) {
  part *p = arg;
  return mr_toeplitz_set_maps(p->op, p->s->maps + p->first * p->s->nvox, err);
}

/* Runs fn(p) on p's helper, or here for the first device. */
static int on_part(part *p, mr_worker_fn fn, mr_err *err) {
  return p->helper != NULL ? mr_worker_call(p->helper, fn, p, err) : fn(p, err);
}

int mr_toeplitz_split_create(mr_device *const *devs, size_t ndev, const mr_toeplitz_opts *opts,
                             const mr_cfloat *q, mr_toeplitz_split **out, mr_err *err) {
  if (ndev < 1 || ndev > MAX_PARTS || opts->coils < 1 || q == NULL)
    return mr_err_set(err, MR_EINVAL, "toeplitz split: %zu devices (1 to %d), %zu coils, Q %s",
                      ndev, MAX_PARTS, opts->coils, q != NULL ? "given" : "missing");
  mr_toeplitz_split *s = calloc(1, sizeof *s);
  if (s == NULL)
    return mr_err_set(err, MR_ENOMEM, "toeplitz split: out of memory");
  s->o = *opts;
  s->nvox = 1;
  for (int d = 0; d < opts->rank && d < 3; d++)
    s->nvox *= opts->n[d];
  s->nparts = ndev < opts->coils ? ndev : opts->coils;
  s->q = q;
  int rc = 0;
  for (size_t i = 0; i < s->nparts; i++) {
    part *p = &s->parts[i];
    p->s = s;
    p->dev = devs[i];
    /* Coils dealt as evenly as they go: the first coils % nparts get one more. */
    size_t base = opts->coils / s->nparts, extra = opts->coils % s->nparts;
    p->first = i * base + (i < extra ? i : extra);
    p->coils = base + (i < extra);
  }
  for (size_t i = 1; rc == 0 && i < s->nparts; i++)
    rc = mr_worker_start(become_helper, NULL, &s->parts[i].helper, err);
  for (size_t i = 0; rc == 0 && i < s->nparts; i++)
    rc = on_part(&s->parts[i], make_part, err);
  size_t others = s->nparts > 1 ? s->nparts - 1 : 1;
  if (rc == 0)
    rc = mr_buf_create(devs[0], others * bytes_of(s), &s->partials, err);
  for (size_t i = 1; rc == 0 && i < s->nparts; i++)
    s->parts[i].y_on_first = (mr_cfloat *)mr_buf_data(s->partials) + (i - 1) * s->nvox;
  if (rc == 0)
    rc = mr_buf_create(devs[0], opts->coils * bytes_of(s), &s->maps_all, err);
  s->q = NULL;
  if (rc < 0) {
    mr_toeplitz_split_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

int mr_toeplitz_split_set_maps(mr_toeplitz_split *s, const mr_cfloat *maps, mr_err *err) {
  s->maps = maps;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < s->nparts; i++)
    rc = on_part(&s->parts[i], set_part_maps, err);
  s->maps = NULL;
  if (rc == 0)
    rc = mr_buf_upload(s->maps_all, 0, maps, s->o.coils * bytes_of(s), err);
  s->have_maps = rc == 0;
  return rc;
}

int mr_toeplitz_split_combine(mr_toeplitz_split *s, const mr_cfloat *x, mr_cfloat *out,
                              mr_err *err) {
  if (!s->have_maps)
    return mr_err_set(err, MR_EINVAL, "toeplitz split: combining coils needs maps");
  return mr_vec_conj_mul_sum(s->parts[0].dev, s->o.coils, s->nvox, mr_buf_data(s->maps_all), x,
                             mr_buf_data(s->partials), out, err);
}

/* A device after the first, its x already there: its part, and y to the
 * first device. Posted: its line goes to the part's own mr_err, for
 * part_result(). */
static int apply_part(void *arg, mr_err *unused) {
  (void)unused;
  part *p = *(part **)arg;
  mr_err *err = &p->why;
  mr_err_clear(err);
  mr_cfloat *y = mr_buf_data(p->y);
  int rc = mr_toeplitz_apply(p->op, mr_buf_data(p->x), y, err);
  if (rc == 0)
    rc = mr_device_copy_to(p->dev, y, p->s->parts[0].dev, p->y_on_first, bytes_of(p->s), err);
  p->rc = rc;
  return rc;
}

/* The apply's result, its line copied into the waiting thread's mr_err. */
static int part_result(void *arg, mr_err *err) {
  part *p = arg;
  return p->rc < 0 ? mr_err_set(err, p->rc, "%s", mr_err_text(&p->why, p->rc)) : 0;
}

int mr_toeplitz_split_apply(mr_toeplitz_split *s, const mr_cfloat *x, mr_cfloat *y, mr_err *err) {
  if (!s->have_maps)
    return mr_err_set(err, MR_EINVAL, "toeplitz split: no coil maps set");
  mr_device *first = s->parts[0].dev;
  size_t n = s->nvox, posted = 1;
  int rc = 0;
  /* Device to device (NVLink where the GPUs have it); the first device's
   * queued work, the last apply's sums included, is done after these. */
  for (size_t i = 1; rc == 0 && i < s->nparts; i++)
    rc = mr_device_copy_to(first, x, s->parts[i].dev, mr_buf_data(s->parts[i].x), bytes_of(s),
                           err);
  for (; rc == 0 && posted < s->nparts; posted++) {
    part *p = &s->parts[posted];
    p->rc = 0;
    rc = mr_worker_post(p->helper, apply_part, &p, sizeof p, err);
  }
  if (rc == 0)
    rc = mr_toeplitz_apply(s->parts[0].op, x, y, err); /* while the others run theirs */
  /* Every posted apply writes into partials: wait for each, whatever
   * failed. */
  for (size_t i = 1; i < posted; i++) {
    int part_rc = mr_worker_call(s->parts[i].helper, part_result, &s->parts[i], err);
    if (rc == 0)
      rc = part_rc;
  }
  for (size_t i = 1; rc == 0 && i < s->nparts; i++)
    rc = mr_vec_axpy(first, n, 1.0f, s->parts[i].y_on_first, y, err);
  return rc;
}

int mr_toeplitz_split_apply_op(void *op, size_t count, const mr_cfloat *x, mr_cfloat *y,
                               mr_err *err) {
  if (count != 1)
    return mr_err_set(err, MR_EINVAL, "toeplitz split: a batch of %zu images (coil maps: 1)",
                      count);
  return mr_toeplitz_split_apply(op, x, y, err);
}

size_t mr_toeplitz_split_devices(const mr_toeplitz_split *s) { return s->nparts; }

void mr_toeplitz_split_destroy(mr_toeplitz_split *s) {
  if (s == NULL)
    return;
  for (size_t i = 0; i < s->nparts; i++) {
    part *p = &s->parts[i];
    if (i == 0 || p->helper != NULL)
      on_part(p, free_part, NULL);
    if (p->helper != NULL)
      mr_worker_stop(p->helper, nothing, NULL);
  }
  mr_buf_destroy(s->partials);
  mr_buf_destroy(s->maps_all);
  free(s);
}
