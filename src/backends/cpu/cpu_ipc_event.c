/*
 * The CPU model's interprocess events (cudaEventInterprocess, cudaIpcGetEventHandle /
 * cudaIpcOpenEventHandle), for the halo's IPC path: one rank records "pack landed" or
 * "buffer free again" on its stream, the other rank's stream waits for it, on the device.
 *
 * An event's state is a page every process of it maps: a memfd named
 * "gw-cpu-evt-<serial>", as the model's device memory is shared (cpu_ipc.c: the maker
 * keeps the descriptor open, an opener maps /proc/<pid>/fd/<fd> after checking that the
 * link names the serial). The page holds two counters (gw__cpu_evpage): event_record takes
 * seq = ++recorded when it is called and queues an item that raises completed to seq when
 * the stream reaches it; stream_wait_event reads recorded when it is called and queues an
 * item ready once completed reaches it (the streams queue and run both through the
 * gw__cpu_evshm calls below, polling for progress another process makes). So a wait is for
 * the last record made before it, in whichever process, as CUDA's.
 *
 * The page, its counters and its mapping belong to this file alone: the streams hold a
 * gw__cpu_evshm and call in (cpu_queue.c, cpu_streams.c), and this file calls none of
 * theirs; cpu_ops.c makes the stream event around a page made or opened here.
 *
 * CUDA's rules, modelled: the creating process cannot open its own handle; a capture may
 * neither record nor wait for an interprocess event (cpu_streams.c).
 */
#include "cpu_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EVT_MAGIC "GWCPUEVT"
#define EVT_PREFIX "gw-cpu-evt-"

/* The runtime's handle: the model's 64-byte handle of a shared page (cpu_internal.h), with
 * its own magic; len unused. */
typedef gw__cpu_rt_handle evt_handle;

/* The state every process shares: work recorded (the count of event_record calls, in any
 * process) and completed (the largest record whose stream work has run). */
typedef struct {
  _Atomic uint64_t recorded, completed;
} evpage;
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the shared counters must be lock-free atomics");

/* The page as this process maps it. refs: the event and its queued items (the streams' lock
 * guards it: every call below that changes it is made with that lock held). */
struct gw__cpu_evshm {
  evpage *page;
  size_t len;
  int fd; /* the maker's descriptor (-1 in an opener) */
  int refs;
};

static atomic_ullong next_serial = 1;

static size_t page_len(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static void unmap(evpage *page, size_t len, int fd) {
  (void)munmap(page, len);
  if (fd >= 0) (void)close(fd);
}

/* The mapped page as an object of one reference, which owns page and fd from then on
 * (NULL: out of memory, nothing taken). */
static gw__cpu_evshm *evshm_new(void *page, size_t len, int fd) {
  gw__cpu_evshm *sh = malloc(sizeof *sh);
  if (sh) *sh = (gw__cpu_evshm){.page = page, .len = len, .fd = fd, .refs = 1};
  return sh;
}

gw_status gw__cpu_ipc_event_create(gw__cpu_evshm **out, unsigned char rt[GW__IPC_RT_BYTES]) {
  uint64_t serial = atomic_fetch_add(&next_serial, 1);
  char name[64];
  snprintf(name, sizeof name, EVT_PREFIX "%llu", (unsigned long long)serial);
  size_t len = page_len();
  void *p = NULL;
  int fd = gw__cpu_shm_create(name, len, &p);
  if (fd < 0)
    return gw__fail(errno == ENOMEM ? GW_ENOMEM : GW_EBACKEND,
                    "model cudaEventCreate(Interprocess): no shared memory for the event "
                    "(memfd %s): %s",
                    name, strerror(errno));
  /* A fresh memfd is zero: recorded == completed == 0, complete as a fresh event. */
  gw__cpu_evshm *sh = evshm_new(p, len, fd);
  if (!sh) {
    unmap(p, len, fd);
    return gw__fail(GW_ENOMEM, "ipc_event: out of host memory for the event");
  }
  *out = sh;
  evt_handle h = {.pid = (uint64_t)getpid(), .fd = fd, .serial = serial};
  memcpy(h.magic, EVT_MAGIC, 8);
  gw__cpu_rt_encode(&h, rt);
  return GW_OK;
}

gw_status gw__cpu_ipc_event_open(const unsigned char rt[GW__IPC_RT_BYTES], gw__cpu_evshm **out) {
  evt_handle h;
  gw__cpu_rt_decode(rt, &h);
  if (memcmp(h.magic, EVT_MAGIC, 8) != 0 || h.fd < 0 || h.zero != 0 || h.serial == 0)
    return gw__fail(GW_EINVAL, "model cudaIpcOpenEventHandle: handle is not an event handle of "
                               "this runtime (invalid value)");
  if (h.pid == (uint64_t)getpid())
    return gw__fail(GW_EBACKEND,
                    "model cudaIpcOpenEventHandle: handle is of an event this process created "
                    "(the runtime refuses to open it in the creating process: use the event)");
  char name[64], what[64];
  snprintf(name, sizeof name, EVT_PREFIX "%llu", (unsigned long long)h.serial);
  snprintf(what, sizeof what, "event %llu", (unsigned long long)h.serial);
  size_t len = page_len();
  void *p = NULL;
  gw_status st =
      gw__cpu_shm_map("model cudaIpcOpenEventHandle", what, h.pid, (int)h.fd, name, len, &p);
  if (st != GW_OK) return st;
  gw__cpu_evshm *sh = evshm_new(p, len, -1);
  if (!sh) {
    unmap(p, len, -1);
    return gw__fail(GW_ENOMEM, "ipc_event: out of host memory for the event");
  }
  *out = sh;
  return GW_OK;
}

/* ---- the counters, for the streams (their lock held where refs change) ---- */

uint64_t gw__cpu_evshm_take(gw__cpu_evshm *sh, bool record) {
  sh->refs++;
  /* An interprocess record is numbered, and a wait takes its target, when called: what
   * "the last record made before the wait" means across processes. */
  if (record) return atomic_fetch_add(&sh->page->recorded, 1) + 1;
  return atomic_load(&sh->page->recorded);
}

bool gw__cpu_evshm_reached(const gw__cpu_evshm *sh, uint64_t value) {
  return atomic_load_explicit(&sh->page->completed, memory_order_acquire) >= value;
}

void gw__cpu_evshm_raise(gw__cpu_evshm *sh, uint64_t value) {
  /* completed = max(completed, seq): records of several processes run in any order. The
   * release publishes the stream's work before it to the waiter that sees the value. */
  _Atomic uint64_t *c = &sh->page->completed;
  uint64_t was = atomic_load_explicit(c, memory_order_relaxed);
  while (was < value && !atomic_compare_exchange_weak_explicit(c, &was, value, memory_order_release,
                                                               memory_order_relaxed)) {
  }
}

bool gw__cpu_evshm_complete(const gw__cpu_evshm *sh) {
  return atomic_load(&sh->page->completed) >= atomic_load(&sh->page->recorded);
}

void gw__cpu_evshm_unref(gw__cpu_evshm *sh) {
  if (--sh->refs == 0) {
    unmap(sh->page, sh->len, sh->fd);
    free(sh);
  }
}
