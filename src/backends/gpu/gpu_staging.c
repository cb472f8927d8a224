/*
 * Staged, pipelined copies between PAGEABLE host memory and device/managed memory.
 *
 * The runtime's own pageable copy (cudaMemcpy on malloc'd memory) stages through a small
 * pinned buffer with one host thread, far below what the link moves from pinned memory.
 * Here the context keeps a few pinned bounce buffers and a pool of host threads
 * (gpu_staging_pool.c), and a copy is cut into chunks, each chunk into pieces:
 *
 *   host-to-device: the threads fill chunk i+1 from the caller's memory into a bounce
 *                   buffer while the DMA of chunk i (bounce -> device) runs;
 *   device-to-host: up to `buffers` DMAs (device -> bounce) are queued ahead, and the
 *                   threads copy chunk i out of its bounce buffer while the next DMAs run.
 *
 * The threads take pieces one at a time from a shared counter as soon as their chunk may be
 * copied (device-to-host: its DMA has landed; host-to-device: its bounce buffer is free), so
 * there is no barrier per chunk: a slow or descheduled thread costs one piece, not a whole
 * chunk's wait for every thread, and the threads go on to chunk i+1 while chunk i's last
 * piece is still being copied. The calling thread drives the device side without blocking
 * (event queries): it issues the next DMA the moment a buffer is free (d2h) or a chunk is
 * filled (h2d), publishes landed chunks, and copies pieces itself in between.
 *
 * Host-to-device stores: small copies fill the bounce buffers with non-temporal stores (a
 * DMA that reads lines still dirty in the filling cores' caches runs slow, and in a small
 * copy most chunks are just-filled ones); large ones with plain stores (streaming competes
 * with the DMA for memory in the steady state), but for their last chunks, whose lines are
 * demoted to the shared cache after the memcpy (their DMAs are the copy's end, with no
 * host work left to hide them). Device-to-host copies write the caller's memory with plain
 * stores. The measurements behind each choice: docs/STAGING.md.
 *
 * A buffer is reused once the event recorded after its DMA has completed. The DMAs go on
 * the operation's stream (the legacy default stream for synchronous copies, as cudaMemcpy,
 * or the caller's gw_stream, created or borrowed: the vendor handle comes from the
 * gwg_stream, and the stream's device is current), so ordering against earlier work is
 * that of the plain path, also on a borrowed non-blocking stream; the call returns when
 * every chunk has landed (the caller's memory is pageable).
 *
 * Only 1-D contiguous copies (after the core's normalisation) of at least `min` bytes take
 * this path, when the executing device is the context's and the device does not read
 * pageable memory through the host's page tables (there the runtime's copy is fast). One
 * staged copy at a time per context: a second thread that finds the staging busy takes
 * the plain path instead of waiting. Bounce buffers, events and threads are made on the
 * first staged copy and kept until the context goes (gwg_staging_fini). The settings
 * (GPUWRAP_STAGING_*, docs/API.md) are read when the context first considers staging.
 */
#define _POSIX_C_SOURCE 200809L /* pthreads, sysconf */

#include "gpu_internal.h"
#include "gpu_staging.h"

