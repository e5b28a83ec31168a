/* An output of 4 GiB or more goes out whole: its pieces become write
 * buffers of at most MR_WRITE_BUF_MAX bytes (uv_buf_init's length is an
 * `unsigned int`, so one buffer per piece would truncate it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "error.h"
#include "write_bufs.h"

/* Pieces are only pointed at, never read: a fake address range. */
static char *fake_base(uintptr_t at) { return (char *)at; }

static void test_big_pieces_are_split_without_truncation(void **state) {
  (void)state;
  const size_t big = ((size_t)5 << 30) + 7; /* a 5 GiB image and change */
  mr_encoded enc = {.npieces = 3};
  enc.piece[0] = (mr_piece){fake_base(0x10000), 210};
  enc.piece[1] = (mr_piece){fake_base(0x100000), 3};
  enc.piece[2] = (mr_piece){fake_base(0x200000), big};
  uv_buf_t bufs[16];
  int n = mr_write_bufs(&enc, bufs, 16);
  assert_int_equal(n, 2 + 6); /* 5 whole GiB, then 7 bytes */
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    assert_true(bufs[i].len > 0 && bufs[i].len <= MR_WRITE_BUF_MAX);
    total += bufs[i].len;
  }
  assert_int_equal(total, 210 + 3 + big);
  assert_ptr_equal(bufs[0].base, fake_base(0x10000));
  assert_ptr_equal(bufs[1].base, fake_base(0x100000));
  /* The big piece's buffers follow each other. */
  for (int i = 2; i < n; i++)
    assert_ptr_equal(bufs[i].base, fake_base(0x200000) + (size_t)(i - 2) * MR_WRITE_BUF_MAX);
  assert_int_equal(bufs[n - 1].len, 7);
}

static void test_too_many_buffers_is_an_error(void **state) {
  (void)state;
  mr_encoded enc = {.npieces = 1};
  enc.piece[0] = (mr_piece){fake_base(0x10000), 3 * MR_WRITE_BUF_MAX};
  uv_buf_t bufs[2];
  assert_int_equal(mr_write_bufs(&enc, bufs, 2), MR_ELIMIT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_big_pieces_are_split_without_truncation),
      cmocka_unit_test(test_too_many_buffers_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
