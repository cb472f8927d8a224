/* gw_pointer_query: the backend's classification plus what only gpuwrap knows. */
#include "internal.h"

#include <string.h>

gw_status gw_pointer_query(gw_context *ctx, const void *ptr, gw_ptrinfo *out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  /* Straight into the caller's struct: a backend writes *out only when it succeeds, so no
   * local copy is needed (one 48-byte copy less per query; the cost over the raw runtime
   * call is the target of docs/BENCHMARKS.md, <= 1.1x). */
  gw_status s = ctx->ops->query(ctx->state, ptr, out);
  if (__builtin_expect(s != GW_OK || out->kind != GW_MEM_PINNED, 1)) return s;
  /* Pinned: gpuwrap's own registration reports its exact range (no call and no lock while
   * the registry is empty: memory someone else pinned, a cudaHostAlloc pointer, costs what
   * a device pointer costs). */
  uintptr_t base;
  size_t len;
  if (!gw__registry_empty() && gw__registry_contains(ctx->ops, (uintptr_t)ptr, &base, &len)) {
    out->flags |= GW_PTR_GPUWRAP_REGISTERED;
    out->base = (void *)base;
    out->extent = len;
  }
  return GW_OK;
}
