/* fence_malloc.c: an allocator for tests, loaded with LD_PRELOAD: every
 * block of at least FENCE_MIN bytes ends (to malloc's 16-byte alignment)
 * where FENCE_GUARD bytes of inaccessible address space begin, so that a
 * read past its end faults at once, also one made inside a library that no
 * sanitizer instruments (OpenBLAS's kernels: gpu/README.md, "OpenBLAS
 * reads past its operands"). Smaller blocks, and alignments over a page,
 * go to the C library's allocator. Each fenced block is its own mapping,
 * given back to the system when freed, so a read of a freed block faults
 * too. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FENCE_MIN 4096
#define FENCE_GUARD ((size_t)1 << 20)
#define FENCE_MAGIC 0x66656e63656d656dULL

/* Just below each fenced block. */
typedef struct {
  uint64_t magic;
  void *self; /* the block: tells a fenced block from the C library's */
  void *map;
  size_t map_len, size;
} fence_head;

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_realloc)(void *, size_t);
static void *(*next_memalign)(size_t, size_t);
static size_t (*next_usable)(void *);

/* dlsym may allocate while the pointers above are being looked up. */
static _Alignas(16) char boot[1 << 16];
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n > sizeof boot - boot_used)
    return NULL;
  void *p = boot + boot_used;
  boot_used += n;
  return p;
}

static int in_boot(const void *p) {
  return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static int resolve(void) {
  if (next_malloc != NULL)
    return 1;
  if (resolving)
    return 0;
  resolving = 1;
  next_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  next_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  next_usable = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
  next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  resolving = 0;
  return next_malloc != NULL;
}

static fence_head *head_of(void *p) {
  if (p == NULL || in_boot(p) || ((uintptr_t)p & 15) != 0)
    return NULL;
  fence_head *h = (fence_head *)p - 1;
  return h->magic == FENCE_MAGIC && h->self == p ? h : NULL;
}

static void *fenced(size_t size, size_t align) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t need = size + sizeof(fence_head) + align;
  if (need < size)
    return NULL;
  size_t rw = (need + page - 1) / page * page;
  char *map = mmap(NULL, rw + FENCE_GUARD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED)
    return NULL;
  if (mprotect(map, rw, PROT_READ | PROT_WRITE) != 0) {
    munmap(map, rw + FENCE_GUARD);
    return NULL;
  }
  char *p = (char *)(((uintptr_t)(map + rw) - size) & ~(uintptr_t)(align - 1));
  fence_head *h = (fence_head *)p - 1;
  *h = (fence_head){FENCE_MAGIC, p, map, rw + FENCE_GUARD, size};
  return p;
}

void *malloc(size_t n) {
  if (n >= FENCE_MIN)
    return fenced(n, 16);
  if (!resolve())
    return boot_alloc(n);
  return next_malloc(n);
}

void *calloc(size_t count, size_t n) {
  if (n != 0 && count > SIZE_MAX / n)
    return NULL;
  size_t total = count * n;
  if (total >= FENCE_MIN)
    return fenced(total, 16); /* fresh pages are zero */
  if (!resolve())
    return boot_alloc(total); /* never handed out before: zero */
  /* Through the pointer: malloc and memset here would be turned into a
   * call of calloc, this one. */
  void *p = next_malloc(total);
  if (p != NULL)
    memset(p, 0, total);
  return p;
}

void free(void *p) {
  fence_head *h = head_of(p);
  if (h != NULL) {
    h->magic = 0;
    munmap(h->map, h->map_len);
  } else if (p != NULL && !in_boot(p) && resolve()) {
    next_free(p);
  }
}

void *realloc(void *p, size_t n) {
  fence_head *h = head_of(p);
  if (p == NULL || in_boot(p) || h != NULL || n >= FENCE_MIN) {
    size_t old = h != NULL ? h->size : p == NULL ? 0 : in_boot(p) ? 0 : next_usable(p);
    void *q = malloc(n);
    if (q == NULL)
      return NULL;
    if (p != NULL)
      memcpy(q, p, old < n ? old : n);
    free(p);
    return q;
  }
  return resolve() ? next_realloc(p, n) : NULL;
}

void *memalign(size_t align, size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (align < 16)
    align = 16;
  if (n >= FENCE_MIN && align <= page)
    return fenced(n, align);
  return resolve() ? next_memalign(align, n) : NULL;
}

int posix_memalign(void **out, size_t align, size_t n) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0)
    return EINVAL;
  void *p = memalign(align, n);
  if (p == NULL)
    return ENOMEM;
  *out = p;
  return 0;
}

void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

void *valloc(size_t n) { return memalign((size_t)sysconf(_SC_PAGESIZE), n); }

void *pvalloc(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return memalign(page, (n + page - 1) / page * page);
}

size_t malloc_usable_size(void *p) {
  fence_head *h = head_of(p);
  if (h != NULL)
    return h->size;
  return p == NULL || in_boot(p) || !resolve() ? 0 : next_usable(p);
}
