/* gw_pointer_query: the backend's classification plus what only gpuwrap knows. */
#include "internal.h"
#include "out_struct.h"

#include <string.h>

static const size_t layouts[] = GW__PTRINFO_LAYOUTS;
GW__LAYOUTS_CHECK(gw_ptrinfo, GW__PTRINFO_LAST);

gw_status gw_pointer_query(gw_context *ctx, const void *ptr, gw_ptrinfo *out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  /* A caller whose struct is the newest layout is written straight into: a backend writes
   * *out only when it succeeds (one struct copy less per query; the cost over the raw
   * runtime call is the target of docs/BENCHMARKS.md, <= 1.1x). An older layout gets a
   * copy of its bytes of a whole struct (out_struct.h). */
  size_t bytes = gw__out_size(out->struct_size, layouts, sizeof layouts / sizeof layouts[0]);
  if (__builtin_expect(bytes != sizeof *out, 0)) {
    gw_ptrinfo full = {.struct_size = sizeof full};
    gw_status st = gw_pointer_query(ctx, ptr, &full);
    if (st == GW_OK) gw__out_copy(out, &full, layouts, sizeof layouts / sizeof layouts[0]);
    return st;
  }
  gw_status s = ctx->ops->mem_query(ctx->state, ptr, out);
  if (s == GW_OK) out->struct_size = bytes;
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