#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- settings: the one function that reads them ------------------------------------------- */
/*
 * The values and ranges are rows of the settings table (src/core/settings_table.h,
 * GPUWRAP_STAGING_*); why the defaults are what they are:
 * - MIN 1 MiB: below it the runtime's own pageable copy is used: pipeline start-up (thread
 *   hand-off, one chunk not overlapped, event round trips) does not pay for itself. At
 *   1 MiB a copy is 4 chunks of CHUNK_MIN, each of 16 pieces (the default PIECE).
 * - CHUNK 4 MiB, the bounce buffer size and largest chunk: large enough that a DMA (~75 us
 *   at 55 GB/s) dwarfs the per-chunk cost (launch, event, thread hand-off); small enough
 *   that the buffers stay in the host's last-level cache and cost little pinned memory.
 * - BUFFERS 6: the threads work on up to two chunks at once (a chunk's last pieces and the
 *   next one's first), so 6 leaves ~4 DMAs (~300 us of link time at 4 MiB) queued behind
 *   them: a late host never starves the DMA engine, and a 1 MiB copy (4 chunks of
 *   CHUNK_MIN) has every DMA queued at once. 24 MiB of pinned memory per context.
 * - THREADS: three quarters of the online CPUs (the rest for the program and the runtime),
 *   at most THREADS_DEFAULT_MAX: a single core's memcpy is far below the link's speed, but
 *   beyond 12 more threads gained nothing and cost more wake-ups on small copies.
 * - SPLIT 4, SMALL 4 MiB: a copy smaller than SPLIT x chunk is cut into SPLIT chunks (so it
 *   still pipelines), but no chunk below CHUNK_MIN, and a copy of at most SMALL bytes goes
 *   in CHUNK_MIN chunks: a small chunk is in or out sooner, so its DMA (host->device) or
 *   its copy out (device->host) starts sooner; a large one costs less per byte.
 * - PIECE 16 KiB, the smallest piece (a hand-off is one atomic on a shared counter): it sets
 *   how soon a small chunk is in or out; a 256 KiB chunk in 64 KiB pieces kept most threads
 *   waiting for the next chunk while four copied.
 * - SPINS 4096 idle pauses (~40 ns each on x86) before a worker yields its CPU: a worker
 *   that never yields keeps its CPU from the program's own threads for a whole copy when
 *   the host is full (MPI ranks sharing cores).
 * - LINGER_US 100: a copy that finds the workers asleep waits for the wake-ups (a futex
 *   wake, then each thread's turn on a CPU) before its first chunk fills, which a 64 MiB
 *   copy (1.2 ms at the link's speed) feels.
 * - NT_UP_MAX 32 MiB: host-to-device copies up to it fill the bounce buffers with
 *   non-temporal stores: streamed stores leave no dirty lines in the cores' caches for the
 *   DMA to snoop, which is most of a small copy (its start and end), but compete with the
 *   DMA for memory in a large copy's steady state.
 * - EDGE_TAIL 3: host-to-device copies above NT_UP_MAX demote their last chunks after the
 *   memcpy (GWG_STORE_DEMOTE). Their DMAs, which read lines the threads have just written,
 *   are the copy's end, with no host work left to overlap them.
 */
/* Pieces per chunk = this x threads (no piece below PIECE), so each thread takes about two
 * pieces of a chunk and the last piece of a chunk is short next to the chunk. */
#define GWG_STAGING_PIECES_PER_THREAD 2
#define GWG_STAGING_THREADS_DEFAULT_MAX 12
#define GWG_STAGING_CHUNK_MIN ((size_t)256 << 10)

typedef struct {
  int off;          /* GPUWRAP_STAGING=0: never stage */
  size_t min;       /* smallest copy staged */
  size_t chunk;     /* bounce buffer size, the largest chunk (whole pages) */
  size_t split;     /* a copy below split x chunk is cut into this many chunks */
  size_t small;     /* a copy of at most this many bytes goes in CHUNK_MIN chunks */
  size_t piece;     /* the smallest piece (whole pages) */
  size_t nt_up_max; /* host-to-device copies up to this size stream into the bounce buffers */
  int edge_tail;    /* host-to-device copies above nt_up_max: their last chunks demoted */
  int nbuf, nthreads;
  unsigned linger_us, spins;
} gwg_staging_settings;

static size_t whole_pages(size_t n) { return (n + 4095) & ~(size_t)4095; }

/* One setting into *v; the first bad one's id is kept in *bad (-1: none). */
static long long setting(gw__setting_id id, int *bad) {
  long long v = 0;
  if (gwg_setting(id, &v) != GW_OK && *bad < 0) *bad = (int)id;
  return v;
}

/* The settings; GW__SET_* of the first that is not valid, else -1 (the copy then fails
 * with the parser's message: a tuning value that is silently replaced measures nothing). */
