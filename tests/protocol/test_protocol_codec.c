/* The wire codec: round trips of every message type, byte layouts checked
 * against hand-built buffers, streams split at every byte boundary, and a
 * table of malformed inputs each giving its specific error. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decode.h"
#include "encode.h"
#include "error.h"
#include "payload.h"
#include "test_support.h"

/* ---- a decoder that records what it sees ---- */

#define MAX_SEEN 64

typedef struct seen {
  mr_message *msgs[MAX_SEEN];
  int n;
  int codes[MAX_SEEN];
  char texts[MAX_SEEN][256];
  int nerr;
} seen;

static int on_msg(void *ctx, mr_message *m) {
  seen *s = ctx;
  assert_true(s->n < MAX_SEEN);
  s->msgs[s->n++] = m;
  return 0;
}

static void on_err(void *ctx, int code, const char *text) {
  seen *s = ctx;
  assert_true(s->nerr < MAX_SEEN);
  s->codes[s->nerr] = code;
  snprintf(s->texts[s->nerr], sizeof s->texts[0], "%s", text);
  s->nerr++;
}

static void seen_clear(seen *s) {
  for (int i = 0; i < s->n; i++)
    mr_message_unref(s->msgs[i]);
  memset(s, 0, sizeof *s);
}

static mr_decoder *decoder(seen *s, const mr_limits *lim) {
  mr_decoder_callbacks cb = {on_msg, on_err, s};
  mr_decoder *d = NULL;
  assert_int_equal(mr_decoder_create(lim, &cb, &d), 0);
  return d;
}

/* ---- sample messages ---- */

static mr_message *sample_acquisition(int traj_dims, int channels, int samples) {
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.number_of_samples = (uint16_t)samples;
  h.active_channels = (uint16_t)channels;
  h.available_channels = (uint16_t)channels;
  h.trajectory_dimensions = (uint16_t)traj_dims;
  h.scan_counter = 42;
  h.idx.kspace_encode_step_1 = 17;
  h.flags = MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE);
  h.read_dir[0] = 1.0f;
  mr_message *m = mr_message_new_acquisition(&h);
  assert_non_null(m);
  for (int i = 0; i < traj_dims * samples; i++)
    m->u.acq.traj[i] = (float)i * 0.25f - 1.0f;
  for (int i = 0; i < channels * samples; i++)
    m->u.acq.data[i] = (float)i + 0.5f * I * (float)(-i);
  return m;
}

static mr_message *sample_image(uint16_t data_type, const char *attr) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = data_type;
  h.matrix_size[0] = 4;
  h.matrix_size[1] = 3;
  h.matrix_size[2] = 1;
  h.channels = 2;
  h.image_series_index = 5;
  h.image_index = 9;
  mr_message *m = mr_message_new_image(&h, attr);
  assert_non_null(m);
  uint8_t *p = m->u.image.data;
  for (size_t i = 0; i < m->u.image.data_bytes; i++)
    p[i] = (uint8_t)(i * 7 + 3);
  return m;
}

static mr_message *sample_waveform(void) {
  ISMRMRD_WaveformHeader h;
  memset(&h, 0, sizeof h);
  h.version = 1;
  h.flags = 3;
  h.measurement_uid = 11;
  h.scan_counter = 12;
  h.time_stamp = 13;
  h.number_of_samples = 5;
  h.channels = 2;
  h.sample_time_us = 2.5f;
  h.waveform_id = 7;
  mr_message *m = mr_message_new_waveform(&h);
  assert_non_null(m);
  for (int i = 0; i < 10; i++)
    m->u.waveform.data[i] = 1000u + (uint32_t)i;
  return m;
}

/* One of every wire message. */
static int sample_session(mr_message **out) {
  int n = 0;
  out[n++] = mr_message_new_config_file("default.xml");
  out[n++] = mr_message_new_text(MR_MSG_CONFIG_SCRIPT, "{\"name\":\"x\"}", 12);
  out[n++] = mr_message_new_text(MR_MSG_HEADER, "<ismrmrdHeader/>", 16);
  out[n++] = mr_message_new_query(MR_MSG_QUERY, 99, "gadgetron::version", 18);
  out[n++] = mr_message_new_text(MR_MSG_TEXT, "hello", 5);
  out[n++] = sample_acquisition(0, 3, 8);
  out[n++] = sample_acquisition(2, 2, 5);
  out[n++] = sample_waveform();
  out[n++] = sample_image(ISMRMRD_FLOAT, "<ismrmrdMeta/>");
  out[n++] = sample_image(ISMRMRD_CXFLOAT, NULL);
  out[n++] = mr_message_new_query(MR_MSG_RESPONSE, 99, "4.7.2", 5);
  out[n++] = mr_message_new_text(MR_MSG_DEPENDENCY_QUERY, "<ismrmrdMeta/>", 14);
  uint8_t *file = malloc(5);
  memcpy(file, "DICM!", 5);
  out[n++] = mr_message_new_dicom(file, 5, "image_1_000001", "<ismrmrdMeta/>");
  out[n++] = mr_message_new_dicom(malloc(1), 0, NULL, NULL);
  out[n++] = mr_message_new(MR_MSG_CLOSE);
  for (int i = 0; i < n; i++)
    assert_non_null(out[i]);
  return n;
}

