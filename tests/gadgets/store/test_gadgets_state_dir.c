/* The state directory under concurrency (issue 27 items 3 and 8): commits
 * and prunes of many sessions at once keep exactly the newest files and
 * never lose one a client was told is stored; dumps being written count
 * against the dumps' byte limit together. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "state_dir.h"
#include "test_support.h"

static char dir[256];

static int open_dir(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("state-dir"));
  return 0;
}

static int close_dir(void **state) {
  (void)state;
  mr_state_dir_close();
  mr_test_remove_tree(dir);
  return 0;
}

/* The files of folder sub whose names end in suffix: count and bytes. */
static int listing(const char *sub, const char *suffix, uint64_t *bytes) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  *bytes = 0;
  struct stat st;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name), m = strlen(suffix);
    if (len < m || strcmp(e->d_name + len - m, suffix) != 0 ||
        fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode))
      continue;
    n++;
    *bytes += (uint64_t)st.st_size;
  }
  closedir(d);
  return n;
}

enum { THREADS = 8, KEEP = 3, ROUNDS = 10 };

typedef struct committer {
  int round, index;
  pthread_barrier_t *start;
  int stored;       /* commit said so */
  int found;        /* the file was there right after */
  struct timespec mtime;
  char name[64];
} committer;

static void *commit_one(void *arg) {
  committer *c = arg;
  int fd = mr_state_dir_fd("noise");
  mr_state_file f;
  mr_err e = {0};
  snprintf(c->name, sizeof c->name, "r%d-t%d.noise", c->round, c->index);
  pthread_barrier_wait(c->start);
  if (mr_state_file_begin(fd, &f, &e) != 0)
    return NULL;
  if (mr_state_file_write(&f, c->name, strlen(c->name), &e) != 0) {
    mr_state_file_abort(&f);
    return NULL;
  }
  mr_state_bounds keep = {".noise", KEEP, 0, 0};
  c->stored = mr_state_file_commit(&f, c->name, &keep, &e) == 0;
  struct stat st;
  if (fstatat(fd, c->name, &st, 0) == 0) {
    c->found = 1;
    c->mtime = st.st_mtim;
  }
  return NULL;
}

static int newer(struct timespec a, struct timespec b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

/* Eight sessions commit at once with a limit of three, ten times over:
 * three files remain each time, the newest, and every one a client was
 * told is stored and found is gone only when three newer ones remain. */
static void concurrent_commits_keep_exactly_the_newest(void **state) {
  (void)state;
  mr_state_limits lim = mr_state_limits_default;
  mr_err e = {0};
  assert_int_equal(mr_state_dir_open(dir, &lim, &e), 0);
  for (int round = 0; round < ROUNDS; round++) {
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    committer c[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
      c[i] = (committer){.round = round, .index = i, .start = &start};
      assert_int_equal(pthread_create(&t[i], NULL, commit_one, &c[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
      pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    uint64_t bytes;
    assert_int_equal(listing("noise", ".noise", &bytes), KEEP);
    struct stat st;
    int fd = mr_state_dir_fd("noise");
    for (int i = 0; i < THREADS; i++) {
      assert_true(c[i].stored);
      if (!c[i].found || fstatat(fd, c[i].name, &st, 0) == 0)
        continue;
      /* c[i] was stored and is gone: KEEP newer files remain. */
      int newer_left = 0;
      for (int j = 0; j < THREADS; j++)
        if (j != i && fstatat(fd, c[j].name, &st, 0) == 0 && newer(st.st_mtim, c[i].mtime))
          newer_left++;
      if (newer_left != KEEP)
        fail_msg("round %d: %s was stored and removed with %d newer files left", round,
                 c[i].name, newer_left);
    }
    for (int i = 0; i < THREADS; i++)
      unlinkat(fd, c[i].name, 0);
  }
}

static void write_dump(mr_state_file *f, uint64_t bytes, const mr_state_bounds *keep,
                       int expect) {
  static char chunk[4096];
  mr_err e = {0};
  for (uint64_t done = 0; done < bytes; done += sizeof chunk) {
    int rc = mr_state_file_reserve(f, sizeof chunk, keep, &e);
    if (rc < 0) {
      assert_int_equal(rc, expect);
      assert_non_null(strstr(e.msg, "the files being written would together pass the limit"));
      return;
    }
    assert_int_equal(mr_state_file_write(f, chunk, sizeof chunk, &e), 0);
  }
  assert_int_equal(expect, 0);
}

/* --dump-max-mib bounds the dumps together, those being written
 * included: a second dump that would pass it while the first is being
 * written is refused, and a stored dump makes room for a new one. */
static void dumps_being_written_count(void **state) {
  (void)state;
  mr_state_limits lim = mr_state_limits_default;
  lim.dump_max_bytes = 1 << 20;
  mr_err e = {0};
  assert_int_equal(mr_state_dir_open(dir, &lim, &e), 0);
  mr_state_bounds keep = {".mrd", 0, 0, lim.dump_max_bytes};
  int fd = mr_state_dir_fd("dumps");
  mr_state_file a, b;
  assert_int_equal(mr_state_file_begin(fd, &a, &e), 0);
  assert_int_equal(mr_state_file_begin(fd, &b, &e), 0);
  write_dump(&a, 700 << 10, &keep, 0);
  write_dump(&b, 400 << 10, &keep, MR_ELIMIT); /* 700 + 400 kB > 1 MiB */
  mr_state_file_abort(&b);
  assert_int_equal(mr_state_file_commit(&a, "a.mrd", &keep, &e), 0);
  uint64_t bytes;
  assert_int_equal(listing("dumps", ".mrd", &bytes), 1);
  /* A new 700 kB dump: the stored one goes as it grows, so the folder
   * never holds more than the limit. */
  mr_state_file c;
  assert_int_equal(mr_state_file_begin(fd, &c, &e), 0);
  write_dump(&c, 700 << 10, &keep, 0);
  assert_int_equal(listing("dumps", ".mrd", &bytes), 0);
  uint64_t tmp_bytes;
  listing("dumps", "", &tmp_bytes);
  assert_true(tmp_bytes <= lim.dump_max_bytes);
  assert_int_equal(mr_state_file_commit(&c, "c.mrd", &keep, &e), 0);
  assert_int_equal(listing("dumps", ".mrd", &bytes), 1);
  assert_int_equal(bytes, 700 << 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(concurrent_commits_keep_exactly_the_newest, open_dir,
                                      close_dir),
      cmocka_unit_test_setup_teardown(dumps_being_written_count, open_dir, close_dir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
