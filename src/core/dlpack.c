/*
 * DLPack export and import (include/gpuwrap/dlpack.h).
 *
 * Export: one heap block holds the managed tensor (versioned or legacy), the array reference
 * it keeps, and the tensor's shape and strides; its deleter drops the reference and frees
 * the block. Import: validate every field before anything is wrapped, then wrap data +
 * byte_offset with a deleter that calls the tensor's deleter; an import that fails calls
 * the tensor's deleter itself, so the producer is released exactly once either way.
 */
#include "gpuwrap/dlpack.h"
#include "internal.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- element types ---------------------------------------------------------------- */

static const DLDataType dl_dtypes[GW_DTYPE_COUNT] = {
    [GW_BOOL] = {kDLBool, 8, 1},
    [GW_INT8] = {kDLInt, 8, 1},
    [GW_INT16] = {kDLInt, 16, 1},
    [GW_INT32] = {kDLInt, 32, 1},
    [GW_INT64] = {kDLInt, 64, 1},
    [GW_UINT8] = {kDLUInt, 8, 1},
    [GW_UINT16] = {kDLUInt, 16, 1},
    [GW_UINT32] = {kDLUInt, 32, 1},
    [GW_UINT64] = {kDLUInt, 64, 1},
    [GW_FLOAT16] = {kDLFloat, 16, 1},
    [GW_BFLOAT16] = {kDLBfloat, 16, 1},
    [GW_FLOAT32] = {kDLFloat, 32, 1},
    [GW_FLOAT64] = {kDLFloat, 64, 1},
    [GW_COMPLEX64] = {kDLComplex, 64, 1},
    [GW_COMPLEX128] = {kDLComplex, 128, 1},
};

int gw__dtype_from_dl(DLDataType t, gw_dtype *out) {
  for (int i = 0; i < GW_DTYPE_COUNT; i++) {
    if (dl_dtypes[i].code == t.code && dl_dtypes[i].bits == t.bits && t.lanes == 1) {
      *out = (gw_dtype)i;
      return 1;
    }
  }
  return 0;
}

static const char *device_type_name(int t) {
  switch (t) {
  case kDLCPU: return "kDLCPU";
  case kDLCUDA: return "kDLCUDA";
  case kDLCUDAHost: return "kDLCUDAHost";
  case kDLOpenCL: return "kDLOpenCL";
  case kDLVulkan: return "kDLVulkan";
  case kDLMetal: return "kDLMetal";
  case kDLVPI: return "kDLVPI";
  case kDLROCM: return "kDLROCM";
  case kDLROCMHost: return "kDLROCMHost";
  case kDLExtDev: return "kDLExtDev";
  case kDLCUDAManaged: return "kDLCUDAManaged";
  case kDLOneAPI: return "kDLOneAPI";
  case kDLWebGPU: return "kDLWebGPU";
  case kDLHexagon: return "kDLHexagon";
  default: return "an unknown device type";
  }
}

/* The backend a device type belongs to (GW_BACKEND_AUTO: kDLCPU, any backend; -1: none). */
static int device_type_backend(int t) {
  switch (t) {
  case kDLCPU: return GW_BACKEND_AUTO;
  case kDLCUDA:
  case kDLCUDAHost:
  case kDLCUDAManaged: return GW_BACKEND_CUDA;
  case kDLROCM:
  case kDLROCMHost: return GW_BACKEND_HIP;
  case kDLExtDev: return GW_BACKEND_CPU; /* the CPU model's device memory (natural_placement) */
  default: return -1;
  }
}

/* Device types whose device_id DLPack fixes at 0 ("for vanilla CPU memory, pinned memory,
 * or managed memory, this is set to 0"); gpuwrap exports them with 0 and nothing else. */
static bool fixed_zero_id(int t) {
  return t == kDLCPU || t == kDLCUDAHost || t == kDLROCMHost || t == kDLCUDAManaged;
}

/* ---- where an array is, as a DLPack device -------------------------------------------- */

typedef struct {
  DLDevice device;
  void *data;
} placement;

/* Public accessors throughout: views answer them for their root. */
static gw_backend array_backend(const gw_array *a) {
  return gw_context_backend(gw_array_context(a));
}
static int context_device(const gw_array *a) { return gw_context_device(gw_array_context(a)); }

