/* gw_pointer_query: the backend's classification plus what only gpuwrap knows. */
#include "internal.h"

#include <string.h>

gw_status gw_pointer_query(gw_context *ctx, const void *ptr, gw_ptrinfo *out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  gw_ptrinfo info;
  gw_status s = ctx->ops->query(ctx->state, ptr, &info);
  if (s != GW_OK) return s;
  if (info.kind == GW_MEM_PINNED) {
    uintptr_t base;
    size_t len;
    if (gw__registry_contains(ctx->ops, (uintptr_t)ptr, &base, &len)) {
      info.flags |= GW_PTR_GPUWRAP_REGISTERED;
      info.base = (void *)base;
      info.extent = len;
    }
  }
  *out = info;
  return GW_OK;
}
