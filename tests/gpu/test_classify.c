/*
 * gwc_classify() against attribute values recorded from the runtimes (no GPU needed):
 * CUDA 13 on an H200 (baselines/h200-*.txt: cuPointerGetAttributes memory type, managed
 * flag, ordinal, range), ROCm 5 (hipPointerGetAttributes with `memoryType`, error for
 * unregistered host memory) and ROCm 6 (`type`, "unregistered" with device -2).
 */
#include "gpu_classify.h"
#include "test.h"

#define P(x) ((uintptr_t)(x))

/* Addresses as recorded (shapes of real ones; nothing is dereferenced). */
#define DEV 0x7f3d9a000000ull
#define PIN 0x7f3d5a000000ull
#define REG 0x55f50bb09000ull
#define MAN 0x7f3d56000000ull
#define PAGE 0x7f3d15fff000ull
#define GIB (1ull << 30)
#define MIB (1ull << 20)

typedef struct {
  const char *what;
  uintptr_t ptr;
  gwc_attrs in;
  gwc_caps caps;
  gw_status status;
  gw_ptrinfo out; /* expected (ignored when status != GW_OK) */
} row;

static const gwc_caps H200 = {.pageable_access = 0, .host_ptr_for_registered = 1};
static const gwc_caps HMM = {.pageable_access = 1, .host_ptr_for_registered = 1};
static const gwc_caps NOHP = {.pageable_access = 0, .host_ptr_for_registered = 0};
static const gwc_caps AMD = {.pageable_access = 0, .host_ptr_for_registered = 0};

#define INFO(k, d, b, e, dp, hp)                                                                \
  {                                                                                             \
    .kind = (k), .device = (d), .base = (void *)(b), .extent = (e), .device_ptr = (void *)(dp), \
    .host_ptr = (void *)(hp), .flags = 0                                                        \
  }

