/* The gadget framework: parameter binding and its errors, config parsing,
 * defaults parsed once per class, chain type checks, pass-through, flush
 * order, a failing gadget's message released by the chain, --describe. */
#include <complex.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chain.h"
#include "gadget_harness.h"
#include "test_support.h"
#include "params.h"
#include "pipeline_config.h"
#include "registry.h"

/* ---- parameter binding, on a class of our own ---- */

typedef struct probe_state {
  int flag, count, mode, kernel[2], device;
  double lambda;
} probe_state;

static const mr_param probe_params[] = {
    MR_PARAM_BOOL(probe_state, flag, "flag", "false", "a bool"),
    MR_PARAM_INT(probe_state, count, "count", "3", 1, 10, "an int"),
    MR_PARAM_DOUBLE(probe_state, lambda, "lambda", "1e-4", 0, 1, "a double"),
    MR_PARAM_ENUM(probe_state, mode, "mode", "\"b\"", "a|b|c", "an enum"),
    MR_PARAM_INTS(probe_state, kernel, "kernel", "[4,5]", 1, 9, "two ints"),
    MR_PARAM_DEVICE(probe_state, device, "device", "\"auto\"", "dev"),
};

static const mr_gadget_class probe = {
    .name = "probe",
    .summary = "test class",
    .params = probe_params,
    .nparams = sizeof probe_params / sizeof *probe_params,
    .state_size = sizeof(probe_state),
};

static int bind(const char *json, probe_state *st, mr_err *e) {
  cJSON *entry = cJSON_Parse(json);
  assert_non_null(entry);
  memset(st, 0, sizeof *st);
  mr_err_clear(e);
  int rc = mr_params_bind(&probe, entry, st, "cfg", 2, e);
  cJSON_Delete(entry);
  return rc;
}

static void test_params_defaults_and_values(void **state) {
  (void)state;
  probe_state st;
  mr_err e;
  assert_int_equal(bind("{\"gadget\":\"probe\"}", &st, &e), 0);
  assert_int_equal(st.flag, 0);
  assert_int_equal(st.count, 3);
  assert_float_equal(st.lambda, 1e-4, 1e-12);
  assert_int_equal(st.mode, 1);
  assert_int_equal(st.kernel[0], 4);
  assert_int_equal(st.kernel[1], 5);
  assert_int_equal(st.device, MR_PARAM_DEVICE_AUTO);
  assert_int_equal(bind("{\"gadget\":\"probe\",\"comment\":\"ok\",\"flag\":true,\"count\":10,"
                        "\"lambda\":0.5,\"mode\":\"c\",\"kernel\":[1,9],\"device\":\"cpu\"}",
                        &st, &e),
                   0);
  assert_int_equal(st.flag, 1);
  assert_int_equal(st.count, 10);
  assert_float_equal(st.lambda, 0.5, 0);
  assert_int_equal(st.mode, 2);
  assert_int_equal(st.kernel[1], 9);
  assert_int_equal(st.device, MR_PARAM_DEVICE_CPU);
  assert_int_equal(bind("{\"device\":1}", &st, &e), 0);
  assert_int_equal(st.device, 1);
}

