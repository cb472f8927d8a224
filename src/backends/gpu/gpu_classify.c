/* Vendor pointer attributes -> gw_ptrinfo. Pure: no vendor headers, no runtime calls. The
 * classification itself is gwc_classify_inline (gpu_classify.h), inline for the backend's
 * query; this is its out-of-line copy for the other callers and the tests. The extent of
 * pool and VMM memory (gwc_mapped_range) is pure too: the runtime's answers about each
 * address come through a callback, so the tests walk fake chunk tables. */
#include "gpu_classify.h"

gw_status gwc_classify(const void *ptr, const gwc_attrs *a, const gwc_caps *caps, gw_ptrinfo *out) {
  return gwc_classify_inline(ptr, a, caps, out);
}

int gwc_mapped_range(const void *ptr, const gwc_attrs *a, gwc_chunk_fn chunk, void *user,
                     uintptr_t *base, size_t *extent) {
  uintptr_t p = (uintptr_t)ptr;
  gwc_chunk c = {0};
  chunk(user, p, &c);
  if (!c.ok || c.size == 0 || p - c.base >= c.size) return 0;
  uintptr_t lo = c.base, hi = c.base + c.size;
  uintptr_t rs = a->range_start, re = a->range_start + a->range_size;
  /* A pool allocation is one mapping; so is VMM memory whose reservation is not known. */
  if (a->mempool || a->range_size == 0 || lo < rs || hi > re || re < rs) {
    *base = lo;
    *extent = hi - lo;
    return 1;
  }
  while (hi < re) {
    gwc_chunk n = {0};
    chunk(user, hi, &n);
    if (!n.ok || n.base != hi || n.size == 0 || n.size > re - hi || n.range_start != rs ||
        n.device != a->device)
      break;
    hi += n.size;
  }
  while (lo > rs) {
    gwc_chunk n = {0};
    chunk(user, lo - 1, &n);
    if (!n.ok || n.size == 0 || n.base < rs || n.base + n.size != lo || n.range_start != rs ||
        n.device != a->device)
      break;
    lo = n.base;
  }
  *base = lo;
  *extent = hi - lo;
  return 1;
}
