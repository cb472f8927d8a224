/* Contexts: a (backend, device) pair carrying its backend's operations table. */
#include "internal.h"
#include "tls_fast.h"

#include <stdlib.h>
#include <string.h>

static gw_status parse_env_backend(gw_backend *out) {
  /* The choices' order in the settings table is auto|cpu|cuda|hip, as gw_backend's. */
  long long b;
  gw_status s = gw__setting_int(GW__SET_BACKEND, &b);
  if (s == GW_OK && b != 0) *out = (gw_backend)b;
  return s;
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
  s = ops->dev_count(&n);
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
  s = ops->dev_count(&n);
  if (s != GW_OK) return s;
  if (device >= n)
    return gw__fail(GW_ENODEV, "device: %d, but backend %s has %d device%s", device, ops->name, n,
                    n == 1 ? "" : "s");
  /* Aligned, so that each reference count has its cache line to itself (internal.h). */
  gw_context *ctx = aligned_alloc(_Alignof(gw_context), sizeof *ctx);
  if (!ctx) return gw__fail(GW_ENOMEM, "gw_context_create: out of host memory");
  memset(ctx, 0, sizeof *ctx);
  s = ops->ctx_init(device, &ctx->state, &ctx->caps);
  if (s != GW_OK) {
    free(ctx);
    return s;
  }
  atomic_init(&ctx->central, 1); /* the creator's reference */
  for (int i = 0; i < GW__CTX_SLOTS; i++) atomic_init(&ctx->slot[i].n, 0);
  ctx->ops = ops;
  ctx->backend = backend;
  ctx->device = device;
  *out = ctx;
  return GW_OK;
}

/*
 * References, counted per thread (struct gw_context). While the creator holds its
 * reference the context cannot go, so a reference is one atomic add and one atomic
 * subtract on the thread's own count, whichever thread drops it (the token says which
 * count it was taken on, so no count ever goes below 0), with no look at any other count.
 * When the creator lets go (gw_context_destroy), the counts are folded into `central`, one
 * atomic fetch-or each, which also marks the count GW__CTX_DYING: a retain or release that
 * finds the mark goes to `central` instead. That read-modify-write on the count itself is
 * what makes this safe without a lock: a release that subtracted before the fold had its
 * reference folded away with the count (and never touches the context again); one after
 * it sees the mark in the value it changed, so its reference is in `central`, which
 * cannot reach 0 before it drops it. The context is freed by whoever takes `central` to 0.
 */
#define GW__CTX_DYING (UINT64_C(1) << 62)
#define GW__CTX_GUARD (UINT64_C(1) << 61)
#define CENTRAL (-1) /* the token of a reference held in `central` */

static int slot_of_thread(void) {
  static atomic_uint next;
  static _Thread_local int mine GW__TLS_FAST = -1;
  if (mine < 0)
    mine = (int)(atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) % GW__CTX_SLOTS);
  return mine;
}

static void drop_central(gw_context *ctx, uint64_t n) {
  if (atomic_fetch_sub_explicit(&ctx->central, n, memory_order_acq_rel) != n) return;
  ctx->ops->ctx_fini(ctx->state);
  free(ctx);
}

int gw__context_retain(gw_context *ctx) {
  int i = slot_of_thread();
  uint64_t was = atomic_fetch_add_explicit(&ctx->slot[i].n, 1, memory_order_relaxed);
  if (__builtin_expect(!(was & GW__CTX_DYING), 1)) return i;
  /* Folded already: this count is not counted any more (what was added to it is
   * ignored); the reference lives in central. The caller holds one, so it is > 0. */
  atomic_fetch_add_explicit(&ctx->central, 1, memory_order_relaxed);
  return CENTRAL;
}

void gw__context_release(gw_context *ctx, int token) {
  if (token != CENTRAL) {
    uint64_t was = atomic_fetch_sub_explicit(&ctx->slot[token].n, 1, memory_order_release);
    if (__builtin_expect(!(was & GW__CTX_DYING), 1)) return;
  }
  drop_central(ctx, 1);
}

void gw_context_destroy(gw_context *ctx) {
  if (!ctx) return;
  /* Fold every count into central. A reference on a count folded already is dropped from
   * central at once, possibly before this loop has added that count: a guard far above
   * any number of references keeps central > 0 until the sum is in. */
  atomic_fetch_add_explicit(&ctx->central, GW__CTX_GUARD, memory_order_relaxed);
  uint64_t held = 0;
  for (int i = 0; i < GW__CTX_SLOTS; i++)
    held += atomic_fetch_or_explicit(&ctx->slot[i].n, GW__CTX_DYING, memory_order_acq_rel) &
            (GW__CTX_DYING - 1);
  /* central + held - guard - the creator's reference: what is left is every reference
   * still held, wherever it was taken. */
  drop_central(ctx, GW__CTX_GUARD + 1 - held);
}

gw_backend gw_context_backend(const gw_context *ctx) {
  return ctx ? ctx->backend : GW_BACKEND_AUTO;
}

int gw_context_device(const gw_context *ctx) { return ctx ? ctx->device : -1; }

void gw__context_device_identity(const gw_context *ctx, unsigned char uuid[16],
                                 int *concurrent_processes) {
  memset(uuid, 0, 16);
  *concurrent_processes = 0;
  if (!ctx) return;
  memcpy(uuid, ctx->caps.device_uuid, 16);
  *concurrent_processes = ctx->caps.concurrent_processes;
}

gw_status gw_synchronize(gw_context *ctx) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  return ctx->ops->ctx_synchronize(ctx->state);
}