static int staging_settings_read(gwg_staging_settings *s) {
  int bad = -1;
  s->off = !setting(GW__SET_STAGING, &bad);
  s->min = (size_t)setting(GW__SET_STAGING_MIN, &bad);
  s->chunk = whole_pages((size_t)setting(GW__SET_STAGING_CHUNK, &bad));
  s->split = (size_t)setting(GW__SET_STAGING_SPLIT, &bad);
  s->small = (size_t)setting(GW__SET_STAGING_SMALL, &bad);
  s->piece = whole_pages((size_t)setting(GW__SET_STAGING_PIECE, &bad));
  s->nt_up_max = (size_t)setting(GW__SET_STAGING_NT_UP_MAX, &bad);
  s->edge_tail = (int)setting(GW__SET_STAGING_EDGE_TAIL, &bad);
  s->nbuf = (int)setting(GW__SET_STAGING_BUFFERS, &bad);
  s->nthreads = (int)setting(GW__SET_STAGING_THREADS, &bad);
  if (s->nthreads == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long threads = cpus > 1 ? cpus * 3 / 4 : 1;
    s->nthreads = (int)(threads > GWG_STAGING_THREADS_DEFAULT_MAX ? GWG_STAGING_THREADS_DEFAULT_MAX
                                                                  : threads);
  }
  s->linger_us = (unsigned)setting(GW__SET_STAGING_LINGER_US, &bad);
  s->spins = (unsigned)setting(GW__SET_STAGING_SPINS, &bad);
  return bad;
}

/* ---- per-context staging state ------------------------------------------------------------ */

typedef struct {
  pthread_mutex_t lock; /* held for a whole staged copy */
  int device;
  int enabled;     /* 0: never stage (off, host page tables, or setup failed) */
  int bad_setting; /* GW__SET_* of a setting that is not valid (copies fail), else -1 */
  int ready;       /* buffers, events and threads exist */
  gwg_staging_settings set;
  char *buf[GWG_STAGING_BUFFERS_MAX];
  gwv_event ev[GWG_STAGING_BUFFERS_MAX];
  int inflight[GWG_STAGING_BUFFERS_MAX]; /* event recorded, not yet waited for */
  gwg_pool pool;
} gwg_staging;

/* Serialises creation of the (cheap) per-context objects across threads. */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

static gwg_staging *staging_get(gwg_ctx *c) {
  gwg_staging *st = __atomic_load_n(&c->staging, __ATOMIC_ACQUIRE);
  if (st) return st;
  pthread_mutex_lock(&create_lock);
  st = c->staging;
  if (!st && (st = calloc(1, sizeof *st)) != NULL) {
    if (pthread_mutex_init(&st->lock, NULL) != 0) {
      free(st);
      st = NULL;
    } else {
      st->device = c->device;
      st->bad_setting = staging_settings_read(&st->set);
      /* Where the device walks the host's page tables (ATS, e.g. Grace Hopper) the
       * runtime copies pageable memory at full speed itself. */
      st->enabled = !st->set.off && !gwv_device_attr(GWV_ATTR_PAGEABLE_HOST_PAGE_TABLES, c->device);
      st->pool.linger_us = st->set.linger_us;
      st->pool.spins = st->set.spins;
      __atomic_store_n(&c->staging, st, __ATOMIC_RELEASE);
    }
  }
  pthread_mutex_unlock(&create_lock);
  return st;
}

static void release_resources(gwg_staging *st) {
  for (int i = 0; i < GWG_STAGING_BUFFERS_MAX; i++) {
    if (st->ev[i]) {
      (void)gwv_EventDestroy(st->ev[i]);
      st->ev[i] = NULL;
    }
    if (st->buf[i]) {
      (void)gwv_FreeHost(st->buf[i]);
      st->buf[i] = NULL;
    }
  }
  (void)gwv_GetLastError();
  st->ready = 0;
}

/* Bounce buffers, events, threads; the context's device is current. 0 on failure (the
 * copy then takes the plain path, and staging stays off for this context). */
