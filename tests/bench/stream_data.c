#include "stream_data.h"

#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "test_support.h"

static int is_executable(const char *path) { return access(path, X_OK) == 0; }

/* The directory part of path ("." for none) into out. */
static void dir_of(const char *path, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  if (slash != NULL)
    snprintf(out, size, "%.*s", (int)(slash - path), path);
  else
    snprintf(out, size, ".");
}

static void self_dir(char *out, size_t size) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  dir_of(n > 0 ? exe : ".", out, size);
}

void stream_tools_find(const char *server, stream_tools *t) {
  char here[2048], there[2048];
  self_dir(here, sizeof here);
  snprintf(t->generator, sizeof t->generator, "%s/%s", here, ISMRMRD_TOOL);
  if (!is_executable(t->generator))
    snprintf(t->generator, sizeof t->generator, "%s",
             mr_test_have_tool(ISMRMRD_TOOL) ? ISMRMRD_TOOL : "");
  if (server != NULL)
    snprintf(t->server, sizeof t->server, "%s", server);
  else
    snprintf(t->server, sizeof t->server, "%s/reconserver", here);
  dir_of(t->server, there, sizeof there);
  snprintf(t->client, sizeof t->client, "%s/reconclient", there);
  if (!is_executable(t->client))
    snprintf(t->client, sizeof t->client, "%s/reconclient", here);
}

const char *stream_configs_dir(const char *configs) {
  struct stat st;
  if (configs != NULL)
    return configs;
  if (stat("configs", &st) == 0 && S_ISDIR(st.st_mode))
    return "configs";
  return MR_BENCH_SOURCE_CONFIGS;
}

void stream_first_line(const char *text, char *out, size_t size) {
  while (*text == '\n' || *text == ' ')
    text++;
  snprintf(out, size, "%.*s", (int)strcspn(text, "\n"), text);
}

int stream_data_generate(const stream_tools *t, const char *tool, const char *args,
                         const char *cwd, const char *path, double *seconds, char *why,
                         size_t why_size) {
  const char *argv[40];
  int argc = 0;
  char words[256];
  snprintf(words, sizeof words, "%s", args);
  int simulate = strcmp(tool, SIMULATE) == 0;
  if (simulate) {
    argv[argc++] = t->client;
    argv[argc++] = "simulate";
  } else {
    if (t->generator[0] == '\0') {
      snprintf(why, why_size,
               "%s is neither next to mr-bench nor on PATH (Debian package ismrmrd-tools)",
               ISMRMRD_TOOL);
      return -1;
    }
    argv[argc++] = t->generator;
  }
  char *save = NULL;
  for (char *w = strtok_r(words, " ", &save); w != NULL && argc < 36; w = strtok_r(NULL, " ", &save))
    argv[argc++] = w;
  argv[argc++] = "-o";
  argv[argc++] = path;
  argv[argc] = NULL;
  fprintf(stderr, "mr-bench: generating %s %s\n", tool, args);
  static char out[4096], err[4096]; /* one generator at a time */
  double t0 = bench_now_ms();
  int rc = mr_test_run(argv, cwd, out, sizeof out, err, sizeof err);
  *seconds = (bench_now_ms() - t0) / 1e3;
  if (rc == 0 && access(path, R_OK) == 0)
    return 0;
  char line[300];
  stream_first_line(err[0] != '\0' ? err : out, line, sizeof line);
  snprintf(why, why_size, "'%s %s' failed (exit %d)%s%s", tool, args, rc,
           line[0] != '\0' ? ": " : "", line);
  if (simulate && rc == 2) /* a usage error */
    snprintf(why + strlen(why), why_size - strlen(why),
             "; this build's reconclient simulate lacks the options the case needs");
  return -1;
}

int stream_listed(const char *list, const char *name) {
  if (list == NULL)
    return 1;
  size_t n = strlen(name);
  for (const char *p = list; *p != '\0'; p += strcspn(p, ",") + (p[strcspn(p, ",")] != '\0'))
    if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
      return 1;
  return 0;
}

int stream_unknown_name(const char *list, const char *const *names, int n, char *out,
                        size_t size) {
  for (const char *p = list; list != NULL && *p != '\0';
       p += strcspn(p, ",") + (p[strcspn(p, ",")] != '\0')) {
    int len = (int)strcspn(p, ","), known = 0;
    for (int i = 0; i < n; i++)
      known |= (int)strlen(names[i]) == len && strncmp(p, names[i], (size_t)len) == 0;
    if (!known) {
      snprintf(out, size, "%.*s", len, p);
      return 1;
    }
  }
  return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void stream_remove_tree(const char *dir) { nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }
