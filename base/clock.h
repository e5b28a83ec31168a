/* The monotonic clock every timing, timeout and deadline of the server
 * reads (never the wall clock, which jumps). */
#ifndef MR_BASE_CLOCK_H
#define MR_BASE_CLOCK_H

#include <stdint.h>

/* Nanoseconds and milliseconds of CLOCK_MONOTONIC. */
uint64_t mr_now_ns(void);
uint64_t mr_now_ms(void);

#endif