static void assert_same(const mr_message *a, const mr_message *b) {
  assert_int_equal(a->kind, b->kind);
  switch (a->kind) {
  case MR_MSG_CONFIG_FILE:
    assert_string_equal(a->u.config_name, b->u.config_name);
    break;
  case MR_MSG_CONFIG_SCRIPT:
  case MR_MSG_HEADER:
  case MR_MSG_TEXT:
  case MR_MSG_DEPENDENCY_QUERY:
    assert_int_equal(a->text_len, b->text_len);
    assert_string_equal(a->u.text, b->u.text);
    break;
  case MR_MSG_QUERY:
  case MR_MSG_RESPONSE:
    assert_int_equal(a->u.query.correlation_id, b->u.query.correlation_id);
    assert_string_equal(a->u.query.text, b->u.query.text);
    break;
  case MR_MSG_ACQUISITION: {
    assert_memory_equal(&a->u.acq.head, &b->u.acq.head, sizeof a->u.acq.head);
    size_t nt = mr_acquisition_traj_count(&a->u.acq.head);
    size_t nd = mr_acquisition_data_count(&a->u.acq.head);
    if (nt > 0)
      assert_memory_equal(a->u.acq.traj, b->u.acq.traj, nt * sizeof(float));
    assert_memory_equal(a->u.acq.data, b->u.acq.data, nd * 8);
    break;
  }
  case MR_MSG_IMAGE: {
    ISMRMRD_ImageHeader ha = a->u.image.head, hb = b->u.image.head;
    ha.attribute_string_len = hb.attribute_string_len = 0;
    assert_memory_equal(&ha, &hb, sizeof ha);
    assert_int_equal(a->u.image.data_bytes, b->u.image.data_bytes);
    assert_memory_equal(a->u.image.data, b->u.image.data, a->u.image.data_bytes);
    const char *aa = a->u.image.attributes ? a->u.image.attributes : "";
    const char *ab = b->u.image.attributes ? b->u.image.attributes : "";
    assert_string_equal(aa, ab);
    break;
  }
  case MR_MSG_DICOM:
    assert_int_equal(a->u.dicom.nbytes, b->u.dicom.nbytes);
    assert_memory_equal(a->u.dicom.bytes, b->u.dicom.bytes, a->u.dicom.nbytes);
    assert_string_equal(a->u.dicom.name, b->u.dicom.name);
    assert_string_equal(a->u.dicom.attributes, b->u.dicom.attributes);
    break;
  case MR_MSG_WAVEFORM:
    assert_int_equal(a->u.waveform.head.waveform_id, b->u.waveform.head.waveform_id);
    assert_int_equal(a->u.waveform.head.number_of_samples, b->u.waveform.head.number_of_samples);
    assert_int_equal(a->u.waveform.head.channels, b->u.waveform.head.channels);
    assert_int_equal(a->u.waveform.head.flags, b->u.waveform.head.flags);
    assert_true(a->u.waveform.head.sample_time_us == b->u.waveform.head.sample_time_us);
    assert_memory_equal(a->u.waveform.data, b->u.waveform.data,
                        mr_waveform_data_count(&a->u.waveform.head) * 4);
    break;
  default:
    break;
  }
}

/* ---- round trip ---- */

/* A receiver that puts every body byte it can in place (as the server's
 * connection does), in chunks of `chunk` bytes, and feeds the rest. */
static void receive_in_place(mr_decoder *d, const uint8_t *bytes, size_t len, size_t chunk) {
  size_t at = 0;
  while (at < len) {
    void *dst;
    size_t room = mr_decoder_body_room(d, &dst), n = len - at < chunk ? len - at : chunk;
    if (room > 0) {
      assert_non_null(dst);
      if (n > room)
        n = room;
      memcpy(dst, bytes + at, n);
      assert_int_equal(mr_decoder_received(d, n), 0);
    } else {
      assert_null(dst);
      assert_int_equal(mr_decoder_feed(d, bytes + at, n), 0);
    }
    at += n;
  }
}

/* Decodes the encoded session (fed whole, or received in place in chunks of
 * in_place_chunk bytes when non-zero) and checks it gives back msgs. */
static void assert_decodes_to(mr_message **msgs, int n, const uint8_t *bytes, size_t len,
                              size_t in_place_chunk) {
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  if (in_place_chunk == 0)
    assert_int_equal(mr_decoder_feed(d, bytes, len), 0);
  else
    receive_in_place(d, bytes, len, in_place_chunk);
  assert_int_equal(s.nerr, 0);
  assert_int_equal(s.n, n);
  for (int i = 0; i < n; i++)
    assert_same(msgs[i], s.msgs[i]);
  assert_true(mr_decoder_idle(d));
  assert_int_equal(mr_decoder_offset(d), len);
  mr_decoder_destroy(d);
  seen_clear(&s);
}

static void test_round_trip_every_type(void **state) {
  (void)state;
  mr_message *msgs[16];
  int n = sample_session(msgs);
  size_t len;
  uint8_t *bytes = mr_test_encode_all(msgs, n, &len, NULL);
  assert_decodes_to(msgs, n, bytes, len, 0);
  for (int i = 0; i < n; i++)
    mr_message_unref(msgs[i]);
  free(bytes);
}