static const row rows[] = {
    /* ---- CUDA: one cuPointerGetAttributes call ---- */
    {"cuda device",
     DEV,
     {GWC_GEN_CUDA, 0, GWC_CU_DEVICE, 0, 0, 0, 0, DEV, GIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_DEVICE, 0, DEV, GIB, DEV, 0)},
    {"cuda device interior +1000",
     DEV + 1000,
     {GWC_GEN_CUDA, 0, GWC_CU_DEVICE, 0, 0, 0, 0, DEV, GIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_DEVICE, 0, DEV, GIB, DEV + 1000, 0)},
    {"cuda device on device 1",
     DEV,
     {GWC_GEN_CUDA, 0, GWC_CU_DEVICE, 0, 1, 0, 0, DEV, MIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_DEVICE, 1, DEV, MIB, DEV, 0)},
    {"cuda cudaMallocAsync (device, no context)",
     DEV,
     {GWC_GEN_CUDA, 0, GWC_CU_DEVICE, 0, 0, 0, 0, DEV, 4096, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_DEVICE, 0, DEV, 4096, DEV, 0)},
    {"cuda pinned (cudaMallocHost)",
     PIN,
     {GWC_GEN_CUDA, 0, GWC_CU_HOST, 0, 0, 0, 0, PIN, GIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, PIN, GIB, PIN, PIN)},
    {"cuda pinned interior +4096",
     PIN + 4096,
     {GWC_GEN_CUDA, 0, GWC_CU_HOST, 0, 0, 0, 0, PIN, MIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, PIN, MIB, PIN + 4096, PIN + 4096)},
    {"cuda registered (same answers as pinned)",
     REG,
     {GWC_GEN_CUDA, 0, GWC_CU_HOST, 0, 0, 0, 0, REG, MIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, REG, MIB, REG, REG)},
    {"cuda pinned, no host pointer use: lookup",
     PIN,
     {GWC_GEN_CUDA, 0, GWC_CU_HOST, 0, 0, 0, 0, PIN, MIB, 0, 0},
     NOHP,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, PIN, MIB, 0, PIN)},
    {"cuda managed (type DEVICE + is_managed)",
     MAN,
     {GWC_GEN_CUDA, 0, GWC_CU_DEVICE, 1, 0, 0, 0, MAN, 64 * MIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_MANAGED, 0, MAN, 64 * MIB, MAN, MAN)},
    {"cuda pageable (type 0, ordinal -2)",
     PAGE,
     {GWC_GEN_CUDA, 0, GWC_CU_UNREGISTERED, 0, -2, 0, 0, 0, 0, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_HOST, -1, 0, 0, 0, PAGE)},
    {"cuda pageable with HMM",
     PAGE,
     {GWC_GEN_CUDA, 0, GWC_CU_UNREGISTERED, 0, -2, 0, 0, 0, 0, 0, 0},
     HMM,
     GW_OK,
     INFO(GW_MEM_HOST, -1, 0, 0, PAGE, PAGE)},
    {"cuda stack pointer",
     PAGE + 0x4a0,
     {GWC_GEN_CUDA, 0, GWC_CU_UNREGISTERED, 0, -2, 0, 0, 0, 0, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_HOST, -1, 0, 0, 0, PAGE + 0x4a0)},
    {"cuda array memory",
     DEV,
     {GWC_GEN_CUDA, 0, GWC_CU_ARRAY, 0, 0, 0, 0, 0, 0, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_UNKNOWN, 0, 0, 0, 0, 0)},
    {"cuda error (not initialized)",
     DEV,
     {GWC_GEN_CUDA, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     H200,
     GW_EBACKEND,
     INFO(0, 0, 0, 0, 0, 0)},
    {"cuda range not containing ptr is ignored",
     DEV + 2 * MIB,
     {GWC_GEN_CUDA, 0, GWC_CU_DEVICE, 0, 0, 0, 0, DEV, MIB, 0, 0},
     H200,
     GW_OK,
     INFO(GW_MEM_DEVICE, 0, 0, 0, DEV + 2 * MIB, 0)},

    /* ---- ROCm 5: `memoryType`, Host=0 Device=1 Array=2 Unified=3 (Managed=4) ---- */
    {"rocm5 device",
     DEV,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_DEVICE, 0, 0, DEV, 0, DEV, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_DEVICE, 0, DEV, MIB, DEV, 0)},
    {"rocm5 device interior",
     DEV + 256,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_DEVICE, 0, 1, DEV + 256, 0, DEV, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_DEVICE, 1, DEV, MIB, DEV + 256, 0)},
    {"rocm5 pinned (hipHostMalloc)",
     PIN,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_HOST, 0, 0, PIN, PIN, PIN, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, PIN, MIB, PIN, PIN)},
    {"rocm5 registered: own device address",
     REG,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_HOST, 0, 0, DEV + 0x1000, REG, REG, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, REG, MIB, DEV + 0x1000, REG)},
    {"rocm5 managed (Host type + isManaged)",
     MAN,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_HOST, 1, 0, MAN, MAN, MAN, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_MANAGED, 0, MAN, MIB, MAN, MAN)},
    {"rocm5 managed (type Managed=4)",
     MAN,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_MANAGED, 1, 0, MAN, MAN, MAN, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_MANAGED, 0, MAN, MIB, MAN, MAN)},
    /* The misclassification of Open MPI/MPICH: the error plus memoryType 0 ("Host") left in
     * the struct must NOT read as pinned. */
    {"rocm5 pageable: invalid value error",
     PAGE,
     {GWC_GEN_ROCM5, GWC_HIP_ERROR_INVALID_VALUE, GWC_HIP5_HOST, 0, 0, 0, 0, 0, 0, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_HOST, -1, 0, 0, 0, PAGE)},
    {"rocm5 pageable with stale fields",
     PAGE,
     {GWC_GEN_ROCM5, GWC_HIP_ERROR_INVALID_VALUE, GWC_HIP5_DEVICE, 1, 3, DEV, DEV, DEV, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_HOST, -1, 0, 0, 0, PAGE)},
    {"rocm5 other error (invalid device)",
     DEV,
     {GWC_GEN_ROCM5, 101, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     AMD,
     GW_EBACKEND,
     INFO(0, 0, 0, 0, 0, 0)},
    {"rocm5 device -2 sentinel",
     PIN,
     {GWC_GEN_ROCM5, 0, GWC_HIP5_HOST, 0, -2, PIN, PIN, 0, 0, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_PINNED, -1, 0, 0, PIN, PIN)},

    /* ---- ROCm 6: `type`, Unregistered=0 Host=1 Device=2 Managed=3 ---- */
    {"rocm6 unregistered (success, device -2)",
     PAGE,
     {GWC_GEN_ROCM6, 0, GWC_HIP6_UNREGISTERED, 0, -2, 0, PAGE, 0, 0, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_HOST, -1, 0, 0, 0, PAGE)},
    {"rocm6 pinned",
     PIN,
     {GWC_GEN_ROCM6, 0, GWC_HIP6_HOST, 0, 0, PIN, PIN, PIN, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, PIN, MIB, PIN, PIN)},
    {"rocm6 registered: own device address",
     REG + 64,
     {GWC_GEN_ROCM6, 0, GWC_HIP6_HOST, 0, 0, DEV + 0x1040, REG + 64, REG, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_PINNED, 0, REG, MIB, DEV + 0x1040, REG + 64)},
    {"rocm6 device (Device=2, not Array as in 5)",
     DEV,
     {GWC_GEN_ROCM6, 0, GWC_HIP6_DEVICE, 0, 0, DEV, 0, DEV, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_DEVICE, 0, DEV, MIB, DEV, 0)},
    {"rocm6 managed (Managed=3, not Unified as in 5)",
     MAN,
     {GWC_GEN_ROCM6, 0, GWC_HIP6_MANAGED, 1, 0, MAN, MAN, MAN, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_MANAGED, 0, MAN, MIB, MAN, MAN)},
    {"rocm6 invalid value is a real error",
     PAGE,
     {GWC_GEN_ROCM6, GWC_HIP_ERROR_INVALID_VALUE, 0, 0, 0, 0, 0, 0, 0, 0, 0},
     AMD,
     GW_EBACKEND,
     INFO(0, 0, 0, 0, 0, 0)},
    {"rocm6 device interior on device 2",
     DEV + 4096,
     {GWC_GEN_ROCM6, 0, GWC_HIP6_DEVICE, 0, 2, DEV + 4096, 0, DEV, MIB, 0, 0},
     AMD,
     GW_OK,
     INFO(GW_MEM_DEVICE, 2, DEV, MIB, DEV + 4096, 0)},
};

