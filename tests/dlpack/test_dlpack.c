/* DLPack export and import (gpuwrap/dlpack.h): round trips, device types per memory kind,
 * deleters run exactly once in every release order, read-only both ways, zero-size tensors,
 * byte_offset, version refusal, every malformed field, legacy tensors both ways. */
#include "gpuwrap/dlpack.h"
#include "test.h"

#include <stddef.h>

/* ---- ABI: the layout every DLPack 1.x producer and consumer agrees on (LP64) ----------- */

#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLDevice/DLDataType");
_Static_assert(offsetof(DLTensor, device) == 8 && offsetof(DLTensor, ndim) == 16 &&
                   offsetof(DLTensor, dtype) == 20 && offsetof(DLTensor, shape) == 24 &&
                   offsetof(DLTensor, strides) == 32 && offsetof(DLTensor, byte_offset) == 40 &&
                   sizeof(DLTensor) == 48,
               "DLTensor layout");
_Static_assert(offsetof(DLManagedTensor, manager_ctx) == 48 &&
                   offsetof(DLManagedTensor, deleter) == 56 && sizeof(DLManagedTensor) == 64,
               "DLManagedTensor layout");
_Static_assert(offsetof(DLManagedTensorVersioned, manager_ctx) == 8 &&
                   offsetof(DLManagedTensorVersioned, deleter) == 16 &&
                   offsetof(DLManagedTensorVersioned, flags) == 24 &&
                   offsetof(DLManagedTensorVersioned, dl_tensor) == 32 &&
                   sizeof(DLManagedTensorVersioned) == 80,
               "DLManagedTensorVersioned layout");
#endif
_Static_assert(kDLCPU == 1 && kDLCUDA == 2 && kDLCUDAHost == 3 && kDLROCM == 10 &&
                   kDLROCMHost == 11 && kDLCUDAManaged == 13 && kDLOneAPI == 14,
               "device type values");
_Static_assert(kDLInt == 0 && kDLUInt == 1 && kDLFloat == 2 && kDLBfloat == 4 && kDLComplex == 5 &&
                   kDLBool == 6,
               "type code values");
_Static_assert(DLPACK_FLAG_BITMASK_READ_ONLY == 1 && DLPACK_FLAG_BITMASK_IS_COPIED == 2,
               "flag bits");
_Static_assert(DLPACK_MAJOR_VERSION == 1, "DLPack 1.x");

/* ---- hand-made producer tensors -------------------------------------------------------- */

/* A tensor made by a "foreign producer": static storage, its deleter counts its calls. */
typedef struct {
  DLManagedTensorVersioned mt;
  DLManagedTensor legacy;
  int64_t shape[GW_MAX_DIMS + 2];
  int64_t strides[GW_MAX_DIMS + 2];
  int calls;        /* versioned deleter */
  int legacy_calls; /* legacy deleter */
} producer;

static void producer_deleter(DLManagedTensorVersioned *self) {
  ((producer *)self->manager_ctx)->calls++;
}
static void producer_legacy_deleter(DLManagedTensor *self) {
  ((producer *)self->manager_ctx)->legacy_calls++;
}

/* A 1-d C-contiguous float32 tensor of n elements over data (kDLCPU). */
static void producer_init(producer *p, void *data, int64_t n) {
  memset(p, 0, sizeof *p);
  p->shape[0] = n;
  p->strides[0] = 1;
  DLTensor t = {.data = data,
                .device = {kDLCPU, 0},
                .ndim = 1,
                .dtype = {kDLFloat, 32, 1},
                .shape = p->shape,
                .strides = p->strides,
                .byte_offset = 0};
  p->mt.version = (DLPackVersion){1, 0};
  p->mt.manager_ctx = p;
  p->mt.deleter = producer_deleter;
  p->mt.flags = 0;
  p->mt.dl_tensor = t;
  p->legacy.dl_tensor = t;
  p->legacy.manager_ctx = p;
  p->legacy.deleter = producer_legacy_deleter;
}

#define SENTINEL ((gw_array *)(uintptr_t)0x5a5a5a5a)

/* gw_from_dlpack refuses t with `want`, mentions `field`, runs the deleter exactly once. */
static void expect_refused(gw_context *ctx, producer *p, gw_status want, const char *field) {
  gw_array *out = SENTINEL;
  p->calls = 0;
  ASSERT_STATUS(gw_from_dlpack(ctx, &p->mt, &out), want);
  ASSERT_ERROR_MENTIONS(field);
  ASSERT_EQ_INT(p->calls, 1);
  ASSERT_EQ_PTR(out, SENTINEL);
}
static void expect_refused_legacy(gw_context *ctx, producer *p, gw_status want, const char *field) {
  gw_array *out = SENTINEL;
  p->legacy_calls = 0;
  ASSERT_STATUS(gw_from_dlpack_legacy(ctx, &p->legacy, &out), want);
  ASSERT_ERROR_MENTIONS(field);
  ASSERT_EQ_INT(p->legacy_calls, 1);
  ASSERT_EQ_PTR(out, SENTINEL);
}

/* Counts like tst_deleter, and frees the malloc'd memory. */
static void free_deleter(void *ptr, void *user) {
  tst_deleter(ptr, user);
  free(ptr);
}

/* The device type a GPU backend gives its device memory. */
static DLDeviceType gpu_type(void) { return tst_backend() == GW_BACKEND_HIP ? kDLROCM : kDLCUDA; }

/* A float32 array over memory of `kind` (pageable: malloc'd and wrapped with a counting
 * deleter; others: gw_alloc). Skips kinds the backend does not have. */
static gw_array *make_array(gw_context *ctx, gw_memkind kind, int64_t n, tst_deleter_state *d) {
  gw_array *a = NULL;
  int64_t shape[1] = {n};
  if (kind == GW_MEM_HOST) {
    float *buf = malloc((size_t)n * sizeof(float));
    ASSERT_NOT_NULL(buf);
    for (int64_t i = 0; i < n; i++) buf[i] = (float)i;
    ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, shape, NULL, 0, free_deleter, d, &a));
    return a;
  }
  gw_status s = gw_alloc(ctx, kind, GW_FLOAT32, 1, shape, &a);
  if (s == GW_ENOTSUP) TEST_SKIP("memory kind not available");
  ASSERT_OK(s);
  return a;
}

/* ---- export ------------------------------------------------------------------------------ */