/* The device a GPU backend's own device memory is reported as. */
static DLDeviceType backend_device_type(gw_backend b) {
  return b == GW_BACKEND_HIP ? kDLROCM : kDLCUDA;
}

/*
 * The CPU model's device memory is kDLExtDev (DLPack's "reserved extension device type")
 * with the model's device number, not kDLCPU: on a GPU device memory is kDLCUDA / kDLROCM,
 * which a host consumer (NumPy) refuses, and a program that passes its tests on the model
 * must not read device memory on the host there and then fail on the GPU. NumPy refuses
 * kDLExtDev the same way; gpuwrap's own import takes it back (CPU contexts only), and
 * gw_to_dlpack_as refuses kDLCPU for it as for GPU device memory. The named ways to read
 * it on the host are a copy (gw_copy into host memory) and gw_host_data (NULL, as on a GPU).
 */
static gw_status natural_placement(const gw_array *a, placement *p) {
  gw_backend b = array_backend(a);
  gw_memkind kind = gw_kind(a);
  void *dev0 = gw_data(a), *host0 = gw_host_data(a);
  int dev = gw_device(a) >= 0 ? gw_device(a) : context_device(a);
  bool gpu = b == GW_BACKEND_CUDA || b == GW_BACKEND_HIP;

  if (b == GW_BACKEND_CPU && kind == GW_MEM_DEVICE) {
    *p = (placement){{kDLExtDev, dev}, dev0};
    return GW_OK;
  }
  if (!gpu || kind == GW_MEM_HOST) {
    *p = (placement){{kDLCPU, 0}, host0 ? host0 : dev0};
    return GW_OK;
  }
  switch (kind) {
  case GW_MEM_DEVICE: *p = (placement){{backend_device_type(b), dev}, dev0}; return GW_OK;
  case GW_MEM_PINNED:
    *p = (placement){{b == GW_BACKEND_HIP ? kDLROCMHost : kDLCUDAHost, 0}, host0 ? host0 : dev0};
    return GW_OK;
  case GW_MEM_MANAGED:
    if (b == GW_BACKEND_HIP)
      *p = (placement){{kDLROCM, dev}, dev0 ? dev0 : host0};
    else
      *p = (placement){{kDLCUDAManaged, 0}, dev0 ? dev0 : host0};
    return GW_OK;
  case GW_MEM_HOST:
  case GW_MEM_UNKNOWN: break;
  }
  if (gw_numel(a) == 0) { /* an empty wrap is never classified: the context's device */
    *p = (placement){{backend_device_type(b), context_device(a)}, dev0};
    return GW_OK;
  }
  return gw__fail(GW_ENOTSUP, "a: memory of unknown kind has no DLPack device type");
}

