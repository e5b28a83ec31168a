/* metrics.h in-process (issue 13, item 3): counts land in the series of
 * their config, outcome, gadget and kind; histograms are cumulative with a
 * +Inf bucket equal to their count; a config name that needs escaping is
 * escaped; readiness follows the server's state, --max-connections and the
 * memory budget; what is rendered passes `promtool check metrics` where
 * Debian's prometheus package is installed. The counters are process-wide:
 * the tests run in order and each looks at what it changed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"
#include "error.h"
#include "metrics.h"
#include "test_support.h"

static mr_pipeline_config cartesian = {.name = "cartesian"};
static mr_pipeline_config odd = {.name = "odd \"name\"\\x"};
static mr_pipeline_config *list[] = {&cartesian, &odd};
static mr_config_dir configs = {.configs = list, .n = 2};

static char *render(void) {
  char *text;
  size_t len;
  assert_int_equal(mr_metrics_render(NULL, &text, &len), 0);
  assert_int_equal(strlen(text), len);
  return text;
}

/* The value of the sample line that starts with `series ` (name and
 * labels exactly as rendered); fails when there is none. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; *p != '\0'; p = strchr(p, '\n') + 1) {
    if (strncmp(p, series, n) == 0 && p[n] == ' ')
      return strtod(p + n + 1, NULL);
    if (strchr(p, '\n') == NULL)
      break;
  }
  fail_msg("no sample %s", series);
  return -1;
}

static int setup(void **state) {
  (void)state;
  mr_metrics_init(&configs, 2);
  mr_metrics_set_state(MR_STATE_ACCEPTING);
  return 0;
}

static void sessions_by_config_and_outcome(void **state) {
  (void)state;
  mr_metrics_session_finished("cartesian", MR_OUTCOME_OK, 0.3);
  mr_metrics_session_finished("cartesian", MR_OUTCOME_OK, 7);
  mr_metrics_session_finished("cartesian", MR_OUTCOME_ERROR, 0.02);
  mr_metrics_session_finished("a-script-nobody-installed", MR_OUTCOME_ERROR, 1);
  mr_metrics_session_finished("", MR_OUTCOME_REFUSED, 0.001);
  char *t = render();
  assert_true(sample(t, "mrrecon_sessions_total{config=\"cartesian\",outcome=\"ok\"}") == 2);
  assert_true(sample(t, "mrrecon_sessions_total{config=\"cartesian\",outcome=\"error\"}") == 1);
  assert_true(sample(t, "mrrecon_sessions_total{config=\"other\",outcome=\"error\"}") == 1);
  assert_true(sample(t, "mrrecon_sessions_total{config=\"none\",outcome=\"refused\"}") == 1);
  /* A client-chosen name never becomes a series of its own. */
  assert_null(strstr(t, "a-script-nobody-installed"));
  /* Cumulative buckets: 0.02 <= 0.05, 0.3 <= 0.5, 7 <= 10. */
  assert_true(
      sample(t, "mrrecon_session_duration_seconds_bucket{config=\"cartesian\",le=\"0.01\"}") == 0);
  assert_true(
      sample(t, "mrrecon_session_duration_seconds_bucket{config=\"cartesian\",le=\"0.05\"}") == 1);
  assert_true(
      sample(t, "mrrecon_session_duration_seconds_bucket{config=\"cartesian\",le=\"0.5\"}") == 2);
  assert_true(sample(t, "mrrecon_session_duration_seconds_bucket{config=\"cartesian\",le=\"5\"}") ==
              2);
  assert_true(
      sample(t, "mrrecon_session_duration_seconds_bucket{config=\"cartesian\",le=\"10\"}") == 3);
  assert_true(
      sample(t, "mrrecon_session_duration_seconds_bucket{config=\"cartesian\",le=\"+Inf\"}") == 3);
  assert_true(sample(t, "mrrecon_session_duration_seconds_count{config=\"cartesian\"}") == 3);
  assert_float_equal(sample(t, "mrrecon_session_duration_seconds_sum{config=\"cartesian\"}"), 7.32,
                     1e-5);
  free(t);
}

static void escaped_label_values(void **state) {
  (void)state;
  mr_metrics_session_finished("odd \"name\"\\x", MR_OUTCOME_OK, 1);
  char *t = render();
  assert_true(
      sample(t, "mrrecon_sessions_total{config=\"odd \\\"name\\\"\\\\x\",outcome=\"ok\"}") == 1);
  free(t);
}