TEST_IMPL(export_fields) {
  gw_context *ctx = tst_open(0);
  float buf[6] = {0, 1, 2, 3, 4, 5};
  int64_t shape[2] = {2, 3};
  tst_deleter_state d = {0, NULL};
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 2, shape, NULL, 0, tst_deleter, &d, &a));

  DLManagedTensorVersioned *t = NULL;
  ASSERT_OK(gw_to_dlpack(a, &t));
  ASSERT_NOT_NULL(t);
  ASSERT_EQ_INT(t->version.major, 1);
  ASSERT_EQ_INT(t->version.minor, DLPACK_MINOR_VERSION);
  ASSERT_EQ_INT(t->flags, 0);
  ASSERT_TRUE(t->deleter != NULL);
  DLTensor *dt = &t->dl_tensor;
  ASSERT_EQ_INT(dt->ndim, 2);
  ASSERT_EQ_INT(dt->dtype.code, kDLFloat);
  ASSERT_EQ_INT(dt->dtype.bits, 32);
  ASSERT_EQ_INT(dt->dtype.lanes, 1);
  ASSERT_EQ_INT(dt->shape[0], 2);
  ASSERT_EQ_INT(dt->shape[1], 3);
  ASSERT_NOT_NULL(dt->strides);
  ASSERT_EQ_INT(dt->strides[0], 3);
  ASSERT_EQ_INT(dt->strides[1], 1);
  ASSERT_EQ_INT(dt->byte_offset, 0);
  DLDevice natural;
  ASSERT_OK(gw_dlpack_device(a, &natural));
  ASSERT_EQ_INT(dt->device.device_type, natural.device_type);
  ASSERT_EQ_INT(dt->device.device_id, natural.device_id);
  if (dt->device.device_type == kDLCPU)
    ASSERT_EQ_PTR(dt->data, buf);
  else /* pageable memory a GPU backend registered: offered as the host memory it is */
    ASSERT_TRUE(dt->device.device_type == kDLCUDAHost || dt->device.device_type == kDLROCMHost);
  /* Shape and strides live in the tensor's own allocation (one malloc), right after it. */
  char *lo = (char *)t, *hi = (char *)t + 1024;
  ASSERT_TRUE((char *)dt->shape > lo && (char *)dt->shape < hi);
  ASSERT_TRUE((char *)dt->strides > lo && (char *)dt->strides < hi);

  /* The tensor holds the array: releasing the handle frees nothing. */
  gw_release(a);
  ASSERT_EQ_INT(d.calls, 0);
  t->deleter(t);
  ASSERT_EQ_INT(d.calls, 1);
  ASSERT_EQ_PTR(d.ptr, buf);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(export_bad_args) {
  gw_context *ctx = tst_open(0);
  float buf[4];
  int64_t shape[1] = {4};
  tst_deleter_state d = {0, NULL};
  gw_array *a = NULL;
  ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, shape, NULL, 0, tst_deleter, &d, &a));
  DLManagedTensorVersioned *t = NULL;
  DLManagedTensor *l = NULL;
  ASSERT_STATUS(gw_to_dlpack(NULL, &t), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("a");
  ASSERT_STATUS(gw_to_dlpack(a, NULL), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("out");
  ASSERT_STATUS(gw_to_dlpack_legacy(NULL, &l), GW_EINVAL);
  ASSERT_STATUS(gw_to_dlpack_legacy(a, NULL), GW_EINVAL);
  ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLCPU, -1}, &t), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("device_id");
  ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLVulkan, 0}, &t), GW_ENOTSUP);
  ASSERT_ERROR_MENTIONS("kDLVulkan");
  ASSERT_STATUS(gw_dlpack_device(NULL, &(DLDevice){kDLCPU, 0}), GW_EINVAL);
  ASSERT_STATUS(gw_dlpack_device(a, NULL), GW_EINVAL);
  ASSERT_NULL(t);
  ASSERT_NULL(l);
  gw_release(a); /* no failed call kept a reference */
  ASSERT_EQ_INT(d.calls, 1);
  gw_context_destroy(ctx);
  return 0;
}

/* Every memory kind maps to the device type of the table in gpuwrap/dlpack.h and round-trips. */
static void check_kind(gw_memkind kind) {
  gw_context *ctx = tst_open(0);
  tst_deleter_state d = {0, NULL};
  gw_array *a = make_array(ctx, kind, 256, &d);
  gw_backend b = tst_backend();
  gw_memkind k = gw_kind(a); /* pageable memory may have become pinned by registration */
  DLDeviceType want = kDLCPU;
  int want_id = 0;
  void *want_data = gw_host_data(a) ? gw_host_data(a) : gw_data(a);
  if (b == GW_BACKEND_CPU && k == GW_MEM_DEVICE) {
    /* the CPU model's device memory: a device type a host consumer refuses (gpuwrap/dlpack.h) */
    want = kDLExtDev;
    want_id = gw_device(a);
    want_data = gw_data(a);
  } else if (b != GW_BACKEND_CPU) {
    switch (k) {
    case GW_MEM_DEVICE:
      want = gpu_type();
      want_id = gw_device(a);
      want_data = gw_data(a);
      break;
    case GW_MEM_PINNED: want = b == GW_BACKEND_HIP ? kDLROCMHost : kDLCUDAHost; break;
    case GW_MEM_MANAGED:
      want = b == GW_BACKEND_HIP ? kDLROCM : kDLCUDAManaged;
      want_id = b == GW_BACKEND_HIP ? gw_device(a) : 0;
      want_data = gw_data(a);
      break;
    default: break;
    }
  }
  DLDevice dev;
  ASSERT_OK(gw_dlpack_device(a, &dev));
  ASSERT_EQ_INT(dev.device_type, want);
  ASSERT_EQ_INT(dev.device_id, want_id);

  DLManagedTensorVersioned *t = NULL;
  ASSERT_OK(gw_to_dlpack(a, &t));
  ASSERT_EQ_INT(t->dl_tensor.device.device_type, want);
  ASSERT_EQ_INT(t->dl_tensor.device.device_id, want_id);
  ASSERT_EQ_PTR(t->dl_tensor.data, want_data);

  /* Back into gpuwrap: same memory, same kind, no copy. */
  gw_array *back = NULL;
  ASSERT_OK(gw_from_dlpack(ctx, t, &back));
  ASSERT_EQ_INT(gw_kind(back), k);
  ASSERT_EQ_PTR(gw_data(back), gw_data(a));
  ASSERT_EQ_PTR(gw_host_data(back), gw_host_data(a));
  ASSERT_EQ_INT(gw_numel(back), 256);
  float v = 7.5f, got[256];
  ASSERT_OK(gw_fill(back, &v));
  tst_read(a, got); /* written through the import, read through the original */
  ASSERT_ALL_EQ(got, &v, 256, sizeof v);

  gw_release(a);
  gw_release(back);
  if (kind == GW_MEM_HOST) ASSERT_EQ_INT(d.calls, 1);
  gw_context_destroy(ctx);
}
TEST_IMPL(kind_host) {
  check_kind(GW_MEM_HOST);
  return 0;
}
TEST_IMPL(kind_pinned) {
  check_kind(GW_MEM_PINNED);
  return 0;
}
TEST_IMPL(kind_device) {
  check_kind(GW_MEM_DEVICE);
  return 0;
}
TEST_IMPL(kind_managed) {
  check_kind(GW_MEM_MANAGED);
  return 0;
}