/* `want` if it can be offered without a copy (see gw_to_dlpack_as in dlpack.h). */
static gw_status chosen_placement(const gw_array *a, DLDevice want, placement *p) {
  gw_status s = natural_placement(a, p);
  if (s == GW_OK && p->device.device_type == want.device_type &&
      p->device.device_id == want.device_id)
    return GW_OK;
  if (want.device_id < 0)
    return gw__fail(GW_EINVAL, "want.device_id: %" PRId32 " is negative", want.device_id);
  /* DLPack fixes device_id at 0 for CPU, pinned and managed memory: another id is not a
   * device gpuwrap could honour, and exporting with 0 anyway would hand the consumer a
   * tensor on a device it did not ask for. Checked before the array is looked at, so the
   * answer is the same on every backend. */
  if (fixed_zero_id((int)want.device_type) && want.device_id != 0)
    return gw__fail(GW_EINVAL,
                    "want.device_id: %" PRId32 " for %s (DLPack's device_id is 0 "
                    "for CPU, pinned and managed memory)",
                    want.device_id, device_type_name((int)want.device_type));

  gw_backend b = array_backend(a);
  gw_memkind kind = gw_kind(a);
  void *dev0 = gw_data(a), *host0 = gw_host_data(a);
  const char *wname = device_type_name((int)want.device_type);
  int owner = device_type_backend((int)want.device_type);
  bool empty = gw_numel(a) == 0;

  if (owner < 0)
    return gw__fail(GW_ENOTSUP, "want: %s (%d) is not a device type gpuwrap can export to", wname,
                    (int)want.device_type);
  if (owner != GW_BACKEND_AUTO && owner != (int)b)
    return gw__fail(GW_ENOTSUP, "want: %s, but the array belongs to the %s backend", wname,
                    gw_backend_name(b));

  switch ((int)want.device_type) {
  case kDLCPU:
    if ((kind != GW_MEM_DEVICE && (b == GW_BACKEND_CPU || host0)) || empty) {
      *p = (placement){{kDLCPU, 0}, host0 ? host0 : dev0};
      return GW_OK;
    }
    return gw__fail(GW_ENOTSUP, "want: kDLCPU, but %s memory is not host-accessible%s",
                    gw_memkind_name(kind),
                    b == GW_BACKEND_CPU ? " (the CPU model refuses a host consumer of its device "
                                          "memory as a GPU does; copy it to host memory)"
                                        : "");
  case kDLExtDev:
    if (kind == GW_MEM_DEVICE && gw_device(a) != want.device_id)
      return gw__fail(GW_ENOTSUP,
                      "want.device_id: %" PRId32 ", but the device memory belongs to device %d "
                      "(no copy is ever made)",
                      want.device_id, gw_device(a));
    break; /* only the CPU model's device memory is kDLExtDev: natural_placement's */
  case kDLCUDA:
  case kDLROCM: {
    if (!dev0 && !empty)
      return gw__fail(GW_ENOTSUP, "want: %s, but %s memory is not device-accessible%s", wname,
                      gw_memkind_name(kind),
                      kind == GW_MEM_HOST ? " (it was wrapped with GW_WRAP_NO_REGISTER)" : "");
    int dev = (kind == GW_MEM_DEVICE && gw_device(a) >= 0) ? gw_device(a) : context_device(a);
    if (want.device_id != dev)
      return gw__fail(GW_ENOTSUP,
                      "want.device_id: %" PRId32 ", but the %s memory is "
                      "addressed through device %d (no copy is ever made)",
                      want.device_id, gw_memkind_name(kind), dev);
    *p = (placement){{want.device_type, dev}, dev0};
    return GW_OK;
  }
  case kDLCUDAHost:
  case kDLROCMHost:
    if (kind == GW_MEM_PINNED || empty) {
      *p = (placement){{want.device_type, 0}, host0 ? host0 : dev0};
      return GW_OK;
    }
    break;
  case kDLCUDAManaged:
    if (kind == GW_MEM_MANAGED || empty) {
      *p = (placement){{kDLCUDAManaged, 0}, dev0 ? dev0 : host0};
      return GW_OK;
    }
    break;
  }
  return gw__fail(GW_ENOTSUP, "want: %s, but the array is %s memory", wname, gw_memkind_name(kind));
}

/* ---- export ------------------------------------------------------------------------- */

typedef struct {
  union { /* first: the tensor's address is the block's */
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
  } mt;
  gw_array *array;
  int64_t dims[]; /* shape[ndim], then strides[ndim] */
} export_block;

static void export_release(export_block *b) {
  gw_release(b->array);
  free(b);
}
static void export_deleter_versioned(DLManagedTensorVersioned *self) {
  if (self) export_release((export_block *)(void *)self);
}
static void export_deleter_legacy(DLManagedTensor *self) {
  if (self) export_release((export_block *)(void *)self);
}

static gw_status export_block_new(gw_array *a, const placement *p, export_block **out) {
  int ndim = gw_ndim(a);
  export_block *b = malloc(sizeof *b + 2 * (size_t)ndim * sizeof(int64_t));
  if (!b) return gw__fail(GW_ENOMEM, "DLPack export: out of host memory");
  memcpy(b->dims, gw_shape(a), (size_t)ndim * sizeof(int64_t));
  memcpy(b->dims + ndim, gw_strides(a), (size_t)ndim * sizeof(int64_t));
  b->array = gw_retain(a);
  DLTensor t = {
      .data = p->data,
      .device = p->device,
      .ndim = ndim,
      .dtype = dl_dtypes[gw_array_dtype(a)],
      .shape = b->dims,
      .strides = b->dims + ndim,
      .byte_offset = 0,
  };
  b->mt.versioned.dl_tensor = t; /* set again below for legacy: the layouts differ */
  *out = b;
  return GW_OK;
}

