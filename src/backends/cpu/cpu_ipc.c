/*
 * The CPU model of the runtime's IPC calls on device memory (cudaIpcGetMemHandle /
 * cudaIpcOpenMemHandle / cudaIpcCloseMemHandle). The device memory itself is shareable
 * between processes (memfd pages, cpu_shm.c); an open maps another process's allocation
 * and makes it device memory of this one (cpu_model.c, adopt).
 *
 * The runtime's rules, modelled: only device memory exports through legacy IPC; memory of
 * a pool with a POSIX fd handle type exports through the pool (cpu_vmm.c), other pool and
 * VMM memory is refused naming how to allocate it shareable (the runtime's handle is of
 * an allocation's base); the exporting process cannot open its own handle (CUDA:
 * cudaErrorDeviceUninitialized, measured on the H200); a second open of one allocation in
 * a process is refused (what makes an import table necessary); a mapped allocation is
 * device memory of the process until closed, and a free cannot unmap it.
 *
 * The device allocations and the memory behind them are cpu_shm.c's; the table of mappings
 * here is guarded by one leaf mutex (never held while taking another lock).
 */
#include "codec.h"
#include "cpu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RT_MAGIC "GWCPUIPC"

/* Another process's allocation mapped here. */
typedef struct {
  uintptr_t base;
  size_t len;
  uint64_t pid, serial;
} mapping;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *maps; /* lock; few, unsorted */
static size_t nmaps, cap_maps;

static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_parent(void) { pthread_mutex_unlock(&lock); }
/* The child forgets the mappings it inherited, as the core's import table does
 * (gw__ipc_child): they stay mapped (and device memory of the model) for the arrays that
 * hold them, which never close them, and a new open of the allocation maps it anew instead
 * of being refused as a second open. */
static void fork_child(void) {
  nmaps = 0;
  pthread_mutex_unlock(&lock);
}

/*
 * Ordered explicitly, as the streams' (cpu_queue.c) and cpu_shm.c's are (never by link
 * order): registered after the streams' (priority 200) and before cpu_shm.c's (202) and
 * fork.c's (default priority), so, prepare handlers running in the reverse order of
 * registration, this lock is taken after the core's (the import table's: the core holds it while calling ipc_open and ipc_close,
 * which take this one) and the model's, and before the streams'. Taken the other way, a
 * fork while another thread is inside gw_ipc_open would wait for the table's lock that
 * thread holds while it waits for this one.
 */
