/* cmocka assertions over the wire client (wire_client.h), for the server
 * tests: include after <cmocka.h>. */
#ifndef MR_TEST_WIRE_ASSERT_H
#define MR_TEST_WIRE_ASSERT_H

#include "wire_client.h"

/* Sends m (takes it) and fails the test when it was not made or not sent. */
static inline void mr_test_send_msg(int fd, mr_message *m) {
  assert_non_null(m);
  assert_int_equal(mr_test_send(fd, m), 0);
  mr_message_unref(m);
}

#endif
