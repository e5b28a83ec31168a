/* Internal: the per-thread detail line behind mr_device_error() (device.h
 * says who reads it). Written by gpu/ and by the tasks it runs (a gadget's
 * step given to mr_device_run(), through mr_placement_run()): a task has no
 * mr_err of its own, so this is how its failure's text reaches the thread
 * that asked for the work. C and C++ (the .cu files report library
 * failures through it). */
#ifndef MR_GPU_FAIL_H
#define MR_GPU_FAIL_H

#ifdef __cplusplus
extern "C" {
#endif

/* Sets this thread's detail line from fmt and returns code, so a failure
 * reads `return mr_fail(MR_EINVAL, "fft: rank %d", rank)`. */
int mr_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#ifdef __clang_analyzer__
/* The static analyzer does not follow calls into variadic functions: for
 * it alone, the call says what it returns (as gadget.h's mr_gadget_fail). */
#define mr_fail(code, ...) (mr_fail((code), __VA_ARGS__), (code))
#endif

/* This thread's detail line ("" when none). */
const char *mr_fail_detail(void);

/* Replaces this thread's detail line with a copy of line (carries a
 * worker's failure back to the thread that asked for the work). */
void mr_fail_set_detail(const char *line);

#ifdef __cplusplus
}
#endif

#endif
