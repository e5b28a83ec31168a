#include "kspace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "budget.h"
#include "buf.h"
#include "host.h"
#include "vec.h"

/* What a buffer of this shape costs (its budget share). */
static uint64_t footprint(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims) {
  uint64_t n = (uint64_t)nro * ne1 * ne2;
  return n * nch * sizeof(float complex) + (uint64_t)ne1 * ne2 +
         n * (uint64_t)(traj_dims > 0 ? traj_dims : 0) * sizeof(float);
}

/* The samples' own share of the footprint, which counts one copy. */
static uint64_t samples_bytes(const mr_kspace *k) {
  return (uint64_t)mr_kspace_channel_size(k) * k->nch * sizeof(float complex);
}

/* Freed pageable sample blocks kept for the next buffer of their size: a
 * slice's buffer of more than the C library's largest heap block (32 MiB)
 * comes fresh from the kernel every time, and faulting in and zeroing its
 * pages costs more than gathering the lines into it. A few blocks, shared
 * by every session (buffers are freed on any pipeline thread), counted as
 * the budget's spare memory: kept only while they fit beside what the
 * sessions hold, and freed when a reservation would not fit (cache_reclaim).
 * Sixteen: a series whose later stages lag behind its receiving (the CPU
 * server's 20-slice GRAPPA case) holds a dozen slices' buffers of two
 * sizes at once, so four served the next series only its first slices and
 * the session thread faulted in the rest (accumulate 137-197 ms against
 * 44-52 ms in its session log on the 2-core CI machine). */
enum { CACHE_BLOCKS = 16 };
#define CACHE_MIN ((size_t)1 << 20)
#define CACHE_BYTES ((size_t)1 << 30)

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void *p;
  size_t bytes;
} cache[CACHE_BLOCKS];
static int ncached;
static size_t cached_bytes;

/* Blocks from this size on are aligned to, and asked to be backed by, 2 MiB
 * pages: gathering a line touches every channel, a page apart each, and
 * small pages made that a TLB miss per channel. */
#define HUGE_PAGE ((size_t)2 << 20)

/* bytes of host memory, zeroed when `zero`, from the cache when a block of
 * that size is there. */
static void *samples_alloc(size_t bytes, int zero) {
  if (bytes >= CACHE_MIN) {
    void *p = NULL;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < ncached; i++)
      if (cache[i].bytes == bytes) {
        p = cache[i].p;
        cached_bytes -= bytes;
        cache[i] = cache[--ncached];
        break;
      }
    pthread_mutex_unlock(&cache_lock);
    if (p != NULL) {
      mr_budget_drop_spare(bytes); /* counted by its new buffer's footprint now */
      return zero ? memset(p, 0, bytes) : p;
    }
  }
  if (bytes >= HUGE_PAGE) {
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0)
      return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice: failing it costs only speed */
#endif
    return zero ? memset(p, 0, bytes) : p;
  }
  return calloc(bytes > 0 ? bytes : 1, 1);
}

/* Frees every cached block: the budget's reclaim function. */
static void cache_reclaim(void) {
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < ncached; i++) {
    free(cache[i].p);
    mr_budget_drop_spare(cache[i].bytes);
  }
  ncached = 0;
  cached_bytes = 0;
  pthread_mutex_unlock(&cache_lock);
}

static void samples_free(void *p, size_t bytes) {
  if (p == NULL)
    return;
  if (bytes >= CACHE_MIN && mr_budget_keep_spare(bytes) == 0) {
    mr_budget_add_reclaim(cache_reclaim);
    pthread_mutex_lock(&cache_lock);
    int kept = ncached < CACHE_BLOCKS && cached_bytes + bytes <= CACHE_BYTES;
    if (kept) {
      cache[ncached].p = p;
      cache[ncached++].bytes = bytes;
      cached_bytes += bytes;
    }
    pthread_mutex_unlock(&cache_lock);
    if (kept)
      return;
    mr_budget_drop_spare(bytes);
  }
  free(p);
}

/* Frees k's host samples, pinned or not. */
static void free_host(mr_kspace *k) {
  if (k->pinned != NULL)
    mr_host_free(k->pinned, k->data);
  else
    samples_free(k->data, samples_bytes(k));
  k->data = NULL;
  k->pinned = NULL;
}

/* A buffer whose samples go to host memory (dev NULL or the CPU; pinned
 * for pin; zeroed when `zero`), or to a GPU buffer (dev a GPU). */