static void test_split_at_every_byte(void **state) {
  (void)state;
  mr_message *msgs[16];
  int n = sample_session(msgs);
  size_t len;
  uint8_t *bytes = mr_test_encode_all(msgs, n, &len, NULL);
  for (size_t cut = 0; cut <= len; cut++) {
    seen s = {0};
    mr_decoder *d = decoder(&s, NULL);
    assert_int_equal(mr_decoder_feed(d, bytes, cut), 0);
    assert_int_equal(mr_decoder_feed(d, bytes + cut, len - cut), 0);
    assert_int_equal(s.n, n);
    for (int i = 0; i < n; i++)
      assert_same(msgs[i], s.msgs[i]);
    mr_decoder_destroy(d);
    seen_clear(&s);
  }
  /* And one byte at a time. */
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  for (size_t i = 0; i < len; i++) {
    assert_int_equal(mr_decoder_feed(d, bytes + i, 1), 0);
    if (i + 1 < len)
      assert_true(s.n < n);
  }
  assert_int_equal(s.n, n);
  for (int i = 0; i < n; i++)
    assert_same(msgs[i], s.msgs[i]);
  mr_decoder_destroy(d);
  seen_clear(&s);
  for (int i = 0; i < n; i++)
    mr_message_unref(msgs[i]);
  free(bytes);
}

static void test_bodies_received_in_place(void **state) {
  (void)state;
  mr_message *msgs[16];
  int n = sample_session(msgs);
  size_t len;
  uint8_t *bytes = mr_test_encode_all(msgs, n, &len, NULL);
  size_t chunks[] = {1, 3, 7, 64, 4096};
  for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++)
    assert_decodes_to(msgs, n, bytes, len, chunks[c]);
  for (int i = 0; i < n; i++)
    mr_message_unref(msgs[i]);
  free(bytes);
}

static void test_received_outside_a_body_is_refused(void **state) {
  (void)state;
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  void *dst;
  assert_int_equal(mr_decoder_body_room(d, &dst), 0); /* between messages */
  assert_null(dst);
  assert_int_equal(mr_decoder_received(d, 0), 0);
  assert_int_equal(mr_decoder_received(d, 5), MR_EINVAL);
  assert_int_equal(mr_decoder_feed(d, "\x01\x00", 2), MR_EINVAL); /* and it stays failed */
  mr_decoder_destroy(d);
  seen_clear(&s);
}

/* ---- byte layouts ---- */

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static void check_encoding(const mr_message *m, const uint8_t *want, size_t want_len) {
  uint8_t *b;
  size_t l;
  assert_int_equal(mr_encode_flat(m, &b, &l), 0);
  assert_int_equal(l, want_len);
  assert_memory_equal(b, want, want_len);
  free(b);
}

static void test_layout_small_messages(void **state) {
  (void)state;
  uint8_t want[2 + 1024];
  /* CONFIG_FILE: id 1, 1024 bytes NUL padded. */
  memset(want, 0, sizeof want);
  put16(want, 1);
  memcpy(want + 2, "default.xml", 11);
  mr_message *m = mr_message_new_config_file("default.xml");
  check_encoding(m, want, 2 + 1024);
  mr_message_unref(m);
  /* TEXT: id 5, u32 length, no NUL. */
  put16(want, 5);
  put32(want + 2, 3);
  memcpy(want + 6, "abc", 3);
  m = mr_message_new_text(MR_MSG_TEXT, "abc", 3);
  check_encoding(m, want, 9);
  mr_message_unref(m);
  /* QUERY: id 6, u64 reserved 0, u64 correlation, u64 length, text. */
  put16(want, 6);
  put64(want + 2, 0);
  put64(want + 10, 0x0102030405060708ull);
  put64(want + 18, 2);
  memcpy(want + 26, "k1", 2);
  m = mr_message_new_query(MR_MSG_QUERY, 0x0102030405060708ull, "k1", 2);
  check_encoding(m, want, 28);
  mr_message_unref(m);
  /* RESPONSE: id 7, u64 correlation, u64 length, text. */
  put16(want, 7);
  put64(want + 2, 77);
  put64(want + 10, 1);
  want[18] = 'y';
  m = mr_message_new_query(MR_MSG_RESPONSE, 77, "y", 1);
  check_encoding(m, want, 19);
  mr_message_unref(m);
  /* DEPENDENCY_QUERY: id 1019, u64 length, meta XML. */
  put16(want, 1019);
  put64(want + 2, 2);
  memcpy(want + 10, "<x", 2);
  m = mr_message_new_text(MR_MSG_DEPENDENCY_QUERY, "<x", 2);
  check_encoding(m, want, 12);
  mr_message_unref(m);
  /* DICOM_WITHNAME: id 1018, u32 size, the file, u64 name length, name,
   * u64 meta length, meta (as Gadgetron's DICOM writer). */
  put16(want, 1018);
  put32(want + 2, 3);
  memcpy(want + 6, "abc", 3);
  put64(want + 9, 2);
  memcpy(want + 17, "nm", 2);
  put64(want + 19, 1);
  want[27] = 'x';
  uint8_t *file = malloc(3);
  memcpy(file, "abc", 3);
  m = mr_message_new_dicom(file, 3, "nm", "x");
  check_encoding(m, want, 28);
  mr_message_unref(m);
  /* CLOSE: the id alone. */
  put16(want, 4);
  m = mr_message_new(MR_MSG_CLOSE);
  check_encoding(m, want, 2);
  mr_message_unref(m);
}