static int staging_setup(gwg_staging *st) {
  for (int i = 0; i < st->set.nbuf; i++) {
    void *p = NULL;
    if (gwv_HostAlloc(&p, st->set.chunk, GWV_HOST_ALLOC_FLAGS) != GWV_SUCCESS) {
      release_resources(st);
      return 0;
    }
    st->buf[i] = p;
    if (gwv_EventCreateWithFlags(&st->ev[i], GWV_EVENT_FLAGS) != GWV_SUCCESS) {
      st->ev[i] = NULL;
      release_resources(st);
      return 0;
    }
  }
  if (gwg_pool_start(&st->pool, st->set.nthreads - 1) < 0) {
    release_resources(st);
    return 0;
  }
  st->ready = 1;
  return 1;
}

void gwg_staging_fini(void *state) {
  gwg_ctx *c = state;
  gwg_staging *st = c->staging;
  if (!st) return;
  if (st->ready) {
    gwg_pool_stop(&st->pool);
    gwg_prev prev;
    int entered = gwg_enter(st->device, &prev) == GW_OK;
    if (!entered) (void)gwv_GetLastError();
    release_resources(st);
    if (entered) gwg_leave(prev);
  }
  pthread_mutex_destroy(&st->lock);
  free(st);
  c->staging = NULL;
}

/* ---- planning: chunks and pieces of one copy ------------------------------------------------ */

/* Chunk length for a copy of n bytes: CHUNK_MIN up to SMALL, else n / SPLIT (no less than
 * CHUNK_MIN), at most the buffer size. */
static size_t pick_chunk(const gwg_staging_settings *s, size_t n) {
  size_t c = n <= s->small ? GWG_STAGING_CHUNK_MIN : whole_pages(n / s->split);
  if (c < GWG_STAGING_CHUNK_MIN) c = GWG_STAGING_CHUNK_MIN;
  return c < s->chunk ? c : s->chunk;
}

static void flow_init(gwg_flow *j, const gwg_staging *st, int up, char *host, size_t n) {
  const gwg_staging_settings *s = &st->set;
  memset(j, 0, sizeof *j);
  j->up = up;
  j->stream = up && n <= s->nt_up_max;
  j->edge_tail = up ? (size_t)s->edge_tail : 0;
  j->host = host;
  j->buf = st->buf;
  j->n = n;
  j->nbuf = s->nbuf;
  j->spins = s->spins;
  j->chunk = pick_chunk(s, n);
  j->nchunks = (n + j->chunk - 1) / j->chunk;
  size_t parts = (size_t)s->nthreads * GWG_STAGING_PIECES_PER_THREAD;
  size_t piece = whole_pages(j->chunk / parts); /* pieces page aligned */
  if (piece < s->piece) piece = s->piece;
  if (piece > j->chunk) piece = j->chunk;
  j->piece = piece;
  j->ppc = (j->chunk + piece - 1) / piece;
  j->nitems = j->nchunks * j->ppc;
}

/* ---- the device side: DMAs and their events ------------------------------------------------- */

/* Wait for buffer b's last DMA. */
static gw_status wait_buf(gwg_staging *st, int b) {
  if (!st->inflight[b]) return GW_OK;
  st->inflight[b] = 0;
  gwv_err e = gwv_EventSynchronize(st->ev[b]);
  if (e != GWV_SUCCESS) return gwg_fail(e, "staged copy: " GWV_CALL("EventSynchronize"));
  return GW_OK;
}

/* DMA between buffer b and the device side, then the event that frees the buffer. */
static gw_status dma(gwg_staging *st, int b, void *dst, const void *src, size_t n, gwv_stream s,
                     int *unrecorded) {
  gwv_err e = gwv_MemcpyAsync(dst, src, n, GWV_MEMCPY_DEFAULT, s);
  if (e != GWV_SUCCESS)
    return gwg_fail(e, "staged copy: " GWV_CALL("MemcpyAsync") "(dst %p, src %p, %zu bytes)", dst,
                    src, n);
  e = gwv_EventRecord(st->ev[b], s);
  if (e != GWV_SUCCESS) {
    *unrecorded = 1;
    return gwg_fail(e, "staged copy: " GWV_CALL("EventRecord"));
  }
  st->inflight[b] = 1;
  return GW_OK;
}

