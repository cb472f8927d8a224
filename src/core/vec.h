/*
 * The two helpers every sorted table of the library is built on (the registry's ranges,
 * the owned spans, the CPU model's allocations): room for one more entry in a growable
 * array, and a binary search by an address key. Static inline: the searches sit on the
 * wrap path, and with the entry size and key offset constant at each call they compile to
 * the loop a table would write for itself. Never installed.
 */
#ifndef GW_CORE_VEC_H
#define GW_CORE_VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * `v` (`n` entries of `size` bytes, capacity *cap) with room for one more: v itself, or a
 * copy of twice the capacity (16 entries the first time), *cap updated. NULL when out of
 * memory: v and *cap are as they were, so the caller's table is unchanged.
 */
static inline void *gw__vec_room(void *v, size_t n, size_t *cap, size_t size) {
  if (n < *cap) return v;
  size_t c = *cap ? *cap * 2 : 16;
  void *g = realloc(v, c * size);
  if (g) *cap = c;
  return g;
}

/*
 * Index of the first of the `n` entries of `v` (each `size` bytes, sorted by the uintptr_t
 * at byte offset `key` of an entry) whose key is > p (`after` true) or >= p (false); n
 * when there is none. For a table of disjoint [lo, hi) ranges sorted by lo, the first
 * range with hi > p is the only one that can hold p.
 */
static inline size_t gw__vec_bound(const void *v, size_t n, size_t size, size_t key, uintptr_t p,
                                   bool after) {
  size_t a = 0, b = n;
  while (a < b) {
    size_t m = a + (b - a) / 2;
    uintptr_t k;
    memcpy(&k, (const char *)v + m * size + key, sizeof k);
    if (after ? k > p : k >= p)
      b = m;
    else
      a = m + 1;
  }
  return a;
}

#endif /* GW_CORE_VEC_H */
