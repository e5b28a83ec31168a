/* The installed Cartesian configs (cartesian, grappa) end to end through
 * the gadget chain, on ISMRMRD phantoms with readout oversampling 2:
 *   - on the CPU, against the same gadgets in the per-line layout (noise
 *     prewhitening and oversampling removal before accumulate, line by
 *     line), the layout the configs had before the per-slice batches; for
 *     grappa also against maps made from every image (how the weighted
 *     combination was before maps were kept per slice), for the first image
 *     of the slice, whose maps are the same;
 *   - with --cuda, the GPU chain against the CPU chain (exit 77 without a
 *     GPU).
 * Images agree to 1e-5 of the largest pixel; the GPU's GRAPPA at R 4 to
 * 3e-4 (see check_config). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <math.h>

#include "dataset_chain.h"
#include "gadget_harness.h"
#include "pool.h"
#include "test_support.h"

#define GENERATOR "ismrmrd_generate_cartesian_shepp_logan"

static int cuda;

/* The gadget list of configs/<name>.json as JSON text (malloc'd). With
 * per_line, noise_adjust and remove_oversampling move before accumulate;
 * maps (may be NULL) sets coil_combine's "maps". */
static char *config_chain(const char *name, int per_line, const char *maps) {
  cJSON *doc = mr_harness_installed_config(name);
  assert_non_null(doc);
  cJSON *gadgets = cJSON_GetObjectItem(doc, "gadgets");
  if (per_line) {
    /* the line gadgets, in their order, ahead of everything */
    cJSON *lines = cJSON_CreateArray();
    for (int i = 0; i < cJSON_GetArraySize(gadgets);) {
      const char *g = cJSON_GetObjectItem(cJSON_GetArrayItem(gadgets, i), "gadget")->valuestring;
      if (strcmp(g, "noise_adjust") == 0 || strcmp(g, "remove_oversampling") == 0)
        cJSON_AddItemToArray(lines, cJSON_DetachItemFromArray(gadgets, i));
      else
        i++;
    }
    assert_true(cJSON_GetArraySize(lines) > 0);
    for (int i = cJSON_GetArraySize(lines) - 1; i >= 0; i--)
      cJSON_InsertItemInArray(gadgets, 0, cJSON_DetachItemFromArray(lines, i));
    cJSON_Delete(lines);
  }
  if (maps != NULL)
    for (int i = 0; i < cJSON_GetArraySize(gadgets); i++) {
      cJSON *g = cJSON_GetArrayItem(gadgets, i);
      if (strcmp(cJSON_GetObjectItem(g, "gadget")->valuestring, "coil_combine") == 0)
        cJSON_AddStringToObject(g, "maps", maps);
    }
  char *out = cJSON_PrintUnformatted(gadgets);
  cJSON_Delete(doc);
  return out;
}

/* The dataset through the chain on a pool of `gpus`. */
static float *reconstruct(const char *h5, const char *chain, const char *gpus, int *count,
                          size_t *pixels) {
  return mr_test_reconstruct(h5, chain, gpus, 0, count, pixels);
}

/* Largest pixel difference over the largest pixel of want. */
static double max_rel_diff(const float *got, const float *want, size_t n) {
  double err = 0, peak = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabsf(got[i] - want[i]), w = fabsf(want[i]);
    err = e > err ? e : err;
    peak = w > peak ? w : peak;
  }
  return err / peak;
}

/* The phantom: 64 x 64, 8 coils, readout oversampling 2 (the generator's
 * default), noise lines; accel > 1 with 16 ACS lines. */
static const char *phantom(const char *dir, const char *name, int accel, int reps) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/%s.h5", dir, name);
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           GENERATOR " -m 64 -c 8 -O 2 -r %d -a %d -w %d -n 0.05 -C -o %s > /dev/null 2>&1", reps,
           accel, accel > 1 ? 16 : 0, path);
  assert_int_equal(system(cmd), 0);
  return path;
}

static void compare(const char *what, const float *got, int ngot, const float *want, int nwant,
                    size_t pixels, int images, double tol) {
  assert_true(ngot >= images && nwant >= images);
  for (int i = 0; i < images; i++) {
    double d = max_rel_diff(got + i * pixels, want + i * pixels, pixels);
    print_message("%s, image %d: %.2e\n", what, i, d);
    assert_true(d <= tol);
  }
}

static void check_config(const char *name, int accel) {
  if (!mr_test_have_tool(GENERATOR)) {
    print_message("skipped: %s is not installed\n", GENERATOR);
    skip();
  }
  const char *dir = mr_test_tmpdir("configs");
  char file[64];
  snprintf(file, sizeof file, "%s_r%d", name, accel);
  const char *h5 = phantom(dir, file, accel, 3);
  int n, nref;
  size_t px, pxref;
  char *chain = config_chain(name, 0, NULL);
  float *img = reconstruct(h5, chain, "none", &n, &px);
  assert_true(n >= 3); /* grappa: the generator shifts the pattern per repetition */
  if (cuda) {
    float *gpu = reconstruct(h5, chain, "all", &nref, &pxref);
    assert_int_equal(nref, n);
    assert_int_equal(pxref, px);
    /* R 4 from 16 ACS lines is ill-conditioned: the GPU's float calibration
     * (blocked Cholesky) and the CPU's LAPACK differ by 1.4e-4 of the peak
     * on the H100; R 2 agrees to 7e-6. */
    compare("GPU against CPU", gpu, nref, img, n, px, n, accel >= 4 ? 3e-4 : 1e-5);
    free(gpu);
  } else {
    char *per_line = config_chain(name, 1, NULL);
    float *ref = reconstruct(h5, per_line, "none", &nref, &pxref);
    assert_int_equal(nref, n);
    assert_int_equal(pxref, px);
    compare("per-slice against per-line", img, n, ref, nref, px, n, 1e-5);
    free(ref);
    free(per_line);
    if (accel > 1) {
      char *before = config_chain(name, 1, "image");
      ref = reconstruct(h5, before, "none", &nref, &pxref);
      compare("maps per slice against maps per image", img, n, ref, nref, px, 1, 1e-5);
      free(ref);
      free(before);
    }
  }
  free(img);
  free(chain);
}

static void cartesian(void **state) {
  (void)state;
  check_config("cartesian", 1);
}

static void grappa(void **state) {
  (void)state;
  check_config("grappa", 2);
}

/* R 4: under half the lines sampled, the CPU crops line by line. */
static void grappa_r4(void **state) {
  (void)state;
  check_config("grappa", 4);
}

int main(int argc, char **argv) {
  cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
  if (cuda && !mr_harness_have_gpu()) {
    fprintf(stderr, "skipped: no usable GPU\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cartesian),
      cmocka_unit_test(grappa),
      cmocka_unit_test(grappa_r4),
  };
  return cmocka_run_group_tests_name(cuda ? "gadgets_configs_cuda" : "gadgets_configs", tests,
                                     NULL, NULL);
}
