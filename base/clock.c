#include "clock.h"

#include <time.h>

uint64_t mr_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t mr_now_ms(void) { return mr_now_ns() / 1000000u; }
