/*
 * The import table: memory from another process, mapped once per process (ipc_table.h).
 *
 * The import table holds one entry per allocation mapped from another process, keyed by
 * (backend, device, exporter pid and nonce, allocation id, base, extent, the runtime's
 * handle bytes: where the runtime has no allocation id, as HIP, a new allocation at the
 * same address differs there, as in UCX's cuda_ipc cache): the runtimes
 * refuse a second open of one allocation in a process, and a mapping must be closed
 * exactly once, so every open of any handle of the allocation shares the entry and takes a
 * reference, and the last opened array's release closes it. One mutex: opens and closes
 * are runtime calls of milliseconds, and an open of an allocation already mapped is a
 * look-up in a short list. VMM memory's entry is one span of chunks (kind GW__IPC_VMM,
 * keyed by the span's base, extent, first chunk id and the chunks' descriptors and sizes):
 * its open takes each chunk's descriptor (take_fd) and has the backend map them
 * (ipc_vmm_open); its close is ipc_vmm_close. take_fd uses a descriptor received over a
 * Unix socket (gw_ipc_handle_recv, ipc_fdpass.c) before it asks pidfd_getfd.
 */
#include "ipc_table.h"

#include "ipc_fdpass.h"
#include "ipc_manifest.h"

#include "gpuwrap/cpu_testing.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* the same number on every architecture since 5.3 */
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* A pool of another process imported here (memory of pools with a POSIX file descriptor
 * handle type): once per (exporter, pool id), destroyed when its last pointer is closed. */
struct pool_imp {
  struct pool_imp *next;
  const gw__backend_ops *ops;
  int device;
  uint64_t pid, nonce, pool_id;
  void *pool; /* the backend's imported pool */
  long refs;  /* mappings (entries) of its pointers; lock */
  bool forked;
};

struct gw__ipc_map {
  struct gw__ipc_map *next;
  const gw__backend_ops *ops;
  gw_context *ctx; /* the context that opened it (retained: close needs its state) */
  int ctx_ref;
  int device; /* this process's ordinal */
  uint64_t pid, nonce, alloc_id, base, extent;
  unsigned char rt[GW__IPC_RT_BYTES]; /* the runtime's handle it was opened with */
  int kind;                           /* GW__IPC_LEGACY, GW__IPC_POOL */
  uint64_t pool_id;                   /* pool memory: the exporter's pool */
  struct pool_imp *pool;              /* pool memory: its imported pool */
  char *local;                        /* the allocation's base in this process */
  long refs;                          /* opened arrays (roots) on it; lock */
  bool listed;                        /* in the table (found by opens); lock */
  bool forked; /* inherited by a forked child: the parent's runtime's, never closed here */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw__ipc_map *table; /* lock */
static struct pool_imp *pools;    /* lock */

void gw__ipc_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }

/* A forked child: the mappings are the parent's runtime's (on CUDA the child cannot use
 * them, and closing them is not its business). Arrays the child inherited keep their
 * entries until released, but nothing is closed for them and new opens map anew (the CPU
 * model forgets its own list of them alike, cpu_ipc.c). (The child is not the exporter of
 * the parent's handles either: fork.c has it forget the identity, proc_identity.c.) */
void gw__ipc_child(void) {
  for (struct gw__ipc_map *m = table; m; m = m->next) {
    m->listed = false;
    m->forked = true;
  }
  for (struct pool_imp *p = pools; p; p = p->next) p->forked = true;
  table = NULL;
  pools = NULL;
  pthread_mutex_unlock(&lock);
}

/* The entry of the handle's allocation. One of the same exporter and base whose allocation
 * id, extent or runtime handle differs is of a released allocation whose address a new one
 * reuses (stale): it leaves the table (its arrays keep it until released, and its
 * close), so the new allocation is mapped anew rather than served the old mapping. */
