/* Checks shared by the CUDA tests: a CUDA runtime call or a gpuwrap call that must succeed
 * (on failure: print the call and its error, return 1 from the test). */
#ifndef GWT_CUDA_H
#define GWT_CUDA_H

#include <cuda_runtime.h>

#include "gpuwrap.h"
#include "gwt.h"

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      GWT_FAIL_("%s: %s", #x, cudaGetErrorName(e_));                                       \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)
#define GW_OK_(x)                                                                          \
  do {                                                                                     \
    gw_status s_ = (x);                                                                    \
    if (s_ != GW_OK) {                                                                     \
      GWT_FAIL_("%s: %s (%s)", #x, gw_err_name(s_), gw_last_error());                      \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

#endif
