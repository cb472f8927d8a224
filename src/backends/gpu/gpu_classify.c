/* Vendor pointer attributes -> gw_ptrinfo. Pure: no vendor headers, no runtime calls. */
#include "gpu_classify.h"

/* The generation-neutral kinds the raw enums map onto. */
typedef enum { RAW_PAGEABLE, RAW_HOST, RAW_DEVICE, RAW_MANAGED, RAW_OTHER } raw_kind;

static raw_kind raw_kind_of(const gwc_attrs *a) {
  switch (a->gen) {
  case GWC_GEN_CUDA:
    switch (a->memtype) {
    case GWC_CU_UNREGISTERED: return RAW_PAGEABLE;
    case GWC_CU_HOST: return RAW_HOST;
    case GWC_CU_DEVICE: return RAW_DEVICE;
    case GWC_CU_UNIFIED: return RAW_MANAGED;
    default: return RAW_OTHER;
    }
  case GWC_GEN_ROCM5:
    /* ROCm 5 has no "unregistered" value: hipMemoryTypeHost (0) is pinned host memory
     * only because unregistered pointers fail the query (handled by the caller). */
    switch (a->memtype) {
    case GWC_HIP5_HOST: return RAW_HOST;
    case GWC_HIP5_DEVICE: return RAW_DEVICE;
    case GWC_HIP5_UNIFIED: /* fallthrough: documented "not used", treat as managed */
    case GWC_HIP5_MANAGED: return RAW_MANAGED;
    default: return RAW_OTHER;
    }
  case GWC_GEN_ROCM6:
    switch (a->memtype) {
    case GWC_HIP6_UNREGISTERED: return RAW_PAGEABLE;
    case GWC_HIP6_HOST: return RAW_HOST;
    case GWC_HIP6_DEVICE: return RAW_DEVICE;
    case GWC_HIP6_UNIFIED: /* fallthrough */
    case GWC_HIP6_MANAGED: return RAW_MANAGED;
    default: return RAW_OTHER;
    }
  }
  return RAW_OTHER;
}

gw_status gwc_classify(const void *ptr, const gwc_attrs *a, const gwc_caps *caps,
                       gw_ptrinfo *out) {
  raw_kind k;
  if (a->status != 0) {
    /* ROCm 5 answers "invalid value" for host memory it does not know: that is the
     * pageable case, not a failure. Every other error is one. */
    if (a->gen == GWC_GEN_ROCM5 && a->status == GWC_HIP_ERROR_INVALID_VALUE)
      k = RAW_PAGEABLE;
    else
      return GW_EBACKEND;
  } else {
    k = raw_kind_of(a);
  }
  /* Managed memory reports DEVICE (CUDA) or HOST (older ROCm) as its type; the flag wins. */
  if (k != RAW_PAGEABLE && a->is_managed)
    k = RAW_MANAGED;

  /* Written straight into *out, each field once (no local gw_ptrinfo and copy: this runs
   * on every pointer query and wrap). */
  void *p = (void *)(uintptr_t)ptr;
  /* CUDA and HIP cannot tell registered host memory from pinned allocations, so
   * GW_PTR_HOST_REGISTERED is never set here; the core adds GW_PTR_GPUWRAP_REGISTERED. */
  out->flags = 0;
  if (k == RAW_PAGEABLE) {
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
  if (a->range_start != 0 && a->range_size != 0 && (uintptr_t)ptr >= a->range_start &&
      (uintptr_t)ptr - a->range_start < a->range_size) {
    out->base = (void *)a->range_start;
    out->extent = a->range_size;
  } else {
    out->base = NULL;
    out->extent = 0;
  }
  switch (k) {
  case RAW_HOST:
    out->kind = GW_MEM_PINNED;
    out->host_ptr = a->host_pointer ? (void *)a->host_pointer : p;
    if (a->device_pointer)
      out->device_ptr = (void *)a->device_pointer;
    else if (caps->host_ptr_for_registered)
      out->device_ptr = p;
    else
      out->device_ptr = NULL; /* the backend looks the device address up */
    break;
  case RAW_DEVICE:
    out->kind = GW_MEM_DEVICE;
    out->device_ptr = p; /* a device pointer is its own device address, interior ones too */
    out->host_ptr = NULL;
    break;
  case RAW_MANAGED:
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