static void check_row(const row *r) {
  gw_ptrinfo got;
  TEST_CONTEXT("row \"%s\"", r->what);
  memset(&got, 0xab, sizeof got); /* untouched on failure: must still read 0xab */
  gw_status s = gwc_classify((const void *)r->ptr, &r->in, &r->caps, &got);
  ASSERT_EQ_INT(s, r->status);
  if (s == GW_OK) {
    ASSERT_EQ_INT(got.kind, r->out.kind);
    ASSERT_EQ_INT(got.device, r->out.device);
    ASSERT_EQ_PTR(got.base, r->out.base);
    ASSERT_EQ_INT(got.extent, r->out.extent);
    ASSERT_EQ_PTR(got.device_ptr, r->out.device_ptr);
    ASSERT_EQ_PTR(got.host_ptr, r->out.host_ptr);
    ASSERT_EQ_INT(got.flags, 0); /* never GW_PTR_HOST_REGISTERED on CUDA/HIP */
  } else {
    ASSERT_EQ_INT(got.kind, (gw_memkind)0xabababab);
  }
}

TEST_IMPL(table) {
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) check_row(&rows[i]);
  return 0;
}

/* Every negative ordinal is "no device", not just -2. */
TEST_IMPL(negative_ordinals) {
  for (int d = -5; d < 0; d++) {
    gwc_attrs a = {GWC_GEN_CUDA, 0, GWC_CU_HOST, 0, d, 0, 0, 0, 0, 0, 0};
    gw_ptrinfo o;
    ASSERT_EQ_INT(gwc_classify((void *)P(PIN), &a, &H200, &o), GW_OK);
    ASSERT_EQ_INT(o.device, -1);
  }
  return 0;
}

