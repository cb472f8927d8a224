/*
 * Pointer classification for the GPU backend, as a pure function.
 *
 * The vendor shim copies what the runtime answered into gwc_attrs without interpreting it
 * (raw enum values, raw status, raw device ordinal); gwc_classify() turns that into a
 * gw_ptrinfo. Keeping the interpretation here, away from any vendor header, lets the tests
 * replay attribute values recorded on CUDA, ROCm 5 and ROCm 6 on a machine without a GPU:
 * the three generations disagree on enum values and on whether an unregistered host pointer
 * is an error, and that is exactly where Open MPI and MPICH misclassified memory.
 */
#ifndef GW_GPU_CLASSIFY_H
#define GW_GPU_CLASSIFY_H

#include "gpuwrap.h"

#include <stddef.h>
#include <stdint.h>

/* Which vendor API answered: decides how memtype and status are read. */
typedef enum {
  GWC_GEN_CUDA = 1,  /* cuPointerGetAttributes: CUmemorytype, success for any pointer */
  GWC_GEN_ROCM5 = 5, /* hipPointerGetAttributes, `memoryType` field, error if unregistered */
  GWC_GEN_ROCM6 = 6, /* hipPointerGetAttributes, `type` field, success if unregistered */
} gwc_gen;

/* Vendor constants, written out so no vendor header is needed; the shims check them
 * against the real headers with _Static_assert. */
enum {
  /* CUmemorytype (0: the pointer is unknown to CUDA, i.e. pageable) */
  GWC_CU_UNREGISTERED = 0,
  GWC_CU_HOST = 1,
  GWC_CU_DEVICE = 2,
  GWC_CU_ARRAY = 3,
  GWC_CU_UNIFIED = 4,
  /* hipMemoryType before ROCm 6 (Managed appeared in late 5.x) */
  GWC_HIP5_HOST = 0,
  GWC_HIP5_DEVICE = 1,
  GWC_HIP5_ARRAY = 2,
  GWC_HIP5_UNIFIED = 3,
  GWC_HIP5_MANAGED = 4,
  /* hipMemoryType from ROCm 6 (CUDA-like numbering) */
  GWC_HIP6_UNREGISTERED = 0,
  GWC_HIP6_HOST = 1,
  GWC_HIP6_DEVICE = 2,
  GWC_HIP6_MANAGED = 3,
  GWC_HIP6_ARRAY = 10,
  GWC_HIP6_UNIFIED = 11,
  /* hipErrorInvalidValue: how ROCm 5 says "not a pointer I know" */
  GWC_HIP_ERROR_INVALID_VALUE = 1,
};

/* What the runtime said about one pointer, uninterpreted. */
typedef struct {
  gwc_gen gen;
  int status;               /* the query's raw return code (0 = success) */
  int memtype;              /* raw memory type of `gen` */
  int is_managed;           /* raw is-managed flag */
  int device;               /* raw ordinal; vendors use -2 for "none" */
  uintptr_t device_pointer; /* raw fields where the query gives them (HIP), else 0 */
  uintptr_t host_pointer;
  uintptr_t range_start; /* allocation/registration holding ptr; 0 = unknown */
  size_t range_size;
  /* CUDA only (0 elsewhere and in recordings without them): IS_LEGACY_CUDA_IPC_CAPABLE
   * said 0, and MEMPOOL_HANDLE. Device memory that is not legacy-IPC capable is pool
   * memory (mempool != 0) or VMM memory, whose RANGE_* are not its extent: see
   * gwc_needs_range. */
  int not_legacy_ipc;
  uintptr_t mempool;
} gwc_attrs;

/* What the device can do, as far as classification cares. */
typedef struct {
  int pageable_access;         /* HMM/ATS: the device uses pageable host addresses */
  int host_ptr_for_registered; /* registered/pinned memory has device address == host */
} gwc_caps;

/*
 * Classify `ptr` from its raw attributes.
 * Returns GW_OK and fills *out, or GW_EBACKEND when `a->status` is a real failure (the
 * caller formats the vendor message); *out is then untouched.
 * A GW_MEM_PINNED result with device_ptr NULL means the device address must be looked up
 * (the device cannot use the host address and the query did not give one).
 */
