/* The noise store (gadgets/store/noise_store.h, state_dir.h): what is saved
 * loads back bit for bit, also after the directory is closed and opened
 * again (a restart); hostile ids never name a file; a link in the folder
 * is neither followed on load nor written through on save; files appear
 * whole (no temporary file left, damaged or foreign files refused, stale
 * temporary files of a crash removed); the count and age bounds hold. */
#include <complex.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "noise_store.h"
#include "state_dir.h"
#include "test_support.h"

enum { NCH = 5 };

static char dir[256];

static int open_store(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("noise-store"));
  mr_err e = {0};
  assert_int_equal(mr_state_dir_open(dir, &mr_state_limits_default, &e), 0);
  return 0;
}

static int close_store(void **state) {
  (void)state;
  mr_state_dir_close();
  mr_test_remove_tree(dir);
  return 0;
}

/* Sums of a made-up noise: a positive diagonal, some coupling. */
static void make_stats(mr_noise_stats *s, double seed) {
  assert_int_equal(mr_noise_stats_init(s, NCH, 2.5f), 0);
  s->samples = 4096;
  s->fourth = 1234.5 * seed;
  for (int i = 0; i < NCH; i++)
    for (int j = 0; j <= i; j++)
      s->cov[i * NCH + j] = i == j ? 4096.0 * (1 + i + seed) : (i - j) * seed + I * (i + j);
}

/* The files of sub starting with prefix, the folder's own lock aside. */
static int count_files(const char *sub, const char *prefix) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  DIR *d = opendir(path);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
        strcmp(e->d_name, ".lock") != 0 && strncmp(e->d_name, prefix, strlen(prefix)) == 0)
      n++;
  closedir(d);
  return n;
}

static void noise_path(const char *name, char *path, size_t size) {
  snprintf(path, size, "%s/noise/%s", dir, name);
}

static void set_age(const char *name, time_t seconds_ago) {
  char path[400];
  noise_path(name, path, sizeof path);
  struct timespec t[2] = {{time(NULL) - seconds_ago, 0}, {time(NULL) - seconds_ago, 0}};
  assert_int_equal(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0);
}

static void saves_loads_and_survives_restart(void **state) {
  (void)state;
  const char *id = "42563_35189578_35189583_24";
  mr_noise_stats s, got;
  mr_err e = {0};
  make_stats(&s, 1);
  assert_int_equal(mr_noise_store_save(id, &s, &e), 0);
  for (int restart = 0; restart < 2; restart++) {
    assert_int_equal(mr_noise_store_load(id, &got, &e), 0);
    assert_int_equal(got.nch, NCH);
    assert_int_equal(got.samples, s.samples);
    assert_true(got.dwell_us == s.dwell_us && got.fourth == s.fourth);
    assert_memory_equal(got.cov, s.cov, NCH * NCH * sizeof *s.cov);
    double lo, hi, mean;
    mr_noise_stats_sigmas(&got, &lo, &hi, &mean);
    assert_true(fabs(lo - sqrt(2.0)) < 1e-12 && fabs(hi - sqrt(6.0)) < 1e-12);
    mr_noise_stats_free(&got);
    /* A new server process opens the same directory. */
    mr_state_dir_close();
    assert_int_equal(mr_state_dir_open(dir, &mr_state_limits_default, &e), 0);
  }
  assert_int_equal(count_files("noise", ".tmp-"), 0);
  assert_int_equal(count_files("noise", id), 1);
  mr_noise_stats_free(&s);
}

static void refuses_hostile_ids(void **state) {
  (void)state;
  char longest[200];
  memset(longest, 'a', 129);
  longest[129] = '\0';
  const char *ids[] = {"../escape", "/etc/passwd", "a/b", "", ".", "..", ".hidden",
                       "x\ny",      "tab\t",       "sp ace", "back\\slash", longest,
                       "\xc3\xa9"};
  mr_noise_stats s, got;
  make_stats(&s, 2);
  for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
    mr_err e = {0};
    assert_int_equal(mr_noise_store_save(ids[i], &s, &e), MR_EINVAL);
    assert_int_equal(mr_noise_store_load(ids[i], &got, &e), MR_ENOENT);
  }
  assert_int_equal(count_files("noise", ""), 0);
  assert_int_equal(count_files("..", "escape"), 0);
  mr_noise_stats_free(&s);
}