static void test_layout_acquisition(void **state) {
  (void)state;
  mr_message *m = sample_acquisition(2, 2, 3);
  size_t n = 2 + 340 + 2 * 3 * 4 + 2 * 3 * 8;
  uint8_t *want = calloc(1, n);
  put16(want, 1008);
  memcpy(want + 2, &m->u.acq.head, 340);
  /* Spot-check the packed header: flags at 2, samples at 34, channels at
   * 38 (u16 version, u64 flags, u32 uid, counter, stamp, 3 x u32 stamps). */
  assert_int_equal(offsetof(ISMRMRD_AcquisitionHeader, number_of_samples), 34);
  assert_int_equal(want[2 + 34], 3);
  assert_int_equal(want[2 + 38], 2);
  assert_int_equal(want[2 + 2 + 0], (uint8_t)MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE));
  memcpy(want + 342, m->u.acq.traj, 24);
  memcpy(want + 366, m->u.acq.data, 48);
  check_encoding(m, want, n);
  free(want);
  mr_message_unref(m);
}

static void test_layout_image_counts_trailing_nul(void **state) {
  (void)state;
  mr_message *m = sample_image(ISMRMRD_USHORT, "<a/>");
  size_t attr = 5; /* "<a/>" and its NUL, as Gadgetron sends */
  size_t n = 2 + 198 + 8 + attr + m->u.image.data_bytes;
  uint8_t *want = calloc(1, n);
  put16(want, 1022);
  ISMRMRD_ImageHeader h = m->u.image.head;
  h.attribute_string_len = (uint32_t)attr;
  memcpy(want + 2, &h, 198);
  put64(want + 200, attr);
  memcpy(want + 208, "<a/>", 5);
  memcpy(want + 213, m->u.image.data, m->u.image.data_bytes);
  check_encoding(m, want, n);
  free(want);
  mr_message_unref(m);
}

static void test_layout_waveform_is_naturally_aligned(void **state) {
  (void)state;
  mr_message *m = sample_waveform();
  uint8_t want[2 + 40 + 40];
  memset(want, 0, sizeof want);
  put16(want, 1026);
  uint8_t *h = want + 2;
  put16(h + 0, 1);    /* version, then 6 pad bytes */
  put64(h + 8, 3);    /* flags */
  put32(h + 16, 11);  /* measurement_uid */
  put32(h + 20, 12);  /* scan_counter */
  put32(h + 24, 13);  /* time_stamp */
  put16(h + 28, 5);   /* number_of_samples */
  put16(h + 30, 2);   /* channels */
  float st = 2.5f;
  memcpy(h + 32, &st, 4);
  put16(h + 36, 7);   /* waveform_id, then 2 pad bytes */
  for (int i = 0; i < 10; i++)
    put32(want + 42 + 4 * i, 1000u + (uint32_t)i);
  check_encoding(m, want, sizeof want);
  mr_message_unref(m);
}

/* ---- decoding details ---- */

static void test_trailing_nuls_are_stripped(void **state) {
  (void)state;
  /* Python clients send a NUL after CONFIG_SCRIPT, HEADER and TEXT. */
  uint8_t b[32];
  put16(b, 5);
  put32(b + 2, 4);
  memcpy(b + 6, "abc\0", 4);
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  assert_int_equal(mr_decoder_feed(d, b, 10), 0);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.msgs[0]->text_len, 3);
  assert_string_equal(s.msgs[0]->u.text, "abc");
  mr_decoder_destroy(d);
  seen_clear(&s);
}

static void test_config_name_fills_all_1024_bytes(void **state) {
  (void)state;
  uint8_t b[2 + 1024];
  put16(b, 1);
  memset(b + 2, 'a', 1024);
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  assert_int_equal(mr_decoder_feed(d, b, sizeof b), 0);
  assert_int_equal(s.n, 1);
  assert_int_equal(strlen(s.msgs[0]->u.config_name), 1024);
  mr_decoder_destroy(d);
  seen_clear(&s);
}

static void test_compressed_acquisition_is_carried(void **state) {
  (void)state;
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.number_of_samples = 4;
  h.active_channels = 2;
  h.trajectory_dimensions = 1;
  h.flags = MR_ACQ_COMPRESSED;
  uint8_t b[2 + 340 + 16 + 4 + 3];
  put16(b, 1008);
  memcpy(b + 2, &h, 340);
  memset(b + 342, 0, 16);
  put32(b + 358, 3);
  memcpy(b + 362, "xyz", 3);
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  assert_int_equal(mr_decoder_feed(d, b, sizeof b), 0);
  assert_int_equal(s.n, 1);
  assert_int_equal(s.msgs[0]->u.acq.compressed_bytes, 3);
  assert_memory_equal(s.msgs[0]->u.acq.compressed, "xyz", 3);
  assert_null(s.msgs[0]->u.acq.data);
  assert_int_equal(s.msgs[0]->u.acq.finite, 0); /* looked at once decompressed */
  assert_int_equal(s.msgs[0]->u.acq.head.active_channels, 2);
  mr_decoder_destroy(d);
  seen_clear(&s);
}

/* mr_acquisition_finite finds a NaN or infinity anywhere (in a block of
 * the vectorised scan or its tail, in the samples or the trajectory) and
 * passes every finite value (largest, denormal, negative zero); the
 * decoder says which as the body arrives, and leaves a compressed one to
 * be looked at after its decompression. */
