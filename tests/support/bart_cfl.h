/* The tests that compare with `bart` (Debian's package): its files
 * (NAME.hdr with the dimensions, NAME.cfl complex floats with the first
 * dimension fastest: the order of our [coil][z][y][x] arrays for
 * dimensions x, y, z, coils) and one run of a bart command. */
#ifndef MR_TEST_BART_CFL_H
#define MR_TEST_BART_CFL_H

#include <stddef.h>

#include "cfloat.h"

/* The group a gpu/ test program runs that also has a --bart group:
 * 2 for --bart (exits 77 when bart is not on the PATH; the pool is the
 * CPU group's), else gpu_test_init()'s 1 (--cuda) or 0. */
int bart_test_init(int argc, char **argv);

/* Runs `bart COMMAND IN OUT` in a temporary folder: in (dims[0] x dims[1]
 * x dims[2] x dims[3]) written as IN, out_n values of OUT read back into
 * out; the folder removed. Fails the calling cmocka test on any error. */
void bart_run(const char *command, const size_t dims[4], const mr_cfloat *in, size_t out_n,
              mr_cfloat *out);

#endif
