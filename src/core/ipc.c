/*
 * Memory from another process: gw_ipc_export and gw_ipc_open (docs/IPC.md). The handle's
 * format is ipc_handle.c's, the table of what this process has mapped ipc_table.c's, and
 * the identity that tells the exporting process proc_identity.c's.
 */
#include "codec.h"
#include "ipc_fdpass.h"
#include "ipc_manifest.h"
#include "ipc_table.h"
#include "proc_identity.h"

#include <stdio.h>
#include <string.h>

/* ---- export ---- */

/* The allocation holding element 0, and its offset there: views and interior pointers
 * export its base plus their offset (the runtimes map whole allocations: HIP maps an
 * interior pointer's handle at the allocation's base). */
static gw_status allocation_of(gw_array *a, gw_ptrinfo *info, uint64_t *offset) {
  gw_context *ctx = a->ctx;
  gw_status s = ctx->ops->mem_query(ctx->state, a->dev0, info);
  if (s != GW_OK) return s;
  if (info->kind != GW_MEM_DEVICE || !info->base || !info->extent)
    return gw__fail(GW_ENOTSUP, "a: %p is %s memory of no known device allocation now",
                    (void *)a->dev0, gw_memkind_name(info->kind));
  int64_t lo, hi, numel;
  s = gw__span(a->ndim, a->shape, a->strides, gw__dtype_size(a->dtype), &lo, &hi, &numel);
  if (s != GW_OK) return s;
  *offset = (uint64_t)(a->dev0 - (char *)info->base);
  if (numel > 0 && ((lo < 0 && (uint64_t)-lo > *offset) || (uint64_t)hi > info->extent - *offset))
    return gw__fail(GW_ERANGE, "a: its elements reach outside the allocation [%p, +%zu)",
                    info->base, info->extent);
  return GW_OK;
}