static void test_acquisition_finite(void **state) {
  (void)state;
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.number_of_samples = 75; /* 2 x 3 x 75 floats: two blocks of 64 and a tail */
  h.active_channels = 3;
  h.trajectory_dimensions = 2;
  mr_message *m = mr_message_new_acquisition(&h);
  assert_non_null(m);
  mr_acquisition *a = &m->u.acq;
  size_t nf = 2 * mr_acquisition_data_count(&h), nt = mr_acquisition_traj_count(&h);
  float *f = (float *)a->data;
  static const float finite[] = {FLT_MAX, -FLT_MAX, FLT_MIN / 8, -0.0f, 1.0f};
  for (size_t i = 0; i < nf; i++)
    f[i] = finite[i % 5];
  for (size_t i = 0; i < nt; i++)
    a->traj[i] = finite[(i + 2) % 5];
  assert_true(mr_acquisition_finite(a));
  static const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
  const size_t at[] = {0, 63, 64, 127, 128, 300, 449};
  for (size_t b = 0; b < 4; b++) {
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
      float keep = f[at[i]];
      f[at[i]] = bad[b];
      assert_false(mr_acquisition_finite(a));
      f[at[i]] = keep;
    }
    float keep = a->traj[nt - 1];
    a->traj[nt - 1] = bad[b];
    assert_false(mr_acquisition_finite(a));
    a->traj[nt - 1] = keep;
  }
  assert_true(mr_acquisition_finite(a));

  /* Decoded: 1 for this one, -1 with a NaN in the last sample. */
  for (int with_nan = 0; with_nan <= 1; with_nan++) {
    if (with_nan)
      f[nf - 1] = NAN;
    size_t len;
    uint8_t *bytes = mr_test_encode_all(&m, 1, &len, NULL);
    seen s = {0};
    mr_decoder *d = decoder(&s, NULL);
    receive_in_place(d, bytes, len, 1000);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.msgs[0]->u.acq.finite, with_nan ? -1 : 1);
    mr_decoder_destroy(d);
    seen_clear(&s);
    free(bytes);
  }
  mr_message_unref(m);
}

/* What protocol/encode.c writes for a compressed acquisition reads back
 * as the same header, trajectory and block. */
static void test_compressed_acquisition_round_trip(void **state) {
  (void)state;
  mr_message *m = sample_acquisition(2, 3, 8);
  m->u.acq.head.flags |= MR_ACQ_COMPRESSED;
  m->u.acq.compressed = malloc(5);
  memcpy(m->u.acq.compressed, "abcde", 5);
  m->u.acq.compressed_bytes = 5;
  mr_encoded e;
  assert_int_equal(mr_encode(m, &e), 0);
  assert_int_equal(e.total, 2 + 340 + 2 * 8 * 4 + 4 + 5);
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  for (int i = 0; i < e.npieces; i++)
    assert_int_equal(mr_decoder_feed(d, e.piece[i].base, e.piece[i].len), 0);
  assert_int_equal(s.n, 1);
  mr_acquisition *a = &s.msgs[0]->u.acq;
  assert_memory_equal(&a->head, &m->u.acq.head, 340);
  assert_memory_equal(a->traj, m->u.acq.traj, 2 * 8 * 4);
  assert_int_equal(a->compressed_bytes, 5);
  assert_memory_equal(a->compressed, "abcde", 5);
  mr_decoder_destroy(d);
  seen_clear(&s);
  mr_message_unref(m);
}

/* ---- malformed inputs ---- */

typedef struct bad_case {
  const char *name;
  uint8_t bytes[2 + 1024 + 64];
  size_t len;
  int fatal;        /* feed fails (framing lost) with this code, or 0 */
  int rejected;     /* on_error gets this code, or 0 */
  const char *text; /* substring of the error text */
} bad_case;

static mr_limits small_limits(void) {
  mr_limits l = mr_limits_default;
  l.text_bytes = 8;
  l.header_bytes = 8;
  l.config_script_bytes = 8;
  l.query_bytes = 8;
  l.channels = 4;
  l.samples = 16;
  l.acquisition_bytes = 256;
  l.image_bytes = 64;
  l.attribute_bytes = 8;
  l.waveform_bytes = 16;
  l.connection_bytes = 1 << 20;
  return l;
}

static size_t acq_bytes(uint8_t *b, int dims, int channels, int samples, uint64_t flags) {
  ISMRMRD_AcquisitionHeader h;
  ismrmrd_init_acquisition_header(&h);
  h.trajectory_dimensions = (uint16_t)dims;
  h.active_channels = (uint16_t)channels;
  h.number_of_samples = (uint16_t)samples;
  h.flags = flags;
  h.scan_counter = 5;
  put16(b, 1008);
  memcpy(b + 2, &h, 340);
  return 342;
}

static size_t image_bytes(uint8_t *b, uint16_t type, uint32_t attr_field, uint64_t attr_len,
                          uint16_t nx) {
  ISMRMRD_ImageHeader h;
  ismrmrd_init_image_header(&h);
  h.data_type = type;
  h.matrix_size[0] = nx;
  h.matrix_size[1] = h.matrix_size[2] = h.channels = 1;
  h.attribute_string_len = attr_field;
  put16(b, 1022);
  memcpy(b + 2, &h, 198);
  put64(b + 200, attr_len);
  return 208;
}

