/* Names the calling thread (what top -H, ps -L, gdb and /proc show, and
 * what mr-bench load sums the server's CPU time by): printf-style, cut to
 * the kernel's 15 characters. Our threads' names start with "mr-". */
#ifndef MR_BASE_THREAD_NAME_H
#define MR_BASE_THREAD_NAME_H

void mr_thread_name(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