static struct gw__ipc_map *find(const gw__backend_ops *ops, const gw__ipc_fields *d, int device) {
  for (struct gw__ipc_map **p = &table; *p;) {
    struct gw__ipc_map *m = *p;
    if (m->ops != ops || m->device != device || m->pid != d->pid || m->nonce != d->nonce ||
        m->base != d->base || m->kind != d->share.kind || m->pool_id != d->share.pool_id) {
      p = &m->next;
      continue;
    }
    if (m->alloc_id == d->alloc_id && m->extent == d->extent &&
        memcmp(m->rt, d->rt, GW__IPC_RT_BYTES) == 0)
      return m;
    *p = m->next; /* stale */
    m->listed = false;
  }
  return NULL;
}

/* Drop a pointer's reference on its imported pool (lock held): the last destroys it. */
static void pool_unref(struct pool_imp *p, void *state) {
  if (--p->refs > 0) return;
  for (struct pool_imp **q = &pools; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  if (!p->forked) (void)p->ops->ipc_pool_release(state, p->device, p->pool);
  free(p);
}

static void unlink_entry(struct gw__ipc_map *m) {
  for (struct gw__ipc_map **p = &table; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      return;
    }
}

void gw__ipc_unref(struct gw__ipc_map *m) {
  pthread_mutex_lock(&lock);
  if (--m->refs > 0) {
    pthread_mutex_unlock(&lock);
    return;
  }
  /* Closed under the lock: an open of the same allocation racing with this close finds it
   * either mapped or gone, never half-closed (the runtime would refuse the re-open). */
  if (m->listed) unlink_entry(m);
  if (!m->forked && m->kind == GW__IPC_VMM) {
    (void)m->ops->ipc_vmm_close(m->ctx->state, m->device, m->local, (size_t)m->extent);
  } else if (!m->forked) {
    /* A close the runtime refuses is reported (the backend set gw_last_error; a release
     * cannot return it) and the entry goes all the same: kept, it would pin its context
     * for the life of the process. What the runtime kept is the runtime's; a later open
     * of the allocation asks the runtime again. */
    (void)m->ops->ipc_mem_close(m->ctx->state, m->device, m->pool ? m->pool->pool : NULL, m->local);
  }
  if (m->pool) pool_unref(m->pool, m->ctx->state);
  gw__owned_drop(m->local);
  pthread_mutex_unlock(&lock);
  gw__context_release(m->ctx, m->ctx_ref);
  free(m);
}

/* Test control (gw_cpu_ipc_force_pidfd_errno, gpuwrap/cpu_testing.h): pidfd_getfd fails
 * with this errno (0: the real call). Core code, as pidfd_getfd is the core's call on
 * every backend. */
static atomic_int forced_errno;
GW_API void gw_cpu_ipc_force_pidfd_errno(int err) { atomic_store(&forced_errno, err); }

/* The exporter's descriptor `fd` (process `pid`, `nonce`), as a descriptor of this
 * process (the caller closes it): the one gw_ipc_handle_recv received for it, where it did
 * (ipc_fdpass.c: taken out of its table, so used once); else pidfd_open + pidfd_getfd
 * (which needs ptrace access to the exporter). GW_ENOTSUP where the kernel or its policy
 * refuses, naming the cause and the way around it. */
static gw_status take_fd(const char *what, uint64_t pid, uint64_t nonce, int fd, int *out) {
  int received = gw__ipc_fd_claim(pid, nonce, fd);
  if (received >= 0) {
    *out = received;
    return GW_OK;
  }
  int err = atomic_load(&forced_errno);
  int pfd = -1, got = -1;
  const char *call = "pidfd_open";
  if (!err) {
    pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (pfd < 0) err = errno;
  }
  if (!err) {
    call = "pidfd_getfd";
    got = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
    if (got < 0) err = errno;
    close(pfd);
  } else if (atomic_load(&forced_errno)) {
    call = "pidfd_getfd";
  }
  if (!err) {
    *out = got;
    return GW_OK;
  }
  if (err == ENOSYS)
    return gw__fail(GW_ENOTSUP,
                    "h: %s: %s of process %llu's descriptor %d: %s: the kernel has "
                    "no pidfd_getfd (Linux 5.6 or later needed); pass the descriptor over a "
                    "Unix socket with SCM_RIGHTS instead: gw_ipc_handle_send in the exporter, "
                    "gw_ipc_handle_recv here before gw_ipc_open (docs/IPC.md)",
                    what, call, (unsigned long long)pid, fd, strerror(err));
  if (err == EPERM)
    return gw__fail(GW_ENOTSUP,
                    "h: %s: %s of process %llu's descriptor %d: %s: that needs ptrace access "
                    "to the exporter (Yama's ptrace_scope 1: only from its ancestors; in a "
                    "container, CAP_SYS_PTRACE); pass the descriptors over a Unix socket with "
                    "SCM_RIGHTS instead: gw_ipc_handle_send in the exporter, "
                    "gw_ipc_handle_recv here before gw_ipc_open (or set ptrace_scope 0, or "
                    "have the exporter call prctl(PR_SET_PTRACER, pid); docs/IPC.md)",
                    what, call, (unsigned long long)pid, fd, strerror(err));
  if (err == ESRCH)
    return gw__fail(GW_EBACKEND, "h: %s: %s: exporting process %llu is gone: %s", what, call,
                    (unsigned long long)pid, strerror(err));
  if (err == EBADF)
    return gw__fail(GW_EBACKEND,
                    "h: %s: %s: process %llu has no descriptor %d open (its pool "
                    "destroyed, its chunk released?): %s",
                    what, call, (unsigned long long)pid, fd, strerror(err));
  return gw__fail(GW_EBACKEND, "h: %s: %s of process %llu's descriptor %d: %s", what, call,
                  (unsigned long long)pid, fd, strerror(err));
}

/* The imported pool of d's allocation, imported now if it is not yet, with a reference
 * taken for one pointer. lock held. */
static gw_status pool_of(gw_context *ctx, const gw__ipc_fields *d, int device,
                         struct pool_imp **out) {
  for (struct pool_imp *p = pools; p; p = p->next)
    if (p->ops == ctx->ops && p->device == device && p->pid == d->pid && p->nonce == d->nonce &&
        p->pool_id == d->share.pool_id) {
      p->refs++;
      *out = p;
      return GW_OK;
    }
  if (!ctx->ops->ipc_pool_import || !ctx->ops->ipc_pool_release)
    return gw__fail(GW_ENOTSUP, "h: pool memory, which the %s backend cannot open", ctx->ops->name);
  struct pool_imp *p = calloc(1, sizeof *p);
  if (!p) return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
  int fd = -1;
  gw_status s = take_fd("pool memory", d->pid, d->nonce, d->share.fd, &fd);
  if (s == GW_OK) {
    s = ctx->ops->ipc_pool_import(ctx->state, fd, device, &p->pool);
    close(fd); /* the imported pool holds what it needs */
  }
  if (s != GW_OK) {
    free(p);
    return s;
  }
  p->next = pools;
  p->ops = ctx->ops;
  p->device = device;
  p->pid = d->pid;
  p->nonce = d->nonce;
  p->pool_id = d->share.pool_id;
  p->refs = 1;
  pools = p;
  *out = p;
  return GW_OK;
}

/* VMM memory: each chunk's descriptor taken from the exporter, the chunks imported and
 * mapped back to back by the backend, the descriptors closed (the imported chunks hold
 * what they need). lock held. */
static gw_status vmm_open(gw_context *ctx, const gw__ipc_fields *d, int device, void **local) {
  if (!ctx->ops->ipc_vmm_open || !ctx->ops->ipc_vmm_close)
    return gw__fail(GW_ENOTSUP, "h: VMM memory, which the %s backend cannot open", ctx->ops->name);
  int fds[GW__IPC_VMM_MAX_CHUNKS], n = 0;
  const int *named = d->share.chunk_fd;
  const uint64_t *bytes = d->share.chunk_bytes;
  gw_status s = GW_OK;
  int listed[GW__IPC_VMM_MAX_CHUNKS];
  uint64_t listed_bytes[GW__IPC_VMM_MAX_CHUNKS];
  if (d->share.nchunks > GW__IPC_VMM_HANDLE_CHUNKS) {
    /* The chunks are listed in the manifest (ipc_manifest.c): taken as a chunk is, read,
     * checked against the handle, closed. */
    int mfd = -1;
    s = take_fd("VMM memory's manifest", d->pid, d->nonce, d->share.manifest_fd, &mfd);
    if (s == GW_OK) {
      s = gw__ipc_manifest_read(mfd, d, listed, listed_bytes);
      close(mfd);
    }
    named = listed;
    bytes = listed_bytes;
  }
  while (s == GW_OK && n < d->share.nchunks) {
    s = take_fd("VMM memory", d->pid, d->nonce, named[n], &fds[n]);
    if (s == GW_OK) n++;
  }
  if (s == GW_OK)
    s = ctx->ops->ipc_vmm_open(ctx->state, device, n, fds, bytes, d->share.pool_id, local);
  for (int i = 0; i < n; i++) close(fds[i]);
  return s;
}

/* A new entry for d's allocation, mapped and listed. lock held. */
static gw_status map_new(gw_context *ctx, const gw__ipc_fields *d, int device,
                         struct gw__ipc_map **out) {
  struct gw__ipc_map *m = calloc(1, sizeof *m);
  if (!m) return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
  struct pool_imp *pool = NULL;
  gw_status s = GW_OK;
  bool vmm = d->share.kind == GW__IPC_VMM;
  if (d->share.kind == GW__IPC_POOL) s = pool_of(ctx, d, device, &pool);
  void *local = NULL;
  void *rt_pool = pool ? pool->pool : NULL;
  if (s == GW_OK && vmm)
    s = vmm_open(ctx, d, device, &local);
  else if (s == GW_OK)
    s = ctx->ops->ipc_mem_open(ctx->state, d->rt, device, (size_t)d->extent, rt_pool, &local);
  if (s == GW_OK) {
    /* Owned by the table: an owning wrap of any of its bytes would free (cudaFree) a
     * mapping, which only a close may undo. */
    s = gw__owned_claim(local, (size_t)d->extent, false, false);
    if (s != GW_OK && vmm)
      (void)ctx->ops->ipc_vmm_close(ctx->state, device, local, (size_t)d->extent);
    else if (s != GW_OK)
      (void)ctx->ops->ipc_mem_close(ctx->state, device, rt_pool, local);
  }
  if (s != GW_OK) {
    if (pool) pool_unref(pool, ctx->state);
    free(m);
    return s;
  }
  *m = (struct gw__ipc_map){.next = table,
                            .ops = ctx->ops,
                            .ctx = ctx,
                            .device = device,
                            .pid = d->pid,
                            .nonce = d->nonce,
                            .alloc_id = d->alloc_id,
                            .base = d->base,
                            .extent = d->extent,
                            .kind = d->share.kind,
                            .pool_id = d->share.pool_id,
                            .pool = pool,
                            .local = local,
                            .listed = true};
  memcpy(m->rt, d->rt, GW__IPC_RT_BYTES);
  m->ctx_ref = gw__context_retain(ctx);
  table = m;
  *out = m;
  return GW_OK;
}

gw_status gw__ipc_table_open(gw_context *ctx, const gw__ipc_fields *d, int device,
                             struct gw__ipc_map **out, char **local) {
  pthread_mutex_lock(&lock);
  struct gw__ipc_map *m = find(ctx->ops, d, device);
  gw_status s = m ? GW_OK : map_new(ctx, d, device, &m);
  /* The descriptors received for the handle are consumed by this open: used by map_new,
   * the rest (the memory mapped already, or the pool imported; a failed open) closed, so
   * that none outlives the open it was sent for (ipc_fdpass.c). */
  gw__ipc_fd_drop(d);
  if (s != GW_OK) {
    pthread_mutex_unlock(&lock);
    return s;
  }
  m->refs++;
  *local = m->local;
  pthread_mutex_unlock(&lock);
  *out = m;
  return GW_OK;
}
