#include "state_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const mr_state_limits mr_state_limits_default = {
    .noise_max_entries = 256,
    .noise_max_age_s = 7 * 24 * 3600,
    .dump_max_bytes = (uint64_t)1 << 30,
};

#define TMP_PREFIX ".tmp-"
/* A temporary file this old was left by a crash (or a writer stuck for an
 * hour): removed when the directory is opened. */
#define STALE_TMP_S 3600

static struct {
  int root, noise, dumps; /* -1 when closed */
  mr_state_limits limits;
} state = {-1, -1, -1, {0}};

static atomic_uint tmp_counter;

static int open_sub(int root, const char *name, mr_err *err) {
  if (mkdirat(root, name, 0700) != 0 && errno != EEXIST)
    return mr_err_set(err, MR_EIO, "state directory: cannot create %s: %m", name);
  int fd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return mr_err_set(err, MR_EIO, "state directory: cannot open %s: %m", name);
  return fd;
}

/* A listing of dirfd from its start (its own descriptor), or NULL. */
static DIR *listing(int dirfd) {
  int fd = dup(dirfd);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (d == NULL && fd >= 0)
    close(fd);
  if (d != NULL)
    rewinddir(d);
  return d;
}

static void remove_stale_tmp(int dirfd) {
  DIR *d = listing(dirfd);
  if (d == NULL)
    return;
  time_t now = time(NULL);
  struct stat st;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 &&
        fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        now - st.st_mtime > STALE_TMP_S)
      unlinkat(dirfd, e->d_name, 0);
  closedir(d);
}

int mr_state_dir_open(const char *path, const mr_state_limits *limits, mr_err *err) {
  mr_state_dir_close();
  if (mkdir(path, 0700) != 0 && errno != EEXIST)
    return mr_err_set(err, MR_EIO, "cannot create state directory %s: %m", path);
  int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return mr_err_set(err, MR_EIO, "cannot open state directory %s: %m", path);
  int noise = open_sub(root, "noise", err);
  int dumps = noise >= 0 ? open_sub(root, "dumps", err) : -1;
  if (noise < 0 || dumps < 0) {
    if (noise >= 0)
      close(noise);
    close(root);
    return noise < 0 ? noise : dumps;
  }
  remove_stale_tmp(noise);
  remove_stale_tmp(dumps);
  state.root = root;
  state.noise = noise;
  state.dumps = dumps;
  state.limits = *limits;
  return 0;
}

void mr_state_dir_close(void) {
  int *fds[] = {&state.root, &state.noise, &state.dumps};
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) {
    if (*fds[i] >= 0)
      close(*fds[i]);
    *fds[i] = -1;
  }
}

int mr_state_dir_fd(const char *sub) {
  if (strcmp(sub, "noise") == 0)
    return state.noise;
  if (strcmp(sub, "dumps") == 0)
    return state.dumps;
  return -1;
}

const mr_state_limits *mr_state_dir_limits(void) { return &state.limits; }

int mr_state_file_begin(int dirfd, mr_state_file *f, mr_err *err) {
  memset(f, 0, sizeof *f);
  f->dirfd = dirfd;
  for (int attempt = 0; attempt < 16; attempt++) {
    snprintf(f->tmp, sizeof f->tmp, TMP_PREFIX "%ld-%u", (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    f->fd = openat(dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f->fd >= 0 || errno != EEXIST)
      break;
  }
  if (f->fd < 0)
    return mr_err_set(err, MR_EIO, "state directory: cannot create a file: %m");
  return 0;
}

int mr_state_file_write(mr_state_file *f, const void *data, size_t len, mr_err *err) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(f->fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return mr_err_set(err, MR_EIO, "state directory: write failed: %m");
    p += n;
    len -= (size_t)n;
    f->bytes += (uint64_t)n;
  }
  return 0;
}

int mr_state_file_commit(mr_state_file *f, const char *name, mr_err *err) {
  int rc = 0;
  if (fsync(f->fd) != 0)
    rc = mr_err_set(err, MR_EIO, "state directory: sync failed: %m");
  close(f->fd);
  f->fd = -1;
  if (rc == 0 && renameat(f->dirfd, f->tmp, f->dirfd, name) != 0)
    rc = mr_err_set(err, MR_EIO, "state directory: cannot rename to %s: %m", name);
  if (rc < 0) {
    unlinkat(f->dirfd, f->tmp, 0);
    return rc;
  }
  fsync(f->dirfd); /* the rename itself survives a power cut */
  return 0;
}

void mr_state_file_abort(mr_state_file *f) {
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
  unlinkat(f->dirfd, f->tmp, 0);
}

int mr_state_read(int dirfd, const char *name, size_t max_bytes, char **data, size_t *len,
                  time_t *mtime, mr_err *err) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errno == ENOENT ? mr_err_set(err, MR_ENOENT, "%s is not stored", name)
                           : mr_err_set(err, MR_EIO, "cannot open %s: %m", name);
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max_bytes) {
    close(fd);
    return mr_err_set(err, MR_EDATA, "%s is not a regular file of at most %zu bytes", name,
                      max_bytes);
  }
  char *buf = malloc((size_t)st.st_size + 1);
  size_t got = 0;
  while (buf != NULL && got < (size_t)st.st_size) {
    ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fd);
  if (buf == NULL || got != (size_t)st.st_size) {
    free(buf);
    return mr_err_set(err, buf == NULL ? MR_ENOMEM : MR_EIO, "cannot read %s", name);
  }
  buf[got] = '\0';
  *data = buf;
  *len = got;
  *mtime = st.st_mtime;
  return 0;
}

typedef struct entry {
  char *name;
  time_t mtime;
  uint64_t bytes;
} entry;

static int oldest_first(const void *a, const void *b) {
  const entry *x = a, *y = b;
  return x->mtime < y->mtime ? -1 : x->mtime > y->mtime ? 1 : strcmp(x->name, y->name);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

void mr_state_prune(int dirfd, const char *suffix, int max_entries, int64_t max_age_s,
                    uint64_t max_bytes) {
  DIR *d = listing(dirfd);
  if (d == NULL)
    return;
  entry *list = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  struct stat st;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || !ends_with(e->d_name, suffix) ||
        fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (max_age_s > 0 && now - st.st_mtime > max_age_s) {
      unlinkat(dirfd, e->d_name, 0);
      continue;
    }
    if (n == cap) {
      size_t grown_cap = cap ? 2 * cap : 64;
      entry *grown = realloc(list, grown_cap * sizeof *list);
      if (grown == NULL)
        break;
      list = grown;
      cap = grown_cap;
    }
    if ((list[n].name = strdup(e->d_name)) == NULL)
      break;
    list[n].mtime = st.st_mtime;
    list[n].bytes = (uint64_t)st.st_size;
    total += list[n].bytes;
    n++;
  }
  closedir(d);
  if (n > 1) /* list is NULL when nothing matched: qsort wants an array */
    qsort(list, n, sizeof *list, oldest_first);
  size_t left = n;
  for (size_t i = 0; i < n; i++) {
    int over = (max_entries > 0 && left > (size_t)max_entries) ||
               (max_bytes > 0 && total > max_bytes);
    if (over && unlinkat(dirfd, list[i].name, 0) == 0) {
      left--;
      total -= list[i].bytes;
    }
    free(list[i].name);
  }
  free(list);
}

int mr_state_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > 128 || name[0] == '.')
    return 0;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '.' || c == '_' || c == '-'))
      return 0;
  }
  return 1;
}