static void test_params_errors_name_config_gadget_and_key(void **state) {
  (void)state;
  static const struct {
    const char *json, *error;
  } cases[] = {
      {"{\"colour\":1}", "config 'cfg', gadget 2 'probe': unknown key 'colour'"},
      {"{\"count\":\"3\"}", "config 'cfg', gadget 2 'probe', key 'count': expected an integer"},
      {"{\"count\":2.5}", "key 'count': expected an integer, got 2.5"},
      {"{\"count\":11}", "key 'count': 11 is outside 1..10"},
      {"{\"lambda\":-1}", "key 'lambda': -1 is outside 0..1"},
      {"{\"lambda\":true}", "key 'lambda': expected a number"},
      {"{\"flag\":1}", "key 'flag': expected true or false"},
      {"{\"mode\":\"d\"}", "key 'mode': expected one of a|b|c"},
      {"{\"kernel\":[4]}", "key 'kernel': expected an array of 2 integers"},
      {"{\"kernel\":[4,0]}", "key 'kernel': 0 is outside 1..9"},
      {"{\"device\":\"gpu\"}", "key 'device': expected \"auto\", \"cpu\" or a GPU index"},
      {"{\"device\":-1}", "key 'device': expected"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    probe_state st;
    mr_err e;
    assert_int_equal(bind(cases[i].json, &st, &e), MR_ECONFIG);
    if (strstr(e.msg, cases[i].error) == NULL)
      fail_msg("%s: '%s' lacks '%s'", cases[i].json, e.msg, cases[i].error);
  }
}

/* cJSON's allocations, counted: the defaults are parsed on a class's first
 * bind, never again. */
static size_t json_allocs;
static void *counting_malloc(size_t n) {
  json_allocs++;
  return malloc(n);
}

static void test_params_defaults_parsed_once(void **state) {
  (void)state;
  probe_state st;
  mr_err e;
  assert_int_equal(mr_params_bind(&probe, NULL, &st, "cfg", 0, &e), 0);
  cJSON_Hooks hooks = {counting_malloc, free};
  cJSON_InitHooks(&hooks);
  json_allocs = 0;
  memset(&st, 0, sizeof st);
  int rc = mr_params_bind(&probe, NULL, &st, "cfg", 0, &e);
  cJSON_InitHooks(NULL);
  assert_int_equal(rc, 0);
  assert_int_equal(json_allocs, 0);
  assert_int_equal(st.count, 3);
  assert_int_equal(st.kernel[1], 5);
}

/* A table whose default does not bind is a bug of its class: every bind
 * fails, naming the class, the key and the default. */
static const mr_param broken_params[] = {
    MR_PARAM_INT(probe_state, count, "count", "30", 1, 10, "an int"),
};
static const mr_gadget_class broken = {
    .name = "broken",
    .summary = "test class with a default outside its range",
    .params = broken_params,
    .nparams = 1,
    .state_size = sizeof(probe_state),
};

static void test_params_bad_default_fails_every_bind(void **state) {
  (void)state;
  for (int i = 0; i < 2; i++) {
    probe_state st;
    mr_err e = {0};
    assert_int_equal(mr_params_bind(&broken, NULL, &st, "cfg", 0, &e), MR_EINVAL);
    assert_string_equal(e.msg, "gadget 'broken': the default of 'count' (30): 30 is outside 1..10");
  }
}

/* Chains are built on many connections' threads at once: the first binds
 * of a class race to make its defaults. */
static const mr_param race_params[] = {
    MR_PARAM_DOUBLE(probe_state, lambda, "lambda", "0.25", 0, 1, "a double"),
    MR_PARAM_INTS(probe_state, kernel, "kernel", "[7, 8]", 1, 9, "two ints"),
};
static const mr_gadget_class race = {
    .name = "race",
    .summary = "test class bound from several threads at once",
    .params = race_params,
    .nparams = 2,
    .state_size = sizeof(probe_state),
};

static void *bind_race(void *arg) {
  probe_state *st = arg;
  mr_err e;
  return mr_params_bind(&race, NULL, st, "cfg", 0, &e) == 0 ? st : NULL;
}

static void test_params_first_binds_race(void **state) {
  (void)state;
  enum { N = 8 };
  pthread_t t[N];
  probe_state st[N];
  memset(st, 0, sizeof st);
  for (int i = 0; i < N; i++)
    assert_int_equal(pthread_create(&t[i], NULL, bind_race, &st[i]), 0);
  for (int i = 0; i < N; i++) {
    void *got = NULL;
    pthread_join(t[i], &got);
    assert_ptr_equal(got, &st[i]);
    assert_float_equal(st[i].lambda, 0.25, 0);
    assert_int_equal(st[i].kernel[0], 7);
    assert_int_equal(st[i].kernel[1], 8);
  }
}

/* ---- configs ---- */

static int parse(const char *json, mr_pipeline_config **cfg, mr_err *e) {
  mr_err_clear(e);
  return mr_pipeline_config_parse(json, strlen(json), "t.json", cfg, e);
}

static void test_config_parses_and_matches_aliases(void **state) {
  (void)state;
  mr_pipeline_config *cfg = NULL;
  mr_err e;
  const char *json = "{\"name\":\"x\",\"aliases\":[\"default.xml\"],\"description\":\"d\","
                     "\"gadgets\":[{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
                     "{\"gadget\":\"image_out\"}]}";
  assert_int_equal(parse(json, &cfg, &e), 0);
  assert_string_equal(cfg->name, "x");
  assert_int_equal(cfg->naliases, 1);
  assert_true(mr_pipeline_config_matches(cfg, "default.xml"));
  assert_true(mr_pipeline_config_matches(cfg, "x"));
  assert_false(mr_pipeline_config_matches(cfg, "y"));
  mr_pipeline_config_free(cfg);
}

static void test_config_errors(void **state) {
  (void)state;
  static const struct {
    const char *json, *error;
  } cases[] = {
      {"{\"name\":", "config t.json: not valid JSON"},
      {"[]", "expected a JSON object"},
      {"{\"gadgets\":[{\"gadget\":\"fft\"}]}", "'name' must be a non-empty string"},
      {"{\"name\":\"x\",\"gadgets\":[]}", "'gadgets' must be a non-empty array"},
      {"{\"name\":\"x\",\"extra\":1,\"gadgets\":[{}]}", "unknown key 'extra'"},
      {"{\"name\":\"x\",\"aliases\":\"a\",\"gadgets\":[{}]}", "'aliases' must be an array"},
      {"{\"name\":\"x\",\"priority\":\"urgent\",\"gadgets\":[{}]}",
       "'priority' is \"realtime\" or \"normal\""},
      {"{\"name\":\"x\",\"gadgets\":[{\"gadget\":\"warp\"}]}",
       "config 'x', gadget 0: no gadget called 'warp'"},
      {"{\"name\":\"x\",\"gadgets\":[{\"fft\":1}]}",
       "config 'x', gadget 0: expected an object with a \"gadget\" name"},
      {"{\"name\":\"x\",\"gadgets\":[{\"gadget\":\"fft\"},{\"gadget\":\"image_out\"}]}",
       "config 'x', gadget 0 'fft': handles KSPACE, but what reaches it is "
       "ACQUISITION|IMAGE|WAVEFORM"},
      {"{\"name\":\"x\",\"gadgets\":[{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"}]}",
       "no gadget produces images"},
      {"{\"name\":\"x\",\"gadgets\":[{\"gadget\":\"accumulate\",\"trigger\":\"never\"},"
       "{\"gadget\":\"fft\"},{\"gadget\":\"image_out\"}]}",
       "config 'x', gadget 0 'accumulate', key 'trigger': expected one of slice|repetition|end"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mr_pipeline_config *cfg = NULL;
    mr_err e;
    assert_int_equal(parse(cases[i].json, &cfg, &e), MR_ECONFIG);
    assert_null(cfg);
    if (strstr(e.msg, cases[i].error) == NULL)
      fail_msg("%s: '%s' lacks '%s'", cases[i].json, e.msg, cases[i].error);
  }
}

