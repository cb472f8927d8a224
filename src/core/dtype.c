/* Element types and memory-kind names. */
#include "internal.h"

static const struct {
  const char *name;
  size_t size;
} dtypes[GW_DTYPE_COUNT] = {
    [GW_BOOL] = {"bool", 1},         [GW_INT8] = {"int8", 1},
    [GW_INT16] = {"int16", 2},       [GW_INT32] = {"int32", 4},
    [GW_INT64] = {"int64", 8},       [GW_UINT8] = {"uint8", 1},
    [GW_UINT16] = {"uint16", 2},     [GW_UINT32] = {"uint32", 4},
    [GW_UINT64] = {"uint64", 8},     [GW_FLOAT16] = {"float16", 2},
    [GW_BFLOAT16] = {"bfloat16", 2}, [GW_FLOAT32] = {"float32", 4},
    [GW_FLOAT64] = {"float64", 8},   [GW_COMPLEX64] = {"complex64", 8},
    [GW_COMPLEX128] = {"complex128", 16},
};

size_t gw_dtype_size(gw_dtype t) {
  return ((unsigned)t < GW_DTYPE_COUNT) ? dtypes[t].size : 0;
}

const char *gw_dtype_name(gw_dtype t) {
  return ((unsigned)t < GW_DTYPE_COUNT) ? dtypes[t].name : "invalid";
}

const char *gw_memkind_name(gw_memkind k) {
  switch (k) {
  case GW_MEM_HOST: return "host";
  case GW_MEM_PINNED: return "pinned";
  case GW_MEM_DEVICE: return "device";
  case GW_MEM_MANAGED: return "managed";
  case GW_MEM_UNKNOWN: break;
  }
  return "unknown";
}

const char *gw_backend_name(gw_backend b) {
  switch (b) {
  case GW_BACKEND_AUTO: return "auto";
  case GW_BACKEND_CPU: return "cpu";
  case GW_BACKEND_CUDA: return "cuda";
  case GW_BACKEND_HIP: return "hip";
  }
  return "invalid";
}