static void test_malformed_table(void **state) {
  (void)state;
  mr_limits lim = small_limits();
  static bad_case cases[24];
  int n = 0;
  bad_case *c;

  c = &cases[n++];
  c->name = "unknown id";
  put16(c->bytes, 999);
  c->len = 2;
  c->fatal = MR_EPROTO;
  c->text = "unknown message id 999";

  c = &cases[n++];
  c->name = "internal Gadgetron id 8";
  put16(c->bytes, 8);
  c->len = 2;
  c->fatal = MR_EPROTO;
  c->text = "unknown message id 8";

  c = &cases[n++];
  c->name = "TEXT over its limit";
  put16(c->bytes, 5);
  put32(c->bytes + 2, 9);
  memcpy(c->bytes + 6, "123456789", 9);
  c->len = 15;
  c->rejected = MR_ELIMIT;
  c->text = "TEXT of 9 bytes is over the limit text_bytes = 8";

  c = &cases[n++];
  c->name = "HEADER over its limit";
  put16(c->bytes, 3);
  put32(c->bytes + 2, 100);
  memset(c->bytes + 6, 'x', 100);
  c->len = 106;
  c->rejected = MR_ELIMIT;
  c->text = "HEADER of 100 bytes is over the limit header_bytes = 8";

  c = &cases[n++];
  c->name = "CONFIG_SCRIPT over its limit";
  put16(c->bytes, 2);
  put32(c->bytes + 2, 9);
  memset(c->bytes + 6, '{', 9);
  c->len = 15;
  c->rejected = MR_ELIMIT;
  c->text = "CONFIG_SCRIPT of 9 bytes is over the limit config_script_bytes = 8";

  c = &cases[n++];
  c->name = "QUERY over its limit";
  put16(c->bytes, 6);
  put64(c->bytes + 10, 3);
  put64(c->bytes + 18, 20);
  memset(c->bytes + 26, 'q', 20);
  c->len = 46;
  c->rejected = MR_ELIMIT;
  c->text = "QUERY of 20 bytes is over the limit query_bytes = 8";

  c = &cases[n++];
  c->name = "acquisition bytes over limit";
  c->len = acq_bytes(c->bytes, 0, 4, 16, 0);
  c->len += 4 * 16 * 8;
  c->rejected = MR_ELIMIT;
  c->text = "size in bytes 512 is over the limit acquisition_bytes = 256";

  c = &cases[n++];
  c->name = "compressed acquisition over limit once decompressed";
  c->len = acq_bytes(c->bytes, 0, 4, 16, MR_ACQ_COMPRESSED);
  put32(c->bytes + c->len, 4);
  c->len += 8;
  c->fatal = MR_ELIMIT;
  c->text = "compressed ACQUISITION (scan_counter 5): size in bytes 512 is over the limit "
            "acquisition_bytes = 256";

  c = &cases[n++];
  c->name = "DICOM file over the image limit";
  put16(c->bytes, 1018);
  put32(c->bytes + 2, 65);
  c->len = 6;
  c->fatal = MR_ELIMIT;
  c->text = "DICOM file of 65 bytes is over the limit image_bytes = 64";

  c = &cases[n++];
  c->name = "DICOM meta over the attribute limit";
  put16(c->bytes, 1018);
  put32(c->bytes + 2, 1);
  c->bytes[6] = 'd';
  put64(c->bytes + 7, 0);
  put64(c->bytes + 15, 9);
  c->len = 23;
  c->fatal = MR_ELIMIT;
  c->text = "DICOM meta of 9 bytes is over the limit attribute_bytes = 8";

  c = &cases[n++];
  c->name = "image attributes over limit";
  c->len = image_bytes(c->bytes, ISMRMRD_FLOAT, 9, 9, 1);
  memcpy(c->bytes + c->len, "<ab></ab>", 9);
  c->len += 9 + 4;
  c->rejected = MR_ELIMIT;
  c->text = "IMAGE attributes of 9 bytes are over the limit attribute_bytes = 8";

  c = &cases[n++];
  c->name = "QUERY reserved not zero";
  put16(c->bytes, 6);
  put64(c->bytes + 2, 1);
  put64(c->bytes + 10, 3);
  put64(c->bytes + 18, 2);
  memcpy(c->bytes + 26, "ab", 2);
  c->len = 28;
  c->rejected = MR_EPROTO;
  c->text = "QUERY reserved field is 1";

  c = &cases[n++];
  c->name = "CONFIG_FILE with an empty name";
  put16(c->bytes, 1);
  c->bytes[2 + 500] = 'x'; /* after the NUL: not part of the name */
  c->len = 2 + 1024;
  c->rejected = MR_EPROTO;
  c->text = "empty config name";

  c = &cases[n++];
  c->name = "acquisition channels over limit";
  c->len = acq_bytes(c->bytes, 0, 5, 2, 0);
  c->len += 5 * 2 * 8;
  c->rejected = MR_ELIMIT;
  c->text = "active_channels 5 is over the limit channels = 4";

  c = &cases[n++];
  c->name = "trajectory dimensions over 3";
  c->len = acq_bytes(c->bytes, 4, 1, 2, 0);
  c->len += 4 * 2 * 4 + 2 * 8;
  c->rejected = MR_ELIMIT;
  c->text = "trajectory_dimensions 4 is over the limit trajectory_dims = 3";

  c = &cases[n++];
  c->name = "acquisition samples over limit";
  c->len = acq_bytes(c->bytes, 0, 1, 17, 0);
  c->len += 17 * 8;
  c->rejected = MR_ELIMIT;
  c->text = "number_of_samples 17 is over the limit samples = 16";

  c = &cases[n++];
  c->name = "image attribute length disagrees with header";
  c->len = image_bytes(c->bytes, ISMRMRD_FLOAT, 3, 4, 2);
  c->len += 4 + 2 * 4;
  c->rejected = MR_EPROTO;
  c->text = "says 3 attribute bytes but 4 follow";

  c = &cases[n++];
  c->name = "image of unknown data type";
  c->len = image_bytes(c->bytes, 99, 0, 0, 2);
  c->fatal = MR_EPROTO;
  c->text = "unknown data_type 99";

  c = &cases[n++];
  c->name = "image over its limit";
  c->len = image_bytes(c->bytes, ISMRMRD_FLOAT, 0, 0, 17);
  c->len += 17 * 4;
  c->rejected = MR_ELIMIT;
  c->text = "IMAGE of 68 bytes is over the limit image_bytes = 64";

  c = &cases[n++];
  c->name = "waveform over its limit";
  {
    ISMRMRD_WaveformHeader h;
    memset(&h, 0, sizeof h);
    h.number_of_samples = 5;
    h.channels = 1;
    put16(c->bytes, 1026);
    memcpy(c->bytes + 2, &h, 40);
    c->len = 42 + 20;
  }
  c->rejected = MR_ELIMIT;
  c->text = "WAVEFORM of 20 bytes is over the limit waveform_bytes = 16";

  for (int i = 0; i < n; i++) {
    c = &cases[i];
    const uint8_t *bytes = c->bytes;
    size_t len = c->len;
    /* Every case is followed by a good CLOSE: after a rejection it must
     * still decode; after a framing error nothing more may. */
    uint8_t *stream = malloc(len + 2);
    memcpy(stream, bytes, len);
    put16(stream + len, 4);
    seen s = {0};
    mr_decoder *d = decoder(&s, &lim);
    int rc = mr_decoder_feed(d, stream, len + 2);
    print_message("case: %s\n", c->name);
    if (c->fatal) {
      assert_int_equal(rc, c->fatal);
      assert_non_null(strstr(mr_decoder_error(d), c->text));
      assert_int_equal(s.n, 0);
      assert_int_equal(mr_decoder_feed(d, stream + len, 2), c->fatal);
    } else {
      assert_int_equal(rc, 0);
      assert_int_equal(s.nerr, 1);
      assert_int_equal(s.codes[0], c->rejected);
      if (strstr(s.texts[0], c->text) == NULL)
        fail_msg("case '%s': error text '%s' lacks '%s'", c->name, s.texts[0], c->text);
      assert_int_equal(s.n, 1);
      assert_int_equal(s.msgs[0]->kind, MR_MSG_CLOSE);
    }
    mr_decoder_destroy(d);
    seen_clear(&s);
    free(stream);
  }
}

