#include "nufft_points.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

void mr_nufft_points_free(mr_nufft_points *p) {
  free(p->pos);
  free(p->offset);
  free(p->bin_start);
  free(p->entries);
  free(p->subs);
  memset(p, 0, sizeof *p);
}

size_t mr_nufft_sub_entries(const mr_nufft_geom *g, size_t npoints) {
  /* a footprint of w touches 1 + (w - 1) / bin bins along a dimension on
   * average */
  double per_point = 1, bins = 1;
  for (int d = 0; d < g->rank; d++) {
    per_point *= 1.0 + (double)(g->width - 1) / g->bin[d];
    bins *= g->nbins[d];
  }
  double want = 4.0 * (double)npoints * per_point / bins;
  if (!(want >= MR_NUFFT_MIN_SUB_ENTRIES))
    return MR_NUFFT_MIN_SUB_ENTRIES;
  return want < MR_NUFFT_MAX_SUB_ENTRIES ? (size_t)want : MR_NUFFT_MAX_SUB_ENTRIES;
}

void mr_nufft_bin_box(const mr_nufft_geom *g, size_t b, int b0[3], int ext[3]) {
  size_t idx[3] = {b % (size_t)g->nbins[0], b / (size_t)g->nbins[0] % (size_t)g->nbins[1],
                   b / ((size_t)g->nbins[0] * (size_t)g->nbins[1])};
  for (int d = 0; d < 3; d++) {
    b0[d] = (int)idx[d] * g->bin[d];
    ext[d] = g->nf[d] - b0[d] < g->bin[d] ? g->nf[d] - b0[d] : g->bin[d];
  }
}

typedef struct place_job {
  const mr_nufft_geom *g;
  const float *k;
  int32_t (*pos)[4];
  float (*offset)[4];
  int32_t *home; /* bin of the footprint's first grid point */
  atomic_int bad; /* a position was not finite */
} place_job;

static void place_range(void *arg, size_t begin, size_t end) {
  place_job *j = arg;
  const mr_nufft_geom *g = j->g;
  for (size_t i = begin; i < end; i++) {
    int32_t *pos = j->pos[i];
    float *off = j->offset[i];
    size_t home = 0, stride = 1;
    for (int d = 0; d < 3; d++) {
      if (d < g->rank) {
        double k = j->k[i * (size_t)g->rank + d];
        if (!isfinite(k)) {
          atomic_store(&j->bad, 1);
          k = 0;
        }
        int s;
        mr_nufft_place(k, g->nf[d], g->width, g->origin[d], &s, &off[d]);
        pos[d] = s;
      } else {
        pos[d] = 0;
        off[d] = 0;
      }
      home += (size_t)(pos[d] / g->bin[d]) * stride;
      stride *= (size_t)g->nbins[d];
    }
    pos[3] = (int32_t)i;
    off[3] = 0;
    j->home[i] = (int32_t)home;
  }
}

/* Calls fn(arg, bin) for every bin sorted sample p's footprint touches. */
static void for_touched(const mr_nufft_geom *g, const int32_t pos[4],
                        void (*fn)(void *arg, size_t bin), void *arg) {
  int t[3][3], nt[3];
  for (int d = 0; d < 3; d++)
    nt[d] = mr_nufft_touched(pos[d], mr_nufft_width(g, d), g->nf[d], g->bin[d], t[d]);
  for (int z = 0; z < nt[2]; z++)
    for (int y = 0; y < nt[1]; y++)
      for (int x = 0; x < nt[0]; x++)
        fn(arg, ((size_t)t[2][z] * g->nbins[1] + t[1][y]) * g->nbins[0] + t[0][x]);
}

static void count_entry(void *arg, size_t bin) { ((int32_t *)arg)[bin + 1]++; }

typedef struct fill_state {
  int32_t *fill; /* next free slot per bin */
  int32_t *entries;
  int32_t p;
} fill_state;

static void fill_entry(void *arg, size_t bin) {
  fill_state *f = arg;
  f->entries[f->fill[bin]++] = f->p;
}

/* Counting sort by home bin (stable, so deterministic), the entry lists,
 * and the GPU's pieces. */
