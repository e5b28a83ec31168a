/* base/error.h: the first error is kept; mr_err_code gives a callee's code
 * or the caller's fallback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"

static void first_error_kept(void **state) {
  (void)state;
  mr_err e = {0};
  assert_int_equal(mr_err_set(&e, MR_ELIMIT, "over the budget"), MR_ELIMIT);
  assert_int_equal(mr_err_set(&e, MR_ENOMEM, "out of memory"), MR_ENOMEM);
  assert_int_equal(e.code, MR_ELIMIT);
  assert_string_equal(mr_err_text(&e, MR_ENOMEM), "over the budget");
}

static void code_or_fallback(void **state) {
  (void)state;
  mr_err e = {0};
  assert_int_equal(mr_err_code(NULL, MR_ENOMEM), MR_ENOMEM);
  assert_int_equal(mr_err_code(&e, MR_ENOMEM), MR_ENOMEM);
  mr_err_set(&e, MR_ELIMIT, "over the budget");
  assert_int_equal(mr_err_code(&e, MR_ENOMEM), MR_ELIMIT);
  mr_err_clear(&e);
  assert_int_equal(mr_err_code(&e, MR_EDATA), MR_EDATA);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(first_error_kept),
      cmocka_unit_test(code_or_fallback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