/* The explicit choice: pinned and managed memory as the GPU type or as kDLCPU, zero-copy;
 * device memory never as kDLCPU. */
TEST_IMPL(export_as) {
  gw_context *ctx = tst_open(0);
  gw_backend b = tst_backend();
  int dev0 = gw_context_device(ctx);
  static const gw_memkind kinds[] = {GW_MEM_PINNED, GW_MEM_MANAGED, GW_MEM_DEVICE};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    int64_t shape[1] = {64};
    gw_array *a = NULL;
    gw_status s = gw_alloc(ctx, kinds[i], GW_FLOAT32, 1, shape, &a);
    if (s == GW_ENOTSUP) continue;
    ASSERT_OK(s);
    DLManagedTensorVersioned *t = NULL;
    DLManagedTensor *l = NULL;
    if (b == GW_BACKEND_CPU && kinds[i] == GW_MEM_DEVICE) {
      /* The model's device memory is kDLExtDev, never kDLCPU: a host consumer is refused
       * as on a GPU, naming the way to read it (a copy). */
      ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLCPU, 0}, &t), GW_ENOTSUP);
      ASSERT_ERROR_MENTIONS("not host-accessible");
      ASSERT_ERROR_MENTIONS("copy it to host memory");
      ASSERT_STATUS(gw_to_dlpack_legacy_as(a, (DLDevice){kDLCPU, 0}, &l), GW_ENOTSUP);
      ASSERT_OK(gw_to_dlpack_as(a, (DLDevice){kDLExtDev, dev0}, &t));
      ASSERT_EQ_INT(t->dl_tensor.device.device_type, kDLExtDev);
      ASSERT_EQ_INT(t->dl_tensor.device.device_id, dev0);
      ASSERT_EQ_PTR(t->dl_tensor.data, gw_data(a));
      t->deleter(t);
      t = NULL;
      ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLExtDev, dev0 + 1}, &t), GW_ENOTSUP);
      ASSERT_ERROR_MENTIONS("want.device_id");
      ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLCUDA, 0}, &t), GW_ENOTSUP);
      ASSERT_NULL(t);
      ASSERT_NULL(l);
      gw_release(a);
      continue;
    }
    if (b == GW_BACKEND_CPU) {
      /* The CPU backend's host-addressable kinds are kDLCPU; GPU types are another
       * backend's. */
      ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLExtDev, 0}, &t), GW_ENOTSUP);
      ASSERT_OK(gw_to_dlpack_as(a, (DLDevice){kDLCPU, 0}, &t));
      ASSERT_EQ_INT(t->dl_tensor.device.device_type, kDLCPU);
      ASSERT_EQ_PTR(t->dl_tensor.data, gw_host_data(a) ? gw_host_data(a) : gw_data(a));
      t->deleter(t);
      t = NULL;
      ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLCUDA, 0}, &t), GW_ENOTSUP);
      ASSERT_ERROR_MENTIONS("cpu backend");
      ASSERT_STATUS(gw_to_dlpack_legacy_as(a, (DLDevice){kDLROCM, 0}, &l), GW_ENOTSUP);
      ASSERT_NULL(t);
      ASSERT_NULL(l);
      gw_release(a);
      continue;
    }
    /* as the GPU type, through the device address */
    ASSERT_OK(gw_to_dlpack_as(
        a, (DLDevice){gpu_type(), kinds[i] == GW_MEM_DEVICE ? gw_device(a) : dev0}, &t));
    ASSERT_EQ_INT(t->dl_tensor.device.device_type, gpu_type());
    ASSERT_EQ_PTR(t->dl_tensor.data, gw_data(a));
    t->deleter(t);
    ASSERT_OK(gw_to_dlpack_legacy_as(
        a, (DLDevice){gpu_type(), kinds[i] == GW_MEM_DEVICE ? gw_device(a) : dev0}, &l));
    ASSERT_EQ_INT(l->dl_tensor.device.device_type, gpu_type());
    ASSERT_EQ_PTR(l->dl_tensor.data, gw_data(a));
    l->deleter(l);
    l = NULL;
    t = NULL;
    /* a device id that is not where the memory is addressed */
    ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){gpu_type(), dev0 + 1000}, &t), GW_ENOTSUP);
    ASSERT_ERROR_MENTIONS("device_id");
    /* as kDLCPU, through the host address */
    if (kinds[i] == GW_MEM_DEVICE) {
      ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){kDLCPU, 0}, &t), GW_ENOTSUP);
      ASSERT_ERROR_MENTIONS("host-accessible");
      ASSERT_NULL(t);
    } else {
      ASSERT_OK(gw_to_dlpack_as(a, (DLDevice){kDLCPU, 0}, &t));
      ASSERT_EQ_INT(t->dl_tensor.device.device_type, kDLCPU);
      ASSERT_EQ_INT(t->dl_tensor.device.device_id, 0);
      ASSERT_EQ_PTR(t->dl_tensor.data, gw_host_data(a));
      t->deleter(t);
    }
    /* the other vendor's types */
    t = NULL;
    DLDeviceType other = b == GW_BACKEND_HIP ? kDLCUDA : kDLROCM;
    ASSERT_STATUS(gw_to_dlpack_as(a, (DLDevice){other, 0}, &t), GW_ENOTSUP);
    /* host types only for pinned memory, managed type only for managed memory */
    DLDeviceType host_t = b == GW_BACKEND_HIP ? kDLROCMHost : kDLCUDAHost;
    s = gw_to_dlpack_as(a, (DLDevice){host_t, 0}, &t);
    ASSERT_EQ_INT(s, kinds[i] == GW_MEM_PINNED ? GW_OK : GW_ENOTSUP);
    if (t) t->deleter(t);
    gw_release(a);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* ---- lifetimes ------------------------------------------------------------------------------ */

/* array, a view of it, and an exported tensor, released in all 6 orders: the memory's
 * deleter runs exactly once, after the last of them. */
TEST_IMPL(deleter_every_order) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  gw_context *ctx = tst_open(0);
  for (int o = 0; o < 6; o++) {
    for (int legacy = 0; legacy < 2; legacy++) {
      float *buf = malloc(16 * sizeof(float));
      int64_t shape[1] = {16}, start[1] = {2}, vshape[1] = {4}, step[1] = {3};
      tst_deleter_state d = {0, NULL};
      gw_array *a = NULL, *v = NULL;
      ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, shape, NULL, 0, tst_deleter, &d, &a));
      ASSERT_OK(gw_view(a, start, vshape, step, &v));
      DLManagedTensorVersioned *t = NULL;
      DLManagedTensor *l = NULL;
      if (legacy)
        ASSERT_OK(gw_to_dlpack_legacy(v, &l));
      else
        ASSERT_OK(gw_to_dlpack(v, &t));
      for (int k = 0; k < 3; k++) {
        ASSERT_EQ_INT(d.calls, 0);
        switch (orders[o][k]) {
        case 0: gw_release(a); break;
        case 1: gw_release(v); break;
        case 2:
          if (legacy)
            l->deleter(l);
          else
            t->deleter(t);
          break;
        }
      }
      ASSERT_EQ_INT(d.calls, 1);
      ASSERT_EQ_PTR(d.ptr, buf);
      free(buf);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