__attribute__((constructor(201))) static void install(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- the runtime's handle (gw__cpu_rt_handle, cpu_internal.h) ---- */

typedef gw__cpu_rt_handle rt_handle;

#define RT_OFF_PID 8
#define RT_OFF_FD 16
#define RT_OFF_ZERO 20
#define RT_OFF_SERIAL 24
#define RT_OFF_LEN 32
#define RT_END 40 /* zero after it */

void gw__cpu_rt_encode(const rt_handle *h, unsigned char rt[GW__IPC_RT_BYTES]) {
  memset(rt, 0, GW__IPC_RT_BYTES);
  memcpy(rt, h->magic, 8);
  gw__put_le64(rt + RT_OFF_PID, h->pid);
  gw__put_le32(rt + RT_OFF_FD, (uint32_t)h->fd);
  gw__put_le32(rt + RT_OFF_ZERO, h->zero);
  gw__put_le64(rt + RT_OFF_SERIAL, h->serial);
  gw__put_le64(rt + RT_OFF_LEN, h->len);
}

void gw__cpu_rt_decode(const unsigned char rt[GW__IPC_RT_BYTES], rt_handle *h) {
  memcpy(h->magic, rt, 8);
  h->pid = gw__get_le64(rt + RT_OFF_PID);
  h->fd = (int32_t)gw__get_le32(rt + RT_OFF_FD);
  h->zero = gw__get_le32(rt + RT_OFF_ZERO);
  h->serial = gw__get_le64(rt + RT_OFF_SERIAL);
  h->len = gw__get_le64(rt + RT_OFF_LEN);
}
_Static_assert(RT_END <= GW__IPC_RT_BYTES, "the model's handle fits the runtime's bytes");

gw_status gw__cpu_ipc_export(void *base, size_t extent, unsigned char rt[GW__IPC_RT_BYTES],
                             uint64_t *alloc_id, gw__ipc_share *sh) {
  /* Memory of an IPC pool: its export data and descriptor (cpu_vmm.c). */
  gw_status st;
  if (gw__cpu_pool_export(base, rt, alloc_id, sh, &st)) return st;
  /* VMM memory made shareable: the chunks covering the array (cpu_vmm.c). */
  if (gw__cpu_vmm_export(sh->lo ? sh->lo : (uintptr_t)base,
                         sh->hi ? sh->hi : (uintptr_t)base + extent, alloc_id, sh, &st))
    return st;
  /* Other pool and VMM memory: legacy IPC cannot export them (as
   * IS_LEGACY_CUDA_IPC_CAPABLE = 0 says on CUDA), and the refusal says how to allocate
   * them shareable. */
  char why[512];
  if (gw__cpu_vmm_refusal(base, why, sizeof why))
    return gw__fail(GW_ENOTSUP, "model cudaIpcGetMemHandle(%p): %s", base, why);
  gw_ptrinfo info;
  gw__cpu_model_query(base, &info);
  if (info.kind != GW_MEM_DEVICE || info.base != base)
    return gw__fail(GW_EINVAL,
                    "model cudaIpcGetMemHandle(%p): not the base of a device allocation (%s "
                    "memory): invalid value",
                    base, gw_memkind_name(info.kind));
  gw__cpu_devmem a;
  if (!gw__cpu_devmem_find(base, &a))
    return gw__fail(GW_ENOTSUP,
                    "model cudaIpcGetMemHandle(%p): the device memory is another process's "
                    "mapping; export it in the process that allocated it",
                    base);
  if (a.fd < 0)
    return gw__fail(GW_ENOTSUP,
                    "model cudaIpcGetMemHandle(%p): this allocation is private memory (the "
                    "process had no file descriptor left for a memfd when it was made), "
                    "which no other process can map",
                    base);
  if (extent > a.len)
    return gw__fail(GW_EINVAL,
                    "model cudaIpcGetMemHandle(%p): extent %zu exceeds the %zu "
                    "bytes mapped",
                    base, extent, a.len);
  rt_handle h = {.pid = (uint64_t)getpid(), .fd = a.fd, .serial = a.serial, .len = a.len};
  *sh = (gw__ipc_share){.kind = GW__IPC_LEGACY};
  memcpy(h.magic, RT_MAGIC, 8);
  gw__cpu_rt_encode(&h, rt);
  /* GPUWRAP_CPU_IPC_NO_ALLOC_ID: as HIP, whose runtime gives none; the serial stays in the
   * runtime's handle, which is what then tells a reused address apart. */
  *alloc_id = gw__cpu_config_get()->ipc_no_alloc_id ? 0 : a.serial;
  return GW_OK;
}

static mapping *find_mapping(uint64_t pid, uint64_t serial) {
  for (size_t i = 0; i < nmaps; i++)
    if (maps[i].pid == pid && maps[i].serial == serial) return &maps[i];
  return NULL;
}

gw_status gw__cpu_ipc_open(const unsigned char rt[GW__IPC_RT_BYTES], int device, size_t extent,
                           void **base) {
  rt_handle h;
  gw__cpu_rt_decode(rt, &h);
  if (memcmp(h.magic, RT_MAGIC, 8) != 0 || h.fd < 0 || h.len < extent)
    return gw__fail(GW_EINVAL, "model cudaIpcOpenMemHandle: not a handle of this runtime "
                               "(invalid value)");
  if (h.pid == (uint64_t)getpid())
    return gw__fail(GW_EBACKEND,
                    "model cudaIpcOpenMemHandle: a handle of this process's own allocation: "
                    "cudaErrorDeviceUninitialized (the runtime refuses it)");
  pthread_mutex_lock(&lock);
  bool twice = find_mapping(h.pid, h.serial) != NULL;
  bool room = gw__cpu_grow((void **)&maps, nmaps, &cap_maps, sizeof *maps);
  pthread_mutex_unlock(&lock);
  if (twice)
    return gw__fail(GW_EBACKEND,
                    "model cudaIpcOpenMemHandle: allocation %llu of process %llu is already "
                    "mapped in this process (the runtime refuses a second open)",
                    (unsigned long long)h.serial, (unsigned long long)h.pid);
  if (!room) return gw__fail(GW_ENOMEM, "model cudaIpcOpenMemHandle: out of host memory");
  char name[64], what[64];
  snprintf(name, sizeof name, GW__CPU_DEVMEM_PREFIX "%llu", (unsigned long long)h.serial);
  snprintf(what, sizeof what, "allocation %llu", (unsigned long long)h.serial);
  void *p = NULL;
  gw_status s =
      gw__cpu_shm_map("model cudaIpcOpenMemHandle", what, h.pid, (int)h.fd, name, h.len, &p);
  if (s != GW_OK) return s;
  s = gw__cpu_model_adopt("model cudaIpcOpenMemHandle", device, p, h.len);
  if (s != GW_OK) {
    munmap(p, h.len);
    return s;
  }
  pthread_mutex_lock(&lock);
  /* Room was made above, but another open may have taken it meanwhile. */
  if (!gw__cpu_grow((void **)&maps, nmaps, &cap_maps, sizeof *maps)) {
    pthread_mutex_unlock(&lock);
    (void)gw__cpu_model_unadopt("model cudaIpcOpenMemHandle", p);
    munmap(p, h.len);
    return gw__fail(GW_ENOMEM, "model cudaIpcOpenMemHandle: out of host memory");
  }
  maps[nmaps++] = (mapping){(uintptr_t)p, h.len, h.pid, h.serial};
  pthread_mutex_unlock(&lock);
  *base = p;
  return GW_OK;
}

gw_status gw__cpu_ipc_close(void *base) {
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < nmaps && maps[i].base != (uintptr_t)base) i++;
  if (i == nmaps) {
    pthread_mutex_unlock(&lock);
    return gw__fail(GW_EINVAL,
                    "model cudaIpcCloseMemHandle(%p): not a mapping cudaIpcOpenMemHandle gave "
                    "(invalid value)",
                    base);
  }
  mapping m = maps[i];
  maps[i] = maps[--nmaps];
  pthread_mutex_unlock(&lock);
  (void)gw__cpu_model_unadopt("model cudaIpcCloseMemHandle", base);
  munmap(base, m.len);
  return GW_OK;
}

GW_API size_t gw_cpu_ipc_mappings(void) {
  pthread_mutex_lock(&lock);
  size_t n = nmaps;
  pthread_mutex_unlock(&lock);
  return n;
}