/* ISMRMRD's ismrmrd_hdf5_to_stream leaves uninitialised bytes after the
 * name's NUL: the name is the C string, never a framing error. */
static void test_config_name_ends_at_its_nul(void **state) {
  (void)state;
  uint8_t b[2 + 1024 + 2];
  put16(b, 1);
  memset(b + 2, 0xa5, 1024);
  memcpy(b + 2, "default.xml", 12);
  put16(b + 2 + 1024, 4); /* CLOSE follows, still in step */
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  assert_int_equal(mr_decoder_feed(d, b, sizeof b), 0);
  assert_int_equal(s.nerr, 0);
  assert_int_equal(s.n, 2);
  assert_string_equal(s.msgs[0]->u.config_name, "default.xml");
  assert_int_equal(s.msgs[1]->kind, MR_MSG_CLOSE);
  mr_decoder_destroy(d);
  seen_clear(&s);
}

/* A declared length over a limit is reported when the length arrives, not
 * after a body the client may never send (a 4 GiB TEXT, a 2^63-byte
 * QUERY). */
static void test_over_limit_length_is_reported_before_its_body(void **state) {
  (void)state;
  mr_limits lim = small_limits();
  uint8_t text[6], query[26];
  put16(text, 5);
  put32(text + 2, 0xffffffffu);
  put16(query, 6);
  put64(query + 2, 0);
  put64(query + 10, 7);
  put64(query + 18, 1ull << 63);
  const struct {
    const uint8_t *bytes;
    size_t len;
    const char *text;
  } cases[] = {
      {text, sizeof text, "TEXT of 4294967295 bytes is over the limit text_bytes = 8"},
      {query, sizeof query,
       "QUERY of 9223372036854775808 bytes is over the limit query_bytes = 8"},
  };
  for (size_t i = 0; i < 2; i++) {
    seen s = {0};
    mr_decoder *d = decoder(&s, &lim);
    assert_int_equal(mr_decoder_feed(d, cases[i].bytes, cases[i].len), 0);
    assert_int_equal(s.nerr, 1);
    assert_int_equal(s.codes[0], MR_ELIMIT);
    assert_string_equal(s.texts[0], cases[i].text);
    assert_int_equal(s.n, 0);
    mr_decoder_destroy(d);
    seen_clear(&s);
  }
}

