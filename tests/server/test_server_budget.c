/* reconserver's memory budget end to end (issue 12, item 5): 3D headers
 * with a few lines sent, whose k-space, FFT output and image arrays come
 * near or over --memory-budget. The server either refuses with a TEXT
 * naming the budget or reconstructs, and either way its peak resident
 * memory grows by no more than the budget (asserted where RSS means
 * something: not under ASan, whose quarantine and shadow memory hold
 * more). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gadget_harness.h"
#include "test_support.h"
#include "wire_assert.h"
#include "wire_client.h"

/* A /proc/PID/status field in KiB, -1 when unknown. */
static long status_kib(const mr_test_server *s, const char *field) {
  char path[64], line[256], want[32];
  snprintf(path, sizeof path, "/proc/%d/status", (int)s->pid);
  snprintf(want, sizeof want, "%s: %%ld kB", field);
  FILE *f = fopen(path, "r");
  long kib = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, want, &kib) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return kib;
}

/* One session: a 64 x 64 x nz header, `lines` lines of `coils` channels,
 * CLOSE, against --memory-budget budget_mib. */
static void run_session(int nz, int coils, int lines, int budget_mib) {
  mr_test_server s;
  char budget[16];
  snprintf(budget, sizeof budget, "%d", budget_mib);
  /* Read-ahead and output bounded to 1 MiB each: what the budget does not
   * count stays small. */
  const char *const args[] = {"--memory-budget", budget, "--limit", "connection_bytes=1048576",
                              NULL};
  mr_test_server_start(&s, args);
  long before = status_kib(&s, "VmRSS");
  int fd = mr_test_connect(s.port);
  mr_test_send_msg(fd, mr_message_new_config_file("default.xml"));
  const char *xml = mr_harness_cartesian_header(64, 64, nz, 64, 64, nz);
  mr_test_send_msg(fd, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)));
  for (int i = 0; i < lines; i++)
    mr_test_send_msg(fd, mr_harness_acquisition(64, coils, i % 64, (nz / 2 + i / 64) % nz, 0,
                                                NULL, NULL));
  mr_test_send_msg(fd, mr_message_new(MR_MSG_CLOSE));
  mr_test_reply r;
  mr_test_receive(fd, &r, 60000);
  close(fd);
  long peak = status_kib(&s, "VmHWM");
  int refused = mr_test_reply_text(&r, "memory budget:") != NULL;
  const char *other = mr_test_reply_text(&r, "ERROR");
  int images = mr_test_reply_count(&r, MR_MSG_IMAGE), got_close = r.got_close;
  /* Stopped before any assertion, so a failure leaves no server behind. */
  int status = mr_test_server_stop(&s);
  double kspace_mib = 64.0 * 64 * nz * coils * 8 / 1048576.0;
  print_message("64x64x%d x %d coils (k-space %.0f MiB), budget %d MiB: %s; RSS %ld KiB before, "
                "peak %ld KiB (+%.1f MiB)\n",
                nz, coils, kspace_mib, budget_mib,
                other != NULL ? other : images == 1 ? "reconstructed" : "no image", before, peak,
                (double)(peak - before) / 1024.0);
  mr_test_reply_free(&r);
  assert_int_equal(status, 0);
  assert_true(got_close);
  assert_true(refused || images == 1);
#ifndef __SANITIZE_ADDRESS__
  assert_true(before > 0 && peak > 0);
  assert_true(peak - before <= (long)budget_mib * 1024);
#endif
}

/* The case, scaled down: a big 3D header and 64 lines. k-space is
 * 64 MiB; with the FFT's output and the coil images the scan needs about
 * 200 MiB. */
static void test_big_header_few_lines(void **state) {
  (void)state;
  run_session(512, 4, 64, 100);
  run_session(512, 4, 64, 160);
  run_session(512, 4, 64, 400);
}

/* Every line sent, so the whole k-space is resident: 16 MiB of it, 16 MiB
 * of FFT output, 16 MiB of coil images. Counting only k-space and image
 * arrays (36 MiB), a 44 MiB budget let the scan through and it peaked near
 * 53 MiB. */
static void test_every_line_sent(void **state) {
  (void)state;
  run_session(128, 4, 64 * 128, 44);
  run_session(128, 4, 64 * 128, 64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_big_header_few_lines),
      cmocka_unit_test(test_every_line_sent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