/* Has buffer b's DMA completed? 1 yes (the buffer is no longer in flight), 0 not yet, -1 the
 * runtime failed (*rc set). Never blocks: the caller keeps issuing and copying meanwhile. */
static int dma_landed(gwg_staging *st, int b, gw_status *rc) {
  gwv_err e = gwv_EventQuery(st->ev[b]);
  if (e == GWV_SUCCESS) {
    st->inflight[b] = 0;
    return 1;
  }
  if (GWV_IS_NOT_READY(e)) {
    (void)gwv_GetLastError(); /* "not ready" is an answer: keep it out of later checks */
    return 0;
  }
  st->inflight[b] = 0;
  *rc = gwg_fail(e, "staged copy: " GWV_CALL("EventQuery"));
  return -1;
}

/* ---- the pipelines ---------------------------------------------------------------------------- */

/* host-to-device: chunk c may be filled once the DMA of chunk c - nbuf (same buffer) has
 * completed; its DMA is issued, in chunk order, as soon as all its pieces are in. */
static gw_status h2d(gwg_staging *st, char *dst, const char *src, size_t n, gwv_stream s,
                     int *unrecorded) {
  gwg_flow j;
  flow_init(&j, st, 1, (char *)(uintptr_t)src, n);
  size_t nb = (size_t)j.nbuf;
  size_t ready = j.nchunks < nb ? j.nchunks : nb, issued = 0, freed = 0;
  j.ready = ready;
  gwg_pool_publish(&st->pool, &j);
  gw_status rc = GW_OK;
  while (issued < j.nchunks) {
    int progress = 0;
    /* DMA every filled chunk, in order (one stream: chunk order is DMA order). */
    while (issued < ready && __atomic_load_n(&j.done[issued % nb], __ATOMIC_ACQUIRE) == j.ppc) {
      int b = (int)(issued % nb);
      if ((rc = dma(st, b, dst + gwg_chunk_off(&j, issued), j.buf[b], gwg_chunk_len(&j, issued), s,
                    unrecorded)) != GW_OK)
        break;
      issued++;
      progress = 1;
    }
    if (rc != GW_OK || issued == j.nchunks) break;
    /* A completed DMA frees its buffer for the chunk nbuf further on. */
    if (freed < issued && ready < j.nchunks) {
      int b = (int)(freed % nb);
      int r = dma_landed(st, b, &rc);
      if (r < 0) break;
      if (r > 0) {
        __atomic_store_n(&j.done[b], 0, __ATOMIC_RELAXED); /* ordered by the release below */
        freed++;
        ready = freed + nb < j.nchunks ? freed + nb : j.nchunks;
        __atomic_store_n(&j.ready, ready, __ATOMIC_RELEASE);
        progress = 1;
      }
    }
    if (!progress && gwg_flow_take(&j) == 0) gwg_cpu_relax();
  }
  gwg_pool_retract(&st->pool, &j, rc != GW_OK);
  return rc; /* the DMAs still in flight are waited for by the caller (wait_buf) */
}

/* device-to-host: DMAs are issued into every free buffer, in chunk order; a chunk is made
 * ready when its DMA has landed; its buffer is free again once all its pieces are out. */