static gw_status export_versioned(gw_array *a, const DLDevice *want,
                                  DLManagedTensorVersioned **out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  placement p;
  gw_status s = want ? chosen_placement(a, *want, &p) : natural_placement(a, &p);
  if (s != GW_OK) return s;
  export_block *b;
  if ((s = export_block_new(a, &p, &b)) != GW_OK) return s;
  DLManagedTensorVersioned *t = &b->mt.versioned;
  t->version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  t->manager_ctx = b;
  t->deleter = export_deleter_versioned;
  t->flags = gw_is_readonly(a) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  *out = t;
  return GW_OK;
}

static gw_status export_legacy(gw_array *a, const DLDevice *want, DLManagedTensor **out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (gw_is_readonly(a))
    return gw__fail(GW_EREADONLY, "a: read-only, and a legacy DLManagedTensor cannot say so "
                                  "(export it with gw_to_dlpack)");
  placement p;
  gw_status s = want ? chosen_placement(a, *want, &p) : natural_placement(a, &p);
  if (s != GW_OK) return s;
  export_block *b;
  if ((s = export_block_new(a, &p, &b)) != GW_OK) return s;
  DLTensor dt = b->mt.versioned.dl_tensor;
  DLManagedTensor *t = &b->mt.legacy;
  t->dl_tensor = dt;
  t->manager_ctx = b;
  t->deleter = export_deleter_legacy;
  *out = t;
  return GW_OK;
}

gw_status gw_dlpack_device(const gw_array *a, DLDevice *out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  placement p;
  gw_status s = natural_placement(a, &p);
  if (s == GW_OK) *out = p.device;
  return s;
}

gw_status gw_to_dlpack(gw_array *a, DLManagedTensorVersioned **out) {
  return export_versioned(a, NULL, out);
}

gw_status gw_to_dlpack_as(gw_array *a, DLDevice want, DLManagedTensorVersioned **out) {
  return export_versioned(a, &want, out);
}

gw_status gw_to_dlpack_legacy(gw_array *a, DLManagedTensor **out) {
  return export_legacy(a, NULL, out);
}

gw_status gw_to_dlpack_legacy_as(gw_array *a, DLDevice want, DLManagedTensor **out) {
  return export_legacy(a, &want, out);
}

/* ---- import ------------------------------------------------------------------------- */

static void import_deleter_versioned(void *ptr, void *user) {
  (void)ptr;
  DLManagedTensorVersioned *t = user;
  if (t->deleter) t->deleter(t);
}

static void import_deleter_legacy(void *ptr, void *user) {
  (void)ptr;
  DLManagedTensor *t = user;
  if (t->deleter) t->deleter(t);
}

/* Everything gw_wrap_with_deleter needs, read from a validated DLTensor. */
typedef struct {
  void *ptr;
  gw_dtype dtype;
  int ndim;
  const int64_t *shape;
  const int64_t *strides;
} import_args;