/* "priority": "realtime": the thread that configures the chain (a
 * session's pipeline thread) does real-time work until the chain is
 * destroyed; a normal config's does not. */
static void test_config_priority(void **state) {
  (void)state;
  static const char *const json[] = {
      "{\"name\":\"x\",\"priority\":\"realtime\",\"gadgets\":[{\"gadget\":\"accumulate\"},"
      "{\"gadget\":\"fft\"},{\"gadget\":\"image_out\"}]}",
      "{\"name\":\"x\",\"priority\":\"normal\",\"gadgets\":[{\"gadget\":\"accumulate\"},"
      "{\"gadget\":\"fft\"},{\"gadget\":\"image_out\"}]}"};
  for (int i = 0; i < 2; i++) {
    mr_pipeline_config *cfg = NULL;
    mr_err e = {0};
    assert_int_equal(parse(json[i], &cfg, &e), 0);
    assert_int_equal(cfg->realtime, i == 0);
    mr_chain *c = NULL;
    assert_int_equal(mr_chain_create(cfg, MR_CHAIN_WIRE_INPUT, &c, &e), 0);
    assert_false(mr_device_is_realtime());
    assert_int_equal(mr_chain_configure(c, NULL, NULL, NULL, &e), 0);
    assert_int_equal(mr_device_is_realtime(), i == 0);
    mr_chain_destroy(c);
    assert_false(mr_device_is_realtime());
    mr_pipeline_config_free(cfg);
  }
}