gw_status gw_ipc_export(gw_array *a, gw_ipc_handle *out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  const gw_array *root = gw__root(a);
  gw_context *ctx = a->ctx;
  if (root->kind != GW_MEM_DEVICE)
    return gw__fail(GW_ENOTSUP,
                    "a: %s memory; only device memory can be exported to another process "
                    "(the runtimes' IPC maps device allocations; host memory is shared with "
                    "shm/mmap and wrapped on the other side)",
                    gw_memkind_name(root->kind));
  if (!ctx->ops->ipc_mem_export)
    return gw__fail(GW_ENOTSUP, "a: the %s backend cannot export memory", ctx->ops->name);
  if (!a->dev0)
    return gw__fail(GW_EINVAL, "a: has no memory to export (no elements, NULL address)");
  /* The geometry first: what does not fit is refused before any runtime call. */
  if (!gw__ipc_geometry_fits(GW__IPC_LEGACY, a->ndim, a->shape, a->strides))
    return gw__fail(GW_ENOTSUP,
                    "a: its %d dims' shape and strides do not fit the %d bytes a handle has "
                    "for them (any array of up to 6 dims fits, more when the extents and "
                    "strides are small); export a reshaped or smaller-dimensional view",
                    a->ndim, GW__IPC_GEOM_BYTES);
  gw_ptrinfo info;
  gw__ipc_fields f;
  memset(&f, 0, sizeof f);
  gw_status s = allocation_of(a, &info, &f.offset);
  if (s != GW_OK) return s;
  {
    /* The array's bytes: VMM memory exports only the chunks covering them. */
    int64_t lo, hi, numel;
    (void)gw__span(a->ndim, a->shape, a->strides, gw__dtype_size(a->dtype), &lo, &hi, &numel);
    f.share.lo = (uintptr_t)(a->dev0 + lo);
    f.share.hi = (uintptr_t)(a->dev0 + (numel > 0 ? hi : lo + 1));
  }
  s = ctx->ops->ipc_mem_export(ctx->state, info.base, info.extent, info.device, f.rt, &f.alloc_id,
                               &f.share);
  if (s != GW_OK) return s;
  /* The descriptors the handle names, as they are now: gw_ipc_handle_send checks that they
   * still are (ipc_fdpass.c). */
  if (f.share.kind == GW__IPC_POOL) s = gw__ipc_fd_exported(f.share.fd);
  for (int i = 0; f.share.kind == GW__IPC_VMM && s == GW_OK && i < f.share.nchunks; i++)
    s = gw__ipc_fd_exported(f.share.chunk_fd[i]);
  if (s != GW_OK) return s;
  bool manifest = f.share.kind == GW__IPC_VMM && f.share.nchunks > GW__IPC_VMM_HANDLE_CHUNKS;
  if (manifest) {
    /* More chunks than the handle holds: their list goes in a manifest it names
     * (ipc_manifest.c), which a send passes with them. */
    s = gw__ipc_manifest_export(&f.share);
    if (s == GW_OK) s = gw__ipc_fd_exported(f.share.manifest_fd);
    if (s != GW_OK) return s;
  }
  if (f.share.kind == GW__IPC_VMM) {
    /* The span of the chunks is what the handle names; each chunk's descriptor and size go
     * in the runtime's bytes (ipc_handle.c, version 3), or the manifest's descriptor and
     * digest do. */
    uint64_t total = 0;
    memset(f.rt, 0, sizeof f.rt);
    for (int i = 0; i < f.share.nchunks; i++) {
      if (!manifest) {
        gw__put_le32(f.rt + 8 * i, (uint32_t)f.share.chunk_fd[i]);
        gw__put_le32(f.rt + 8 * i + 4, (uint32_t)(f.share.chunk_bytes[i] >> 12));
      }
      total += f.share.chunk_bytes[i];
    }
    if (manifest) {
      gw__put_le32(f.rt, (uint32_t)f.share.manifest_fd);
      gw__put_le64(f.rt + 4, f.share.manifest_digest);
    }
    f.offset = (uint64_t)((uintptr_t)a->dev0 - f.share.span_base);
    info.base = (void *)f.share.span_base;
    info.extent = (size_t)total;
  }
  /* Pool memory's handle (version 3) has 13 bytes less for the geometry; nothing to undo
   * (the pool's descriptor stays the backend's, whatever is exported). */
  if (!gw__ipc_geometry_fits(f.share.kind, a->ndim, a->shape, a->strides))
    return gw__fail(
        GW_ENOTSUP,
        "a: pool or VMM memory: its %d dims' shape and strides do not fit the %d bytes a "
        "version-3 handle has for them (any array of up to 5 dims fits, more "
        "when the extents and strides are small); export a reshaped or "
        "smaller-dimensional view",
        a->ndim, GW__IPC_GEOM_BYTES_V3);
  /* The device's UUID: the context's where the memory is its device's, else the backend's
   * (zero where neither can say; the importer then goes by the ordinal). */
  if (info.device == ctx->device)
    memcpy(f.uuid, ctx->caps.device_uuid, 16);
  else if (ctx->ops->dev_uuid && ctx->ops->dev_uuid(info.device, f.uuid) != GW_OK)
    memset(f.uuid, 0, 16);
  gw__proc_identity(&f.pid, &f.nonce);
  f.backend = ctx->backend;
  f.dtype = a->dtype;
  f.ndim = a->ndim;
  f.readonly = a->readonly;
  f.device = info.device;
  f.base = (uint64_t)(uintptr_t)info.base;
  f.extent = info.extent;
  memcpy(f.shape, a->shape, (size_t)a->ndim * sizeof f.shape[0]);
  memcpy(f.strides, a->strides, (size_t)a->ndim * sizeof f.strides[0]);
  gw__ipc_handle_encode(&f, out);
  return GW_OK;
}

/* ---- open ---- */

