/* GCC's per-readout-position product on the CPU (compress_impl.h). */
#include <complex.h>

#include "compress_impl.h"
#include "cpu_threads.h"
#include "device_impl.h"

typedef struct job {
  const mr_cfloat *m, *in;
  size_t nc, nv, nl, nro;
  mr_cfloat *out;
} job;

/* Items: (virtual coil, line) rows of nro samples. */
static void rows(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  for (size_t r = begin; r < end; r++) {
    size_t v = r / j->nl, l = r % j->nl;
    mr_cfloat *o = j->out + r * j->nro;
    for (size_t x = 0; x < j->nro; x++) {
      const mr_cfloat *mx = j->m + x * j->nc * j->nc + v * j->nc;
      float complex sum = 0;
      for (size_t c = 0; c < j->nc; c++)
        sum += mx[c] * j->in[(c * j->nl + l) * j->nro + x];
      o[x] = sum;
    }
  }
}

int mr_compress_cpu_per_x(mr_device *dev, const mr_cfloat *m, size_t ncoils, size_t nvirtual,
                          size_t nlines, size_t nro, const mr_cfloat *in, mr_cfloat *out) {
  job j = {m, in, ncoils, nvirtual, nlines, nro, out};
  mr_cpu_parallel_for(mr_device_threads(dev), nvirtual * nlines, 16, rows, &j);
  return 0;
}
