/* mr-bench stream and load: the programs a session bench runs beside the
 * server (reconclient, the ISMRMRD Cartesian generator) and the data files
 * they generate, before anything is timed. */
#ifndef MR_BENCH_STREAM_DATA_H
#define MR_BENCH_STREAM_DATA_H

#include <limits.h>
#include <stddef.h>

#define ISMRMRD_TOOL "ismrmrd_generate_cartesian_shepp_logan"
#define SIMULATE "reconclient simulate"

typedef struct stream_tools {
  char server[PATH_MAX];    /* reconserver */
  char client[PATH_MAX];    /* reconclient */
  char generator[PATH_MAX]; /* ISMRMRD_TOOL, "" when there is none */
} stream_tools;

/* reconserver: server (mr-bench --server) or next to mr-bench; reconclient:
 * next to it, else next to mr-bench; the data generator: next to mr-bench
 * (for machines without ismrmrd-tools, where it is carried with its
 * libraries), else on PATH. */
void stream_tools_find(const char *server, stream_tools *t);

/* The servers' configs: configs (mr-bench --configs), else ./configs, else
 * the source tree's. */
const char *stream_configs_dir(const char *configs);

/* Runs tool (ISMRMRD_TOOL or SIMULATE) with the space-separated args and
 * -o path, in the directory cwd; *seconds: how long it took. 0, or -1 with
 * the reason in why (a missing tool, its exit status and first line). */
int stream_data_generate(const stream_tools *t, const char *tool, const char *args,
                         const char *cwd, const char *path, double *seconds, char *why,
                         size_t why_size);

/* 1 when name is in the comma-separated list (NULL: every name is). */
int stream_listed(const char *list, const char *name);

/* The first name of the comma-separated list that is none of names[n],
 * into out; 0 when all are known. */
int stream_unknown_name(const char *list, const char *const *names, int n, char *out,
                        size_t size);

/* Removes dir and everything in it. */
void stream_remove_tree(const char *dir);

/* The first line of text (for a one-line reason). */
void stream_first_line(const char *text, char *out, size_t size);

#endif