/* A root array over [p, ...) of the handle's device memory, borrowed. */
static gw_status new_opened(gw_context *ctx, const gw__ipc_fields *d, int device, char *first,
                            gw_array **out) {
  gw_array *a = gw__new_root(ctx, d->dtype, d->ndim, d->shape, d->strides);
  if (!a) return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
  a->readonly = d->readonly;
  if (d->readonly) a->ro_why = GW__RO_ASKED;
  a->dev0 = first;
  a->kind = GW_MEM_DEVICE;
  a->device = device;
  *out = a;
  return GW_OK;
}

static void uuid_text(const unsigned char u[16], char out[37]) {
  static const int dash[4] = {4, 6, 8, 10};
  char *at = out;
  for (int i = 0, k = 0; i < 16; i++) {
    if (k < 4 && i == dash[k]) {
      *at++ = '-';
      k++;
    }
    at += sprintf(at, "%02x", u[i]);
  }
}

/* This process's ordinal of the handle's device: the one with the handle's UUID among the
 * devices it sees (the context's first: the common case, no runtime call); by the
 * exporter's ordinal where the UUID is unknown (all zero) on either side. */
static gw_status local_device(gw_context *ctx, const gw__ipc_fields *d, int *out) {
  int count = 0;
  gw_status s = ctx->ops->dev_count(&count);
  if (s != GW_OK) return s;
  static const unsigned char zero[16];
  bool known = memcmp(d->uuid, zero, 16) != 0;
  if (known && memcmp(d->uuid, ctx->caps.device_uuid, 16) == 0) {
    *out = ctx->device;
    return GW_OK;
  }
  if (known && ctx->ops->dev_uuid) {
    for (int i = 0; i < count; i++) {
      unsigned char u[16];
      s = ctx->ops->dev_uuid(i, u);
      if (s != GW_OK) return s; /* it said why */
      if (memcmp(u, d->uuid, 16) == 0) {
        *out = i;
        return GW_OK;
      }
    }
    char text[37];
    uuid_text(d->uuid, text);
    return gw__fail(GW_ENODEV,
                    "h: exported from %s device %s (the exporter's device %d), which is none of "
                    "the %d device%s this process sees (a launcher's CUDA_VISIBLE_DEVICES?)",
                    ctx->ops->name, text, d->device, count, count == 1 ? "" : "s");
  }
  if (d->device >= count)
    return gw__fail(GW_ENODEV, "h: exported from %s device %d; this process sees %d device%s",
                    ctx->ops->name, d->device, count, count == 1 ? "" : "s");
  *out = d->device;
  return GW_OK;
}

/* An open in the exporting process: the memory must be a live device allocation with the
 * handle's base, extent, device and (where the runtime has one) allocation id, as export
 * found it; a released allocation, one that reuses its address, or a handle rewritten to
 * name other memory is refused rather than opened over whatever is there now. */