static gw_status validate(const gw_context *ctx, const DLTensor *t, bool need_strides,
                          import_args *out) {
  if (t->ndim < 0) return gw__fail(GW_EINVAL, "dl_tensor.ndim: %" PRId32 " is negative", t->ndim);
  if (t->ndim > GW_MAX_DIMS)
    return gw__fail(GW_EINVAL, "dl_tensor.ndim: %" PRId32 " exceeds GW_MAX_DIMS (%d)", t->ndim,
                    GW_MAX_DIMS);
  if (t->ndim > 0 && !t->shape)
    return gw__fail(GW_EINVAL, "dl_tensor.shape: NULL with ndim %" PRId32, t->ndim);
  if (t->ndim > 0 && !t->strides && need_strides)
    return gw__fail(GW_EINVAL,
                    "dl_tensor.strides: NULL with ndim %" PRId32
                    " (DLPack 1.2 and later require strides; only earlier tensors may omit "
                    "them)",
                    t->ndim);
  bool empty = false;
  for (int i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0)
      return gw__fail(GW_EINVAL, "dl_tensor.shape[%d]: %" PRId64 " is negative", i, t->shape[i]);
    if (t->shape[i] == 0) empty = true;
  }
  gw_dtype dtype;
  if (t->dtype.lanes != 1)
    return gw__fail(GW_EINVAL, "dl_tensor.dtype.lanes: %u (gpuwrap has no vector types)",
                    (unsigned)t->dtype.lanes);
  if (!gw__dtype_from_dl(t->dtype, &dtype))
    return gw__fail(GW_EINVAL, "dl_tensor.dtype: code %u with %u bits is not a gpuwrap dtype",
                    (unsigned)t->dtype.code, (unsigned)t->dtype.bits);

  int dt = (int)t->device.device_type;
  int owner = device_type_backend(dt);
  if (owner < 0)
    return gw__fail(GW_EDEVICE, "dl_tensor.device.device_type: %s (%d) has no gpuwrap backend",
                    device_type_name(dt), dt);
  if (owner != GW_BACKEND_AUTO && owner != (int)gw_context_backend(ctx))
    return gw__fail(GW_EDEVICE,
                    "dl_tensor.device.device_type: %s, but the context's backend "
                    "is %s",
                    device_type_name(dt), gw_backend_name(gw_context_backend(ctx)));
  if (t->device.device_id < 0)
    return gw__fail(GW_EINVAL, "dl_tensor.device.device_id: %" PRId32 " is negative",
                    t->device.device_id);

  uintptr_t base = (uintptr_t)t->data;
  if (!t->data && !empty) return gw__fail(GW_EINVAL, "dl_tensor.data: NULL with elements");
  if (t->byte_offset > UINTPTR_MAX - base)
    return gw__fail(GW_EINVAL, "dl_tensor.byte_offset: %" PRIu64 " overflows the address %p",
                    t->byte_offset, t->data);
  uintptr_t first = base + (uintptr_t)t->byte_offset;
  if (!empty && first % gw__dtype_align(dtype) != 0)
    return gw__fail(GW_EINVAL,
                    "dl_tensor.data + byte_offset: %p + %" PRIu64 " is not aligned "
                    "for %s",
                    t->data, t->byte_offset, gw_dtype_name(dtype));

  *out = (import_args){
      .ptr = t->data ? (void *)first : NULL,
      .dtype = dtype,
      .ndim = t->ndim,
      .shape = t->ndim > 0 ? t->shape : NULL,
      .strides = t->ndim > 0 ? t->strides : NULL,
  };
  return GW_OK;
}

/*
 * Wrap a validated tensor. On failure the caller runs the tensor's deleter; once the wrap
 * succeeded, the array owns it, and a later failure releases the array instead.
 */
static gw_status import_wrap(gw_context *ctx, const DLTensor *t, const import_args *x,
                             unsigned flags, gw_deleter del, void *user, gw_array **out,
                             bool *taken) {
  gw_array *a;
  gw_status s = gw_wrap_with_deleter(ctx, x->ptr, x->dtype, x->ndim, x->shape, x->strides, flags,
                                     del, user, &a);
  if (s != GW_OK) return s;
  *taken = true;
  int dt = (int)t->device.device_type;
  if (dt == kDLExtDev && gw_kind(a) != GW_MEM_DEVICE &&
      gw_numel(a) > 0) { /* empty: never classified */
    gw_memkind kind = gw_kind(a);
    gw_release(a); /* runs the tensor's deleter */
    return gw__fail(GW_EDEVICE,
                    "dl_tensor.device.device_type: kDLExtDev is the CPU model's device memory, "
                    "but the data is %s memory",
                    gw_memkind_name(kind));
  }
  if ((dt == kDLCUDA || dt == kDLROCM || dt == kDLExtDev) && gw_kind(a) == GW_MEM_DEVICE &&
      gw_device(a) != t->device.device_id) {
    int dev = gw_device(a);
    gw_release(a); /* runs the tensor's deleter */
    return gw__fail(GW_EDEVICE,
                    "dl_tensor.device.device_id: %" PRId32 ", but the memory "
                    "belongs to device %d",
                    t->device.device_id, dev);
  }
  *out = a;
  return GW_OK;
}

