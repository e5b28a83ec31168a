#include "dataset_chain.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "dataset.h"
#include "gadget_harness.h"

/* depth 0: a synchronous chain, else pipelined with inboxes of depth. */
static float *reconstruct(const char *h5, const char *chain, const char *gpus, size_t depth,
                          int first_repetition_only, int *count, size_t *pixels) {
  mr_err err = {0};
  mr_dataset *ds;
  if (mr_dataset_open(h5, "dataset", &ds, &err) != 0)
    fail_msg("%s", err.msg);
  mr_harness h;
  if (mr_harness_open_gpus(&h, chain, MR_KIND_BIT(MR_MSG_ACQUISITION), gpus) != 0)
    fail_msg("open: %s", h.err.msg);
  if (depth > 0 && mr_harness_set_pipelined(&h, depth) != 0)
    fail_msg("pipelined: out of memory");
  if (mr_harness_configure(&h, mr_dataset_header(ds)) != 0)
    fail_msg("configure: %s", h.err.msg);
  mr_message *m;
  while (mr_dataset_next(ds, &m, &err) == 0 && m != NULL) {
    if (m->kind != MR_MSG_ACQUISITION ||
        (first_repetition_only && m->u.acq.head.idx.repetition > 0)) {
      mr_message_unref(m);
      continue;
    }
    if (mr_harness_push(&h, m) != 0)
      fail_msg("push: %s", h.err.msg);
  }
  if (mr_harness_flush(&h) != 0)
    fail_msg("flush: %s", h.err.msg);
  *count = 0;
  float *images = NULL;
  for (int i = 0; i < h.nout; i++) {
    if (h.out[i]->kind != MR_MSG_IMAGE)
      continue;
    const mr_image *im = &h.out[i]->u.image;
    *pixels = (size_t)im->head.matrix_size[0] * im->head.matrix_size[1] * im->head.matrix_size[2];
    images = realloc(images, (*count + 1) * *pixels * sizeof *images);
    memcpy(images + *count * *pixels, im->data, *pixels * sizeof *images);
    (*count)++;
  }
  mr_harness_close(&h);
  mr_dataset_close(ds);
  return images;
}

float *mr_test_reconstruct(const char *h5, const char *chain, const char *gpus,
                           int first_repetition_only, int *count, size_t *pixels) {
  return reconstruct(h5, chain, gpus, 0, first_repetition_only, count, pixels);
}

float *mr_test_reconstruct_pipelined(const char *h5, const char *chain, const char *gpus,
                                     size_t depth, int *count, size_t *pixels) {
  return reconstruct(h5, chain, gpus, depth, 0, count, pixels);
}

char *mr_test_config_chain(const char *name, const char *gadget, const char *with) {
  cJSON *doc = mr_harness_installed_config(name), *over = NULL;
  assert_non_null(doc);
  if (with != NULL)
    assert_non_null(over = cJSON_Parse(with));
  cJSON *gadgets = cJSON_GetObjectItem(doc, "gadgets");
  for (int i = 0; over != NULL && i < cJSON_GetArraySize(gadgets); i++) {
    cJSON *g = cJSON_GetArrayItem(gadgets, i);
    if (strcmp(cJSON_GetObjectItem(g, "gadget")->valuestring, gadget) != 0)
      continue;
    for (cJSON *o = over->child; o != NULL; o = o->next) {
      cJSON_DeleteItemFromObject(g, o->string);
      cJSON_AddItemToObject(g, o->string, cJSON_Duplicate(o, 1));
    }
  }
  cJSON_Delete(over);
  char *chain = cJSON_PrintUnformatted(gadgets);
  cJSON_Delete(doc);
  return chain;
}