static void test_installed_configs_parse(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/configs/cartesian.json", mr_test_source_dir());
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char text[8192];
  size_t n = fread(text, 1, sizeof text, f);
  fclose(f);
  mr_pipeline_config *cfg = NULL;
  mr_err e = {0};
  assert_int_equal(mr_pipeline_config_parse(text, n, "cartesian.json", &cfg, &e), 0);
  assert_true(mr_pipeline_config_matches(cfg, "default.xml"));
  mr_pipeline_config_free(cfg);
}

/* ---- the runtime ---- */

/* accumulate -> fft -> coil_combine -> image_out, for wire input. */
static void open_cartesian(mr_harness *h) {
  assert_int_equal(mr_harness_open(h, "[{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
                                      "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]",
                                   MR_CHAIN_WIRE_INPUT),
                   0);
}

static void test_unhandled_messages_pass_through(void **state) {
  (void)state;
  mr_harness h;
  open_cartesian(&h);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  ISMRMRD_WaveformHeader wh;
  memset(&wh, 0, sizeof wh);
  wh.number_of_samples = 3;
  wh.channels = 1;
  wh.waveform_id = 4;
  mr_message *w = mr_message_new_waveform(&wh);
  assert_int_equal(mr_harness_push(&h, w), 0);
  assert_int_equal(h.nout, 1);
  assert_ptr_equal(h.out[0], w); /* the very message, untouched */
  mr_harness_close(&h);
}

static float complex one(int c, int s, void *arg) {
  (void)arg;
  return (float)(c + 1) + (float)s * I;
}

/* The slowest step names a gadget of the chain, which of its calls it was,
 * and a time within that gadget's whole time. */
static void test_slowest_step_is_named(void **state) {
  (void)state;
  mr_harness h;
  open_cartesian(&h);
  char slowest[96], timings[512];
  mr_chain_slowest_step(h.chain, slowest, sizeof slowest);
  assert_string_equal(slowest, ""); /* no step yet */
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  for (int y = 0; y < 8; y++) {
    uint64_t flags = y == 7 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0;
    assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(8, 2, y, 0, flags, one, NULL)), 0);
  }
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 1);
  mr_chain_slowest_step(h.chain, slowest, sizeof slowest);
  mr_chain_timings(h.chain, timings, sizeof timings);
  print_message("slowest %s of %s\n", slowest, timings);
  char name[40];
  double ms, total = -1;
  unsigned long long step;
  assert_int_equal(sscanf(slowest, "%39[^:]:%lfms@%llu", name, &ms, &step), 3);
  assert_true(step >= 1 && step <= 9); /* 8 lines and a flush at most */
  char key[48];
  snprintf(key, sizeof key, "%s=", name);
  const char *at = strstr(timings, key);
  assert_non_null(at); /* a gadget of the chain */
  assert_int_equal(sscanf(at + strlen(key), "%lfms", &total), 1);
  assert_true(ms <= total + 0.05); /* both rounded to 0.1 ms */
  mr_harness_close(&h);
}

static void test_header_less_run_flushes_nothing(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"remove_oversampling\"},"
                                       "{\"gadget\":\"accumulate\"},{\"gadget\":\"fft\"},"
                                       "{\"gadget\":\"coil_combine\"},{\"gadget\":\"image_out\"}]",
                                   MR_CHAIN_WIRE_INPUT),
                   0);
  assert_int_equal(mr_harness_configure(&h, NULL), 0);
  assert_int_equal(mr_harness_flush(&h), 0);
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
}

