/* cgroup.h on fake trees: cgroup v2 and v1, numbers and "max" / -1, limits
 * on an ancestor, a container that sees its own cgroup as the root, and
 * missing files (issue 12, item 5: the default budget and thread counts
 * follow the container's limits, not the host's). */
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

#include "cgroup.h"
#include "test_support.h"

/* Writes text to root/rel, making the directories on the way. */
static void put(const char *root, const char *rel, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *p = path + strlen(root) + 1; *p != '\0'; p++) {
    if (*p == '/') {
      *p = '\0';
      mkdir(path, 0755);
      *p = '/';
    }
  }
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *fresh(void) {
  static char root[512];
  snprintf(root, sizeof root, "%s", mr_test_tmpdir("mr-cgroup"));
  return root;
}

static void test_v2(void **state) {
  (void)state;
  const char *root = fresh();
  put(root, "proc/self/cgroup", "0::/system.slice/app.service\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
  put(root, "sys/fs/cgroup/system.slice/memory.max", "max\n");
  put(root, "sys/fs/cgroup/system.slice/cpu.max", "max 100000\n");
  put(root, "sys/fs/cgroup/system.slice/app.service/memory.max", "268435456\n");
  put(root, "sys/fs/cgroup/system.slice/app.service/cpu.max", "150000 100000\n");
  mr_cgroup_limits l;
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 268435456);
  assert_true(l.cpus > 1.49 && l.cpus < 1.51);

  /* A tighter limit on an ancestor applies. */
  put(root, "sys/fs/cgroup/system.slice/memory.max", "100000000\n");
  put(root, "sys/fs/cgroup/system.slice/cpu.max", "50000 100000\n");
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 100000000);
  assert_true(l.cpus > 0.49 && l.cpus < 0.51);
}

static void test_v2_unlimited_and_namespaced(void **state) {
  (void)state;
  const char *root = fresh();
  /* Inside a cgroup namespace the container's cgroup is "/". */
  put(root, "proc/self/cgroup", "0::/\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  put(root, "sys/fs/cgroup/memory.max", "max\n");
  put(root, "sys/fs/cgroup/cpu.max", "max 100000\n");
  mr_cgroup_limits l;
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 0);
  assert_true(l.cpus == 0);
  put(root, "sys/fs/cgroup/memory.max", "536870912\n");
  put(root, "sys/fs/cgroup/cpu.max", "200000 100000\n");
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 536870912);
  assert_true(l.cpus > 1.99 && l.cpus < 2.01);
}

static void test_v1(void **state) {
  (void)state;
  const char *root = fresh();
  put(root, "proc/self/cgroup",
      "9:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n");
  put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  put(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "268435456\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  mr_cgroup_limits l;
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 268435456);
  assert_true(l.cpus > 2.99 && l.cpus < 3.01);
}

/* Docker without a cgroup namespace on v1: /proc/self/cgroup names the
 * host's path, but the container's own cgroup is mounted at the root. */
static void test_v1_own_cgroup_at_the_root(void **state) {
  (void)state;
  const char *root = fresh();
  put(root, "proc/self/cgroup", "4:memory:/docker/abc\n3:cpu:/docker/abc\n");
  put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "134217728\n");
  put(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000\n");
  put(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  mr_cgroup_limits l;
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 134217728);
  assert_true(l.cpus > 0.49 && l.cpus < 0.51);
  /* Unlimited: quota -1 and the page-rounded LONG_MAX. */
  put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  put(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 0);
  assert_true(l.cpus == 0);
}

static void test_missing_files(void **state) {
  (void)state;
  const char *root = fresh();
  mr_cgroup_limits l = {.memory_bytes = 1, .cpus = 1};
  mr_cgroup_read(root, &l); /* nothing at all */
  assert_int_equal(l.memory_bytes, 0);
  assert_true(l.cpus == 0);
  put(root, "proc/self/cgroup", "0::/a\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "\n");
  put(root, "sys/fs/cgroup/a/cpu.max", "garbage\n"); /* unreadable as a limit */
  mr_cgroup_read(root, &l);
  assert_int_equal(l.memory_bytes, 0);
  assert_true(l.cpus == 0);
  /* v1 with a quota but no period is no limit either. */
  root = fresh();
  put(root, "proc/self/cgroup", "3:cpu:/\n");
  put(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000\n");
  mr_cgroup_read(root, &l);
  assert_true(l.cpus == 0);
}

static void test_available_takes_the_lower(void **state) {
  (void)state;
  const char *root = fresh();
  put(root, "proc/self/cgroup", "0::/\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  put(root, "sys/fs/cgroup/memory.max", "268435456\n");
  put(root, "sys/fs/cgroup/cpu.max", "50000 100000\n");
  uint64_t memory;
  int cpus;
  mr_cgroup_available(root, &memory, &cpus);
  assert_int_equal(memory, 268435456);
  assert_int_equal(cpus, 1); /* half a CPU: one thread */
  /* A limit above the host's memory leaves the host's. */
  put(root, "sys/fs/cgroup/memory.max", "1152921504606846976\n");
  put(root, "sys/fs/cgroup/cpu.max", "max 100000\n");
  mr_cgroup_available(root, &memory, &cpus);
  assert_int_equal(memory, (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE));
  assert_int_equal(cpus, (int)sysconf(_SC_NPROCESSORS_ONLN));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_v2),
      cmocka_unit_test(test_v2_unlimited_and_namespaced),
      cmocka_unit_test(test_v1),
      cmocka_unit_test(test_v1_own_cgroup_at_the_root),
      cmocka_unit_test(test_missing_files),
      cmocka_unit_test(test_available_takes_the_lower),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
