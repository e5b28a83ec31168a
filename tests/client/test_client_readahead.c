/* Reading ahead of the sender (client/readahead.h): messages come out in
 * order, the source's end and its error come after what it yielded
 * before them, and stopping frees a reader that waits for room. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "readahead.h"

typedef struct counting {
  int n, limit, fail_at;
} counting;

/* Yields acquisitions numbered 0.. in scan_counter; fails at fail_at
 * (when >= 0), ends at limit. */
static int count_next(void *ctx, mr_message **out, mr_err *err) {
  counting *c = ctx;
  *out = NULL;
  if (c->n == c->fail_at)
    return mr_err_set(err, MR_EIO, "cannot read acquisition %d", c->n);
  if (c->n == c->limit)
    return 0;
  ISMRMRD_AcquisitionHeader h = {.version = 1, .number_of_samples = 64, .active_channels = 4,
                                 .available_channels = 4, .scan_counter = (uint32_t)c->n++};
  *out = mr_message_new_acquisition(&h);
  return *out != NULL ? 0 : MR_ENOMEM;
}

static void test_in_order_then_the_end(void **state) {
  (void)state;
  counting c = {.limit = 500, .fail_at = -1};
  mr_stream_source file = {count_next, &c};
  mr_readahead *ra;
  assert_int_equal(mr_readahead_start(&file, 16 << 10, &ra), 0); /* a few messages */
  mr_stream_source src = mr_readahead_source(ra);
  for (uint32_t i = 0; i < 500; i++) {
    mr_message *m = NULL;
    mr_err err = {0};
    assert_int_equal(src.next(src.ctx, &m, &err), 0);
    assert_non_null(m);
    assert_int_equal(m->u.acq.head.scan_counter, i);
    mr_message_unref(m);
  }
  mr_message *m = (mr_message *)&c;
  mr_err err = {0};
  assert_int_equal(src.next(src.ctx, &m, &err), 0);
  assert_null(m);
  mr_readahead_stop(ra);
}

static void test_error_after_what_came_before(void **state) {
  (void)state;
  counting c = {.limit = 100, .fail_at = 7};
  mr_stream_source file = {count_next, &c};
  mr_readahead *ra;
  assert_int_equal(mr_readahead_start(&file, 1 << 20, &ra), 0);
  mr_stream_source src = mr_readahead_source(ra);
  mr_err err = {0};
  mr_message *m = NULL;
  for (int i = 0; i < 7; i++) {
    assert_int_equal(src.next(src.ctx, &m, &err), 0);
    assert_non_null(m);
    mr_message_unref(m);
  }
  assert_int_equal(src.next(src.ctx, &m, &err), MR_EIO);
  assert_string_equal(err.msg, "cannot read acquisition 7");
  mr_readahead_stop(ra);
}

static void test_stop_frees_a_waiting_reader(void **state) {
  (void)state;
  counting c = {.limit = 1000000, .fail_at = -1};
  mr_stream_source file = {count_next, &c};
  mr_readahead *ra;
  assert_int_equal(mr_readahead_start(&file, 8 << 10, &ra), 0);
  mr_stream_source src = mr_readahead_source(ra);
  mr_message *m = NULL;
  mr_err err = {0};
  assert_int_equal(src.next(src.ctx, &m, &err), 0); /* the reader is running */
  mr_message_unref(m);
  mr_readahead_stop(ra); /* it waits for room: stop must end it, freeing the queue */
  assert_true(c.n < 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_in_order_then_the_end),
      cmocka_unit_test(test_error_after_what_came_before),
      cmocka_unit_test(test_stop_frees_a_waiting_reader),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