static void test_gadget_error_names_config_and_gadget(void **state) {
  (void)state;
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, "[{\"gadget\":\"accumulate\"}]", MR_CHAIN_WIRE_INPUT), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  assert_int_equal(mr_harness_push(&h, mr_harness_acquisition(8, 2, 40, 0, 0, NULL, NULL)),
                   MR_EDATA);
  assert_non_null(strstr(h.err.msg, "config 'test', gadget 0 'accumulate': acquisition"));
  assert_non_null(strstr(h.err.msg, "outside the 8 x 1 encoding matrix"));
  mr_harness_close(&h);
}

/* ---- ownership: a gadget that fails leaks nothing ---- */

/* A 2 x 2 image of 16-bit pixels: scale refuses it. */
static mr_message *ushort_image(void) {
  mr_message *m = mr_test_image(ISMRMRD_USHORT, 2, 2, NULL);
  assert_non_null(m);
  return m;
}

/* Pushes msg (holding a reference of our own) into a chain that fails on
 * it, synchronous (depth 0) or pipelined: once the push has returned, ours
 * is the only reference left, whichever gadgets saw it and passed it on
 * before one failed. ASan's leak check (scripts/test.sh) sees the rest. */
static void push_failing(const char *gadgets, uint32_t input, size_t depth, mr_message *msg,
                         int want, const char *why) {
  mr_harness h;
  assert_int_equal(mr_harness_open(&h, gadgets, input), 0);
  assert_int_equal(mr_harness_set_pipelined(&h, depth), 0);
  assert_int_equal(mr_harness_configure(&h, mr_harness_cartesian_header(8, 8, 1, 8, 8, 1)), 0);
  assert_int_equal(mr_harness_push(&h, mr_message_ref(msg)), want);
  assert_int_equal(atomic_load(&msg->refs), 1);
  assert_non_null(strstr(h.err.msg, why));
  assert_int_equal(h.nout, 0);
  mr_harness_close(&h);
  mr_message_unref(msg);
}

static void test_failing_gadget_leaks_nothing(void **state) {
  (void)state;
  for (size_t depth = 0; depth <= 2; depth += 2) {
    /* The first gadget that sees it fails. */
    push_failing("[{\"gadget\":\"scale\"}]", MR_KIND_BIT(MR_MSG_IMAGE), depth, ushort_image(),
                 MR_ENOTSUP, "gadget 0 'scale': images of ISMRMRD data type");
    /* One gadget passes it on (a reference of its own), the next fails. */
    push_failing("[{\"gadget\":\"remove_oversampling\"},{\"gadget\":\"accumulate\"}]",
                 MR_CHAIN_WIRE_INPUT, depth, mr_harness_acquisition(8, 2, 40, 0, 0, NULL, NULL),
                 MR_EDATA, "gadget 1 'accumulate': acquisition");
  }
}

static void test_describe_lists_every_gadget(void **state) {
  (void)state;
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  mr_registry_describe(f);
  fclose(f);
  for (const mr_gadget_class *const *c = mr_registry_all(); *c != NULL; c++) {
    assert_non_null(strstr(text, (*c)->name));
    for (size_t i = 0; i < (*c)->nparams; i++)
      assert_non_null(strstr(text, (*c)->params[i].help));
  }
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_params_defaults_and_values),
      cmocka_unit_test(test_params_errors_name_config_gadget_and_key),
      cmocka_unit_test(test_params_defaults_parsed_once),
      cmocka_unit_test(test_params_bad_default_fails_every_bind),
      cmocka_unit_test(test_params_first_binds_race),
      cmocka_unit_test(test_config_parses_and_matches_aliases),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_installed_configs_parse),
      cmocka_unit_test(test_unhandled_messages_pass_through),
      cmocka_unit_test(test_header_less_run_flushes_nothing),
      cmocka_unit_test(test_slowest_step_is_named),
      cmocka_unit_test(test_gadget_error_names_config_and_gadget),
      cmocka_unit_test(test_failing_gadget_leaks_nothing),
      cmocka_unit_test(test_describe_lists_every_gadget),
      cmocka_unit_test(test_config_priority),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
