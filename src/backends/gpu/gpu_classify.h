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
  GWC_CU_UNREGISTERED = 0, GWC_CU_HOST = 1, GWC_CU_DEVICE = 2, GWC_CU_ARRAY = 3,
  GWC_CU_UNIFIED = 4,
  /* hipMemoryType before ROCm 6 (Managed appeared in late 5.x) */
  GWC_HIP5_HOST = 0, GWC_HIP5_DEVICE = 1, GWC_HIP5_ARRAY = 2, GWC_HIP5_UNIFIED = 3,
  GWC_HIP5_MANAGED = 4,
  /* hipMemoryType from ROCm 6 (CUDA-like numbering) */
  GWC_HIP6_UNREGISTERED = 0, GWC_HIP6_HOST = 1, GWC_HIP6_DEVICE = 2, GWC_HIP6_MANAGED = 3,
  GWC_HIP6_ARRAY = 10, GWC_HIP6_UNIFIED = 11,
  /* hipErrorInvalidValue: how ROCm 5 says "not a pointer I know" */
  GWC_HIP_ERROR_INVALID_VALUE = 1,
};

/* What the runtime said about one pointer, uninterpreted. */
typedef struct {
  gwc_gen gen;
  int status;              /* the query's raw return code (0 = success) */
  int memtype;             /* raw memory type of `gen` */
  int is_managed;          /* raw is-managed flag */
  int device;              /* raw ordinal; vendors use -2 for "none" */
  uintptr_t device_pointer; /* raw fields where the query gives them (HIP), else 0 */
  uintptr_t host_pointer;
  uintptr_t range_start;   /* allocation/registration holding ptr; 0 = unknown */
  size_t range_size;
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
gw_status gwc_classify(const void *ptr, const gwc_attrs *a, const gwc_caps *caps,
                       gw_ptrinfo *out);

#endif /* GW_GPU_CLASSIFY_H */
