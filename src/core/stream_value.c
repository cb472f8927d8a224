/*
 * Stream memory operations (private.h, gw__stream_write_value / gw__stream_wait_value): a
 * stream stores a word once it reaches the store, or waits on the device until a word
 * holds at least a value. Two processes that map each other's memory then signal each
 * other's streams with no host in between: the halo's IPC path writes "landed" after a
 * pack into the neighbour's buffer and waits for it before the unpack (src/halo/halo_ipc.c),
 * where events needed an MPI message to order each record before its wait.
 *
 * The checks are the runtimes' own preconditions (cuStreamWriteValue32 refuses a
 * misaligned address with an invalid-value error, and a 32-bit write silently truncates a
 * wider value), made here so that every backend refuses alike, with a message that says
 * which argument.
 */
#include "internal.h"

#include <stdint.h>

int gw__stream_values_supported(const gw_context *ctx, int bytes) {
  if (!ctx || !ctx->ops->stream_write_value || !ctx->ops->stream_wait_value) return 0;
  int bit = bytes == 4 ? 1 : bytes == 8 ? 2 : 0;
  return (ctx->caps.stream_values & bit) != 0;
}

static gw_status usable(gw_stream *s, const void *addr, uint64_t value, int bytes, const char *fn) {
  if (!s) return gw__fail(GW_EINVAL, "%s: s: NULL", fn);
  if (!addr) return gw__fail(GW_EINVAL, "%s: addr: NULL", fn);
  if (bytes != 4 && bytes != 8) return gw__fail(GW_EINVAL, "%s: bytes: %d (4 or 8)", fn, bytes);
  if ((uintptr_t)addr % (uintptr_t)bytes)
    return gw__fail(GW_EINVAL, "%s: addr %p is not aligned to its %d-byte word", fn, addr, bytes);
  if (bytes == 4 && value > UINT32_MAX)
    return gw__fail(GW_EINVAL, "%s: value %llu does not fit the 4-byte word", fn,
                    (unsigned long long)value);
  if (!gw__stream_values_supported(s->ctx, bytes))
    return gw__fail(GW_ENOTSUP,
                    "%s: the %s backend's device %d has no %d-byte stream memory operations "
                    "(CUDA: CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR%s)",
                    fn, s->ctx->ops->name, s->ctx->device, bytes,
                    bytes == 8 ? " and _CAN_USE_64_BIT_STREAM_MEM_OPS" : "");
  return GW_OK;
}

gw_status gw__stream_write_value(gw_stream *s, void *addr, uint64_t value, int bytes) {
  gw_status st = usable(s, addr, value, bytes, "gw__stream_write_value");
  return st == GW_OK ? s->ctx->ops->stream_write_value(s->ctx->state, s->handle, addr, value, bytes)
                     : st;
}

gw_status gw__stream_wait_value(gw_stream *s, const void *addr, uint64_t value, int bytes) {
  gw_status st = usable(s, addr, value, bytes, "gw__stream_wait_value");
  return st == GW_OK ? s->ctx->ops->stream_wait_value(s->ctx->state, s->handle, addr, value, bytes)
                     : st;
}
