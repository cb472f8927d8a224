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
 * look-up in a short list.
 */
#include "ipc_table.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gw__ipc_map {
  struct gw__ipc_map *next;
  const gw__backend_ops *ops;
  gw_context *ctx; /* the context that opened it (retained: close needs its state) */
  int ctx_ref;
  int device; /* this process's ordinal */
  uint64_t pid, nonce, alloc_id, base, extent;
  unsigned char rt[GW__IPC_RT_BYTES]; /* the runtime's handle it was opened with */
  char *local;                        /* the allocation's base in this process */
  long refs;                          /* opened arrays (roots) on it; lock */
  bool listed;                        /* in the table (found by opens); lock */
  bool forked; /* inherited by a forked child: the parent's runtime's, never closed here */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw__ipc_map *table; /* lock */

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
  table = NULL;
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
        m->base != d->base) {
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
  if (!m->forked) {
    /* A close the runtime refuses is reported (the backend set gw_last_error; a release
     * cannot return it) and the entry goes all the same: kept, it would pin its context
     * for the life of the process. What the runtime kept is the runtime's; a later open
     * of the allocation asks the runtime again. */
    (void)m->ops->ipc_mem_close(m->ctx->state, m->device, m->local);
  }
  gw__owned_drop(m->local);
  pthread_mutex_unlock(&lock);
  gw__context_release(m->ctx, m->ctx_ref);
  free(m);
}

/* A new entry for d's allocation, mapped and listed. lock held. */
static gw_status map_new(gw_context *ctx, const gw__ipc_fields *d, int device,
                         struct gw__ipc_map **out) {
  struct gw__ipc_map *m = calloc(1, sizeof *m);
  if (!m) return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
  void *local = NULL;
  gw_status s = ctx->ops->ipc_mem_open(ctx->state, d->rt, device, (size_t)d->extent, &local);
  if (s == GW_OK) {
    /* Owned by the table: an owning wrap of any of its bytes would free (cudaFree) a
     * mapping, which only a close may undo. */
    s = gw__owned_claim(local, (size_t)d->extent, false, false);
    if (s != GW_OK) (void)ctx->ops->ipc_mem_close(ctx->state, device, local);
  }
  if (s != GW_OK) {
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
  if (!m) {
    gw_status s = map_new(ctx, d, device, &m);
    if (s != GW_OK) {
      pthread_mutex_unlock(&lock);
      return s;
    }
  }
  m->refs++;
  *local = m->local;
  pthread_mutex_unlock(&lock);
  *out = m;
  return GW_OK;
}
