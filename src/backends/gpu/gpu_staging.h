/*
 * Private to the staging pipeline (gpu_staging.c) and its thread pool
 * (gpu_staging_pool.c): the job of one staged copy, which the calling thread and the
 * pool's workers share, and the pool's calls. How the pipeline works and why:
 * gpu_staging.c's opening comment and docs/STAGING.md.
 */
#ifndef GW_GPU_STAGING_H
#define GW_GPU_STAGING_H

#include <pthread.h>
#include <stddef.h>

#define GWG_STAGING_BUFFERS_MAX 16
#define GWG_STAGING_THREADS_MAX 64

/* How a piece's stores are made (gwg_piece_copy). PLAIN: memcpy. STREAM: non-temporal
 * stores (x86-64; elsewhere memcpy). DEMOTE: memcpy, then each line of the piece pushed
 * from the copying core's private caches to the shared last-level cache (cldemote), so the
 * DMA that reads the chunk next does not snoop lines dirty in some core's L2 (a no-op
 * where the CPU or the compiler lacks cldemote). */
enum { GWG_STORE_PLAIN = 0, GWG_STORE_STREAM = 1, GWG_STORE_DEMOTE = 2 };

/* One staged copy, on the calling thread's stack while it runs. Chunk c is bytes
 * [c * chunk, min((c + 1) * chunk, n)) of the copy and uses bounce buffer c % nbuf; item k
 * is piece k % ppc of chunk k / ppc. `ready`: chunks [0, ready) may be copied (their DMA
 * landed, or their buffer is free); `done[b]`: pieces of buffer b's present chunk finished,
 * reset by the caller before the chunk that next uses the buffer is made ready. */
typedef struct gwg_flow {
  size_t next;  /* next item to take (atomic) */
  size_t ready; /* chunks that may be copied (atomic, written by the caller only) */
  int abort;    /* an error: take no more items (atomic) */
  char pad0[64];
  size_t done[GWG_STAGING_BUFFERS_MAX]; /* atomics */
  char pad1[64];
  int up;     /* host-to-device: caller's memory -> bounce; else bounce -> caller's memory */
  int stream; /* host-to-device: every chunk's stores non-temporal */
  char *host;
  char *const *buf;
  size_t n, chunk, piece, ppc, nitems, nchunks;
  int nbuf;
  unsigned spins;   /* idle pauses before yielding */
  size_t edge_tail; /* host-to-device, not streamed: the last chunks demoted */
} gwg_flow;

typedef struct gwg_pool {
  unsigned linger_us; /* spin this long after a copy before sleeping */
  unsigned spins;     /* idle pauses before yielding */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int state; /* 0 idle (workers sleep), 1 copying (workers spin), -1 quit */
  int nworkers;
  gwg_flow *job; /* the copy running, or NULL (atomic) */
  int active;    /* workers that may be looking at `job` (atomic) */
  char pad[64];
  pthread_t tid[GWG_STAGING_THREADS_MAX - 1];
} gwg_pool;

static inline void gwg_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline size_t gwg_chunk_off(const gwg_flow *j, size_t c) { return c * j->chunk; }

static inline size_t gwg_chunk_len(const gwg_flow *j, size_t c) {
  size_t off = gwg_chunk_off(j, c);
  return j->n - off < j->chunk ? j->n - off : j->chunk;
}

/* Start up to `n` workers (asleep, state 0); returns how many run, -1 when the pool's lock
 * or condition could not be made. */
int gwg_pool_start(gwg_pool *p, int n);
/* Stop and join the workers. */
void gwg_pool_stop(gwg_pool *p);
/* 1: copies are running, the workers spin and take items; 0: they linger, then sleep. */
void gwg_pool_set_state(gwg_pool *p, int st);
/* Hand a job to the workers (state 1: they see it at once). */
void gwg_pool_publish(gwg_pool *p, gwg_flow *j);
/* Take the job back: after this no worker touches it. `abort`: the items left are dropped;
 * the pieces being copied finish first. */
void gwg_pool_retract(gwg_pool *p, gwg_flow *j, int abort);
/* Take the next item of a job and copy it: 1 done (or lost a race: try again), 0 none may
 * be taken yet (its chunk is not ready), -1 none left (all taken, or aborted). */
int gwg_flow_take(gwg_flow *j);

#endif
