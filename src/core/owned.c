/*
 * Byte spans owned by live arrays. A second owning wrap of any byte of an owned span would
 * free the memory twice (or free() an address inside a malloc block), so it is refused
 * with GW_EOWNED: the table knows spans [lo, hi), not only the pointers that will be freed.
 * Only owning wraps and gw_alloc touch this table, so the borrowing fast path never takes
 * its lock.
 *
 * Arrays with a deleter (gw_wrap_with_deleter, DLPack imports) own their memory too (the
 * deleter decides its fate: gw_owns() says 1), so an owning wrap of any byte they span is
 * refused as well. Their spans are kept apart, a multiset in no order: they may overlap
 * each other and the owned spans (two imports of one tensor; a gw_alloc'd array exported
 * and imported back, whose deleter drops a reference, not the memory), and only owning
 * wraps and gw_alloc search them.
 */
#include "internal.h"
#include "vec.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

typedef struct {
  uintptr_t lo, hi; /* [lo, hi), lo is what the owner frees */
} span;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
void gw__owned_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }
static span *spans; /* sorted by lo, disjoint */
static size_t n, cap;

typedef struct {
  uintptr_t lo, hi;
  size_t *slot; /* the array's gw_array.deleter_slot: where this entry is, kept up to date */
} dspan;
static dspan *dspans; /* the deleter arrays' spans, in no order */
static size_t dn, dcap;

/* Index of a deleter span sharing a byte with [lo, hi), or dn. */
static size_t deleter_overlap(uintptr_t lo, uintptr_t hi) {
  for (size_t i = 0; i < dn; i++)
    if (dspans[i].lo < hi && lo < dspans[i].hi) return i;
  return dn;
}

static gw_status refuse_deleter(void *ptr, uintptr_t hi, size_t i) {
  return gw__fail(GW_EOWNED,
                  "ptr: [%p, %p) overlaps [%p, %p), memory a live array with a deleter owns "
                  "(its deleter decides when it goes: an owning wrap would free it as well)",
                  ptr, (void *)hi, (void *)dspans[i].lo, (void *)dspans[i].hi);
}

/* Index of the first span with hi > p. */
static size_t first_after(uintptr_t p) {
  return gw__vec_bound(spans, n, sizeof *spans, offsetof(span, hi), p, true);
}

static uintptr_t end_of(uintptr_t lo, size_t bytes) {
  if (bytes == 0) bytes = 1;
  return UINTPTR_MAX - lo < bytes ? UINTPTR_MAX : lo + bytes;
}

static gw_status refuse(void *ptr, uintptr_t hi, size_t i) {
  return gw__fail(GW_EOWNED,
                  "ptr: [%p, %p) overlaps [%p, %p), memory a live array already owns (a "
                  "second owner would free it twice)",
                  ptr, (void *)hi, (void *)spans[i].lo, (void *)spans[i].hi);
}

gw_status gw__owned_check(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&lock);
  size_t i = first_after(p), k;
  gw_status s = (i < n && spans[i].lo <= p)            ? refuse(ptr, p + 1, i)
                : (k = deleter_overlap(p, p + 1)) < dn ? refuse_deleter(ptr, p + 1, k)
                                                       : GW_OK;
  pthread_mutex_unlock(&lock);
  return s;
}

gw_status gw__owned_claim(void *ptr, size_t bytes, bool libc, bool fresh) {
  uintptr_t lo = (uintptr_t)ptr, hi = end_of(lo, bytes);
  gw_status s = GW_OK;
  pthread_mutex_lock(&lock);
  size_t i = first_after(lo);
#if defined(__GLIBC__)
  /* A pointer free() will get must be a malloc block's start: the whole block is owned, so
   * an owning wrap of another address inside it is refused too. Asked only once no owned
   * span holds ptr (malloc_usable_size of an interior pointer would itself be invalid). */
  if (libc && !(i < n && spans[i].lo < hi)) {
    size_t usable = malloc_usable_size(ptr);
    if (usable > bytes) hi = end_of(lo, usable);
  }
#else
  (void)libc;
#endif
  size_t k;
  if (i < n && spans[i].lo < hi) {
    s = refuse(ptr, hi, i);
  } else if (!fresh && (k = deleter_overlap(lo, hi)) < dn) {
    s = refuse_deleter(ptr, hi, k);
  } else {
    span *a = gw__vec_room(spans, n, &cap, sizeof *spans);
    if (!a)
      s = gw__fail(GW_ENOMEM, "ownership table: out of host memory");
    else
      spans = a;
  }
  if (s == GW_OK) {
    memmove(&spans[i + 1], &spans[i], (n - i) * sizeof *spans);
    spans[i] = (span){lo, hi};
    n++;
  }
  pthread_mutex_unlock(&lock);
  return s;
}

void gw__owned_drop(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&lock);
  size_t i = first_after(p);
  if (i < n && spans[i].lo == p) {
    memmove(&spans[i], &spans[i + 1], (n - i - 1) * sizeof *spans);
    n--;
  }
  pthread_mutex_unlock(&lock);
}

gw_status gw__owned_note_deleter(void *lo, void *hi, size_t *slot) {
  pthread_mutex_lock(&lock);
  gw_status s = GW_OK;
  dspan *a = gw__vec_room(dspans, dn, &dcap, sizeof *dspans);
  if (!a)
    s = gw__fail(GW_ENOMEM, "ownership table: out of host memory");
  else
    dspans = a;
  if (s == GW_OK) {
    dspans[dn] = (dspan){(uintptr_t)lo, (uintptr_t)hi, slot};
    *slot = dn++;
  }
  pthread_mutex_unlock(&lock);
  return s;
}

void gw__owned_forget_deleter(size_t *slot) {
  pthread_mutex_lock(&lock);
  size_t i = *slot;
  if (i < dn && dspans[i].slot == slot) { /* the last entry moves into its place */
    dspans[i] = dspans[--dn];
    *dspans[i].slot = i;
  }
  pthread_mutex_unlock(&lock);
}
