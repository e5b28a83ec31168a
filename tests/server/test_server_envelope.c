/* What a connection's channels carry (server/envelope.h), in process:
 * messages and events in order, each counting its memory against the
 * channel's bound of bytes (the byte accounting of queued events against
 * connection_bytes), a flood of events filling the inbox, and a queued
 * message's overhead. The channel itself (order, release, pause / resume
 * at half, waiting producers, closing, the metrics hook) is tested in
 * tests/base/test_base_channel.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "envelope.h"
#include "error.h"
#include "message.h"

static mr_message *text(const char *s) {
  mr_message *m = mr_message_new_text(MR_MSG_TEXT, s, strlen(s));
  assert_non_null(m);
  return m;
}

static mr_chan *channel(size_t bytes) {
  mr_chan *ch = NULL;
  assert_int_equal(mr_envelope_channel(bytes, NULL, NULL, NULL, NULL, &ch), 0);
  return ch;
}

static void test_messages_and_events_come_out_in_order_and_count(void **state) {
  (void)state;
  mr_chan *ch = channel(100000);
  const size_t event = MR_ENVELOPE_OVERHEAD + strlen("bad framing");
  const size_t one = MR_ENVELOPE_OVERHEAD + 3, two = MR_ENVELOPE_OVERHEAD + 3;
  assert_int_equal(mr_envelope_send(ch, text("one"), 0), 0);
  assert_int_equal(mr_envelope_send_event(ch, MR_EPROTO, "bad framing"), 0);
  assert_int_equal(mr_envelope_send(ch, text("two"), 1), 0);
  assert_int_equal(mr_chan_bytes(ch), one + event + two); /* events count too */
  mr_envelope e;
  size_t bytes;
  assert_int_equal(mr_chan_pop(ch, &e, &bytes, 0), 0);
  assert_string_equal(e.msg->u.text, "one");
  assert_int_equal(bytes, one);
  assert_int_equal(mr_chan_bytes(ch), one + event + two); /* popped, not yet released */
  mr_chan_release(ch, bytes);
  mr_envelope_clear(&e);
  assert_int_equal(mr_chan_pop(ch, &e, &bytes, 0), 0);
  assert_null(e.msg);
  assert_int_equal(e.code, MR_EPROTO);
  assert_string_equal(e.text, "bad framing");
  assert_int_equal(bytes, event);
  mr_chan_release(ch, bytes);
  mr_envelope_clear(&e);
  assert_int_equal(mr_chan_pop(ch, &e, &bytes, 0), 0);
  assert_string_equal(e.msg->u.text, "two");
  mr_chan_release(ch, bytes);
  mr_envelope_clear(&e);
  assert_int_equal(mr_chan_bytes(ch), 0);
  mr_chan_free(ch);
}

/* Rejected messages (events) are held like messages: a flood of them
 * fills the inbox, so the loop thread stops reading the socket. */
static void test_a_flood_of_events_fills_the_channel(void **state) {
  (void)state;
  mr_chan *ch = channel(64 * 1024);
  int pushed = 0;
  while (!mr_chan_full(ch) && pushed < 1000) {
    assert_int_equal(mr_envelope_send_event(ch, MR_EPROTO, "QUERY: malformed"), 0);
    pushed++;
  }
  assert_true(mr_chan_full(ch));
  assert_int_equal(pushed,
                   (64 * 1024 + MR_ENVELOPE_OVERHEAD + 15) / (MR_ENVELOPE_OVERHEAD + 16));
  mr_chan_free(ch); /* frees the events' texts (ASan) */
}

/* Once the channel is closed (the client gone) a message sent is dropped,
 * not leaked (ASan), and so is an event. */
static void test_a_closed_channel_drops_what_is_sent(void **state) {
  (void)state;
  mr_chan *ch = channel(1000);
  assert_int_equal(mr_envelope_send(ch, text("kept"), 0), 0);
  mr_chan_close(ch);
  assert_int_equal(mr_envelope_send(ch, text("after"), 1), MR_ECANCELED);
  assert_int_equal(mr_envelope_send_event(ch, MR_ECONN, "gone"), MR_ECANCELED);
  mr_chan_free(ch); /* frees "kept" */
}

static void test_a_message_counts_its_memory(void **state) {
  (void)state;
  mr_message *m = text("hello");
  assert_int_equal(mr_envelope_bytes(m), MR_ENVELOPE_OVERHEAD + 5);
  mr_message_unref(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_messages_and_events_come_out_in_order_and_count),
      cmocka_unit_test(test_a_flood_of_events_fills_the_channel),
      cmocka_unit_test(test_a_closed_channel_drops_what_is_sent),
      cmocka_unit_test(test_a_message_counts_its_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
