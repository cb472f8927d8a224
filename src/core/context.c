/* Contexts: a (backend, device) pair carrying its backend's operations table. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static gw_status parse_env_backend(gw_backend *out) {
  const char *env = getenv("GPUWRAP_BACKEND");
  if (!env || !*env || !strcasecmp(env, "auto")) return GW_OK;
  if (!strcasecmp(env, "cpu")) *out = GW_BACKEND_CPU;
  else if (!strcasecmp(env, "cuda")) *out = GW_BACKEND_CUDA;
  else if (!strcasecmp(env, "hip")) *out = GW_BACKEND_HIP;
  else
    return gw__fail(GW_EINVAL, "GPUWRAP_BACKEND=%s: expected cpu, cuda, hip or auto", env);
  return GW_OK;
}

/*
 * A value outside gw_backend is the caller's mistake, whichever call it reaches: GW_EINVAL
 * naming the argument (`arg`). GW_ENODEV is kept for a real backend that is not built in or
 * cannot load, so a caller probing backends can tell "absent" from "wrong value". The
 * unsigned compare also catches negative values (the enum may be signed or unsigned).
 */
static gw_status check_backend(gw_backend b, const char *arg) {
  if ((unsigned)b > (unsigned)GW_BACKEND_HIP)
    return gw__fail(GW_EINVAL, "%s: %d is not a gw_backend", arg, (int)b);
  return GW_OK;
}

gw_status gw_backend_device_count(gw_backend b, int *count) {
  if (!count) return gw__fail(GW_EINVAL, "count: NULL");
  *count = 0;
  gw_status s = check_backend(b, "b");
  if (s != GW_OK) return s;
  /* AUTO stands for a choice gw_context_create makes per device; it has no count of its
   * own, and answering for one backend would hide that the choice depends on `device`. */
  if (b == GW_BACKEND_AUTO)
    return gw__fail(GW_EINVAL, "b: GW_BACKEND_AUTO names no backend (gw_context_create "
                    "resolves it); ask GW_BACKEND_CPU, _CUDA or _HIP");
  const gw__backend_ops *ops = gw__backend_get(b);
  if (!ops) return GW_ENODEV;
  int n = 0;
  s = ops->device_count(&n);
  if (s != GW_OK) return s;
  *count = n;
  return GW_OK;
}

/* AUTO: the first GPU backend that sees `device`, else the CPU. */
static gw_backend pick_auto(int device) {
  static const gw_backend gpus[] = {GW_BACKEND_CUDA, GW_BACKEND_HIP};
  for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
    int n = 0;
    if (gw_backend_device_count(gpus[i], &n) == GW_OK && device < n) return gpus[i];
  }
  return GW_BACKEND_CPU;
}

gw_status gw_context_create(gw_backend backend, int device, gw_context **out) {
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (device < 0) return gw__fail(GW_EINVAL, "device: %d is negative", device);
  gw_status s = check_backend(backend, "backend");
  if (s != GW_OK) return s;
  if (backend == GW_BACKEND_AUTO) {
    s = parse_env_backend(&backend);
    if (s != GW_OK) return s;
    if (backend == GW_BACKEND_AUTO) backend = pick_auto(device);
  }
  const gw__backend_ops *ops = gw__backend_get(backend);
  if (!ops) return GW_ENODEV;
  int n = 0;
  s = ops->device_count(&n);
  if (s != GW_OK) return s;
  if (device >= n)
    return gw__fail(GW_ENODEV, "device: %d, but backend %s has %d device%s", device, ops->name,
                    n, n == 1 ? "" : "s");
  gw_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return gw__fail(GW_ENOMEM, "gw_context_create: out of host memory");
  s = ops->context_init(device, &ctx->state, &ctx->caps);
  if (s != GW_OK) {
    free(ctx);
    return s;
  }
  atomic_init(&ctx->refs, 1);
  ctx->ops = ops;
  ctx->backend = backend;
  ctx->device = device;
  *out = ctx;
  return GW_OK;
}

gw_context *gw__context_retain(gw_context *ctx) {
  atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
  return ctx;
}

void gw__context_release(gw_context *ctx) {
  if (atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel) != 1) return;
  ctx->ops->context_fini(ctx->state);
  free(ctx);
}

void gw_context_destroy(gw_context *ctx) {
  if (ctx) gw__context_release(ctx);
}

gw_backend gw_context_backend(const gw_context *ctx) {
  return ctx ? ctx->backend : GW_BACKEND_AUTO;
}

int gw_context_device(const gw_context *ctx) { return ctx ? ctx->device : -1; }

gw_status gw_synchronize(gw_context *ctx) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  return ctx->ops->synchronize(ctx->state);
}
