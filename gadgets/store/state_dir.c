#include "state_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const mr_state_limits mr_state_limits_default = {
    .noise_max_entries = 256,
    .noise_max_age_s = 7 * 24 * 3600,
    .dump_max_bytes = (uint64_t)1 << 30,
};

#define TMP_PREFIX ".tmp-"

/* The bytes of one folder's files as this process knows them: those being
 * written (reserved by their writers) and those stored (as of the last
 * listing, plus what was committed since). Guarded by folder_lock. */
typedef struct folder {
  int fd, lock_fd; /* -1 when closed */
  uint64_t reserved, stored;
} folder;

static struct {
  int root; /* -1 when closed */
  folder noise, dumps;
  mr_state_limits limits;
} state = {-1, {-1, -1, 0, 0}, {-1, -1, 0, 0}, {0}};

/* Creating, committing and pruning files of a folder are done holding this
 * lock (so two sessions' prunes never undercount what the other removed,
 * and a temporary file is locked the moment it exists), and flock on the
 * folder's LOCK_FILE (so are those of another server sharing the
 * directory; a file opened for writing, as NFS's emulation of flock
 * wants). */
static pthread_mutex_t folder_mutex = PTHREAD_MUTEX_INITIALIZER;

#define LOCK_FILE ".lock"

static folder *folder_of(int dirfd) {
  return dirfd == state.noise.fd ? &state.noise : dirfd == state.dumps.fd ? &state.dumps : NULL;
}

static void folder_lock(int dirfd) {
  pthread_mutex_lock(&folder_mutex);
  folder *fo = folder_of(dirfd);
  while (fo != NULL && flock(fo->lock_fd, LOCK_EX) != 0 && errno == EINTR)
    ;
}

static void folder_unlock(int dirfd) {
  folder *fo = folder_of(dirfd);
  if (fo != NULL)
    flock(fo->lock_fd, LOCK_UN);
  pthread_mutex_unlock(&folder_mutex);
}

static atomic_uint tmp_counter;

/* Opens (creating them) the folder name of root and its lock file into
 * *f; *f stays closed on failure. */
