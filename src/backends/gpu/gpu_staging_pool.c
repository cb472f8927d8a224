/*
 * The staging pipeline's copy threads (gpu_staging.c drives them): a pool of workers that
 * take the pieces of a staged copy from a shared counter as soon as their chunk may be
 * copied, so no thread waits for another at a chunk's end (a slow or descheduled thread
 * costs one piece, not every thread's wait). Between copies the workers spin a little
 * (back-to-back copies then skip the wake-up), then sleep on a condition variable.
 */
#define _POSIX_C_SOURCE 200809L /* pthreads, clock_gettime, sched_yield */

#include "gpu_staging.h"

#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h> /* SSE2 streaming stores (part of x86-64 itself), cldemote */
#endif

/* cldemote needs the compilers' intrinsic for it (GCC 9, any clang that builds this);
 * elsewhere DEMOTE is a plain memcpy. */
#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 9)
#define GWG_LINE_HINTS 1
#else
#define GWG_LINE_HINTS 0
#endif

#if GWG_LINE_HINTS
/* cldemote is a hint in the NOP space: a CPU without it ignores it, no check needed. */
__attribute__((target("cldemote"))) static void lines_demote(char *p, size_t n) {
  for (char *e = p + n, *q = (char *)((uintptr_t)p & ~(uintptr_t)63); q < e; q += 64) _cldemote(q);
}
#endif

/* STREAM fences before returning, so the release store that publishes "piece done" orders
 * after its stores (streaming stores are weakly ordered). DEMOTE fences too, as it was
 * measured; the bytes do not need it (cldemote only moves a line, coherently). */
static void piece_copy(char *dst, const char *src, size_t n, int how) {
#if defined(__x86_64__)
  if (how == GWG_STORE_STREAM && n >= 256) {
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    __m128i *d = (__m128i *)(void *)dst;
    const __m128i *s = (const __m128i *)(const void *)src;
    size_t lines = n / 64;
    for (size_t i = 0; i < lines; i++, d += 4, s += 4) {
      __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
      __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
      _mm_stream_si128(d, a);
      _mm_stream_si128(d + 1, b);
      _mm_stream_si128(d + 2, c);
      _mm_stream_si128(d + 3, e);
    }
    memcpy(d, s, n % 64);
    _mm_sfence();
    return;
  }
  memcpy(dst, src, n);
#if GWG_LINE_HINTS
  if (how == GWG_STORE_DEMOTE) {
    lines_demote(dst, n);
    _mm_sfence();
  }
#endif
#else
  (void)how;
  memcpy(dst, src, n);
#endif
}

static uint64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

int gwg_flow_take(gwg_flow *j) {
  size_t it = __atomic_load_n(&j->next, __ATOMIC_RELAXED);
  if (it >= j->nitems || __atomic_load_n(&j->abort, __ATOMIC_RELAXED)) return -1;
  size_t c = it / j->ppc;
  if (c >= __atomic_load_n(&j->ready, __ATOMIC_ACQUIRE)) return 0;
  if (!__atomic_compare_exchange_n(&j->next, &it, it + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return 1;
  size_t coff = gwg_chunk_off(j, c), clen = gwg_chunk_len(j, c);
  size_t off = (it % j->ppc) * j->piece;
  int b = (int)(c % (size_t)j->nbuf);
  if (off < clen) { /* the last chunk, when short, has empty trailing items */
    size_t len = clen - off < j->piece ? clen - off : j->piece;
    if (j->up)
      piece_copy(j->buf[b] + off, j->host + coff + off, len,
                 j->stream                        ? GWG_STORE_STREAM
                 : c + j->edge_tail >= j->nchunks ? GWG_STORE_DEMOTE
                                                  : GWG_STORE_PLAIN);
    else
      piece_copy(j->host + coff + off, j->buf[b] + off, len, GWG_STORE_PLAIN);
  }
  /* Release: the caller that sees the count complete sees the bytes (DMA or return). */
  __atomic_fetch_add(&j->done[b], 1, __ATOMIC_RELEASE);
  return 1;
}

/* A worker's part of a copy: pieces until none are left. */
static void flow_work(gwg_flow *j) {
  unsigned idle = 0;
  for (;;) {
    int r = gwg_flow_take(j);
    if (r < 0) return;
    if (r > 0) {
      idle = 0;
    } else if (++idle < j->spins) {
      gwg_cpu_relax();
    } else {
      sched_yield();
    }
  }
}

static void *worker_main(void *arg) {
  gwg_pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (p->state == 0) pthread_cond_wait(&p->cv, &p->mu);
    int st = p->state;
    pthread_mutex_unlock(&p->mu);
    if (st < 0) return NULL;
    /* Copies are running: take pieces as they come; after the last one, linger a little
     * (back-to-back copies then skip the wake-up), then sleep. */
    unsigned idle = 0, linger = 0;
    uint64_t idle_since = 0;
    for (;;) {
      if (__atomic_load_n(&p->job, __ATOMIC_RELAXED)) {
        /* Announce ourselves before looking at the job (both sequentially consistent,
         * against the caller's "job = NULL, then wait for active == 0"): the caller does
         * not return, and its job go out of scope, while we may still touch it. */
        __atomic_add_fetch(&p->active, 1, __ATOMIC_SEQ_CST);
        gwg_flow *j = __atomic_load_n(&p->job, __ATOMIC_SEQ_CST);
        if (j) flow_work(j);
        __atomic_sub_fetch(&p->active, 1, __ATOMIC_SEQ_CST);
        idle = linger = 0;
        continue;
      }
      st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
      if (st < 0) break;
      if (st == 1) {
        linger = 0;
      } else if (linger++ == 0) {
        idle_since = now_us();
      } else if (linger % 64 == 0 && now_us() - idle_since >= p->linger_us) {
        break;
      }
      if (++idle < p->spins)
        gwg_cpu_relax();
      else
        sched_yield();
    }
  }
}

void gwg_pool_set_state(gwg_pool *p, int st) {
  pthread_mutex_lock(&p->mu);
  __atomic_store_n(&p->state, st, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

int gwg_pool_start(gwg_pool *p, int n) {
  p->state = 0;
  p->nworkers = 0;
  p->job = NULL;
  p->active = 0;
  if (pthread_mutex_init(&p->mu, NULL) != 0) return -1;
  if (pthread_cond_init(&p->cv, NULL) != 0) {
    pthread_mutex_destroy(&p->mu);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    if (pthread_create(&p->tid[i], NULL, worker_main, p) != 0)
      break; /* fewer threads: slower, still right */
    p->nworkers++;
  }
  return p->nworkers;
}

void gwg_pool_stop(gwg_pool *p) {
  gwg_pool_set_state(p, -1);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->tid[i], NULL);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  p->nworkers = 0;
}

void gwg_pool_publish(gwg_pool *p, gwg_flow *j) { __atomic_store_n(&p->job, j, __ATOMIC_SEQ_CST); }

void gwg_pool_retract(gwg_pool *p, gwg_flow *j, int abort) {
  if (abort) __atomic_store_n(&j->abort, 1, __ATOMIC_SEQ_CST);
  __atomic_store_n(&p->job, NULL, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&p->active, __ATOMIC_SEQ_CST)) gwg_cpu_relax();
}