static mr_kspace *make(mr_device *dev, mr_device *pin, size_t nro, size_t ne1, size_t ne2,
                       size_t nch, int traj_dims, int zero, mr_err *err) {
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
  int on_gpu = dev != NULL && mr_device_is_gpu(dev), rc = 0;
  if (on_gpu) {
    rc = mr_buf_create(dev, n * nch * sizeof *k->data + 1, &k->dev, err);
  } else if (pin != NULL &&
             mr_host_alloc(pin, n * nch * sizeof *k->data, (void **)&k->data, NULL) == 0) {
    k->pinned = pin;
    mr_budget_give(samples_bytes(k)); /* mr_host_alloc counts pinned samples itself */
    if (zero)
      memset(k->data, 0, n * nch * sizeof *k->data);
  } else {
    k->data = samples_alloc(n * nch * sizeof *k->data, zero);
  }
  k->sampled = calloc(ne1 * ne2, 1);
  if (traj_dims > 0)
    k->traj = calloc(n * (size_t)traj_dims, sizeof *k->traj);
  if (rc < 0 || (on_gpu ? k->dev == NULL : k->data == NULL) || k->sampled == NULL ||
      (traj_dims > 0 && k->traj == NULL)) {
    mr_kspace_free(k);
    mr_err_set(err, rc < 0 ? rc : MR_ENOMEM, "out of memory for %s%s", what,
               on_gpu ? " on the GPU" : "");
    return NULL;
  }
  return k;
}

mr_kspace *mr_kspace_new(size_t nro, size_t ne1, size_t ne2, size_t nch, int traj_dims,
                         mr_err *err) {
  return make(NULL, NULL, nro, ne1, ne2, nch, traj_dims, 1, err);
}

mr_kspace *mr_kspace_new_pinned(mr_device *dev, size_t nro, size_t ne1, size_t ne2, size_t nch,
                                mr_err *err) {
  return make(NULL, mr_device_is_gpu(dev) ? dev : NULL, nro, ne1, ne2, nch, 0, 1, err);
}

mr_kspace *mr_kspace_new_gather(mr_device *pin, size_t nro, size_t ne1, size_t ne2, size_t nch,
                                int traj_dims, mr_err *err) {
  return make(NULL, pin != NULL && mr_device_is_gpu(pin) ? pin : NULL, nro, ne1, ne2, nch,
              traj_dims, 0, err);
}

void mr_kspace_zero_unsampled(mr_kspace *k) {
  size_t lines = k->ne1 * k->ne2, stride = mr_kspace_channel_size(k);
  for (size_t l = 0; l < lines; l++)
    if (!k->sampled[l])
      for (size_t c = 0; c < k->nch; c++)
        memset(k->data + c * stride + l * k->nro, 0, k->nro * sizeof *k->data);
}

mr_kspace *mr_kspace_new_on(mr_device *dev, size_t nro, size_t ne1, size_t ne2, size_t nch,
                            mr_err *err) {
  return make(dev, NULL, nro, ne1, ne2, nch, 0, 1, err);
}

void mr_kspace_free(mr_kspace *k) {
  if (k == NULL)
    return;
  mr_kspace_free(k->calib);
  /* The footprint counts one copy of the samples; pinned host samples are
   * counted by mr_host_alloc instead (mr_host_free gives them back). */
  uint64_t own = footprint(k->nro, k->ne1, k->ne2, k->nch, k->traj_dims);
  if (k->pinned != NULL && k->dev == NULL)
    own -= samples_bytes(k);
  if (k->data != NULL && k->dev != NULL && k->pinned == NULL) /* the second copy */
    own += samples_bytes(k);
  mr_budget_give(own);
  mr_buf_destroy(k->dev);
  free_host(k);
  free(k->sampled);
  free(k->traj);
  free(k);
}

float complex *mr_kspace_host(mr_kspace *k, mr_err *err) {
  if (k->data != NULL)
    return k->data;
  uint64_t bytes = samples_bytes(k);
  if (mr_budget_take(bytes, "a k-space buffer's host copy", err) < 0)
    return NULL;
  k->data = samples_alloc(bytes, 0); /* the download fills every sample */
  mr_err why = {0};
  int rc = k->data == NULL ? MR_ENOMEM : mr_buf_download(k->dev, 0, k->data, bytes, &why);
  if (rc < 0) {
    samples_free(k->data, bytes);
    k->data = NULL;
    mr_budget_give(bytes);
    mr_err_set(err, rc, "downloading a k-space buffer: %s", mr_err_text(&why, rc));
    return NULL;
  }
  return k->data;
}