gw_status gwc_classify(const void *ptr, const gwc_attrs *a, const gwc_caps *caps, gw_ptrinfo *out);

/*
 * Whether the extent of ptr needs more runtime calls than the one query (gwc_mapped_range):
 * device memory (not managed) the runtime says is not legacy-IPC capable. That is
 * stream-ordered pool memory (cudaMallocAsync, cudaMallocFromPoolAsync), whose RANGE_*
 * the driver does not document as the allocation, or VMM memory (cuMemCreate + cuMemMap),
 * whose RANGE_* are the whole cuMemAddressReserve reservation, mostly unmapped in
 * PyTorch's expandable segments (driver API text of cuPointerGetAttribute). Ordinary
 * cudaMalloc memory (capable) never takes the slower path.
 */
static inline int gwc_needs_range(const gwc_attrs *a) {
  return a->not_legacy_ipc && a->status == 0 && !a->is_managed && a->gen == GWC_GEN_CUDA &&
         a->memtype == GWC_CU_DEVICE;
}

/* What the runtime says of the mapping holding address q (cuMemGetAddressRange and
 * cuPointerGetAttributes of q): ok 0 when q is not mapped device memory or the runtime
 * cannot say. */
typedef struct {
  int ok;
  uintptr_t base; /* the mapping (one VMM chunk, one pool allocation) */
  size_t size;
  uintptr_t range_start; /* RANGE_START_ADDR of q: the reservation for VMM memory */
  int device;
} gwc_chunk;
typedef void (*gwc_chunk_fn)(void *user, uintptr_t q, gwc_chunk *out);

/*
 * The extent of pool or VMM memory at ptr (a: its attributes, gwc_needs_range true), asking
 * `chunk` about addresses: a pool allocation is its own mapping (interior pointers report
 * it); VMM memory is the CONTIGUOUS MAPPED RANGE around ptr: from ptr's chunk, the chunks
 * of the same reservation (same RANGE_START_ADDR) and device mapped back to back on either
 * side, up to an unmapped hole or the reservation's end (never the whole reservation,
 * never one chunk when the next is mapped right after it). Returns 1 with *base and *extent,
 * or 0 when ptr's own mapping is unknown (a freed pool allocation, an unmapped address):
 * then no extent is reported, never a stale one. Pure: tests drive it with a fake table.
 */
int gwc_mapped_range(const void *ptr, const gwc_attrs *a, gwc_chunk_fn chunk, void *user,
                     uintptr_t *base, size_t *extent);

/*
 * The same, inline: what the backend's pointer query uses, so that on its hot path (every
 * gw_pointer_query and every wrap) the attributes the runtime wrote go straight into the
 * caller's gw_ptrinfo, with no call and no gwc_attrs in memory in between.
 * gwc_classify (gpu_classify.c, what the tests replay recorded attributes through) is this
 * function, so both always agree.
 */

/* The generation-neutral kinds the raw enums map onto. */
typedef enum {
  GWC_RAW_PAGEABLE,
  GWC_RAW_HOST,
  GWC_RAW_DEVICE,
  GWC_RAW_MANAGED,
  GWC_RAW_OTHER
} gwc__raw_kind;

static inline gwc__raw_kind gwc__raw_kind_of(const gwc_attrs *a) {
  switch (a->gen) {
  case GWC_GEN_CUDA:
    switch (a->memtype) {
    case GWC_CU_UNREGISTERED: return GWC_RAW_PAGEABLE;
    case GWC_CU_HOST: return GWC_RAW_HOST;
    case GWC_CU_DEVICE: return GWC_RAW_DEVICE;
    case GWC_CU_UNIFIED: return GWC_RAW_MANAGED;
    default: return GWC_RAW_OTHER;
    }
  case GWC_GEN_ROCM5:
    /* ROCm 5 has no "unregistered" value: hipMemoryTypeHost (0) is pinned host memory
     * only because unregistered pointers fail the query (handled by the caller). */
    switch (a->memtype) {
    case GWC_HIP5_HOST: return GWC_RAW_HOST;
    case GWC_HIP5_DEVICE: return GWC_RAW_DEVICE;
    case GWC_HIP5_UNIFIED: /* fallthrough: documented "not used", treat as managed */
    case GWC_HIP5_MANAGED: return GWC_RAW_MANAGED;
    default: return GWC_RAW_OTHER;
    }
  case GWC_GEN_ROCM6:
    switch (a->memtype) {
    case GWC_HIP6_UNREGISTERED: return GWC_RAW_PAGEABLE;
    case GWC_HIP6_HOST: return GWC_RAW_HOST;
    case GWC_HIP6_DEVICE: return GWC_RAW_DEVICE;
    case GWC_HIP6_UNIFIED: /* fallthrough */
    case GWC_HIP6_MANAGED: return GWC_RAW_MANAGED;
    default: return GWC_RAW_OTHER;
    }
  }
  return GWC_RAW_OTHER;
}

