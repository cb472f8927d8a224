/*
 * The IPC handle's format (ipc_handle.c): gw_ipc_handle's bytes to fields and back, with
 * every check that needs no runtime. gw_ipc_export fills the fields and encodes them;
 * gw_ipc_open decodes a handle before it asks the runtime anything (ipc.c).
 */
#ifndef GW_CORE_IPC_HANDLE_H
#define GW_CORE_IPC_HANDLE_H

#include "internal.h"

/* Bytes the handle has for the shape and strides (varints): version 2 (legacy memory),
 * version 3 (pool memory: 13 of them carry the pool's descriptor and id). */
#define GW__IPC_GEOM_BYTES 114
#define GW__IPC_GEOM_BYTES_V3 101

/* A handle's contents. */
typedef struct {
  gw_backend backend;
  gw_dtype dtype;
  int ndim;
  bool readonly;
  int device; /* the exporter's ordinal */
  uint64_t pid, nonce, alloc_id, base, extent, offset;
  unsigned char uuid[16];
  unsigned char rt[GW__IPC_RT_BYTES];
  gw__ipc_share share; /* kind; fd and pool_id for pool memory, the chunks for VMM memory
                        * (version 3) */
  int64_t shape[GW_MAX_DIMS], strides[GW_MAX_DIMS];
} gw__ipc_fields;

/* Whether ndim dims of shape and strides fit the handle's geometry bytes for memory shared
 * as `kind` (GW__IPC_LEGACY; GW__IPC_POOL and GW__IPC_VMM: version 3). */
bool gw__ipc_geometry_fits(int kind, int ndim, const int64_t *shape, const int64_t *strides);
/* The handle of f, whose geometry must fit (gw__ipc_geometry_fits). */
void gw__ipc_handle_encode(const gw__ipc_fields *f, gw_ipc_handle *out);
/* The fields of h after every check that needs no runtime (GW_EINVAL naming what is wrong
 * with h otherwise); *out is written only on success. */
gw_status gw__ipc_handle_decode(const gw_ipc_handle *h, gw__ipc_fields *out);

#endif
