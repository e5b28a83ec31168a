/* BART's array files: NAME.hdr (a comment line, then the dimensions) and
 * NAME.cfl (complex floats, first dimension fastest), as `bart` reads and
 * writes them. */
#ifndef MR_TEST_CFL_H
#define MR_TEST_CFL_H

#include <complex.h>

enum { CFL_MAX_DIMS = 16 };

/* Writes name.hdr and name.cfl: ndims dimensions (the rest 1). 0 or -1
 * (errno set). */
int cfl_write(const char *name, int ndims, const long *dims, const float complex *data);

/* Reads name.hdr and name.cfl: dims (CFL_MAX_DIMS, missing ones 1) and a
 * malloc'ed array of their product, or NULL. */
float complex *cfl_read(const char *name, long dims[CFL_MAX_DIMS]);

/* The product of the dimensions. */
long cfl_size(const long dims[CFL_MAX_DIMS]);

#endif