mr_cfloat *mr_kspace_on(mr_kspace *k, mr_device *dev, mr_err *err) {
  if (!mr_device_is_gpu(dev))
    return mr_kspace_host(k, err);
  if (k->dev != NULL && mr_buf_device(k->dev) == dev)
    return mr_buf_data(k->dev);
  if (k->dev != NULL) { /* on another GPU: through the host */
    if (mr_kspace_host(k, err) == NULL)
      return NULL;
    mr_buf_destroy(k->dev);
    k->dev = NULL;
    mr_budget_give(samples_bytes(k));
  }
  uint64_t bytes = samples_bytes(k);
  if (mr_budget_take(bytes, "a k-space buffer on the GPU", err) < 0)
    return NULL;
  mr_err why = {0};
  int rc = mr_buf_create(dev, bytes > 0 ? bytes : 1, &k->dev, &why);
  if (rc == 0 && (rc = mr_buf_upload(k->dev, 0, k->data, bytes, &why)) < 0) {
    mr_buf_destroy(k->dev);
  }
  if (rc < 0) {
    k->dev = NULL;
    mr_budget_give(bytes);
    mr_err_set(err, rc, "a k-space buffer on the GPU: %s", mr_err_text(&why, rc));
    return NULL;
  }
  return mr_buf_data(k->dev);
}

void mr_kspace_changed_on(mr_kspace *k, mr_device *dev) {
  if (!mr_device_is_gpu(dev)) {
    if (k->dev != NULL) {
      mr_buf_destroy(k->dev);
      k->dev = NULL;
      mr_budget_give(samples_bytes(k));
    }
    return;
  }
  if (k->data != NULL) {
    int counted_here = k->pinned == NULL; /* else by mr_host_alloc */
    free_host(k);
    if (counted_here)
      mr_budget_give(samples_bytes(k));
  }
}

void mr_kspace_copy_meta(mr_kspace *dst, const mr_kspace *src) {
  dst->ref = src->ref;
  dst->encoding = src->encoding;
  dst->recon = src->recon;
  dst->encoded = src->encoded;
  dst->calib_generation = src->calib_generation;
}

/* Drops k's device copy (after a failure). */
static void drop_device(mr_kspace *k) {
  if (k->dev == NULL)
    return;
  mr_buf_destroy(k->dev);
  k->dev = NULL;
  mr_budget_give(samples_bytes(k));
}

int mr_kspace_upload_lines(mr_kspace *k, mr_device *dev, size_t first, size_t count,
                           mr_err *err) {
  int rc = 0;
  mr_err why = {0};
  if (k->dev == NULL) {
    uint64_t bytes = samples_bytes(k);
    if ((rc = mr_budget_take(bytes, "a k-space buffer on the GPU", err)) < 0)
      return rc;
    if ((rc = mr_buf_create(dev, bytes > 0 ? bytes : 1, &k->dev, &why)) < 0) {
      k->dev = NULL;
      mr_budget_give(bytes);
      return mr_err_set(err, rc, "a k-space buffer on the GPU: %s", mr_err_text(&why, rc));
    }
    rc = mr_vec_zero(dev, mr_kspace_channel_size(k) * k->nch, mr_buf_data(k->dev), &why);
  }
  /* The run of lines in every channel: rows a channel apart. */
  size_t pitch = mr_kspace_channel_size(k) * sizeof *k->data;
  if (rc == 0)
    rc = mr_buf_upload_rows_async(k->dev, first * k->nro * sizeof *k->data, pitch,
                                  k->data + first * k->nro, pitch, count * k->nro * sizeof *k->data,
                                  k->nch, &why);
  if (rc < 0) {
    if (k->dev != NULL)
      mr_buf_wait_uploads(k->dev, NULL); /* earlier copies may still read k->data */
    drop_device(k);
    return mr_err_set(err, rc, "uploading k-space lines: %s", mr_err_text(&why, rc));
  }
  return 0;
}

int mr_kspace_wait_uploads(mr_kspace *k, mr_err *err) {
  if (k->dev == NULL)
    return 0;
  mr_err why = {0};
  int rc = mr_buf_wait_uploads(k->dev, &why);
  if (rc < 0) {
    drop_device(k);
    return mr_err_set(err, rc, "uploading k-space lines: %s", mr_err_text(&why, rc));
  }
  return 0;
}