/* A producer's tensor imported, viewed and exported again: its deleter runs once, when the
 * last of import, view and re-export goes, in every order. */
TEST_IMPL(import_deleter_every_order) {
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  gw_context *ctx = tst_open(0);
  float buf[32];
  for (int o = 0; o < 6; o++) {
    for (int legacy = 0; legacy < 2; legacy++) {
      producer p;
      producer_init(&p, buf, 32);
      gw_array *a = NULL, *v = NULL;
      if (legacy)
        ASSERT_OK(gw_from_dlpack_legacy(ctx, &p.legacy, &a));
      else
        ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &a));
      ASSERT_EQ_PTR(gw_host_data(a), buf);
      int64_t start[1] = {31}, vshape[1] = {8}, step[1] = {-2};
      ASSERT_OK(gw_view(a, start, vshape, step, &v));
      DLManagedTensorVersioned *t = NULL;
      ASSERT_OK(gw_to_dlpack(v, &t));
      ASSERT_EQ_INT(t->dl_tensor.strides[0], -2);
      ASSERT_EQ_INT(t->dl_tensor.shape[0], 8);
      for (int k = 0; k < 3; k++) {
        ASSERT_EQ_INT(p.calls + p.legacy_calls, 0);
        switch (orders[o][k]) {
        case 0: gw_release(a); break;
        case 1: gw_release(v); break;
        case 2: t->deleter(t); break;
        }
      }
      ASSERT_EQ_INT(legacy ? p.legacy_calls : p.calls, 1);
      ASSERT_EQ_INT(legacy ? p.calls : p.legacy_calls, 0);
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

/* export -> import -> export -> import: one chain, the original deleter runs once. */
TEST_IMPL(chain) {
  gw_context *ctx = tst_open(0);
  tst_deleter_state d = {0, NULL};
  gw_array *a = make_array(ctx, GW_MEM_HOST, 100, &d);
  gw_array *cur = gw_retain(a);
  for (int i = 0; i < 4; i++) {
    gw_array *next = NULL;
    if (i % 2) {
      DLManagedTensor *l = NULL;
      ASSERT_OK(gw_to_dlpack_legacy(cur, &l));
      ASSERT_OK(gw_from_dlpack_legacy(ctx, l, &next));
    } else {
      DLManagedTensorVersioned *t = NULL;
      ASSERT_OK(gw_to_dlpack(cur, &t));
      ASSERT_OK(gw_from_dlpack(ctx, t, &next));
    }
    ASSERT_EQ_PTR(gw_data(next), gw_data(a));
    ASSERT_EQ_PTR(gw_host_data(next), gw_host_data(a));
    gw_release(cur);
    cur = next;
  }
  gw_release(a);
  ASSERT_EQ_INT(d.calls, 0);
  gw_release(cur);
  ASSERT_EQ_INT(d.calls, 1);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- dtypes, strides, zero size, byte_offset ------------------------------------------------ */

TEST_IMPL(dtypes_both_ways) {
  static const struct {
    gw_dtype t;
    uint8_t code, bits;
  } map[] = {
      {GW_BOOL, kDLBool, 8},      {GW_INT8, kDLInt, 8},           {GW_INT16, kDLInt, 16},
      {GW_INT32, kDLInt, 32},     {GW_INT64, kDLInt, 64},         {GW_UINT8, kDLUInt, 8},
      {GW_UINT16, kDLUInt, 16},   {GW_UINT32, kDLUInt, 32},       {GW_UINT64, kDLUInt, 64},
      {GW_FLOAT16, kDLFloat, 16}, {GW_BFLOAT16, kDLBfloat, 16},   {GW_FLOAT32, kDLFloat, 32},
      {GW_FLOAT64, kDLFloat, 64}, {GW_COMPLEX64, kDLComplex, 64}, {GW_COMPLEX128, kDLComplex, 128},
  };
  ASSERT_EQ_INT(sizeof map / sizeof map[0], GW_DTYPE_COUNT);
  gw_context *ctx = tst_open(0);
  _Alignas(16) unsigned char buf[8 * 16];
  for (size_t i = 0; i < GW_DTYPE_COUNT; i++) {
    int64_t shape[1] = {8};
    gw_array *a = NULL, *back = NULL;
    ASSERT_OK(gw_wrap(ctx, buf, map[i].t, 1, shape, NULL, GW_WRAP_NO_REGISTER, &a));
    DLManagedTensorVersioned *t = NULL;
    ASSERT_OK(gw_to_dlpack(a, &t));
    ASSERT_EQ_INT(t->dl_tensor.dtype.code, map[i].code);
    ASSERT_EQ_INT(t->dl_tensor.dtype.bits, map[i].bits);
    ASSERT_EQ_INT(t->dl_tensor.dtype.lanes, 1);
    ASSERT_OK(gw_from_dlpack(ctx, t, &back));
    ASSERT_EQ_INT(gw_array_dtype(back), map[i].t);
    gw_release(back);
    gw_release(a);
  }
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(strided_views) {
  gw_context *ctx = tst_open(0);
  double buf[4 * 5];
  for (int i = 0; i < 20; i++) buf[i] = i;
  int64_t shape[2] = {4, 5}, start[2] = {3, 1}, vshape[2] = {2, 2}, step[2] = {-2, 3};
  gw_array *a = NULL, *v = NULL, *back = NULL;
  ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT64, 2, shape, NULL, 0, &a));
  ASSERT_OK(gw_view(a, start, vshape, step, &v));
  DLManagedTensorVersioned *t = NULL;
  ASSERT_OK(gw_to_dlpack(v, &t));
  ASSERT_EQ_INT(t->dl_tensor.strides[0], -10);
  ASSERT_EQ_INT(t->dl_tensor.strides[1], 3);
  ASSERT_OK(gw_from_dlpack(ctx, t, &back));
  double got[4], want[4] = {16, 19, 6, 9};
  tst_read(back, got);
  ASSERT_ELEMS_EQ(got, want, 4, sizeof(double));
  /* column-major (Fortran) strides survive too */
  int64_t fstrides[2] = {1, 4}, fshape[2] = {4, 5};
  gw_array *f = NULL;
  ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT64, 2, fshape, fstrides, 0, &f));
  ASSERT_OK(gw_to_dlpack(f, &t));
  ASSERT_EQ_INT(t->dl_tensor.strides[0], 1);
  ASSERT_EQ_INT(t->dl_tensor.strides[1], 4);
  t->deleter(t);
  gw_release(f);
  gw_release(back);
  gw_release(v);
  gw_release(a);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(zero_size) {
  gw_context *ctx = tst_open(0);
  /* export of an empty wrap of NULL */
  int64_t shape[2] = {0, 3};
  tst_deleter_state d = {0, NULL};
  gw_array *a = NULL, *back = NULL;
  ASSERT_OK(gw_wrap_with_deleter(ctx, NULL, GW_INT32, 2, shape, NULL, 0, tst_deleter, &d, &a));
  DLManagedTensorVersioned *t = NULL;
  ASSERT_OK(gw_to_dlpack(a, &t));
  ASSERT_NULL(t->dl_tensor.data);
  ASSERT_EQ_INT(t->dl_tensor.ndim, 2);
  ASSERT_EQ_INT(t->dl_tensor.shape[0], 0);
  ASSERT_EQ_INT(t->dl_tensor.shape[1], 3);
  ASSERT_NOT_NULL(t->dl_tensor.strides);
  DLDevice dev;
  ASSERT_OK(gw_dlpack_device(a, &dev));
  ASSERT_EQ_INT(t->dl_tensor.device.device_type, dev.device_type);
  ASSERT_OK(gw_from_dlpack(ctx, t, &back));
  ASSERT_EQ_INT(gw_numel(back), 0);
  gw_release(a);
  gw_release(back);
  ASSERT_EQ_INT(d.calls, 1); /* the deleter runs for empty arrays too */

  /* import of a producer's empty tensor with a NULL data pointer */
  producer p;
  producer_init(&p, NULL, 0);
  ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &back));
  ASSERT_EQ_INT(gw_numel(back), 0);
  ASSERT_EQ_INT(p.calls, 0);
  gw_release(back);
  ASSERT_EQ_INT(p.calls, 1);

  /* a 0-d scalar: shape and strides pointers are still set */
  float x = 3.0f;
  gw_array *s = NULL;
  ASSERT_OK(gw_wrap(ctx, &x, GW_FLOAT32, 0, NULL, NULL, GW_WRAP_NO_REGISTER, &s));
  ASSERT_OK(gw_to_dlpack(s, &t));
  ASSERT_EQ_INT(t->dl_tensor.ndim, 0);
  ASSERT_NOT_NULL(t->dl_tensor.shape);
  ASSERT_NOT_NULL(t->dl_tensor.strides);
  ASSERT_OK(gw_from_dlpack(ctx, t, &back));
  ASSERT_EQ_INT(gw_ndim(back), 0);
  ASSERT_EQ_INT(gw_numel(back), 1);
  ASSERT_EQ_PTR(gw_host_data(back), &x);
  gw_release(back);
  gw_release(s);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(byte_offset) {
  gw_context *ctx = tst_open(0);
  float buf[16];
  for (int i = 0; i < 16; i++) buf[i] = (float)i;
  producer p;
  producer_init(&p, buf, 4);
  p.mt.dl_tensor.byte_offset = 3 * sizeof(float);
  gw_array *a = NULL;
  ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &a));
  ASSERT_EQ_PTR(gw_host_data(a), buf + 3);
  float got[4], want[4] = {3, 4, 5, 6};
  tst_read(a, got);
  ASSERT_ELEMS_EQ(got, want, 4, sizeof(float));
  gw_release(a);
  ASSERT_EQ_INT(p.calls, 1);

  /* legacy too */
  producer_init(&p, buf, 2);
  p.legacy.dl_tensor.byte_offset = 8 * sizeof(float);
  ASSERT_OK(gw_from_dlpack_legacy(ctx, &p.legacy, &a));
  ASSERT_EQ_PTR(gw_host_data(a), buf + 8);
  gw_release(a);
  ASSERT_EQ_INT(p.legacy_calls, 1);

  /* misaligned for float32 */
  producer_init(&p, buf, 2);
  p.mt.dl_tensor.byte_offset = 2;
  expect_refused(ctx, &p, GW_EINVAL, "byte_offset");
  /* past the end of the address space */
  producer_init(&p, buf, 2);
  p.mt.dl_tensor.byte_offset = UINT64_MAX - 2;
  expect_refused(ctx, &p, GW_EINVAL, "byte_offset");
  gw_context_destroy(ctx);
  return 0;
}

