#include "test_support.h"

#include "encode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

double mr_test_rel_error_f(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

double mr_test_rel_error_c(const float complex *a, const float complex *b, size_t n) {
  return mr_test_rel_error_f((const float *)a, (const float *)b, 2 * n);
}

double mr_test_nrmse_scaled(const float *a, const float *b, size_t n) {
  double ab = 0, aa = 0;
  for (size_t i = 0; i < n; i++) {
    ab += (double)a[i] * b[i];
    aa += (double)a[i] * a[i];
  }
  double s = aa > 0 ? ab / aa : 0, num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = s * a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* One axis at a time; index i of a centered axis stands for i - n/2. */
static void dft_axis(double complex *a, size_t n, size_t stride, size_t count, size_t block,
                     int sign) {
  double complex *tmp = malloc(n * sizeof *tmp);
  for (size_t outer = 0; outer < count; outer++) {
    for (size_t inner = 0; inner < block; inner++) {
      double complex *base = a + outer * n * stride + inner;
      for (size_t k = 0; k < n; k++) {
        double complex sum = 0;
        for (size_t x = 0; x < n; x++) {
          double ph = sign * 2.0 * M_PI * ((double)x - (double)(n / 2)) *
                      ((double)k - (double)(n / 2)) / (double)n;
          sum += base[x * stride] * cexp(I * ph);
        }
        tmp[k] = sum / sqrt((double)n);
      }
      for (size_t k = 0; k < n; k++)
        base[k * stride] = tmp[k];
    }
  }
  free(tmp);
}

void mr_test_centered_dft(const double complex *in, double complex *out, size_t nx, size_t ny,
                          size_t nz, int sign) {
  memcpy(out, in, nx * ny * nz * sizeof *out);
  dft_axis(out, nx, 1, ny * nz, 1, sign);
  dft_axis(out, ny, nx, nz, nx, sign);
  dft_axis(out, nz, nx * ny, 1, nx * ny, sign);
}

uint8_t *mr_test_encode_all(struct mr_message *const *msgs, int n, size_t *len, size_t *ends) {
  uint8_t *all = NULL;
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    uint8_t *b;
    size_t l;
    if (mr_encode_flat(msgs[i], &b, &l) != 0 || (all = realloc(all, total + l)) == NULL) {
      fprintf(stderr, "mr_test_encode_all: message %d does not encode\n", i);
      abort();
    }
    memcpy(all + total, b, l);
    total += l;
    if (ends != NULL)
      ends[i] = total;
    free(b);
  }
  *len = total;
  return all;
}

const char *mr_test_source_dir(void) {
  const char *s = getenv("MR_SOURCE_DIR");
  return s != NULL ? s : ".";
}

const char *mr_test_binary_dir(void) {
  const char *s = getenv("MR_BINARY_DIR");
  return s != NULL ? s : "build";
}

/* The directories mr_test_tmpdir made, removed when the process that made
 * them exits (a forked child that calls exit() leaves them alone). */
#define TMPDIRS_MAX 64
static char made[TMPDIRS_MAX][256];
static int nmade;
static pid_t made_by;

static void remove_made(void) {
  if (getpid() != made_by || getenv("MR_TEST_KEEP_TMP") != NULL)
    return;
  for (int i = 0; i < nmade; i++) {
    const char *argv[] = {"rm", "-rf", made[i], NULL};
    (void)mr_test_run(argv, NULL, NULL, 0, NULL, 0);
  }
}

const char *mr_test_tmpdir(const char *prefix) {
  static char path[256];
  const char *base = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/%s-XXXXXX", base != NULL ? base : "/tmp", prefix);
  if (mkdtemp(path) == NULL) {
    perror("mkdtemp");
    abort();
  }
  if (nmade == 0) {
    made_by = getpid();
    atexit(remove_made);
  }
  if (nmade < TMPDIRS_MAX)
    snprintf(made[nmade++], sizeof made[0], "%s", path);
  return path;
}

void mr_test_remove_tree(const char *path) {
  const char *argv[] = {"rm", "-rf", path, NULL};
  if (mr_test_run(argv, NULL, NULL, 0, NULL, 0) != 0) {
    fprintf(stderr, "cannot remove %s\n", path);
    abort();
  }
}

int mr_test_run(const char *const *argv, const char *capture_dir, char *out, size_t out_size,
                char *err, size_t err_size) {
  char paths[2][512];
  if (capture_dir != NULL) {
    snprintf(paths[0], sizeof paths[0], "%s/stdout", capture_dir);
    snprintf(paths[1], sizeof paths[1], "%s/stderr", capture_dir);
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (capture_dir != NULL) {
      dup2(open(paths[0], O_WRONLY | O_CREAT | O_TRUNC, 0644), 1);
      dup2(open(paths[1], O_WRONLY | O_CREAT | O_TRUNC, 0644), 2);
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  char *bufs[2] = {out, err};
  size_t sizes[2] = {out_size, err_size};
  for (int i = 0; capture_dir != NULL && i < 2; i++) {
    FILE *f = fopen(paths[i], "r");
    size_t n = f != NULL ? fread(bufs[i], 1, sizes[i] - 1, f) : 0;
    bufs[i][n] = '\0';
    if (f != NULL)
      fclose(f);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int mr_test_have_tool(const char *tool) {
  const char *path = getenv("PATH");
  if (path == NULL)
    return 0;
  char *copy = strdup(path), *save = NULL;
  int found = 0;
  for (char *dir = strtok_r(copy, ":", &save); dir != NULL && !found;
       dir = strtok_r(NULL, ":", &save)) {
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", dir, tool);
    found = access(full, X_OK) == 0;
  }
  free(copy);
  return found;
}

mr_message *mr_test_image(uint16_t data_type, uint16_t nx, uint16_t ny, const char *attributes) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = data_type;
  h.matrix_size[0] = nx;
  h.matrix_size[1] = ny;
  h.matrix_size[2] = h.channels = 1;
  return mr_message_new_image(&h, attributes);
}

void mr_test_wrapped_image_header(ISMRMRD_ImageHeader *h) {
  ismrmrd_init_image_header(h);
  h->data_type = ISMRMRD_FLOAT;
  h->matrix_size[0] = 33657;
  h->matrix_size[1] = 54192;
  h->matrix_size[2] = 45917;
  h->channels = 55065;
}

void mr_test_one_cpu(cpu_set_t *all, cpu_set_t *one) {
  if (sched_getaffinity(0, sizeof *all, all) != 0) {
    fprintf(stderr, "sched_getaffinity failed\n");
    abort();
  }
  int first = 0;
  while (!CPU_ISSET(first, all))
    first++;
  CPU_ZERO(one);
  CPU_SET(first, one);
}