/* Runs of sampled lines: calls each(first, count, at, arg, err), `at` the
 * run's first line among the sampled ones, until one fails. */
static int each_run(const mr_kspace *k, int (*each)(size_t, size_t, size_t, void *, mr_err *),
                    void *arg, mr_err *err) {
  size_t lines = k->ne1 * k->ne2;
  int rc = 0;
  for (size_t l = 0, at = 0; rc == 0 && l < lines;) {
    size_t end = l;
    while (end < lines && k->sampled[end])
      end++;
    if (end > l)
      rc = each(l, end - l, at, arg, err);
    at += end - l;
    l = end + 1;
  }
  return rc;
}

typedef struct run_copy {
  mr_kspace *k;
  mr_buf *buf;
  size_t lines; /* sampled lines: the buffer's lines per channel */
} run_copy;

static int gather_run(size_t first, size_t count, size_t at, void *arg, mr_err *err) {
  run_copy *c = arg;
  size_t row = c->k->nro * sizeof *c->k->data;
  return mr_buf_upload_rows(c->buf, at * row, c->lines * row, c->k->data + first * c->k->nro,
                            mr_kspace_channel_size(c->k) * sizeof *c->k->data, count * row,
                            c->k->nch, err);
}

static int scatter_run(size_t first, size_t count, size_t at, void *arg, mr_err *err) {
  run_copy *c = arg;
  size_t row = c->k->nro * sizeof *c->k->data;
  return mr_buf_download_rows(c->buf, at * row, c->lines * row, c->k->data + first * c->k->nro,
                              mr_kspace_channel_size(c->k) * sizeof *c->k->data, count * row,
                              c->k->nch, err);
}

static size_t sampled_lines(const mr_kspace *k) {
  size_t n = 0;
  for (size_t l = 0; l < k->ne1 * k->ne2; l++)
    n += k->sampled[l] != 0;
  return n;
}

int mr_kspace_gather_sampled(const mr_kspace *k, mr_device *dev, mr_buf **out, size_t *lines,
                             mr_err *err) {
  *out = NULL;
  *lines = sampled_lines(k);
  if (*lines == 0)
    return 0;
  run_copy c = {(mr_kspace *)k, NULL, *lines}; /* only read */
  int rc = mr_buf_create(dev, *lines * k->nro * k->nch * sizeof *k->data, &c.buf, err);
  if (rc == 0 && (rc = each_run(k, gather_run, &c, err)) < 0)
    mr_buf_destroy(c.buf);
  if (rc == 0)
    *out = c.buf;
  return rc;
}

int mr_kspace_scatter_sampled(mr_kspace *k, const mr_buf *buf, mr_err *err) {
  run_copy c = {k, (mr_buf *)buf, sampled_lines(k)}; /* only read */
  return c.lines == 0 ? 0 : each_run(k, scatter_run, &c, err);
}

int mr_kspace_hand_on(mr_kspace *k, int on_device, mr_err *err) {
  if (on_device || k->dev == NULL)
    return 0;
  if (mr_kspace_host(k, err) == NULL)
    return mr_err_code(err, MR_ENOMEM);
  drop_device(k);
  return 0;
}

static void free_kspace(void *p) { mr_kspace_free(p); }

mr_message *mr_kspace_message(mr_kspace *k) {
  return mr_message_new_object(MR_MSG_KSPACE, k, free_kspace);
}

static int emit_skipped_warning(mr_gadget_ctx *ctx, mr_emit *out, size_t count,
                                const char *what) {
  if (count == 0)
    return 0;
  char text[256];
  int n = snprintf(text, sizeof text,
                   "WARNING: %s: skipped %zu %sacquisition%s with no samples or no channels",
                   ctx->gadget, count, what, count == 1 ? "" : "s");
  mr_message *m = mr_message_new_text(MR_MSG_TEXT, text, (size_t)n);
  return m != NULL ? mr_emit_message(out, m) : mr_gadget_fail(ctx, MR_ENOMEM, "out of memory");
}

int mr_emit_empty_noise_warning(mr_gadget_ctx *ctx, mr_emit *out, size_t count) {
  return emit_skipped_warning(ctx, out, count, "noise ");
}

int mr_emit_empty_lines_warning(mr_gadget_ctx *ctx, mr_emit *out, size_t count) {
  return emit_skipped_warning(ctx, out, count, "");
}