static gw_status d2h(gwg_staging *st, char *dst, const char *src, size_t n, gwv_stream s,
                     int *unrecorded) {
  gwg_flow j;
  flow_init(&j, st, 0, dst, n);
  size_t nb = (size_t)j.nbuf;
  size_t issued = 0, landed = 0, retired = 0;
  gwg_pool_publish(&st->pool, &j);
  gw_status rc = GW_OK;
  while (retired < j.nchunks) {
    int progress = 0;
    /* Chunks whose pieces are all out, in order: their buffers take the next DMAs. */
    while (retired < landed && __atomic_load_n(&j.done[retired % nb], __ATOMIC_ACQUIRE) == j.ppc) {
      retired++;
      progress = 1;
    }
    while (issued < j.nchunks && issued < retired + nb) {
      int b = (int)(issued % nb);
      if ((rc = dma(st, b, st->buf[b], src + gwg_chunk_off(&j, issued), gwg_chunk_len(&j, issued),
                    s, unrecorded)) != GW_OK)
        break;
      issued++;
      progress = 1;
    }
    if (rc != GW_OK) break;
    if (landed < issued) {
      int b = (int)(landed % nb);
      int r = dma_landed(st, b, &rc);
      if (r < 0) break;
      if (r > 0) {
        /* The buffer's previous chunk is retired: nobody counts on done[b] now. */
        __atomic_store_n(&j.done[b], 0, __ATOMIC_RELAXED); /* ordered by the release below */
        landed++;
        __atomic_store_n(&j.ready, landed, __ATOMIC_RELEASE);
        progress = 1;
      }
    }
    if (!progress && gwg_flow_take(&j) == 0) gwg_cpu_relax();
  }
  gwg_pool_retract(&st->pool, &j, rc != GW_OK);
  return rc;
}

int gwg_staging_copy(void *state, const gw__xfer *x, int device, gwv_stream s, gw_status *out) {
  gwg_ctx *c = state;
  if (x->ndim != 1 || x->dst_stride[0] != (int64_t)x->elem ||
      x->src_stride[0] != (int64_t)x->elem || device != c->device)
    return 0;
  int up =
      x->src_kind == GW_MEM_HOST && (x->dst_kind == GW_MEM_DEVICE || x->dst_kind == GW_MEM_MANAGED);
  int down =
      x->dst_kind == GW_MEM_HOST && (x->src_kind == GW_MEM_DEVICE || x->src_kind == GW_MEM_MANAGED);
  if (!up && !down) return 0;
  size_t n = (size_t)x->shape[0] * x->elem;
  gwg_staging *st = staging_get(c);
  if (st && st->bad_setting >= 0) {
    long long v;
    *out = gwg_setting((gw__setting_id)st->bad_setting, &v); /* records its message again */
    return 1;
  }
  if (!st || !__atomic_load_n(&st->enabled, __ATOMIC_RELAXED) || n < st->set.min || n == 0)
    return 0;
  if (pthread_mutex_trylock(&st->lock) != 0)
    return 0; /* another thread is staging on this context: plain path, no waiting */
  if (!st->ready && !staging_setup(st)) {
    __atomic_store_n(&st->enabled, 0, __ATOMIC_RELAXED); /* no pinned memory: stay plain */
    pthread_mutex_unlock(&st->lock);
    return 0;
  }
  int unrecorded = 0;
  gwg_pool_set_state(&st->pool, 1);
  gw_status rc =
      up ? h2d(st, x->dst, x->src, n, s, &unrecorded) : d2h(st, x->dst, x->src, n, s, &unrecorded);
  /* Every DMA finished before returning: the caller's memory and our buffers are free. */
  for (int b = 0; b < st->set.nbuf; b++) {
    gw_status r = wait_buf(st, b);
    if (rc == GW_OK) rc = r;
  }
  if (unrecorded) { /* a DMA went out without its event: drain the stream */
    if (gwv_StreamSynchronize(s) != GWV_SUCCESS) (void)gwv_GetLastError();
  }
  /* The workers' linger starts now, when the call returns, not when the host side of the
   * copy ended: a host-to-device copy still has its last DMAs to wait for then (one to
   * `nbuf` chunks), about as long as the linger lasts, so the next copy of a loop would
   * find the workers asleep in some calls and not in others, and pay their wake-ups
   * before its first chunk filled. */
  gwg_pool_set_state(&st->pool, 0);
  pthread_mutex_unlock(&st->lock);
  *out = rc;
  return 1;
}
