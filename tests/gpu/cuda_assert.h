/* The CUDA runtime's calls in the CUDA tests: one that fails ends the test (test.h's
 * TST_FAIL) with the call and the runtime's error name. */
#ifndef GW_TESTS_GPU_CUDA_ASSERT_H
#define GW_TESTS_GPU_CUDA_ASSERT_H

#include <cuda_runtime.h>

#include "test.h"

#define ASSERT_CUDA(x)                                                           \
  do {                                                                           \
    cudaError_t tst_e_ = (x);                                                    \
    if (tst_e_ != cudaSuccess) TST_FAIL("%s: %s", #x, cudaGetErrorName(tst_e_)); \
  } while (0)

#endif