static int open_folder(int root, const char *name, folder *f, mr_err *err) {
  *f = (folder){-1, -1, 0, 0};
  if (mkdirat(root, name, 0700) != 0 && errno != EEXIST)
    return mr_err_set(err, MR_EIO, "state directory: cannot create %s: %m", name);
  int fd = openat(root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return mr_err_set(err, MR_EIO, "state directory: cannot open %s: %m", name);
  int lock_fd = openat(fd, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock_fd < 0) {
    close(fd);
    return mr_err_set(err, MR_EIO, "state directory: cannot open %s/" LOCK_FILE ": %m", name);
  }
  *f = (folder){fd, lock_fd, 0, 0};
  return 0;
}

static void close_folder(folder *f) {
  if (f->fd >= 0)
    close(f->fd);
  if (f->lock_fd >= 0)
    close(f->lock_fd);
  *f = (folder){-1, -1, 0, 0};
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

/* Removes the temporary files no writer holds: a writer keeps its file
 * locked (flock) from the moment it exists, under the folder lock, so a
 * file whose lock we get was left by a server that died, whatever its age;
 * one another live server is writing stays. */
static void remove_abandoned_tmp(int dirfd) {
  folder_lock(dirfd);
  DIR *d = listing(dirfd);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0)
      continue;
    int fd = openat(dirfd, e->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
      unlinkat(dirfd, e->d_name, 0);
    if (fd >= 0)
      close(fd);
  }
  if (d != NULL)
    closedir(d);
  folder_unlock(dirfd);
}

int mr_state_dir_open(const char *path, const mr_state_limits *limits, mr_err *err) {
  mr_state_dir_close();
  if (mkdir(path, 0700) != 0 && errno != EEXIST)
    return mr_err_set(err, MR_EIO, "cannot create state directory %s: %m", path);
  int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return mr_err_set(err, MR_EIO, "cannot open state directory %s: %m", path);
  int rc = open_folder(root, "noise", &state.noise, err);
  if (rc == 0)
    rc = open_folder(root, "dumps", &state.dumps, err);
  if (rc < 0) {
    close_folder(&state.noise);
    close(root);
    return rc;
  }
  state.root = root;
  state.limits = *limits;
  remove_abandoned_tmp(state.noise.fd);
  remove_abandoned_tmp(state.dumps.fd);
  return 0;
}

void mr_state_dir_close(void) {
  if (state.root >= 0)
    close(state.root);
  state.root = -1;
  close_folder(&state.noise);
  close_folder(&state.dumps);
}

int mr_state_dir_fd(const char *sub) {
  if (strcmp(sub, "noise") == 0)
    return state.noise.fd;
  if (strcmp(sub, "dumps") == 0)
    return state.dumps.fd;
  return -1;
}

const mr_state_limits *mr_state_dir_limits(void) { return &state.limits; }

int mr_state_file_begin(int dirfd, mr_state_file *f, mr_err *err) {
  memset(f, 0, sizeof *f);
  f->dirfd = dirfd;
  folder_lock(dirfd);
  for (int attempt = 0; attempt < 16; attempt++) {
    snprintf(f->tmp, sizeof f->tmp, TMP_PREFIX "%ld-%u", (long)getpid(),
             atomic_fetch_add(&tmp_counter, 1));
    f->fd = openat(dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (f->fd >= 0 || errno != EEXIST)
      break;
  }
  int rc = f->fd < 0 ? mr_err_set(err, MR_EIO, "state directory: cannot create a file: %m") : 0;
  if (rc == 0 && flock(f->fd, LOCK_EX | LOCK_NB) != 0) { /* ours alone: cannot fail */
    rc = mr_err_set(err, MR_EIO, "state directory: cannot lock a new file: %m");
    close(f->fd);
    unlinkat(dirfd, f->tmp, 0);
    f->fd = -1;
  }
  folder_unlock(dirfd);
  return rc;
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

static void prune_locked(int dirfd, const mr_state_bounds *keep, uint64_t room,
                         const char *committed);

int mr_state_file_reserve(mr_state_file *f, uint64_t bytes, const mr_state_bounds *keep,
                          mr_err *err) {
  folder *fo = folder_of(f->dirfd);
  if (fo == NULL || keep->max_bytes == 0)
    return 0;
  int rc = 0;
  folder_lock(f->dirfd);
  if (fo->reserved + bytes > keep->max_bytes) {
    rc = mr_err_set(err, MR_ELIMIT,
                    "the files being written would together pass the limit of %llu bytes "
                    "(%llu taken, %llu more asked)",
                    (unsigned long long)keep->max_bytes, (unsigned long long)fo->reserved,
                    (unsigned long long)bytes);
  } else {
    if (fo->stored + fo->reserved + bytes > keep->max_bytes)
      prune_locked(f->dirfd, keep, bytes, NULL); /* the oldest make room */
    fo->reserved += bytes;
    f->reserved += bytes;
  }
  folder_unlock(f->dirfd);
  return rc;
}

/* Gives back what f reserved; under the folder lock. */
static void release_locked(mr_state_file *f) {
  folder *fo = folder_of(f->dirfd);
  if (fo != NULL)
    fo->reserved -= f->reserved;
  f->reserved = 0;
}

int mr_state_file_commit(mr_state_file *f, const char *name, const mr_state_bounds *keep,
                         mr_err *err) {
  int rc = 0;
  if (fsync(f->fd) != 0)
    rc = mr_err_set(err, MR_EIO, "state directory: sync failed: %m");
  folder_lock(f->dirfd);
  release_locked(f);
  /* Stamped under the lock, the file committed last is the newest: the
   * order pruning keeps is the order of commits. */
  if (rc == 0 && futimens(f->fd, NULL) != 0)
    rc = mr_err_set(err, MR_EIO, "state directory: cannot set the file's time: %m");
  close(f->fd);
  f->fd = -1;
  if (rc == 0 && renameat(f->dirfd, f->tmp, f->dirfd, name) != 0)
    rc = mr_err_set(err, MR_EIO, "state directory: cannot rename to %s: %m", name);
  if (rc < 0) {
    unlinkat(f->dirfd, f->tmp, 0);
  } else {
    fsync(f->dirfd); /* the rename itself survives a power cut */
    folder *fo = folder_of(f->dirfd);
    if (fo != NULL)
      fo->stored += f->bytes;
    if (keep != NULL)
      prune_locked(f->dirfd, keep, 0, name);
  }
  folder_unlock(f->dirfd);
  return rc;
}

void mr_state_file_abort(mr_state_file *f) {
  folder_lock(f->dirfd);
  release_locked(f);
  if (f->fd >= 0)
    close(f->fd);
  f->fd = -1;
  unlinkat(f->dirfd, f->tmp, 0);
  folder_unlock(f->dirfd);
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
  struct timespec mtime;
  uint64_t bytes;
} entry;

static int oldest_first(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec)
    return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec)
    return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Under the folder lock: removes what keep says is too old, then the
 * oldest files until the rest and the bytes being written, with room more,
 * fit keep's bounds; never the file just committed. A file someone else
 * removed first counts as removed. */
static void prune_locked(int dirfd, const mr_state_bounds *keep, uint64_t room,
                         const char *committed) {
  DIR *d = listing(dirfd);
  if (d == NULL)
    return;
  entry *list = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  struct stat st;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || !ends_with(e->d_name, keep->suffix) ||
        fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (keep->max_age_s > 0 && now - st.st_mtime > keep->max_age_s) {
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
    list[n].mtime = st.st_mtim;
    list[n].bytes = (uint64_t)st.st_size;
    total += list[n].bytes;
    n++;
  }
  closedir(d);
  if (n > 1) /* list is NULL when nothing matched: qsort wants an array */
    qsort(list, n, sizeof *list, oldest_first);
  folder *fo = folder_of(dirfd);
  uint64_t writing = (fo != NULL ? fo->reserved : 0) + room;
  size_t left = n;
  for (size_t i = 0; i < n; i++) {
    int over = (keep->max_entries > 0 && left > (size_t)keep->max_entries) ||
               (keep->max_bytes > 0 && total + writing > keep->max_bytes);
    if (over && (committed == NULL || strcmp(list[i].name, committed) != 0) &&
        (unlinkat(dirfd, list[i].name, 0) == 0 || errno == ENOENT)) {
      left--;
      total -= list[i].bytes;
    }
    free(list[i].name);
  }
  free(list);
  if (fo != NULL)
    fo->stored = total;
}

void mr_state_prune(int dirfd, const mr_state_bounds *keep) {
  folder_lock(dirfd);
  prune_locked(dirfd, keep, 0, NULL);
  folder_unlock(dirfd);
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