static void never_follows_links(void **state) {
  (void)state;
  char target[400], link[400];
  snprintf(target, sizeof target, "%s/outside", dir);
  FILE *f = fopen(target, "w");
  assert_non_null(f);
  fputs("precious", f);
  fclose(f);
  noise_path("evil.noise", link, sizeof link);
  assert_int_equal(symlink(target, link), 0);
  mr_noise_stats s, got;
  mr_err e = {0};
  assert_true(mr_noise_store_load("evil", &got, &e) < 0);
  make_stats(&s, 3);
  assert_int_equal(mr_noise_store_save("evil", &s, &e), 0);
  /* The link was replaced, its target untouched. */
  struct stat st;
  assert_int_equal(lstat(link, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  char text[16] = "";
  f = fopen(target, "r");
  assert_non_null(fgets(text, sizeof text, f));
  fclose(f);
  assert_string_equal(text, "precious");
  assert_int_equal(mr_noise_store_load("evil", &got, &e), 0);
  mr_noise_stats_free(&got);
  mr_noise_stats_free(&s);
}

static void refuses_damaged_files(void **state) {
  (void)state;
  mr_noise_stats s, got;
  mr_err e = {0};
  make_stats(&s, 4);
  assert_int_equal(mr_noise_store_save("whole", &s, &e), 0);
  char from[400], to[400];
  noise_path("whole.noise", from, sizeof from);
  /* Another measurement's file under this name: its id does not match. */
  noise_path("copied.noise", to, sizeof to);
  char cmd[900];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(mr_noise_store_load("copied", &got, &e), MR_EDATA);
  /* Cut short (what a non-atomic writer could leave). */
  assert_int_equal(truncate(from, 200), 0);
  assert_int_equal(mr_noise_store_load("whole", &got, &e), MR_EDATA);
  /* Non-finite sums. */
  s.cov[0] = NAN;
  assert_int_equal(mr_noise_store_save("nan", &s, &e), 0);
  assert_int_equal(mr_noise_store_load("nan", &got, &e), MR_EDATA);
  mr_noise_stats_free(&s);
}

/* A temporary file no writer holds was left by a server that died: removed
 * at start, however new (issue 27 item 8); one a live writer holds (its
 * flock, as mr_state_file_begin takes it; here another server sharing the
 * directory) stays, however old. */
static void removes_abandoned_temporary_files(void **state) {
  (void)state;
  const char *names[] = {".tmp-1-1", ".tmp-1-2"};
  int held = -1;
  for (int i = 0; i < 2; i++) {
    char path[400];
    noise_path(names[i], path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    if (i == 1) {
      assert_int_equal(flock(fd, LOCK_EX), 0);
      held = fd;
    } else {
      close(fd);
    }
  }
  set_age(".tmp-1-2", 2 * 3600);
  mr_err e = {0};
  mr_state_dir_close();
  assert_int_equal(mr_state_dir_open(dir, &mr_state_limits_default, &e), 0);
  assert_int_equal(count_files("noise", ".tmp-1-1"), 0);
  assert_int_equal(count_files("noise", ".tmp-1-2"), 1);
  close(held); /* its writer dies */
  mr_state_dir_close();
  assert_int_equal(mr_state_dir_open(dir, &mr_state_limits_default, &e), 0);
  assert_int_equal(count_files("noise", ".tmp-1-2"), 0);
}

static void keeps_count_and_age_bounds(void **state) {
  (void)state;
  mr_state_limits lim = {.noise_max_entries = 3, .noise_max_age_s = 3600, .dump_max_bytes = 0};
  mr_err e = {0};
  assert_int_equal(mr_state_dir_open(dir, &lim, &e), 0);
  mr_noise_stats s, got;
  make_stats(&s, 5);
  char id[32], name[48];
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "m%d", i);
    assert_int_equal(mr_noise_store_save(id, &s, &e), 0);
    snprintf(name, sizeof name, "m%d.noise", i);
    set_age(name, 100 - i); /* m0 oldest */
  }
  assert_int_equal(count_files("noise", "m"), 3);
  for (int i = 0; i < 5; i++) {
    snprintf(id, sizeof id, "m%d", i);
    int rc = mr_noise_store_load(id, &got, &e);
    assert_int_equal(rc, i < 2 ? MR_ENOENT : 0);
    if (rc == 0)
      mr_noise_stats_free(&got);
  }
  /* Too old: not used, and removed. */
  set_age("m4.noise", 7200);
  mr_err_clear(&e);
  assert_int_equal(mr_noise_store_load("m4", &got, &e), MR_ENOENT);
  assert_non_null(strstr(e.msg, "older than"));
  assert_int_equal(count_files("noise", "m4"), 0);
  mr_noise_stats_free(&s);
}

static void without_state_dir(void **state) {
  (void)state;
  mr_state_dir_close();
  mr_noise_stats s, got;
  mr_err e = {0};
  make_stats(&s, 6);
  assert_int_equal(mr_noise_store_save("x", &s, &e), MR_ENOTSUP);
  assert_non_null(strstr(e.msg, "--state-dir"));
  assert_int_equal(mr_noise_store_load("x", &got, &e), MR_ENOENT);
  mr_noise_stats_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(saves_loads_and_survives_restart, open_store, close_store),
      cmocka_unit_test_setup_teardown(refuses_hostile_ids, open_store, close_store),
      cmocka_unit_test_setup_teardown(never_follows_links, open_store, close_store),
      cmocka_unit_test_setup_teardown(refuses_damaged_files, open_store, close_store),
      cmocka_unit_test_setup_teardown(removes_abandoned_temporary_files, open_store, close_store),
      cmocka_unit_test_setup_teardown(keeps_count_and_age_bounds, open_store, close_store),
      cmocka_unit_test_setup_teardown(without_state_dir, open_store, close_store),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
