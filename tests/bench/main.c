/* mr-bench: benchmarks as JSON on stdout (or --json FILE).
 *
 *   mr-bench [SUBCOMMAND...] [--quick] [--json FILE] [--gpus SPEC]
 *            [--rounds N] [--server PATH] [--configs DIR] [--case NAME,...]
 *            [--reference FILE] [--sessions N]
 *
 * With no subcommand every one runs. Each subcommand's results are one
 * member of the top-level object, named after it. Later areas add a line to
 * the table below. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "clock.h"
#include "test_err.h"

static const struct {
  const char *name;
  const char *what;
  bench_fn run;
} commands[] = {
    {"gpu", "FFT, HERK/GEMM, solve and coil combination, GPU against CPU", bench_gpu},
    {"fhd", "direct F^H D and Q (the book's kernels and past them), CG on the Toeplitz operator", bench_fhd},
    {"grappa", "GRAPPA calibration (32-128 coils; CPU, GPU fused, library chain) and a whole slice", bench_grappa},
    {"nufft", "NUFFT types 1 and 2, 2D and 3D, four trajectories, tol 1e-2 .. 1e-6, GPU against CPU and the reference library, errors against the exact sum", bench_nufft},
    {"espirit", "ESPIRiT maps, 2D 256 x 256 (8, 32 coils) and 3D 256 x 256 x 128 (32 coils), GPU against CPU", bench_espirit},
    {"sms", "slice-GRAPPA calibration and separation, multiband 2-4, 16-32 coils, 64 and 96 matrices, GPU against CPU", bench_sms},
    {"split", "one 3D CG-SENSE scan split by coils across 1, 2, ... of the pool's GPUs", bench_split},
    {"sparse", "compressed sensing, ESPIRiT and coil compression: ours (solve alone, and through a server) against BART on the same data, time and PSNR/NRMSE", bench_sparse},
    {"stream", "end to end: sessions from memory through a GPU and a CPU reconserver against a raw loopback copy", bench_stream},
    {"load", "GPU-bound load: N heavy sessions at once through one reconserver on --gpus; a real-time stream beside a heavy one", bench_load},
};

enum { NCOMMANDS = sizeof commands / sizeof *commands };

int bench_devices(const bench_ctx *ctx, mr_device **cpu, mr_device **gpu) {
  mr_err err = {0};
  *cpu = *gpu = NULL;
  int rc = mr_pool_acquire(ctx->pool, "cpu", cpu, &err);
  if (rc == 0 && mr_pool_gpu_count(ctx->pool) > 0)
    rc = mr_pool_acquire(ctx->pool, "0", gpu, &err);
  if (rc < 0) {
    fprintf(stderr, "mr-bench: %s\n", err.msg);
    bench_devices_release(ctx, *cpu, NULL);
    return rc;
  }
  mr_device_info info;
  if (*gpu != NULL && mr_device_info_get(*gpu, &info, TERR) == 0)
    json_str(ctx->json, "gpu", info.name);
  if (mr_device_info_get(*cpu, &info, TERR) == 0) {
    json_str(ctx->json, "cpu", info.name);
    json_int(ctx->json, "cpu_threads", info.units);
  }
  return 0;
}

void bench_devices_release(const bench_ctx *ctx, mr_device *cpu, mr_device *gpu) {
  if (gpu != NULL)
    mr_pool_release(ctx->pool, gpu);
  if (cpu != NULL)
    mr_pool_release(ctx->pool, cpu);
}

double bench_median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is small */
    for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
      double t = v[k];
      v[k] = v[k - 1];
      v[k - 1] = t;
    }
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_random_fill(mr_cfloat *x, size_t n, unsigned seed) {
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  float *f = (float *)x;
  for (size_t i = 0; i < 2 * n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    f[i] = (float)((s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
  }
}

int bench_random_buf(mr_device *dev, size_t n, unsigned seed, mr_buf **out) {
  mr_cfloat *host = malloc(n * sizeof *host);
  if (host == NULL)
    return MR_ENOMEM;
  bench_random_fill(host, n, seed);
  int rc = mr_buf_create(dev, n * sizeof *host, out, TERR);
  if (rc == 0)
    rc = mr_buf_upload(*out, 0, host, n * sizeof *host, TERR);
  free(host);
  return rc;
}

int bench_listed(const char *list, const char *name) {
  if (list == NULL)
    return 1;
  size_t n = strlen(name);
  for (const char *p = list; *p != '\0'; p += strcspn(p, ",") + (p[strcspn(p, ",")] != '\0'))
    if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
      return 1;
  return 0;
}

int bench_unknown_case(const char *list, const char *const *names, int count, char *out,
                       size_t size) {
  for (const char *p = list; list != NULL && *p != '\0';
       p += strcspn(p, ",") + (p[strcspn(p, ",")] != '\0')) {
    int n = (int)strcspn(p, ","), known = 0;
    for (int i = 0; i < count; i++)
      known |= (int)strlen(names[i]) == n && strncmp(p, names[i], (size_t)n) == 0;
    if (!known) {
      snprintf(out, size, "%.*s", n, p);
      return 1;
    }
  }
  return 0;
}

double bench_now_ms(void) { return (double)mr_now_ns() / 1e6; }

static void usage(FILE *f) {
  fprintf(f, "usage: mr-bench [SUBCOMMAND...] [--quick] [--json FILE] [--gpus SPEC]\n"
             "                [--rounds N] [--server PATH] [--configs DIR] [--case NAME,...]\n"
             "                [--reference FILE] [--sessions N] [--gpu-lanes N]\n"
             "  --quick      small sizes: checks that everything runs, measures nothing\n"
             "  --json FILE  write the JSON there instead of stdout\n"
             "  --gpus SPEC  all (default), none, or a list like 0,1 (0,0: two logical\n"
             "               devices of GPU 0)\n"
             "  --fake-gpus N  N pretend GPUs running the CPU's code (split, load: checks it runs;\n"
             "               load gives the server --fake-gpus N too)\n"
             "  --rounds N   stream, sparse: best of N rounds (default 3, --quick 1); load: the N\n"
             "               sessions N times on one server, the last measured (default 1)\n"
             "  --server PATH  stream, sparse: the reconserver binary (default: next to mr-bench)\n"
             "  --configs DIR  stream, sparse: the servers' configs (default ./configs, else the source tree's)\n"
             "  --case NAME,...  stream, sparse, load, sms: only these cases (default all)\n"
             "  --sessions N  load: N sessions at once (default 16, --quick 4)\n"
             "  --gpu-lanes N  stream, load: the GPU servers' --gpu-lanes (default theirs)\n"
             "  --reference FILE  nufft: the reference library (libcufinufft.so) to run beside ours\n"
             "subcommands (all when none is named):\n");
  for (int i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].what);
}

static void log_line(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "mr-bench: %s\n", line);
}