static void test_truncated_message_waits(void **state) {
  (void)state;
  mr_message *m = sample_acquisition(0, 2, 4);
  uint8_t *b;
  size_t l;
  assert_int_equal(mr_encode_flat(m, &b, &l), 0);
  for (size_t cut = 1; cut < l; cut++) {
    seen s = {0};
    mr_decoder *d = decoder(&s, NULL);
    assert_int_equal(mr_decoder_feed(d, b, cut), 0);
    assert_int_equal(s.n, 0);
    assert_false(mr_decoder_idle(d));
    mr_decoder_destroy(d); /* frees the partial message */
  }
  free(b);
  mr_message_unref(m);
}

static void test_wrapping_image_size_is_refused(void **state) {
  (void)state;
  ISMRMRD_ImageHeader h;
  mr_test_wrapped_image_header(&h);
  uint64_t bytes = 0;
  assert_int_equal(mr_payload_image(&h, &bytes), MR_ELIMIT);
  assert_null(mr_message_new_image(&h, NULL));

  /* The decoder: a framing error naming the limit (the message cannot even
   * be skipped), never a 33 MiB buffer. */
  uint8_t b[2 + 198 + 8 + 2];
  put16(b, 1022);
  memcpy(b + 2, &h, 198);
  put64(b + 200, 0);
  put16(b + 208, 4); /* a CLOSE after it */
  seen s = {0};
  mr_decoder *d = decoder(&s, NULL);
  assert_int_equal(mr_decoder_feed(d, b, sizeof b), MR_ELIMIT);
  assert_non_null(strstr(mr_decoder_error(d), "over the limit image_bytes"));
  assert_int_equal(s.n, 0);
  mr_decoder_destroy(d);
  seen_clear(&s);

  /* The encoder: an image whose buffer has the wrapped size. */
  mr_image im = {.head = h, .data_bytes = MR_TEST_WRAPPED_IMAGE_BYTES};
  uint8_t pixel[4];
  im.data = pixel;
  mr_encoded e;
  mr_message m = {.kind = MR_MSG_IMAGE, .u.image = im};
  assert_int_equal(mr_encode(&m, &e), MR_EINVAL);
}

static void test_payload_sizes(void **state) {
  (void)state;
  ISMRMRD_AcquisitionHeader a;
  ismrmrd_init_acquisition_header(&a);
  a.trajectory_dimensions = 3;
  a.active_channels = 65535;
  a.number_of_samples = 65535;
  uint64_t traj, data;
  assert_int_equal(mr_payload_acquisition(&a, &traj, &data), 0);
  assert_int_equal(traj, 3ull * 65535 * 4);
  assert_int_equal(data, 65535ull * 65535 * 8);
  ISMRMRD_ImageHeader im;
  ismrmrd_init_image_header(&im);
  im.data_type = ISMRMRD_CXDOUBLE;
  im.matrix_size[0] = im.matrix_size[1] = im.matrix_size[2] = im.channels = 65535;
  assert_int_equal(mr_payload_image(&im, &data), MR_ELIMIT);
  im.channels = 1;
  assert_int_equal(mr_payload_image(&im, &data), 0);
  assert_int_equal(data, 65535ull * 65535 * 65535 * 16);
  im.data_type = 99;
  assert_int_equal(mr_payload_image(&im, &data), MR_EPROTO);
  ISMRMRD_WaveformHeader w = {.channels = 65535, .number_of_samples = 65535};
  assert_int_equal(mr_payload_waveform(&w, &data), 0);
  assert_int_equal(data, 65535ull * 65535 * 4);
}

static void test_encoder_refuses_chain_objects(void **state) {
  (void)state;
  mr_message *m = mr_message_new_object(MR_MSG_KSPACE, NULL, NULL);
  mr_encoded e;
  assert_int_equal(mr_encode(m, &e), MR_EINVAL);
  mr_message_unref(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_type),
      cmocka_unit_test(test_split_at_every_byte),
      cmocka_unit_test(test_bodies_received_in_place),
      cmocka_unit_test(test_received_outside_a_body_is_refused),
      cmocka_unit_test(test_layout_small_messages),
      cmocka_unit_test(test_layout_acquisition),
      cmocka_unit_test(test_layout_image_counts_trailing_nul),
      cmocka_unit_test(test_layout_waveform_is_naturally_aligned),
      cmocka_unit_test(test_trailing_nuls_are_stripped),
      cmocka_unit_test(test_config_name_fills_all_1024_bytes),
      cmocka_unit_test(test_config_name_ends_at_its_nul),
      cmocka_unit_test(test_over_limit_length_is_reported_before_its_body),
      cmocka_unit_test(test_compressed_acquisition_is_carried),
      cmocka_unit_test(test_acquisition_finite),
      cmocka_unit_test(test_compressed_acquisition_round_trip),
      cmocka_unit_test(test_malformed_table),
      cmocka_unit_test(test_truncated_message_waits),
      cmocka_unit_test(test_encoder_refuses_chain_objects),
      cmocka_unit_test(test_wrapping_image_size_is_refused),
      cmocka_unit_test(test_payload_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
