#include <math.h>
#include <stdio.h>

#include "bench.h"

/* The separator and key before a value at the current depth. */
static void lead(bench_json *j, const char *key) {
  if (j->count[j->depth]++ > 0)
    fputc(',', j->f);
  fputc('\n', j->f);
  for (int i = 0; i < j->depth; i++)
    fputs("  ", j->f);
  if (key != NULL)
    fprintf(j->f, "\"%s\": ", key);
}

void json_open(bench_json *j, const char *key, char bracket) {
  if (j->depth > 0 || j->count[0] > 0)
    lead(j, key);
  else
    j->count[0]++;
  fputc(bracket, j->f);
  j->count[++j->depth] = 0;
}

void json_close(bench_json *j, char bracket) {
  int had = j->count[j->depth--] > 0;
  if (had) {
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
      fputs("  ", j->f);
  }
  fputc(bracket, j->f);
  if (j->depth == 0)
    fputc('\n', j->f);
}

void json_num(bench_json *j, const char *key, double v) {
  lead(j, key);
  if (isfinite(v))
    fprintf(j->f, "%.6g", v);
  else
    fputs("null", j->f);
}

void json_int(bench_json *j, const char *key, long long v) {
  lead(j, key);
  fprintf(j->f, "%lld", v);
}

void json_str(bench_json *j, const char *key, const char *s) {
  lead(j, key);
  fputc('"', j->f);
  for (; *s != '\0'; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', j->f);
    if ((unsigned char)*s >= 0x20)
      fputc(*s, j->f);
  }
  fputc('"', j->f);
}

void bench_limits(bench_json *j, const char *prefix, double gflop, double mbyte, double ms,
                  bench_peak peak) {
  static const struct {
    const char *name;
    double gflops;
  } peaks[] = {[BENCH_FP32] = {"fp32", BENCH_PEAK_FP32_GFLOPS},
               [BENCH_FP64] = {"fp64", BENCH_PEAK_FP64_GFLOPS},
               [BENCH_FP64_TENSOR] = {"fp64_tensor", BENCH_PEAK_FP64_TENSOR_GFLOPS}};
  char key[64];
  double gflops = gflop / ms * 1e3, gbps = mbyte / ms;
  double pct_flop = 100.0 * gflops / peaks[peak].gflops;
  double pct_hbm = 100.0 * gbps / BENCH_PEAK_HBM_GBPS;
  snprintf(key, sizeof key, "%sgflop", prefix);
  json_num(j, key, gflop);
  snprintf(key, sizeof key, "%smbyte", prefix);
  json_num(j, key, mbyte);
  snprintf(key, sizeof key, "%sgflops", prefix);
  json_num(j, key, gflops);
  snprintf(key, sizeof key, "%sgbps", prefix);
  json_num(j, key, gbps);
  snprintf(key, sizeof key, "%spct_%s_peak", prefix, peaks[peak].name);
  json_num(j, key, pct_flop);
  snprintf(key, sizeof key, "%spct_hbm_peak", prefix);
  json_num(j, key, pct_hbm);
  snprintf(key, sizeof key, "%sbound", prefix);
  if (isfinite(ms))
    json_str(j, key, pct_hbm >= pct_flop ? "memory" : "compute");
  else
    json_num(j, key, NAN); /* not timed: null */
}