static void gadgets_errors_and_traffic(void **state) {
  (void)state;
  mr_metrics_gadget_time("fft", 3000000);      /* 3 ms */
  mr_metrics_gadget_time("fft", 2000000000);   /* 2 s */
  mr_metrics_gadget_time("no_such_gadget", 1); /* not a registry name: not counted */
  mr_metrics_error(mr_metrics_error_kind_of(MR_ELIMIT));
  mr_metrics_error(mr_metrics_error_kind_of(MR_EFRAME));
  mr_metrics_error(mr_metrics_error_kind_of(MR_EDEVMEM));
  mr_metrics_error(MR_ERRKIND_BUSY);
  mr_metrics_bytes_in(1000);
  mr_metrics_bytes_out(300);
  mr_metrics_acquisitions(16);
  mr_metrics_images(2);
  mr_metrics_inbox_bytes(4096);
  mr_metrics_outbox_bytes(8192);
  mr_metrics_outbox_bytes(-8192);
  char *t = render();
  assert_true(sample(t, "mrrecon_gadget_seconds_bucket{gadget=\"fft\",le=\"0.001\"}") == 0);
  assert_true(sample(t, "mrrecon_gadget_seconds_bucket{gadget=\"fft\",le=\"0.005\"}") == 1);
  assert_true(sample(t, "mrrecon_gadget_seconds_bucket{gadget=\"fft\",le=\"5\"}") == 2);
  assert_true(sample(t, "mrrecon_gadget_seconds_count{gadget=\"fft\"}") == 2);
  assert_null(strstr(t, "no_such_gadget"));
  assert_true(sample(t, "mrrecon_errors_total{kind=\"limit\"}") == 1);
  assert_true(sample(t, "mrrecon_errors_total{kind=\"protocol\"}") == 1);
  assert_true(sample(t, "mrrecon_errors_total{kind=\"gpu\"}") == 1);
  assert_true(sample(t, "mrrecon_errors_total{kind=\"busy\"}") == 1);
  assert_true(sample(t, "mrrecon_errors_total{kind=\"timeout\"}") == 0);
  assert_true(sample(t, "mrrecon_received_bytes_total") == 1000);
  assert_true(sample(t, "mrrecon_sent_bytes_total") == 300);
  assert_true(sample(t, "mrrecon_acquisitions_total") == 16);
  assert_true(sample(t, "mrrecon_images_total") == 2);
  assert_true(sample(t, "mrrecon_queue_bytes{queue=\"inbox\"}") == 4096);
  assert_true(sample(t, "mrrecon_queue_bytes{queue=\"outbox\"}") == 0);
  mr_metrics_inbox_bytes(-4096);
  free(t);
}

static void readiness(void **state) {
  (void)state;
  char why[160];
  assert_int_equal(mr_metrics_ready(why, sizeof why), 1);
  /* --max-connections 2 (setup) */
  mr_metrics_connection_open();
  assert_int_equal(mr_metrics_ready(why, sizeof why), 1);
  mr_metrics_connection_open();
  assert_int_equal(mr_metrics_ready(why, sizeof why), 0);
  assert_non_null(strstr(why, "busy"));
  char *t = render();
  assert_true(sample(t, "mrrecon_sessions_active") == 2);
  assert_true(sample(t, "mrrecon_ready") == 0);
  free(t);
  mr_metrics_connection_closed();
  mr_metrics_connection_closed();
  /* Less than 5 % of the budget left: not ready. */
  mr_budget_set(100u << 20);
  assert_int_equal(mr_budget_take(96u << 20, "test", NULL), 0);
  assert_int_equal(mr_metrics_ready(why, sizeof why), 0);
  assert_non_null(strstr(why, "memory budget"));
  t = render();
  assert_true(sample(t, "mrrecon_memory_budget_used_bytes") == (double)(96u << 20));
  assert_true(sample(t, "mrrecon_memory_budget_bytes") == (double)(100u << 20));
  free(t);
  mr_budget_give(96u << 20);
  assert_int_equal(mr_metrics_ready(why, sizeof why), 1);
  mr_budget_set(0);
  mr_metrics_set_state(MR_STATE_DRAINING);
  assert_int_equal(mr_metrics_ready(why, sizeof why), 0);
  assert_non_null(strstr(why, "draining"));
  mr_metrics_warmed(); /* a warm-up ending in a drain leaves it draining */
  assert_int_equal(mr_metrics_ready(why, sizeof why), 0);
  /* --warm: listening, not ready until the warm-up is over. */
  mr_metrics_set_state(MR_STATE_WARMING);
  assert_int_equal(mr_metrics_ready(why, sizeof why), 0);
  assert_non_null(strstr(why, "warming up"));
  mr_metrics_warmed();
  assert_int_equal(mr_metrics_ready(why, sizeof why), 1);
}

static void promtool_accepts_the_output(void **state) {
  (void)state;
  if (!mr_test_have_tool("promtool"))
    skip(); /* Debian's prometheus package; scripts/install-deps.sh tests installs it */
  const char *dir = mr_test_tmpdir("mr-metrics");
  char path[600];
  snprintf(path, sizeof path, "%s/metrics.txt", dir);
  char *t = render();
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(t, f);
  fclose(f);
  free(t);
  char cmd[700], out[4096], err[4096];
  snprintf(cmd, sizeof cmd, "promtool check metrics < '%s'", path);
  const char *argv[] = {"sh", "-c", cmd, NULL};
  int rc = mr_test_run(argv, dir, out, sizeof out, err, sizeof err);
  if (rc != 0)
    fail_msg("promtool check metrics: %s%s", out, err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sessions_by_config_and_outcome), cmocka_unit_test(escaped_label_values),
      cmocka_unit_test(gadgets_errors_and_traffic),     cmocka_unit_test(readiness),
      cmocka_unit_test(promtool_accepts_the_output),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
