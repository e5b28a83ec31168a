#include "gadget_harness.h"

#include <complex.h>
#include <stdio.h>
#include <string.h>

#include "test_support.h"

static int collect(void *ctx, mr_message *msg) {
  mr_harness *h = ctx;
  if (h->nout == MR_HARNESS_MAX_OUT) {
    mr_message_unref(msg);
    return MR_ELIMIT;
  }
  h->out[h->nout++] = msg;
  return 0;
}

int mr_harness_open(mr_harness *h, const char *gadgets, uint32_t input) {
  return mr_harness_open_gpus(h, gadgets, input, "none");
}

int mr_harness_open_gpus(mr_harness *h, const char *gadgets, uint32_t input, const char *gpus) {
  return mr_harness_open_pool(h, gadgets, input, &(mr_pool_opts){.gpus = gpus});
}

int mr_harness_open_pool(mr_harness *h, const char *gadgets, uint32_t input,
                         const mr_pool_opts *opts) {
  memset(h, 0, sizeof *h);
  mr_err_clear(&h->err);
  h->cfg.name = "test";
  h->cfg.description = "";
  h->cfg.doc = cJSON_Parse(gadgets);
  if (h->cfg.doc == NULL || !cJSON_IsArray(h->cfg.doc))
    return mr_err_set(&h->err, MR_ECONFIG, "harness: gadgets are not a JSON array");
  h->cfg.gadgets = h->cfg.doc;
  mr_pool_opts o = *opts;
  o.cpu_threads = 2;
  int rc = mr_pool_create(&o, &h->pool, &h->err);
  if (rc < 0)
    return rc;
  rc = mr_chain_create(&h->cfg, input, &h->chain, &h->err);
  if (rc < 0)
    return rc;
  mr_chain_set_sink(h->chain, collect, h, NULL);
  return 0;
}

void mr_harness_set_cancel(mr_harness *h, const atomic_int *cancel) {
  mr_chain_set_sink(h->chain, collect, h, cancel);
}

int mr_harness_set_pipelined(mr_harness *h, size_t depth) {
  return mr_chain_set_pipelined(h->chain, depth);
}

int mr_harness_configure(mr_harness *h, const char *header_xml) {
  if (header_xml != NULL) {
    int rc = mr_stream_header_parse(header_xml, strlen(header_xml), &h->hdr, &h->err);
    if (rc < 0)
      return rc;
    h->have_hdr = 1;
    if ((rc = mr_pool_acquire(h->pool, "auto", &h->device, &h->err)) < 0)
      return rc;
  }
  return mr_chain_configure(h->chain, h->have_hdr ? &h->hdr : NULL, h->pool, h->device, &h->err);
}

int mr_harness_push(mr_harness *h, mr_message *msg) { return mr_chain_push(h->chain, msg); }

int mr_harness_flush(mr_harness *h) { return mr_chain_flush(h->chain); }

void mr_harness_close(mr_harness *h) {
  mr_chain_destroy(h->chain);
  if (h->device != NULL)
    mr_pool_release(h->pool, h->device);
  mr_pool_destroy(h->pool);
  if (h->have_hdr)
    mr_stream_header_free(&h->hdr);
  cJSON_Delete(h->cfg.doc);
  for (int i = 0; i < h->nout; i++)
    mr_message_unref(h->out[i]);
  memset(h, 0, sizeof *h);
}

const char *mr_harness_cartesian_header(int nx, int ny, int nz, int rx, int ry, int rz) {
  static _Thread_local char xml[2048]; /* one per thread: clients run in parallel */
  snprintf(xml, sizeof xml,
           "<ismrmrdHeader><encoding>"
           "<encodedSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>%d</z></fieldOfView_mm></encodedSpace>"
           "<reconSpace><matrixSize><x>%d</x><y>%d</y><z>%d</z></matrixSize>"
           "<fieldOfView_mm><x>%d</x><y>%d</y><z>%d</z></fieldOfView_mm></reconSpace>"
           "<encodingLimits><kspace_encoding_step_1><minimum>0</minimum><maximum>%d</maximum>"
           "<center>%d</center></kspace_encoding_step_1>"
           "<kspace_encoding_step_2><minimum>0</minimum><maximum>%d</maximum>"
           "<center>%d</center></kspace_encoding_step_2></encodingLimits>"
           "<trajectory>cartesian</trajectory></encoding></ismrmrdHeader>",
           nx, ny, nz, nx, ny, nz, rx, ry, rz, rx, ry, rz, ny - 1, ny / 2, nz - 1, nz / 2);
  return xml;
}

const char *mr_harness_accelerated_header(int nx, int ny, int accel, const char *mode) {
  static _Thread_local char xml[4096];
  const char *base = mr_harness_cartesian_header(nx, ny, 1, nx, ny, 1);
  const char *end = strstr(base, "</encoding>");
  snprintf(xml, sizeof xml,
           "%.*s<parallelImaging><accelerationFactor><kspace_encoding_step_1>%d"
           "</kspace_encoding_step_1><kspace_encoding_step_2>1</kspace_encoding_step_2>"
           "</accelerationFactor><calibrationMode>%s</calibrationMode></parallelImaging>%s",
           (int)(end - base), base, accel, mode, end);
  return xml;
}

cJSON *mr_harness_installed_config(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/configs/%s.json", mr_test_source_dir(), name);
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  static _Thread_local char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  return cJSON_Parse(text);
}

int mr_harness_have_gpu(void) {
  mr_pool *pool = NULL;
  mr_err err = {0};
  if (mr_pool_create(&(mr_pool_opts){.gpus = "all", .cpu_threads = 2}, &pool, &err) != 0)
    return 0;
  int gpus = mr_pool_gpu_count(pool);
  mr_pool_destroy(pool);
  return gpus > 0;
}

float complex mr_harness_smooth_line(int c, int s, void *arg) {
  int e1 = *(int *)arg;
  return (1.0f + 0.1f * (float)c) * cexpf(I * 0.3f * (float)(s + e1));
}

mr_message *mr_harness_acquisition(int ns, int nch, int e1, int e2, uint64_t flags,
                                   float complex (*value)(int c, int s, void *arg), void *arg) {
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.number_of_samples = (uint16_t)ns;
  h.active_channels = h.available_channels = (uint16_t)nch;
  h.center_sample = (uint16_t)(ns / 2);
  h.idx.kspace_encode_step_1 = (uint16_t)e1;
  h.idx.kspace_encode_step_2 = (uint16_t)e2;
  h.flags = flags;
  h.read_dir[0] = h.phase_dir[1] = h.slice_dir[2] = 1.0f;
  mr_message *m = mr_message_new_acquisition(&h);
  if (m == NULL)
    return NULL;
  for (int c = 0; c < nch; c++)
    for (int i = 0; i < ns; i++)
      m->u.acq.data[c * ns + i] = value != NULL ? value(c, i, arg) : 0;
  return m;
}
