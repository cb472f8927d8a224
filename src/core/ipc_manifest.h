/*
 * VMM memory of more chunks than a handle's runtime bytes hold (ipc_manifest.c, docs/IPC.md
 * "VMM memory"): the chunk list goes in a sealed memfd, the manifest, which the handle
 * names by its descriptor number and a digest of its contents.
 */
#ifndef GW_CORE_IPC_MANIFEST_H
#define GW_CORE_IPC_MANIFEST_H

#include "ipc_handle.h"

/* Bytes of one manifest entry: the chunk's descriptor number in the exporter (int32) and
 * its size in 4 KiB units (uint32), little-endian, as the handle's own chunk list. */
#define GW__IPC_MANIFEST_ENTRY 8

/* The digest of sh's chunk list (descriptor numbers and sizes), never zero: the handle
 * carries it, the importer checks the manifest it takes against it, and the import table
 * keys the span by it (as it keys a short list by the list itself). */
uint64_t gw__ipc_manifest_digest(const gw__ipc_share *sh);
/* Export: this process's manifest of sh's chunks (sh->nchunks > the handle's own room), in
 * sh->manifest_fd, and its digest in sh->manifest_digest: the one made for the same span
 * before where its list is the same, else a new one (replacing, closed, the span base's
 * older one). Kept open for the life of the process or until replaced so: the chunk
 * descriptors' rule in the CUDA backend. */
gw_status gw__ipc_manifest_export(gw__ipc_share *sh);
/* Import: read and check the manifest `fd` (this process's copy) for d's handle: a sealed
 * memfd of exactly d->share.nchunks entries whose digest is the handle's, every size a
 * non-zero multiple of 4 KiB, the sizes adding up to the extent. Fills chunk_fd and
 * chunk_bytes (d->share.nchunks each); GW_EINVAL naming what is wrong otherwise. */
gw_status gw__ipc_manifest_read(int fd, const gw__ipc_fields *d, int *chunk_fd,
                                uint64_t *chunk_bytes);

#endif
