/*
 * The CPU model's memory that other processes can map: memfd pages mapped MAP_SHARED, for
 * device allocations (cpu_model.c allocates through here) and interprocess events
 * (cpu_ipc_event.c), and the table of this process's device allocations that the runtime's
 * IPC export reads (cpu_ipc.c). Below both: it calls no other file of the model.
 *
 * A device allocation is a memfd named "gw-cpu-dev-<serial>", mapped MAP_SHARED; its
 * descriptor stays open while the allocation lives, so that another process, forked or
 * started with exec, can open /proc/<pid>/fd/<fd> (allowed for the same user and for root:
 * PTRACE_MODE_READ, which Yama's ptrace_scope does not restrict) and map the same pages.
 * The name carries the serial so that an importer can tell the allocation from whatever
 * later reuses the descriptor number (the link reads "/memfd:gw-cpu-dev-<serial> (deleted)").
 * Without a descriptor to spare (EMFILE), the allocation is private memory that export
 * refuses with the reason.
 *
 * The table is guarded by one leaf mutex (never held while taking another lock).
 */
#include "cpu_internal.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static gw__cpu_devmem *allocs; /* lock; sorted by base */
static size_t nallocs, cap_allocs;
static uint64_t next_serial = 1; /* lock */

static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_parent(void) { pthread_mutex_unlock(&lock); }
static void fork_child(void) { pthread_mutex_unlock(&lock); }

/*
 * Ordered explicitly, as cpu_ipc.c's and the streams' handlers are: registered after theirs
 * (priorities 201 and 200 run first) and before fork.c's (default priority), so, prepare
 * handlers running in the reverse order of registration, this lock is taken after the
 * core's and the model's and before cpu_ipc.c's and the streams'. It is a leaf (no other
 * lock is taken while it is held), so any place among them would do; the priority makes it
 * a decision.
 */
__attribute__((constructor(202))) static void install(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static size_t page_round(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

/* Index of the first allocation with base >= p. lock held. */
static size_t lower_bound(uintptr_t p) {
  return gw__vec_bound(allocs, nallocs, sizeof *allocs, offsetof(gw__cpu_devmem, base), p, false);
}

/* Room for one more of n elements of `size` bytes in *v (capacity *cap; vec.h): false, *v
 * as it was, when out of memory. */
bool gw__cpu_grow(void **v, size_t n, size_t *cap, size_t size) {
  void *g = gw__vec_room(*v, n, cap, size);
  if (g) *v = g;
  return g != NULL;
}

/* ---- pages another process can map ---- */

int gw__cpu_shm_create(const char *name, size_t len, void **p) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  void *m = MAP_FAILED;
  if (ftruncate(fd, (off_t)len) == 0)
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  *p = m;
  return fd;
}

gw_status gw__cpu_shm_map(const char *who, const char *what, uint64_t pid, int fd, const char *name,
                          size_t len, void **out) {
  char path[64], link[128], want[96];
  snprintf(path, sizeof path, "/proc/%llu/fd/%d", (unsigned long long)pid, fd);
  snprintf(want, sizeof want, "/memfd:%s ", name);
  ssize_t n = readlink(path, link, sizeof link - 1);
  if (n < 0)
    return gw__fail(GW_EBACKEND,
                    "%s: %s: %s (the process that made %s is gone or released it, or it "
                    "belongs to another user)",
                    who, path, strerror(errno), what);
  link[n] = '\0';
  if (strncmp(link, want, strlen(want)) != 0)
    return gw__fail(GW_EBACKEND, "%s: %s is '%s', not %s: the process that made it released it",
                    who, path, link, what);
  int mfd = open(path, O_RDWR | O_CLOEXEC);
  if (mfd < 0) return gw__fail(GW_EBACKEND, "%s: open(%s): %s", who, path, strerror(errno));
  struct stat st;
  void *p = MAP_FAILED;
  if (fstat(mfd, &st) == 0 && (uint64_t)st.st_size >= len)
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  int err = errno;
  close(mfd); /* the mapping keeps the pages */
  if (p == MAP_FAILED)
    return gw__fail(GW_EBACKEND, "%s: mapping %s (%zu bytes): %s", who, path, len, strerror(err));
  *out = p;
  return GW_OK;
}

/* ---- device allocations ---- */

void *gw__cpu_devmem_alloc(size_t bytes) {
  size_t len = page_round(bytes);
  pthread_mutex_lock(&lock);
  uint64_t serial = next_serial++;
  bool room = gw__cpu_grow((void **)&allocs, nallocs, &cap_allocs, sizeof *allocs);
  pthread_mutex_unlock(&lock);
  if (!room) return NULL;
  char name[64];
  snprintf(name, sizeof name, GW__CPU_DEVMEM_PREFIX "%llu", (unsigned long long)serial);
  void *p = NULL;
  int fd = gw__cpu_shm_create(name, len, &p);
  if (fd < 0 && errno == ENOMEM) return NULL;
  if (fd < 0) { /* no descriptor (or no memfd): private memory, not exportable */
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (posix_memalign(&p, page, len) != 0) return NULL;
  }
  pthread_mutex_lock(&lock);
  if (!gw__cpu_grow((void **)&allocs, nallocs, &cap_allocs, sizeof *allocs)) {
    pthread_mutex_unlock(&lock);
    if (fd >= 0) {
      (void)munmap(p, len);
      (void)close(fd);
    } else {
      free(p);
    }
    return NULL;
  }
  size_t i = lower_bound((uintptr_t)p);
  memmove(&allocs[i + 1], &allocs[i], (nallocs - i) * sizeof *allocs);
  allocs[i] = (gw__cpu_devmem){(uintptr_t)p, len, fd, serial};
  nallocs++;
  pthread_mutex_unlock(&lock);
  return p;
}

void gw__cpu_devmem_free(void *p) {
  pthread_mutex_lock(&lock);
  size_t i = lower_bound((uintptr_t)p);
  if (i == nallocs || allocs[i].base != (uintptr_t)p) { /* not ours: cannot happen */
    pthread_mutex_unlock(&lock);
    return;
  }
  gw__cpu_devmem a = allocs[i];
  memmove(&allocs[i], &allocs[i + 1], (nallocs - i - 1) * sizeof *allocs);
  nallocs--;
  pthread_mutex_unlock(&lock);
  if (a.fd >= 0) {
    (void)munmap(p, a.len);
    (void)close(a.fd);
  } else {
    free(p);
  }
}

bool gw__cpu_devmem_find(const void *base, gw__cpu_devmem *out) {
  pthread_mutex_lock(&lock);
  size_t i = lower_bound((uintptr_t)base);
  bool found = i < nallocs && allocs[i].base == (uintptr_t)base;
  *out = found ? allocs[i] : (gw__cpu_devmem){0};
  pthread_mutex_unlock(&lock);
  return found;
}