/* Unknown memory-type values of any generation are GW_MEM_UNKNOWN, never a guess. */
TEST_IMPL(unknown_types) {
  gwc_gen gens[3] = {GWC_GEN_CUDA, GWC_GEN_ROCM5, GWC_GEN_ROCM6};
  for (int g = 0; g < 3; g++) {
    gwc_attrs a = {gens[g], 0, 77, 0, 0, 0, 0, 0, 0, 0, 0};
    gw_ptrinfo o;
    ASSERT_EQ_INT(gwc_classify((void *)P(DEV), &a, &AMD, &o), GW_OK);
    ASSERT_EQ_INT(o.kind, GW_MEM_UNKNOWN);
  }
  return 0;
}

/* ---- the extent of pool and VMM memory (gwc_mapped_range) over fake chunk tables ---- */

/* A fake runtime: mapped chunks, each with its reservation's start and its device. */
typedef struct {
  uintptr_t base;
  size_t size;
  uintptr_t resv;
  int device;
} fake_chunk;
typedef struct {
  const fake_chunk *v;
  int n;
  int calls;
} fake_table;

static void fake_fn(void *user, uintptr_t q, gwc_chunk *out) {
  fake_table *t = user;
  t->calls++;
  out->ok = 0;
  for (int i = 0; i < t->n; i++)
    if (q - t->v[i].base < t->v[i].size) {
      *out = (gwc_chunk){1, t->v[i].base, t->v[i].size, t->v[i].resv, t->v[i].device};
      return;
    }
}

/* CUDA's attributes of a VMM pointer (not legacy-IPC capable, no pool, RANGE_* the
 * reservation) or of a pool pointer. */
static gwc_attrs vmm_attrs(uintptr_t resv, size_t resv_size, uintptr_t pool) {
  gwc_attrs a;
  memset(&a, 0, sizeof a);
  a.gen = GWC_GEN_CUDA;
  a.memtype = GWC_CU_DEVICE;
  a.device = 0;
  a.range_start = resv;
  a.range_size = resv_size;
  a.not_legacy_ipc = 1;
  a.mempool = pool;
  return a;
}

static void expect_range(const fake_chunk *v, int n, uintptr_t ptr, gwc_attrs a, int want_ok,
                         uintptr_t want_base, size_t want_extent) {
  fake_table t = {v, n, 0};
  uintptr_t b = 0;
  size_t e = 0;
  int ok = gwc_mapped_range((const void *)ptr, &a, fake_fn, &t, &b, &e);
  TEST_CONTEXT("ptr %#llx", (unsigned long long)ptr);
  ASSERT_EQ_INT(ok, want_ok);
  if (ok) {
    ASSERT_EQ_PTR((void *)b, (void *)want_base);
    ASSERT_EQ_SIZE(e, want_extent);
  }
}