static inline gw_status gwc_classify_inline(const void *ptr, const gwc_attrs *a,
                                            const gwc_caps *caps, gw_ptrinfo *out) {
  gwc__raw_kind k;
  if (a->status != 0) {
    /* ROCm 5 answers "invalid value" for host memory it does not know: that is the
     * pageable case, not a failure. Every other error is one. */
    if (a->gen == GWC_GEN_ROCM5 && a->status == GWC_HIP_ERROR_INVALID_VALUE)
      k = GWC_RAW_PAGEABLE;
    else
      return GW_EBACKEND;
  } else {
    k = gwc__raw_kind_of(a);
  }
  /* Managed memory reports DEVICE (CUDA) or HOST (older ROCm) as its type; the flag wins. */
  if (k != GWC_RAW_PAGEABLE && a->is_managed) k = GWC_RAW_MANAGED;

  /* Written straight into *out, each field once (no local gw_ptrinfo and copy: this runs
   * on every pointer query and wrap). */
  void *p = (void *)(uintptr_t)ptr;
  /* CUDA and HIP cannot tell registered host memory from pinned allocations, so
   * GW_PTR_HOST_REGISTERED is never set here; the core adds GW_PTR_GPUWRAP_REGISTERED. */
  out->flags = 0;
  if (k == GWC_RAW_PAGEABLE) {
    /* Whatever stale fields the runtime left: pageable memory has no owner or range. */
    out->kind = GW_MEM_HOST;
    out->device = -1;
    out->base = NULL;
    out->extent = 0;
    out->host_ptr = p;
    out->device_ptr = caps->pageable_access ? p : NULL;
    return GW_OK;
  }
  out->device = a->device >= 0 ? a->device : -1; /* -2 (and any negative) means none */
  /* Pool and VMM memory: RANGE_* may be the reservation; the backend finds the extent
   * (gwc_mapped_range), never this. Only device memory: pinned and managed memory are
   * never legacy-IPC capable either (measured on an H100), and their RANGE_* are theirs. */
  if (!gwc_needs_range(a) && a->range_start != 0 && a->range_size != 0 &&
      (uintptr_t)ptr >= a->range_start && (uintptr_t)ptr - a->range_start < a->range_size) {
    out->base = (void *)a->range_start;
    out->extent = a->range_size;
  } else {
    out->base = NULL;
    out->extent = 0;
  }
  switch (k) {
  case GWC_RAW_HOST:
    out->kind = GW_MEM_PINNED;
    out->host_ptr = a->host_pointer ? (void *)a->host_pointer : p;
    if (a->device_pointer)
      out->device_ptr = (void *)a->device_pointer;
    else if (caps->host_ptr_for_registered)
      out->device_ptr = p;
    else
      out->device_ptr = NULL; /* the backend looks the device address up */
    break;
  case GWC_RAW_DEVICE:
    out->kind = GW_MEM_DEVICE;
    out->device_ptr = p; /* a device pointer is its own device address, interior ones too */
    out->host_ptr = NULL;
    break;
  case GWC_RAW_MANAGED:
    out->kind = GW_MEM_MANAGED;
    out->device_ptr = p;
    out->host_ptr = p;
    break;
  default:
    /* Arrays (texture memory) are not linear: nothing can address them as an array. */
    out->kind = GW_MEM_UNKNOWN;
    out->device_ptr = NULL;
    out->host_ptr = NULL;
    break;
  }
  return GW_OK;
}

#endif /* GW_GPU_CLASSIFY_H */
