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

/*
 * Batched copy: up to GWK_BATCH_MAX transfers in ONE launch (the halo shell of a field:
 * one launch instead of two per field and dim). The descriptors travel as one kernel
 * parameter of at most 4 KiB: the limit every CUDA driver and HIP accept (CUDA 12.1+ on
 * Volta and later allows 32 KiB, but only with a recent driver, and HIP does not), so
 * each descriptor holds at most GWK_BATCH_DIMS dims, one of them reserved for the words
 * within an element: a transfer fits when x->ndim <= GWK_BATCH_DIMS - 1 (a normalised
 * halo face has at most 3). More transfers go in several launches. The transfers must be
 * independent (they run concurrently) and device-usable from the launching device.
 */
/* 29 descriptors of 136 bytes fill the 4 KiB: the 26 boxes of a 3-D field's halo shell
 * (the halo's local copies, folded into one batch) go in one launch. */
#define GWK_BATCH_MAX 29
#define GWK_BATCH_DIMS 4
#define GWK_BATCH_FITS(x) ((x)->ndim <= GWK_BATCH_DIMS - 1)
int gwk_copy_batch(const gw__xfer *const *x, int n, void *stream, int max_blocks);
/* The same transfers (n <= GWK_BATCH_MAX) as ONE launch that also signals (backend.h:
 * gw__signals): at most 32 blocks, each waiting for the neighbours' words before it copies
 * (kernels.cu says why the grid is small). */
int gwk_copy_batch_signalled(const gw__xfer *const *x, int n, void *stream, const gw__signals *sig);

#ifdef __cplusplus
}
#endif

#endif /* GW_GPU_KERNELS_H */