static int sort_and_list(const mr_nufft_geom *g, size_t n, const int32_t (*pos)[4],
                         const float (*offset)[4], const int32_t *home, size_t max_entries,
                         mr_nufft_points *out, mr_err *err) {
  size_t nbins = (size_t)g->nbins[0] * g->nbins[1] * g->nbins[2];
  int32_t *start = calloc(nbins + 1, sizeof *start);
  int32_t *fill = malloc((nbins + 1) * sizeof *fill);
  out->pos = malloc((n > 0 ? n : 1) * sizeof *out->pos);
  out->offset = malloc((n > 0 ? n : 1) * sizeof *out->offset);
  out->bin_start = calloc(nbins + 1, sizeof *out->bin_start);
  if (start == NULL || fill == NULL || out->pos == NULL || out->offset == NULL ||
      out->bin_start == NULL) {
    free(start);
    free(fill);
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory sorting %zu points", n);
  }
  for (size_t i = 0; i < n; i++)
    start[home[i] + 1]++;
  for (size_t b = 0; b < nbins; b++)
    start[b + 1] += start[b];
  memcpy(fill, start, (nbins + 1) * sizeof *fill);
  for (size_t i = 0; i < n; i++) {
    int32_t p = fill[home[i]]++;
    memcpy(out->pos[p], pos[i], sizeof *out->pos);
    memcpy(out->offset[p], offset[i], sizeof *out->offset);
  }
  free(start);

  int32_t *bs = out->bin_start;
  for (size_t p = 0; p < n; p++)
    for_touched(g, out->pos[p], count_entry, bs);
  for (size_t b = 0; b < nbins; b++)
    bs[b + 1] += bs[b];
  out->nentries = (size_t)bs[nbins];
  out->entries = malloc((out->nentries > 0 ? out->nentries : 1) * sizeof *out->entries);
  size_t nsubs = 0;
  for (size_t b = 0; b < nbins; b++) {
    size_t e = (size_t)(bs[b + 1] - bs[b]);
    nsubs += e > max_entries ? (e + max_entries - 1) / max_entries : 1;
  }
  out->subs = malloc(nsubs * sizeof *out->subs);
  if (out->entries == NULL || out->subs == NULL) {
    free(fill);
    return mr_err_set(err, MR_ENOMEM, "nufft: out of memory listing %zu bin entries",
                      out->nentries);
  }
  memcpy(fill, bs, nbins * sizeof *fill);
  fill_state f = {.fill = fill, .entries = out->entries};
  for (f.p = 0; (size_t)f.p < n; f.p++)
    for_touched(g, out->pos[f.p], fill_entry, &f);
  free(fill);

  out->nbins = nbins;
  out->nsubs = nsubs;
  size_t s = 0;
  for (size_t b = 0; b < nbins; b++) {
    size_t first = (size_t)bs[b], end = (size_t)bs[b + 1];
    int split = end - first > max_entries;
    do {
      size_t piece = end - first < max_entries ? end - first : max_entries;
      out->subs[s][0] = (int32_t)b;
      out->subs[s][1] = (int32_t)first;
      out->subs[s][2] = (int32_t)(first + piece);
      out->subs[s][3] = split;
      s++;
      first += piece;
    } while (first < end);
  }
  return 0;
}

int mr_nufft_points_build(const mr_nufft_geom *g, size_t n, const float *k, size_t max_entries,
                          mr_cpu_threads *t, mr_nufft_points *out, mr_err *err) {
  place_job j = {.g = g, .k = k};
  size_t alloc = n > 0 ? n : 1;
  j.pos = malloc(alloc * sizeof *j.pos);
  j.offset = malloc(alloc * sizeof *j.offset);
  j.home = malloc(alloc * sizeof *j.home);
  int rc = 0;
  if (j.pos == NULL || j.offset == NULL || j.home == NULL) {
    rc = mr_err_set(err, MR_ENOMEM, "nufft: out of memory placing %zu points", n);
    goto done;
  }
  atomic_init(&j.bad, 0);
  mr_cpu_parallel_for(t, n, 4096, place_range, &j);
  if (atomic_load(&j.bad)) {
    rc = mr_err_set(err, MR_EINVAL, "nufft: a sample position is not finite");
    goto done;
  }
  out->npoints = n;
  rc = sort_and_list(g, n, (const int32_t(*)[4])j.pos, (const float(*)[4])j.offset, j.home,
                     max_entries, out, err);
  if (rc < 0)
    mr_nufft_points_free(out);
done:
  free(j.pos);
  free(j.offset);
  free(j.home);
  return rc;
}
