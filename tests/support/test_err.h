/* The mr_err that tests and benchmarks hand to gpu/ calls whose line they
 * only print or check right after the call: TERR empties this thread's one
 * as the argument is evaluated, so after a call it holds that call's line
 * alone (mr_test_last_error()), whatever failed before. */
#ifndef MR_TEST_ERR_H
#define MR_TEST_ERR_H

#include "error.h"

static _Thread_local mr_err mr_test_err_ __attribute__((unused));

static inline mr_err *mr_test_err_fresh(void) {
  mr_err_clear(&mr_test_err_);
  return &mr_test_err_;
}

#define TERR mr_test_err_fresh()
/* The line of this thread's last call given TERR ("" when none). */
#define mr_test_last_error() ((const char *)mr_test_err_.msg)

#endif