/* ---- read-only -------------------------------------------------------------------------------- */

TEST_IMPL(readonly_both_ways) {
  gw_context *ctx = tst_open(0);
  float buf[8] = {0};
  int64_t shape[1] = {8};
  tst_deleter_state d = {0, NULL};
  gw_array *ro = NULL, *back = NULL;
  ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_FLOAT32, 1, shape, NULL, GW_WRAP_READONLY,
                                 tst_deleter, &d, &ro));
  DLManagedTensorVersioned *t = NULL;
  ASSERT_OK(gw_to_dlpack(ro, &t));
  ASSERT_EQ_INT(t->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
  ASSERT_EQ_INT(t->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0);
  /* ...and comes back read-only */
  ASSERT_OK(gw_from_dlpack(ctx, t, &back));
  ASSERT_EQ_INT(gw_is_readonly(back), 1);
  float v = 1.0f;
  ASSERT_STATUS(gw_fill(back, &v), GW_EREADONLY);
  gw_release(back);
  /* a legacy tensor cannot say read-only: refused, no reference kept */
  DLManagedTensor *l = NULL;
  ASSERT_STATUS(gw_to_dlpack_legacy(ro, &l), GW_EREADONLY);
  ASSERT_ERROR_MENTIONS("read-only");
  ASSERT_NULL(l);
  gw_release(ro);
  ASSERT_EQ_INT(d.calls, 1);

  /* a writable array: flag clear */
  gw_array *rw = NULL;
  ASSERT_OK(gw_wrap(ctx, buf, GW_FLOAT32, 1, shape, NULL, 0, &rw));
  ASSERT_OK(gw_to_dlpack(rw, &t));
  ASSERT_EQ_INT(t->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0);
  t->deleter(t);
  gw_release(rw);

  /* a producer's READ_ONLY tensor (other flags ignored) becomes a read-only array */
  producer p;
  producer_init(&p, buf, 8);
  p.mt.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED | (1ull << 40);
  ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &back));
  ASSERT_EQ_INT(gw_is_readonly(back), 1);
  ASSERT_STATUS(gw_fill(back, &v), GW_EREADONLY);
  gw_release(back);
  ASSERT_EQ_INT(p.calls, 1);
  /* without the flag, writable; legacy imports are writable */
  producer_init(&p, buf, 8);
  ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &back));
  ASSERT_EQ_INT(gw_is_readonly(back), 0);
  ASSERT_OK(gw_fill(back, &v));
  ASSERT_TRUE(buf[7] == 1.0f);
  gw_release(back);
  ASSERT_OK(gw_from_dlpack_legacy(ctx, &p.legacy, &back));
  ASSERT_EQ_INT(gw_is_readonly(back), 0);
  gw_release(back);
  gw_context_destroy(ctx);
  return 0;
}

/* ---- refusals ------------------------------------------------------------------------------------ */