/* Run a refused tensor's deleter without losing this thread's error detail to it. */
static gw_status refuse(gw_status s, void (*run)(void *), void *t) {
  char why[256];
  snprintf(why, sizeof why, "%s", gw_last_error());
  run(t);
  return gw__fail(s, "%s", why);
}
static void run_versioned(void *p) {
  DLManagedTensorVersioned *t = p;
  if (t->deleter) t->deleter(t);
}
static void run_legacy(void *p) {
  DLManagedTensor *t = p;
  if (t->deleter) t->deleter(t);
}

/* Both imports once the tensor's own header is read: check, validate and wrap `dl` (of the
 * managed tensor t, whose deleter `run` calls); an import refused before the array took
 * the tensor runs its deleter here (refuse), exactly once either way. */
static gw_status import_tensor(gw_context *ctx, const DLTensor *dl, bool need_strides,
                               unsigned flags, gw_deleter del, void (*run)(void *), void *t,
                               gw_array **out) {
  gw_status s;
  if (!ctx)
    s = gw__fail(GW_EINVAL, "ctx: NULL");
  else if (!out)
    s = gw__fail(GW_EINVAL, "out: NULL");
  else {
    import_args x = {0}; /* (set by validate; GCC cannot tell once inlined) */
    bool taken = false;
    s = validate(ctx, dl, need_strides, &x);
    if (s == GW_OK) s = import_wrap(ctx, dl, &x, flags, del, t, out, &taken);
    if (s == GW_OK || taken) return s;
  }
  return refuse(s, run, t);
}

gw_status gw_from_dlpack(gw_context *ctx, DLManagedTensorVersioned *t, gw_array **out) {
  if (!t) return gw__fail(GW_EINVAL, "t: NULL");
  if (t->version.major != 1) {
    gw__fail(GW_ENOTSUP, "t->version: %" PRIu32 ".%" PRIu32 ", gpuwrap reads DLPack 1.x",
             t->version.major, t->version.minor);
    return refuse(GW_ENOTSUP, run_versioned, t);
  }
  /* dlpack.h: "Before DLPack v1.2, strides can be NULL to indicate contiguous data. This
   * is not allowed in DLPack v1.2 and later." So a 1.0 or 1.1 producer may leave them
   * NULL for a compact tensor. */
  return import_tensor(ctx, &t->dl_tensor, t->version.minor >= 2,
                       (t->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? GW_WRAP_READONLY : 0u,
                       import_deleter_versioned, run_versioned, t, out);
}

gw_status gw_from_dlpack_legacy(gw_context *ctx, DLManagedTensor *t, gw_array **out) {
  if (!t) return gw__fail(GW_EINVAL, "t: NULL");
  return import_tensor(ctx, &t->dl_tensor, false, 0u, import_deleter_legacy, run_legacy, t, out);
}

/* ---- a capsule destructor for bindings (see dlpack.h) ------------------------------------ */

static _Atomic size_t capsule_pointer_offset = 2 * sizeof(void *);
static _Atomic size_t capsule_name_offset = 3 * sizeof(void *);

gw_status gw_dlpack_capsule_layout(size_t pointer_offset, size_t name_offset) {
  if (pointer_offset % sizeof(void *) || name_offset % sizeof(void *) ||
      pointer_offset == name_offset || pointer_offset > 256 || name_offset > 256)
    return gw__fail(GW_EINVAL,
                    "pointer_offset %zu, name_offset %zu: expected distinct, "
                    "pointer-aligned offsets within 256 bytes",
                    pointer_offset, name_offset);
  atomic_store(&capsule_pointer_offset, pointer_offset);
  atomic_store(&capsule_name_offset, name_offset);
  return GW_OK;
}

void gw_dlpack_capsule_destructor(void *capsule) {
  if (!capsule) return;
  const char *base = capsule, *name;
  void *ptr;
  memcpy(&name, base + atomic_load(&capsule_name_offset), sizeof name);
  memcpy(&ptr, base + atomic_load(&capsule_pointer_offset), sizeof ptr);
  if (!name || !ptr) return;
  if (strcmp(name, "dltensor_versioned") == 0) {
    DLManagedTensorVersioned *t = ptr;
    if (t->deleter) t->deleter(t);
  } else if (strcmp(name, "dltensor") == 0) {
    DLManagedTensor *t = ptr;
    if (t->deleter) t->deleter(t);
  } /* "used_...": a consumer took the tensor and calls its deleter itself */
}
