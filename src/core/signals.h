/*
 * One type that the core's private ABI (private.h: gw__batch_run_signalled) and the backend
 * ABI (backend.h: xfer_copy_batch_signalled) share: the halo hands it to the core, the core
 * to the backend, unchanged.
 */
#ifndef GW_CORE_SIGNALS_H
#define GW_CORE_SIGNALS_H

#include <stdint.h>

/*
 * The words of a signalled copy batch (xfer_copy_batch_signalled), per side (0 and 1; a
 * side whose `post` is NULL has no neighbour and no words). Every word is 32 bits of device
 * memory (this device's, or another process's mapped here) that only this operation of
 * this stream writes or waits on. In order, once the stream reaches the operation (after
 * its earlier work, whose writes and reads are then complete):
 *   1. store `epoch` into each post[s]          ("my ghost cells are free": release)
 *   2. wait until each wait[s] >= epoch          (the neighbour's store 1: acquire)
 *   3. the copies
 *   4. store `epoch` into each done[s]           ("landed": release, after every copy)
 *   5. wait until each until[s] >= epoch         (the neighbour's store 4: acquire)
 * and only then does the stream's later work start. Compared as (int32_t)(word - epoch) >= 0,
 * so the epoch may wrap. `count` is a word of this device's memory for the operation's own
 * use (the GPU kernel's count of finished blocks), 0 before and after each run.
 */
/* What one signalled operation takes: at most this many transfers of at most this many
 * dims each (the GPU kernel's one launch: kernels.h, GWK_BATCH_MAX and GWK_BATCH_FITS).
 * Every backend refuses more alike (GW_ENOTSUP), and gw__batch_can_signal says so at plan
 * creation, so that no rank finds out in an update that its neighbours could. */
#define GW__SIGNAL_MAX_TRANSFERS 29
#define GW__SIGNAL_MAX_DIMS 3

typedef struct {
  uint32_t *post[2];
  const uint32_t *wait[2];
  uint32_t *done[2];
  const uint32_t *until[2];
  uint32_t *count;
  uint32_t epoch;
} gw__signals;

#endif /* GW_CORE_SIGNALS_H */