TEST_IMPL(version_refused) {
  gw_context *ctx = tst_open(0);
  float buf[4];
  producer p;
  static const uint32_t majors[] = {0, 2, 3, 0xffffffffu};
  for (size_t i = 0; i < sizeof majors / sizeof majors[0]; i++) {
    producer_init(&p, buf, 4);
    p.mt.version.major = majors[i];
    /* fields after `flags` may have another layout: garbage there must not matter */
    memset(&p.mt.dl_tensor, 0xff, sizeof p.mt.dl_tensor);
    expect_refused(ctx, &p, GW_ENOTSUP, "version");
  }
  /* a newer minor version of 1.x is read */
  producer_init(&p, buf, 4);
  p.mt.version.minor = 99;
  gw_array *a = NULL;
  ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &a));
  gw_release(a);
  ASSERT_EQ_INT(p.calls, 1);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(malformed_fields) {
  gw_context *ctx = tst_open(0);
  float buf[64];
  producer p;
#define CASE(field_edit, status, mention)     \
  do {                                        \
    producer_init(&p, buf, 4);                \
    field_edit;                               \
    expect_refused(ctx, &p, status, mention); \
  } while (0)
  CASE(p.mt.dl_tensor.ndim = -1, GW_EINVAL, "ndim");
  CASE(p.mt.dl_tensor.ndim = GW_MAX_DIMS + 1, GW_EINVAL, "ndim");
  CASE(p.mt.dl_tensor.shape = NULL, GW_EINVAL, "shape");
  CASE(p.shape[0] = -4, GW_EINVAL, "shape[0]");
  CASE((p.mt.dl_tensor.ndim = 2, p.shape[1] = -1, p.strides[1] = 1), GW_EINVAL, "shape[1]");
  /* NULL strides: refused from DLPack 1.2 on (before, they mean C-contiguous: see
   * null_strides_before_1_2) */
  CASE((p.mt.version.minor = 2, p.mt.dl_tensor.strides = NULL), GW_EINVAL, "strides");
  CASE((p.mt.version.minor = 3, p.mt.dl_tensor.strides = NULL), GW_EINVAL, "strides");
  CASE(p.mt.dl_tensor.dtype.lanes = 4, GW_EINVAL, "lanes");
  CASE(p.mt.dl_tensor.dtype.lanes = 0, GW_EINVAL, "lanes");
  CASE(p.mt.dl_tensor.dtype.code = kDLFloat8_e4m3fn, GW_EINVAL, "dtype");
  CASE(p.mt.dl_tensor.dtype.code = 200, GW_EINVAL, "dtype");
  CASE(p.mt.dl_tensor.dtype.bits = 24, GW_EINVAL, "dtype");
  CASE((p.mt.dl_tensor.dtype = (DLDataType){kDLBool, 1, 1}), GW_EINVAL, "dtype");
  CASE(p.mt.dl_tensor.data = NULL, GW_EINVAL, "data");
  CASE(p.mt.dl_tensor.data = (char *)buf + 1, GW_EINVAL, "aligned");
  CASE(p.mt.dl_tensor.device.device_type = kDLVulkan, GW_EDEVICE, "kDLVulkan");
  CASE(p.mt.dl_tensor.device.device_type = (DLDeviceType)99, GW_EDEVICE, "device_type");
  CASE(p.mt.dl_tensor.device.device_id = -1, GW_EINVAL, "device_id");
  /* strides that overflow: gw_wrap's own check, reported as it reports it */
  CASE((p.strides[0] = INT64_MAX / 2), GW_EINVAL, "strides");
#undef CASE

  /* bad arguments: t is still taken */
  gw_array *out = SENTINEL;
  producer_init(&p, buf, 4);
  ASSERT_STATUS(gw_from_dlpack(NULL, &p.mt, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("ctx");
  ASSERT_EQ_INT(p.calls, 1);
  ASSERT_STATUS(gw_from_dlpack(ctx, &p.mt, NULL), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("out");
  ASSERT_EQ_INT(p.calls, 2);
  ASSERT_STATUS(gw_from_dlpack(ctx, NULL, &out), GW_EINVAL);
  ASSERT_STATUS(gw_from_dlpack_legacy(ctx, NULL, &out), GW_EINVAL);
  ASSERT_STATUS(gw_from_dlpack_legacy(NULL, &p.legacy, &out), GW_EINVAL);
  ASSERT_EQ_INT(p.legacy_calls, 1);
  ASSERT_EQ_PTR(out, SENTINEL);

  /* a NULL deleter is allowed, on success and on failure */
  producer_init(&p, buf, 4);
  p.mt.deleter = NULL;
  ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &out));
  gw_release(out);
  p.mt.dl_tensor.ndim = -1;
  out = SENTINEL;
  ASSERT_STATUS(gw_from_dlpack(ctx, &p.mt, &out), GW_EINVAL);
  ASSERT_EQ_PTR(out, SENTINEL);
  ASSERT_EQ_INT(p.calls, 0);
  gw_context_destroy(ctx);
  return 0;
}

TEST_IMPL(malformed_legacy) {
  gw_context *ctx = tst_open(0);
  float buf[16];
  producer p;
  producer_init(&p, buf, 4);
  p.legacy.dl_tensor.ndim = -2;
  expect_refused_legacy(ctx, &p, GW_EINVAL, "ndim");
  producer_init(&p, buf, 4);
  p.legacy.dl_tensor.shape = NULL;
  expect_refused_legacy(ctx, &p, GW_EINVAL, "shape");
  producer_init(&p, buf, 4);
  p.legacy.dl_tensor.dtype.lanes = 2;
  expect_refused_legacy(ctx, &p, GW_EINVAL, "lanes");
  producer_init(&p, buf, 4);
  p.legacy.dl_tensor.device.device_type = kDLMetal;
  expect_refused_legacy(ctx, &p, GW_EDEVICE, "kDLMetal");
  gw_context_destroy(ctx);
  return 0;
}

/* A device type of another backend is refused with GW_EDEVICE, its deleter still run. */
TEST_IMPL(device_type_of_other_backend) {
  gw_context *ctx = tst_open(0);
  float buf[4];
  producer p;
  gw_backend b = tst_backend();
  static const DLDeviceType cuda_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged};
  static const DLDeviceType rocm_types[] = {kDLROCM, kDLROCMHost};
  if (b != GW_BACKEND_CUDA) {
    for (size_t i = 0; i < 3; i++) {
      producer_init(&p, buf, 4);
      p.mt.dl_tensor.device.device_type = cuda_types[i];
      expect_refused(ctx, &p, GW_EDEVICE, "backend");
      producer_init(&p, buf, 4);
      p.legacy.dl_tensor.device.device_type = cuda_types[i];
      expect_refused_legacy(ctx, &p, GW_EDEVICE, "backend");
    }
  }
  if (b != GW_BACKEND_HIP) {
    for (size_t i = 0; i < 2; i++) {
      producer_init(&p, buf, 4);
      p.mt.dl_tensor.device.device_type = rocm_types[i];
      expect_refused(ctx, &p, GW_EDEVICE, "backend");
    }
  }
  gw_context_destroy(ctx);
  return 0;
}

