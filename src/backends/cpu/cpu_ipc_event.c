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
 * item ready once completed reaches it (cpu_streams.c runs both, polling for progress
 * another process makes). So a wait is for the last record made before it, in whichever
 * process, as CUDA's.
 *
 * CUDA's rules, modelled: the creating process cannot open its own handle; a capture may
 * neither record nor wait for an interprocess event (cpu_streams.c).
 */
#include "cpu_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EVT_MAGIC "GWCPUEVT"
#define EVT_PREFIX "gw-cpu-evt-"

/* The runtime's handle: the model's 64-byte handle of a shared page (cpu_internal.h), with
 * its own magic; len unused. */
typedef gw__cpu_rt_handle evt_handle;

static atomic_ullong next_serial = 1;

static size_t page_len(void) { return (size_t)sysconf(_SC_PAGESIZE); }

gw_status gw__cpu_ipc_event_create(void **event, unsigned char rt[GW__IPC_RT_BYTES]) {
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
  gw_status st = gw__cpu_event_create_shared(p, len, fd, event);
  if (st != GW_OK) {
    gw__cpu_ipc_event_unmap(p, len, fd);
    return st;
  }
  evt_handle h = {.pid = (uint64_t)getpid(), .fd = fd, .serial = serial};
  memcpy(h.magic, EVT_MAGIC, 8);
  gw__cpu_rt_encode(&h, rt);
  return GW_OK;
}

gw_status gw__cpu_ipc_event_open(const unsigned char rt[GW__IPC_RT_BYTES], void **event) {
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
  st = gw__cpu_event_create_shared(p, len, -1, event);
  if (st != GW_OK) gw__cpu_ipc_event_unmap(p, len, -1);
  return st;
}

void gw__cpu_ipc_event_unmap(gw__cpu_evpage *page, size_t len, int fd) {
  (void)munmap(page, len);
  if (fd >= 0) (void)close(fd);
}