int main(int argc, char **argv) {
  int chosen[NCOMMANDS] = {0}, any = 0, quick = 0;
  const char *out = NULL, *gpus = "all", *server = NULL, *configs = NULL, *cases = NULL;
  int rounds = 0, fake_gpus = 0, sessions = 0, gpu_lanes = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
      gpus = argv[++i];
    } else if (strcmp(argv[i], "--fake-gpus") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      fake_gpus = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      rounds = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--sessions") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      sessions = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--gpu-lanes") == 0 && i + 1 < argc && atoi(argv[i + 1]) > 0) {
      gpu_lanes = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--server") == 0 && i + 1 < argc) {
      server = argv[++i];
    } else if (strcmp(argv[i], "--configs") == 0 && i + 1 < argc) {
      configs = argv[++i];
    } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
      cases = argv[++i];
    } else if (strcmp(argv[i], "--reference") == 0 && i + 1 < argc) {
      setenv("MR_BENCH_CUFINUFFT", argv[++i], 1); /* read by nufft_reference.c */
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (argv[i][0] == '-') { /* unknown, or a known one without its value */
      fprintf(stderr, "mr-bench: unknown option '%s', or its value is missing or invalid\n",
              argv[i]);
      usage(stderr);
      return 2;
    } else {
      int found = 0;
      for (int c = 0; c < NCOMMANDS; c++)
        if (strcmp(argv[i], commands[c].name) == 0)
          chosen[c] = found = any = 1;
      if (!found) {
        fprintf(stderr, "mr-bench: unknown subcommand '%s'\n", argv[i]);
        usage(stderr);
        return 2;
      }
    }
  }
  FILE *f = stdout;
  if (out != NULL && (f = fopen(out, "w")) == NULL) {
    perror(out);
    return 1;
  }
  /* A GPU listed twice ("0,0") is two logical devices of it: the split
   * bench's multi-device path on a one-GPU machine. */
  mr_pool_opts opts = {.gpus = gpus, .share_gpus = 1, .fake_gpus = fake_gpus,
                       .log = log_line};
  mr_pool *pool;
  mr_err err = {0};
  if (mr_pool_create(&opts, &pool, &err) != 0) {
    fprintf(stderr, "mr-bench: %s\n", err.msg);
    return 1;
  }
  bench_json json = {.f = f};
  bench_ctx ctx = {.pool = pool, .quick = quick, .json = &json, .server = server, .gpus = gpus,
                   .configs = configs, .cases = cases, .rounds = rounds,
                   .sessions = sessions, .fake_gpus = fake_gpus, .gpu_lanes = gpu_lanes};
  int rc = 0;
  json_open(&json, NULL, '{');
  for (int c = 0; c < NCOMMANDS && rc == 0; c++) {
    if (any && !chosen[c])
      continue;
    json_open(&json, commands[c].name, '{');
    rc = commands[c].run(&ctx);
    json_close(&json, '}');
  }
  json_close(&json, '}');
  mr_pool_destroy(pool);
  if (f != stdout)
    fclose(f);
  return rc == 0 ? 0 : 1;
}
