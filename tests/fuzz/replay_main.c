/* Runs a fuzz target over files (the saved crashes and the seed corpus) in
 * builds without libFuzzer, so every regression input is replayed by the
 * normal and sanitizer test runs too. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  LLVMFuzzerTestOneInput(buf, got);
  free(buf);
  return 0;
}

static void usage(FILE *f, const char *self) {
  fprintf(f, "usage: %s [FILE|DIR ...]\n"
             "replays each file, and each file in each folder, through the fuzz target\n"
             "(paths that do not exist are passed over: a target may have no regressions)\n",
             self);
}

int main(int argc, char **argv) {
  int files = 0, failed = 0;
  if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout, argv[0]);
    return 0;
  }
  for (int i = 1; i < argc; i++)
    if (argv[i][0] == '-') {
      fprintf(stderr, "%s: unknown option '%s'\n", argv[0], argv[i]);
      usage(stderr, argv[0]);
      return 2;
    }
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0)
      continue;
    if (!S_ISDIR(st.st_mode)) {
      failed |= replay_file(argv[i]);
      files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
      if (e->d_name[0] == '.')
        continue;
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
      failed |= replay_file(path);
      files++;
    }
    if (d != NULL)
      closedir(d);
  }
  printf("replayed %d inputs\n", files);
  return failed;
}
