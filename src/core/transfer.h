/*
 * Private to the core's copies: what transfer.c (one copy or fill, planned and queued)
 * gives batch.c (the prepared batches, built on it). One way: transfer.c knows nothing of
 * batches.
 */
#ifndef GW_TRANSFER_H
#define GW_TRANSFER_H

#include "internal.h"

#include <stdbool.h>
#include <stdint.h>

/* The caller has not asked gw__capturing yet (no capture's id). */
#define GW__CAP_ASK UINT64_MAX

/* How dst's and src's elements lie in memory relative to each other. */
typedef enum { GW__ALIAS_NONE, GW__ALIAS_SAME, GW__ALIAS_OVERLAP } gw__alias;
gw__alias gw__aliasing(const gw_array *dst, const gw_array *src);
/* Whether a and b may share a byte (false only when certain they do not). */
bool gw__may_meet(const gw_array *a, const gw_array *b);

/* Every check of the pair dst <- src (NULLs, dtype and shape, a writable dst, a backend that
 * runs it, addresses), with its plan in *x and its executing context in *exec; *exec NULL
 * with GW_OK: nothing to copy (no elements). */
gw_status gw__copy_prepare(gw_array *dst, const gw_array *src, gw__xfer *x, gw_context **exec);
/* One copy on st (NULL: synchronous); cap: st's capture (0: none, GW__CAP_ASK: not asked). */
gw_status gw__copy_on(gw_array *dst, const gw_array *src, gw_stream *st, uint64_t cap);

/* Capture: why a copy of kinds dk <- sk cannot be recorded into a graph, or NULL; the
 * refusal (GW_ENOTSUP) of `who`, before anything is queued; the pending-work events of work
 * just queued on st (captured or not), a's and b's (b may be NULL). */
const char *gw__uncapturable_copy(gw_memkind dk, gw_memkind sk);
gw_status gw__refuse_capture(const char *who, const char *why);
gw_status gw__note_pair(const gw_array *a, const gw_array *b, gw_stream *st, uint64_t cap);

#endif /* GW_TRANSFER_H */
