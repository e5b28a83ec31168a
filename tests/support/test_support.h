/* Small helpers shared by the tests: numeric comparisons and paths. */
#ifndef MR_TEST_SUPPORT_H
#define MR_TEST_SUPPORT_H

#include <complex.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>

/* Exit code that ctest reads as "skipped". */
#define MR_TEST_SKIP 77

/* ||a - b|| / ||b|| over n values (double accumulation). */
double mr_test_rel_error_f(const float *a, const float *b, size_t n);
double mr_test_rel_error_c(const float complex *a, const float complex *b, size_t n);

/* NRMSE of a against reference b after scaling a by the least-squares
 * factor s = <a, b> / <a, a>: ||s a - b|| / ||b||. */
double mr_test_nrmse_scaled(const float *a, const float *b, size_t n);

/* Reference centered unitary DFT in double precision, the slow way:
 * out = fftshift(dft(ifftshift(in))) / sqrt(nx ny nz) with exp(sign i ...),
 * sign = +1 for k-space -> image (BACKWARD), -1 for image -> k-space.
 * Arrays are x fastest, nx*ny*nz values. */
void mr_test_centered_dft(const double complex *in, double complex *out, size_t nx, size_t ny,
                          size_t nz, int sign);

/* The wire bytes of n messages back to back (malloc'ed; borrows msgs);
 * ends[i], when ends is not NULL, is where message i ends. Aborts when a
 * message does not encode. */
struct mr_message;
uint8_t *mr_test_encode_all(struct mr_message *const *msgs, int n, size_t *len, size_t *ends);

/* Issue 12, item 13: a float IMAGE header of 33657 x 54192 x 45917 pixels
 * x 55065 channels, whose size in bytes is over 2^64 and wraps to
 * MR_TEST_WRAPPED_IMAGE_BYTES (34,940,864: under the 1 GiB image limit). */
#define MR_TEST_WRAPPED_IMAGE_BYTES 34940864u
struct ISMRMRD_ImageHeader;
void mr_test_wrapped_image_header(struct ISMRMRD_ImageHeader *h);

/* A new IMAGE message (the caller's) of one channel, nx x ny pixels of
 * ISMRMRD data_type, zeros, with attributes (NULL: none); NULL when the
 * header is refused. */
struct mr_message;
struct mr_message *mr_test_image(uint16_t data_type, uint16_t nx, uint16_t ny,
                                 const char *attributes);

/* The source tree root (MR_SOURCE_DIR from ctest, else "."). */
const char *mr_test_source_dir(void);
/* The build tree root (MR_BINARY_DIR from ctest, else "build"). */
const char *mr_test_binary_dir(void);

/* Makes a fresh temporary directory and returns its path (static storage,
 * valid until the next call); aborts the test program on failure. It is
 * removed, with everything in it, when the program exits (the first 64 of
 * a program's; MR_TEST_KEEP_TMP set in the environment keeps them). */
const char *mr_test_tmpdir(const char *prefix);
/* Removes path and everything below it (a test's temporary directory);
 * aborts the test program on failure. */
void mr_test_remove_tree(const char *path);

/* Runs argv (searched on PATH, NULL-terminated) and returns its exit code
 * (128 + signal when killed). With capture_dir, its stdout and stderr go
 * to files there and come back NUL-terminated in out and err (truncated
 * to their sizes); without, they go to the test's own output. */
int mr_test_run(const char *const *argv, const char *capture_dir, char *out, size_t out_size,
                char *err, size_t err_size);

/* 1 when an executable named `tool` is on PATH. */
int mr_test_have_tool(const char *tool);

/* The calling thread's CPU affinity into *all and its first CPU alone
 * into *one: to run something on one CPU (sched_setaffinity) and then on
 * all of them again. */
void mr_test_one_cpu(cpu_set_t *all, cpu_set_t *one);

#endif
