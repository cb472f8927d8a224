/*
 * Launchers for the kernels in kernels.cu (nvcc for CUDA, hipcc for HIP). The C backend
 * calls only these; a build without a vendor compiler defines GW_HAVE_KERNELS 0 and never
 * references them. Each returns the vendor error code of the launch (0 = success).
 */
#ifndef GW_GPU_KERNELS_H
#define GW_GPU_KERNELS_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fill f's region (addresses must be device-usable). `stream` is the vendor stream,
 * `max_blocks` caps the grid of the grid-stride loops. */
int gwk_fill(const gw__fillspec *f, void *stream, int max_blocks);
/* Copy x element by element; both sides device-usable from the launching device. */
int gwk_copy(const gw__xfer *x, void *stream, int max_blocks);

#ifdef __cplusplus
}
#endif

#endif /* GW_GPU_KERNELS_H */