/* ---- legacy ------------------------------------------------------------------------------------ */

TEST_IMPL(legacy_both_ways) {
  gw_context *ctx = tst_open(0);
  int32_t buf[12];
  for (int i = 0; i < 12; i++) buf[i] = i;
  int64_t shape[2] = {3, 4};
  tst_deleter_state d = {0, NULL};
  gw_array *a = NULL, *back = NULL;
  ASSERT_OK(gw_wrap_with_deleter(ctx, buf, GW_INT32, 2, shape, NULL, 0, tst_deleter, &d, &a));
  DLManagedTensor *l = NULL;
  ASSERT_OK(gw_to_dlpack_legacy(a, &l));
  ASSERT_EQ_INT(l->dl_tensor.ndim, 2);
  ASSERT_EQ_INT(l->dl_tensor.dtype.code, kDLInt);
  ASSERT_EQ_INT(l->dl_tensor.dtype.bits, 32);
  ASSERT_NOT_NULL(l->dl_tensor.strides);
  ASSERT_EQ_INT(l->dl_tensor.strides[0], 4);
  ASSERT_EQ_INT(l->dl_tensor.strides[1], 1);
  ASSERT_TRUE(l->deleter != NULL);
  ASSERT_OK(gw_from_dlpack_legacy(ctx, l, &back));
  ASSERT_EQ_PTR(gw_data(back), gw_data(a));
  gw_release(a);
  ASSERT_EQ_INT(d.calls, 0);
  gw_release(back);
  ASSERT_EQ_INT(d.calls, 1);

  /* NULL strides in a legacy tensor mean C-contiguous */
  producer p;
  producer_init(&p, buf, 12);
  p.shape[0] = 3;
  p.shape[1] = 4;
  p.legacy.dl_tensor.ndim = 2;
  p.legacy.dl_tensor.dtype = (DLDataType){kDLInt, 32, 1};
  p.legacy.dl_tensor.strides = NULL;
  ASSERT_OK(gw_from_dlpack_legacy(ctx, &p.legacy, &back));
  ASSERT_EQ_INT(gw_strides(back)[0], 4);
  ASSERT_EQ_INT(gw_strides(back)[1], 1);
  int32_t got[12];
  tst_read(back, got);
  ASSERT_ELEMS_EQ(got, buf, 12, sizeof(int32_t));
  gw_release(back);
  ASSERT_EQ_INT(p.legacy_calls, 1);
  ASSERT_EQ_INT(p.calls, 0);
  gw_context_destroy(ctx);
  return 0;
}

/* dlpack.h: "Before DLPack v1.2, strides can be NULL to indicate contiguous data." A 1.0 or
 * 1.1 tensor of shape {3, 4} with NULL strides is C-contiguous: strides {4, 1}, every
 * element where C order puts it, the deleter run once at the release. */
TEST_IMPL(null_strides_before_1_2) {
  gw_context *ctx = tst_open(0);
  int32_t buf[12];
  tst_random_fill(buf, sizeof buf);
  for (uint32_t minor = 0; minor < 2; minor++) {
    producer p;
    producer_init(&p, buf, 12);
    p.mt.version.minor = minor;
    p.shape[0] = 3;
    p.shape[1] = 4;
    p.mt.dl_tensor.ndim = 2;
    p.mt.dl_tensor.dtype = (DLDataType){kDLInt, 32, 1};
    p.mt.dl_tensor.strides = NULL;
    gw_array *a = NULL;
    ASSERT_OK(gw_from_dlpack(ctx, &p.mt, &a));
    ASSERT_EQ_INT(gw_ndim(a), 2);
    ASSERT_EQ_INT(gw_shape(a)[0], 3);
    ASSERT_EQ_INT(gw_shape(a)[1], 4);
    ASSERT_EQ_INT(gw_strides(a)[0], 4);
    ASSERT_EQ_INT(gw_strides(a)[1], 1);
    int32_t got[12];
    memset(got, 0xa5, sizeof got);
    tst_read(a, got);
    ASSERT_ELEMS_EQ(got, buf, 12, sizeof(int32_t));
    ASSERT_EQ_INT(p.calls, 0);
    gw_release(a);
    ASSERT_EQ_INT(p.calls, 1);
  }
  gw_context_destroy(ctx);
  return 0;
}

/* ---- failure injection (CPU model) ---------------------------------------------------------- */

/* The wrap behind an import fails (registration refused by the runtime): the producer's
 * deleter still runs exactly once, nothing stays registered. */
TEST_IMPL(import_wrap_fails) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0);
  size_t page = tst_page();
  float *buf = tst_pages(2);
  tst_leaks before = tst_leak_snapshot();
  producer p;
  producer_init(&p, buf, (int64_t)(page / sizeof(float)));
  gw_cpu_fail_op(GW_CPU_OP_REGISTER, 1, GW_EBACKEND);
  gw_array *out = SENTINEL;
  ASSERT_STATUS(gw_from_dlpack(ctx, &p.mt, &out), GW_EBACKEND);
  ASSERT_EQ_INT(p.calls, 1);
  ASSERT_EQ_PTR(out, SENTINEL);
  gw_cpu_fail_reset();
  ASSERT_NO_LEAK(before);
  /* any backend call failing, from the first on: never a leak, never a second delete */
  for (long n = 1; n <= 4; n++) {
    producer_init(&p, buf, (int64_t)(page / sizeof(float)));
    gw_cpu_fail_any(n, GW_EBACKEND);
    out = NULL;
    gw_status s = gw_from_dlpack(ctx, &p.mt, &out);
    gw_cpu_fail_reset();
    if (s == GW_OK) {
      ASSERT_EQ_INT(p.calls, 0);
      gw_release(out);
    }
    ASSERT_EQ_INT(p.calls, 1);
    ASSERT_NO_LEAK(before);
  }
  free(buf);
  gw_context_destroy(ctx);
  return 0;
}

/* The deleter may call back into gpuwrap: the refusal's message survives it. */
static gw_context *g_ctx;
static int reentrant_calls;
static void reentrant_deleter(DLManagedTensorVersioned *self) {
  (void)self;
  reentrant_calls++;
  gw_array *x = NULL;
  (void)gw_wrap(g_ctx, NULL, GW_FLOAT32, -1, NULL, NULL, 0, &x); /* fails, sets an error */
}
TEST_IMPL(refusal_message_survives_deleter) {
  g_ctx = tst_open(0);
  float buf[4];
  producer p;
  producer_init(&p, buf, 4);
  p.mt.deleter = reentrant_deleter;
  p.mt.dl_tensor.dtype.lanes = 3;
  gw_array *out = NULL;
  ASSERT_STATUS(gw_from_dlpack(g_ctx, &p.mt, &out), GW_EINVAL);
  ASSERT_ERROR_MENTIONS("lanes");
  ASSERT_EQ_INT(reentrant_calls, 1);
  gw_context_destroy(g_ctx);
  return 0;
}