TEST_IMPL(vmm_range) {
  const uintptr_t R = 0x7f0000000000ull; /* a reservation of 8 chunks of 2 MiB */
  const size_t C = 2 * MIB, RS = 8 * C;
  /* chunks 1, 2, 3 back to back; a hole at 4; 5 mapped; 6 of another device; 7 of a
   * reservation right after ours mapped at its start (never ours). */
  const fake_chunk v[] = {
      {R + 1 * C, C, R, 0}, {R + 2 * C, C, R, 0}, {R + 3 * C, C, R, 0},
      {R + 5 * C, C, R, 0}, {R + 6 * C, C, R, 1}, {R + RS, C, R + RS, 0},
  };
  gwc_attrs a = vmm_attrs(R, RS, 0);
  /* Not the reservation, not one chunk: the three mapped back to back, from any of them. */
  expect_range(v, 6, R + C, a, 1, R + C, 3 * C);
  expect_range(v, 6, R + 2 * C + 77, a, 1, R + C, 3 * C);
  expect_range(v, 6, R + 4 * C - 1, a, 1, R + C, 3 * C);
  /* Alone between a hole and another device's chunk. */
  expect_range(v, 6, R + 5 * C + 1, a, 1, R + 5 * C, C);
  /* Unmapped (the hole): no extent at all. */
  expect_range(v, 6, R + 4 * C, a, 0, 0, 0);
  /* The last chunk of a reservation stops at its end even when a mapping follows. */
  const fake_chunk w[] = {{R + 7 * C, C, R, 0}, {R + RS, C, R + RS, 0}};
  expect_range(w, 2, R + 7 * C + 5, a, 1, R + 7 * C, C);
  /* The first chunk of a reservation stops at its start even when a mapping precedes. */
  gwc_attrs b = vmm_attrs(R + RS, RS, 0);
  const fake_chunk x[] = {{R + 7 * C, C, R, 0}, {R + RS, C, R + RS, 0}};
  expect_range(x, 2, R + RS + 5, b, 1, R + RS, C);
  /* Pool memory: its allocation, interior pointers too, never the neighbours. */
  const fake_chunk p[] = {{R, 4096, R, 0}, {R + 4096, 8192, R, 0}};
  gwc_attrs pa = vmm_attrs(R, 1 << 20, 0xabc);
  expect_range(p, 2, R + 4096 + 100, pa, 1, R + 4096, 8192);
  expect_range(p, 2, R + 5, pa, 1, R, 4096);
  /* A freed pool allocation: the address range call fails, so no extent (never stale). */
  expect_range(p, 0, R + 5, pa, 0, 0, 0);
  /* The classification alone never reports RANGE_* of such memory as its extent. */
  gw_ptrinfo o;
  ASSERT_OK(gwc_classify((void *)(R + C), &a, &H200, &o));
  ASSERT_EQ_INT(o.kind, GW_MEM_DEVICE);
  ASSERT_NULL(o.base);
  ASSERT_EQ_SIZE(o.extent, 0);
  /* Which memory takes the slower path: device memory that is not legacy-IPC capable. */
  ASSERT_TRUE(gwc_needs_range(&a));
  a.not_legacy_ipc = 0; /* cudaMalloc */
  ASSERT_TRUE(!gwc_needs_range(&a));
  a.not_legacy_ipc = 1;
  a.is_managed = 1;
  ASSERT_TRUE(!gwc_needs_range(&a));
  a.is_managed = 0;
  a.memtype = GWC_CU_HOST;
  ASSERT_TRUE(!gwc_needs_range(&a));
  /* Pinned and managed memory are not legacy-IPC capable either (cuPointerGetAttributes on
   * an H100, 2026-12-07: IS_LEGACY_CUDA_IPC_CAPABLE 0 for both): their RANGE_* are still
   * their allocation, reported as it is. */
  const uintptr_t P = 0x7f4576800000ull;
  gwc_attrs pin = {.gen = GWC_GEN_CUDA,
                   .memtype = GWC_CU_HOST,
                   .device = 0,
                   .range_start = P,
                   .range_size = MIB,
                   .not_legacy_ipc = 1};
  ASSERT_OK(gwc_classify((void *)(P + 8), &pin, &H200, &o));
  ASSERT_EQ_INT(o.kind, GW_MEM_PINNED);
  ASSERT_EQ_PTR(o.base, (void *)P);
  ASSERT_EQ_SIZE(o.extent, MIB);
  gwc_attrs man = {.gen = GWC_GEN_CUDA,
                   .memtype = GWC_CU_DEVICE,
                   .is_managed = 1,
                   .device = 0,
                   .range_start = P,
                   .range_size = MIB,
                   .not_legacy_ipc = 1};
  ASSERT_OK(gwc_classify((void *)(P + 8), &man, &H200, &o));
  ASSERT_EQ_INT(o.kind, GW_MEM_MANAGED);
  ASSERT_EQ_PTR(o.base, (void *)P);
  ASSERT_EQ_SIZE(o.extent, MIB);
  return 0;
}
