/* BART's file format for the tests that compare with `bart` (Debian's
 * package): NAME.hdr (the dimensions) and NAME.cfl (complex floats,
 * the first dimension fastest: the order of our [coil][z][y][x] arrays for
 * dimensions x, y, z, coils). */
#ifndef MR_TEST_BART_CFL_H
#define MR_TEST_BART_CFL_H

#include <stddef.h>

#include "cfloat.h"

/* 1 when `bart` is on the PATH. */
int bart_cfl_have_bart(void);

/* Writes x of dims[0] x dims[1] x dims[2] x dims[3] as base.hdr and
 * base.cfl; reads n values of base.cfl into x. Fail the calling cmocka
 * test on an I/O error. */
void bart_cfl_write(const char *base, const size_t dims[4], const mr_cfloat *x);
void bart_cfl_read(const char *base, size_t n, mr_cfloat *x);

#endif
