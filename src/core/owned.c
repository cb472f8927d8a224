/*
 * Addresses owned by live arrays. A second owning wrap of the same allocation would free it
 * twice, so it is refused with GW_EOWNED. Only owning wraps touch this table, so the
 * borrowing fast path never takes its lock.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
void gw__owned_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }
static uintptr_t *addrs; /* sorted */
static size_t n, cap;

static size_t lower_bound(uintptr_t p) {
  size_t a = 0, b = n;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (addrs[m] < p) a = m + 1;
    else b = m;
  }
  return a;
}

gw_status gw__owned_claim(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  gw_status s = GW_OK;
  pthread_mutex_lock(&lock);
  size_t i = lower_bound(p);
  if (i < n && addrs[i] == p) {
    s = gw__fail(GW_EOWNED, "ptr: %p is already owned by a live array (a second owner would free it twice)", ptr);
  } else {
    if (n == cap) {
      size_t c = cap ? cap * 2 : 64;
      uintptr_t *a = realloc(addrs, c * sizeof *a);
      if (!a) s = gw__fail(GW_ENOMEM, "ownership table: out of host memory");
      else {
        addrs = a;
        cap = c;
      }
    }
    if (s == GW_OK) {
      memmove(&addrs[i + 1], &addrs[i], (n - i) * sizeof *addrs);
      addrs[i] = p;
      n++;
    }
  }
  pthread_mutex_unlock(&lock);
  return s;
}

void gw__owned_drop(void *ptr) {
  uintptr_t p = (uintptr_t)ptr;
  pthread_mutex_lock(&lock);
  size_t i = lower_bound(p);
  if (i < n && addrs[i] == p) {
    memmove(&addrs[i], &addrs[i + 1], (n - i - 1) * sizeof *addrs);
    n--;
  }
  pthread_mutex_unlock(&lock);
}
