/* Element types and memory-kind names. */
#include "internal.h"

static const char *const names[GW_DTYPE_COUNT] = {
    [GW_BOOL] = "bool",       [GW_INT8] = "int8",           [GW_INT16] = "int16",
    [GW_INT32] = "int32",     [GW_INT64] = "int64",         [GW_UINT8] = "uint8",
    [GW_UINT16] = "uint16",   [GW_UINT32] = "uint32",       [GW_UINT64] = "uint64",
    [GW_FLOAT16] = "float16", [GW_BFLOAT16] = "bfloat16",   [GW_FLOAT32] = "float32",
    [GW_FLOAT64] = "float64", [GW_COMPLEX64] = "complex64", [GW_COMPLEX128] = "complex128",
};

const unsigned char gw__dtype_bytes[GW_DTYPE_COUNT] = {
    [GW_BOOL] = 1,     [GW_INT8] = 1,    [GW_INT16] = 2,   [GW_INT32] = 4,     [GW_INT64] = 8,
    [GW_UINT8] = 1,    [GW_UINT16] = 2,  [GW_UINT32] = 4,  [GW_UINT64] = 8,    [GW_FLOAT16] = 2,
    [GW_BFLOAT16] = 2, [GW_FLOAT32] = 4, [GW_FLOAT64] = 8, [GW_COMPLEX64] = 8, [GW_COMPLEX128] = 16,
};

size_t gw_dtype_size(gw_dtype t) { return gw__dtype_size(t); }

const char *gw_dtype_name(gw_dtype t) {
  return ((unsigned)t < GW_DTYPE_COUNT) ? names[t] : "invalid";
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