static gw_status check_own(gw_context *ctx, const gw__ipc_fields *d, int device) {
  void *base = (void *)(uintptr_t)d->base;
  gw_ptrinfo info;
  gw_status s = ctx->ops->mem_query(ctx->state, base, &info);
  if (s != GW_OK) return s;
  if (info.kind != GW_MEM_DEVICE)
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process, but %p is %s memory now, not device memory "
                    "(the allocation was released, or the handle names other memory)",
                    base, gw_memkind_name(info.kind));
  /* VMM memory: the handle names the chunks covering the array, inside the contiguous
   * mapped range the query reports. */
  bool vmm = d->share.kind == GW__IPC_VMM;
  if (vmm ? ((uintptr_t)info.base > d->base || d->base - (uintptr_t)info.base > info.extent ||
             d->extent > info.extent - (d->base - (uintptr_t)info.base) || info.device != device)
          : ((uintptr_t)info.base != d->base || info.extent != d->extent || info.device != device))
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process as the allocation [%p, +%llu) of device %d, but "
                    "the device allocation there now is [%p, +%zu) of device %d (released, "
                    "its address reused)",
                    base, (unsigned long long)d->extent, device, info.base, info.extent,
                    info.device);
  if (d->alloc_id == 0 && d->share.kind == GW__IPC_LEGACY)
    return GW_OK; /* the runtime has no id (HIP): base and extent it is */
  unsigned char rt[GW__IPC_RT_BYTES];
  uint64_t id = 0;
  gw__ipc_share sh;
  memset(&sh, 0, sizeof sh);
  sh.lo = (uintptr_t)base;
  sh.hi = (uintptr_t)base + (size_t)d->extent;
  s = ctx->ops->ipc_mem_export(ctx->state, vmm ? info.base : base,
                               vmm ? info.extent : (size_t)d->extent, device, rt, &id, &sh);
  if (s != GW_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", gw_last_error());
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process, but the allocation at %p cannot be "
                    "identified now: %s",
                    base, why);
  }
  bool same_chunks = sh.nchunks == d->share.nchunks && sh.span_base == d->base;
  bool listed = vmm && d->share.nchunks > GW__IPC_VMM_HANDLE_CHUNKS; /* in a manifest */
  if (listed && same_chunks) same_chunks = gw__ipc_manifest_digest(&sh) == d->share.manifest_digest;
  for (int i = 0; vmm && !listed && same_chunks && i < sh.nchunks; i++)
    same_chunks =
        sh.chunk_fd[i] == d->share.chunk_fd[i] && sh.chunk_bytes[i] == d->share.chunk_bytes[i];
  if (sh.kind != d->share.kind || sh.pool_id != d->share.pool_id ||
      (sh.kind == GW__IPC_POOL && memcmp(rt, d->rt, GW__IPC_RT_BYTES) != 0) ||
      (vmm && !same_chunks))
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process as %s memory, but the allocation at %p now is "
                    "another allocation (released, its address reused)",
                    d->share.kind == GW__IPC_POOL  ? "pool"
                    : d->share.kind == GW__IPC_VMM ? "VMM"
                                                   : "device",
                    base);
  if (id != d->alloc_id)
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process as allocation %llu at %p, which was released: "
                    "allocation %llu reuses its address",
                    (unsigned long long)d->alloc_id, base, (unsigned long long)id);
  return GW_OK;
}

gw_status gw_ipc_open(gw_context *ctx, const gw_ipc_handle *h, gw_array **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!h) return gw__fail(GW_EINVAL, "h: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  gw__ipc_fields d;
  gw_status s = gw__ipc_handle_decode(h, &d);
  if (s != GW_OK) return s;
  if (d.backend != ctx->backend)
    return gw__fail(GW_EINVAL, "h: exported by the %s backend; ctx is a %s context",
                    gw_backend_name(d.backend), ctx->ops->name);
  if (!ctx->ops->ipc_mem_open)
    return gw__fail(GW_ENOTSUP, "ctx: the %s backend cannot open memory of another process",
                    ctx->ops->name);
  int device = -1;
  s = local_device(ctx, &d, &device);
  if (s != GW_OK) return s;

  uint64_t pid, nonce;
  gw__proc_identity(&pid, &nonce);
  gw_array *a = NULL;
  if (d.pid == pid && d.nonce == nonce) {
    /* The exporting process: the memory is here already, and the runtimes refuse to open
     * their own handle (cudaErrorDeviceUninitialized, measured). */
    s = check_own(ctx, &d, device);
    if (s != GW_OK) return s;
    s = new_opened(ctx, &d, device, (char *)(uintptr_t)(d.base + d.offset), &a);
    if (s != GW_OK) return s;
    a->ctx_ref = gw__context_retain(ctx);
    *out = a;
    return GW_OK;
  }

  struct gw__ipc_map *m;
  char *local;
  s = gw__ipc_table_open(ctx, &d, device, &m, &local);
  if (s != GW_OK) return s;
  s = new_opened(ctx, &d, device, local + d.offset, &a);
  if (s != GW_OK) {
    gw__ipc_unref(m);
    return s;
  }
  a->ipc = m;
  a->ctx_ref = gw__context_retain(ctx);
  *out = a;
  return GW_OK;
}
