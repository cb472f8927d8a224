/*
 * Who we are, as the exporter of IPC handles (proc_identity.h).
 *
 * The exporting process is (pid, nonce): a 64-bit random number drawn at this address
 * space's first use of IPC. The pid alone is reused by another process, and the pid with
 * the start time (what IPC handle version 1 used) is also the same process after an exec,
 * whose fresh address space has none of the exporter's memory; static storage does not
 * survive an exec, so a nonce kept in it does not either, and no marker on disk or in
 * /proc has to be trusted. A forked child forgets both (gw__proc_identity_forget, from
 * fork.c) and draws its own.
 */
#include "proc_identity.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Atomic(uint64_t) self_pid, self_nonce;

static uint64_t draw_nonce(void) {
  uint64_t n = 0;
  if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n) {
    /* No getrandom (an old kernel, a seccomp filter): the clock, the pid and this
     * address space's layout (ASLR), mixed; still fresh after an exec. */
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    n = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ ((uint64_t)getpid() << 44) ^
        (uint64_t)(uintptr_t)&n ^ ((uint64_t)(uintptr_t)&self_nonce << 17);
    n *= 0x9E3779B97F4A7C15ull;
  }
  return n ? n : 1; /* 0 is "not drawn yet" */
}

/* Read once: getpid is a system call (glibc no longer caches it), a good part of an open
 * of an already-mapped allocation. Two threads making it at once may draw two nonces: the
 * one stored last would win, so a handle exported with the other would not be recognised;
 * the compare-exchange keeps the first. */
void gw__proc_identity(uint64_t *pid, uint64_t *nonce) {
  uint64_t me = atomic_load_explicit(&self_pid, memory_order_acquire);
  if (me == 0) {
    uint64_t none = 0, mine = draw_nonce();
    atomic_compare_exchange_strong_explicit(&self_nonce, &none, mine, memory_order_relaxed,
                                            memory_order_relaxed);
    me = (uint64_t)getpid();
    atomic_store_explicit(&self_pid, me, memory_order_release);
  }
  *pid = me;
  *nonce = atomic_load_explicit(&self_nonce, memory_order_relaxed);
}

/* Called in the child with only the forking thread alive: no other thread reads these. */
void gw__proc_identity_forget(void) {
  atomic_store_explicit(&self_pid, 0, memory_order_relaxed);
  atomic_store_explicit(&self_nonce, 0, memory_order_release);
}