/* ---- the C capsule destructor for bindings ------------------------------------------------ */

/* A stand-in for CPython's PyCapsule: object header, pointer, name, context, destructor. */
typedef struct {
  void *header[2];
  void *pointer;
  const char *name;
  void *context;
  void *destructor;
} fake_capsule;

TEST_IMPL(capsule_destructor) {
  gw_context *ctx = tst_open(0);
  tst_deleter_state d = {0, NULL};
  gw_array *a = make_array(ctx, GW_MEM_HOST, 16, &d);
  DLManagedTensorVersioned *t = NULL;
  DLManagedTensor *l = NULL;
  ASSERT_OK(gw_to_dlpack(a, &t));
  ASSERT_OK(gw_to_dlpack_legacy(a, &l));

  /* consumed capsules are left alone */
  fake_capsule used = {{0, 0}, t, "used_dltensor_versioned", NULL, NULL};
  gw_dlpack_capsule_destructor(&used);
  fake_capsule used_l = {{0, 0}, l, "used_dltensor", NULL, NULL};
  gw_dlpack_capsule_destructor(&used_l);
  gw_dlpack_capsule_destructor(NULL);
  gw_release(a);
  ASSERT_EQ_INT(d.calls, 0);
  /* unconsumed ones release their tensor */
  fake_capsule c1 = {{0, 0}, t, "dltensor_versioned", NULL, NULL};
  gw_dlpack_capsule_destructor(&c1);
  ASSERT_EQ_INT(d.calls, 0);
  fake_capsule c2 = {{0, 0}, l, "dltensor", NULL, NULL};
  gw_dlpack_capsule_destructor(&c2);
  ASSERT_EQ_INT(d.calls, 1);

  /* another layout (a larger object header) */
  struct {
    void *header[4];
    void *pointer;
    void *pad;
    const char *name;
  } big;
  a = make_array(ctx, GW_MEM_HOST, 16, &d);
  ASSERT_OK(gw_to_dlpack(a, &t));
  gw_release(a);
  big.pointer = t;
  big.name = "dltensor_versioned";
  ASSERT_OK(gw_dlpack_capsule_layout(4 * sizeof(void *), 6 * sizeof(void *)));
  gw_dlpack_capsule_destructor(&big);
  ASSERT_EQ_INT(d.calls, 2);
  ASSERT_STATUS(gw_dlpack_capsule_layout(3, 24), GW_EINVAL);
  ASSERT_STATUS(gw_dlpack_capsule_layout(16, 16), GW_EINVAL);
  ASSERT_STATUS(gw_dlpack_capsule_layout(16, 4096), GW_EINVAL);
  ASSERT_OK(gw_dlpack_capsule_layout(2 * sizeof(void *), 3 * sizeof(void *)));
  gw_context_destroy(ctx);
  return 0;
}

/* The CPU model's device memory is kDLExtDev (gpuwrap/dlpack.h): a program that reads
 * device memory on the host through DLPack fails on the model as it fails on a GPU (NumPy
 * refuses kDLCUDA and kDLExtDev alike). gpuwrap's import takes kDLExtDev back for the
 * model's device memory, on its own device, and refuses it for anything else. */
TEST_IMPL(extdev_import) {
  TEST_REQUIRE_CPU();
  gw_context *ctx = tst_open(0), *ctx1 = tst_open(1);
  tst_leaks before = tst_leak_snapshot();
  int64_t shape[1] = {256};
  gw_array *a = NULL, *b = NULL, *back = NULL;
  ASSERT_OK(gw_alloc(ctx1, GW_MEM_DEVICE, GW_FLOAT32, 1, shape, &a));
  ASSERT_NULL(gw_host_data(a)); /* as on a GPU: no host address to read */
  float v = 2.25f, got[256];
  ASSERT_OK(gw_fill(a, &v));
  DLManagedTensorVersioned *t = NULL;
  ASSERT_OK(gw_to_dlpack(a, &t));
  ASSERT_EQ_INT(t->dl_tensor.device.device_type, kDLExtDev);
  ASSERT_EQ_INT(t->dl_tensor.device.device_id, 1);
  /* Back through a context of device 0: the memory stays device 1's, as a peer's would. */
  ASSERT_OK(gw_from_dlpack(ctx, t, &back));
  ASSERT_EQ_INT(gw_kind(back), GW_MEM_DEVICE);
  ASSERT_EQ_INT(gw_device(back), 1);
  ASSERT_EQ_PTR(gw_data(back), gw_data(a));
  /* Read on the host the named way: a copy. */
  ASSERT_OK(gw_alloc(ctx, GW_MEM_PINNED, GW_FLOAT32, 1, shape, &b));
  ASSERT_OK(gw_copy(b, back));
  memcpy(got, gw_host_data(b), sizeof got);
  ASSERT_ALL_EQ(got, &v, 256, sizeof v);
  gw_release(back);

  /* A kDLExtDev tensor that names another device than its memory's. */
  producer p;
  producer_init(&p, gw_data(a), 256);
  p.mt.dl_tensor.device = (DLDevice){kDLExtDev, 0};
  gw_array *out = SENTINEL;
  ASSERT_STATUS(gw_from_dlpack(ctx, &p.mt, &out), GW_EDEVICE);
  ASSERT_ERROR_MENTIONS("belongs to device 1");
  ASSERT_EQ_INT(p.calls, 1);
  ASSERT_EQ_PTR(out, SENTINEL);
  /* A kDLExtDev tensor over host memory is not the model's device memory. */
  producer_init(&p, gw_host_data(b), 256);
  p.mt.dl_tensor.device = (DLDevice){kDLExtDev, 0};
  ASSERT_STATUS(gw_from_dlpack(ctx, &p.mt, &out), GW_EDEVICE);
  ASSERT_ERROR_MENTIONS("kDLExtDev");
  ASSERT_EQ_INT(p.calls, 1);
  ASSERT_EQ_PTR(out, SENTINEL);
  /* An empty device array round-trips (a wrap of no elements is never classified). */
  int64_t none[1] = {0};
  gw_array *e = NULL;
  ASSERT_OK(gw_alloc(ctx1, GW_MEM_DEVICE, GW_FLOAT32, 1, none, &e));
  ASSERT_OK(gw_to_dlpack(e, &t));
  ASSERT_EQ_INT(t->dl_tensor.device.device_type, kDLExtDev);
  ASSERT_OK(gw_from_dlpack(ctx1, t, &back));
  ASSERT_EQ_INT(gw_numel(back), 0);
  gw_release(back);
  gw_release(e);
  gw_release(a);
  gw_release(b);
  ASSERT_NO_LEAK(before);
  gw_context_destroy(ctx1);
  gw_context_destroy(ctx);
  return 0;
}
