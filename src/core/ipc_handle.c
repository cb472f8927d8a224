/*
 * The IPC handle's format (ipc_handle.h): what gw_ipc_export writes and gw_ipc_open reads
 * (ipc.c), through the shared codecs (codec.h).
 *
 * Handle layout (GW_IPC_HANDLE_BYTES = 256, integers little-endian; docs/IPC.md):
 *     0   4  magic "GWIP"
 *     4   1  version (IPC_VERSION)
 *     5   1  backend (gw_backend)
 *     6   1  dtype
 *     7   1  ndim
 *     8   1  flags (FLAG_READONLY)
 *     9   4  device: the exporter's ordinal (int32), used only where the UUID is unknown
 *    13   4  exporter's pid
 *    17   8  exporter's address-space nonce (random, drawn at its first use of IPC): with
 *            the pid it tells the exporting process from a reused pid and from the same
 *            process after an exec (same pid, same start time, another address space)
 *    25   8  allocation id (the runtime's buffer id; 0 where it has none)
 *    33   8  allocation base in the exporter
 *    41   8  allocation extent (bytes)
 *    49   8  byte offset of element 0 from the base
 *    57  16  the device's UUID (caps.device_uuid; all zero when the runtime does not say):
 *            the importer maps it to its own ordinal (CUDA_VISIBLE_DEVICES renumbers)
 *    73  64  the runtime's IPC handle (GW__IPC_RT_BYTES)
 *   137   1  length L of the geometry (<= GEOM_BYTES)
 *   138 114  geometry: shape as unsigned LEB128, then strides as zigzag LEB128 (elements);
 *            the bytes after L are zero
 *   252   4  CRC-32 (ISO-HDLC, as zlib's crc32) of bytes 0..251
 * Version 3, memory of a stream-ordered pool with a POSIX file descriptor handle type
 * (written only for it: legacy memory keeps writing version 2, which stays readable):
 * bytes 0..137 as above, the runtime's bytes being the pointer's export data
 * (cudaMemPoolExportPointer), then
 *   138 101  geometry (as above, 101 bytes)
 *   239   1  kind: 1 = pool
 *   240   4  the pool's descriptor in the exporting process (int32), which the importer
 *            takes with pidfd_getfd
 *   244   8  the pool's id in the exporting process (never reused there)
 *   252   4  CRC-32 of bytes 0..251
 * Version 3, VMM memory made with a POSIX file descriptor handle type (kind 2): base and
 * extent are the span of the chunks covering the array (mapped back to back), the
 * runtime's 64 bytes hold per chunk (at most GW__IPC_VMM_HANDLE_CHUNKS = 8) its descriptor in
 * the exporting process (int32) and its size in 4 KiB units (uint32), zero after the
 * last; 240 holds the chunk count, 244 the first chunk's id. The sizes must add up to the
 * extent. A span of more chunks (9 to GW__IPC_VMM_MAX_CHUNKS = 1024) lists them in a
 * manifest (ipc_manifest.c: a sealed memfd of 8-byte entries as above): the runtime's
 * bytes then hold the manifest's descriptor in the exporting process (int32) at 73 and
 * the digest of its contents (uint64) at 77, zero after; 240 holds the chunk count.
 * Sixteen dims of two int64 do not fit beside the rest; varints do for any array of up to
 * 6 dims (6 x (9 + 10) = 114 bytes) and for up to 16 when the values are small. What does
 * not fit is refused at export (GW_ENOTSUP), never truncated. Version 1 (device by
 * ordinal, identity by pid and start time) is refused with the reason: its ordinal is the
 * exporter's numbering, which the importer cannot check.
 */
#include "ipc_handle.h"

#include "codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define IPC_MAGIC "GWIP"
#define IPC_VERSION 3
#define IPC_VERSION_LEGACY 2
#define FLAG_READONLY 1u
#define OFF_DEVICE 9
#define OFF_PID 13
#define OFF_NONCE 17
#define OFF_ALLOC_ID 25
#define OFF_BASE 33
#define OFF_EXTENT 41
#define OFF_OFFSET 49
#define OFF_UUID 57
#define OFF_RT 73
#define OFF_GEOM_LEN 137
#define OFF_GEOM 138
#define GEOM_BYTES GW__IPC_GEOM_BYTES
#define OFF_CHECK 252
#define OFF_KIND 239
#define OFF_POOL_FD 240
#define OFF_POOL_ID 244
#define GEOM_BYTES_V3 GW__IPC_GEOM_BYTES_V3
_Static_assert(OFF_UUID + 16 == OFF_RT && OFF_RT + GW__IPC_RT_BYTES == OFF_GEOM_LEN &&
                   OFF_GEOM + GEOM_BYTES == OFF_CHECK && OFF_CHECK + 4 == GW_IPC_HANDLE_BYTES,
               "the handle's fields tile its 256 bytes");
_Static_assert(OFF_GEOM + GEOM_BYTES_V3 == OFF_KIND && OFF_POOL_ID + 8 == OFF_CHECK,
               "version 3's fields tile its 256 bytes");

static int geom_bytes(int kind) { return kind == GW__IPC_LEGACY ? GEOM_BYTES : GEOM_BYTES_V3; }

/* ---- encode ---- */

/* The shape, then the strides, from at; false where they do not fit before end. */
static bool put_geometry(unsigned char **at, const unsigned char *end, int ndim,
                         const int64_t *shape, const int64_t *strides) {
  bool fits = true;
  for (int i = 0; i < ndim && fits; i++) fits = gw__put_varint(at, end, (uint64_t)shape[i]);
  for (int i = 0; i < ndim && fits; i++) fits = gw__put_varint(at, end, gw__zigzag(strides[i]));
  return fits;
}

bool gw__ipc_geometry_fits(int kind, int ndim, const int64_t *shape, const int64_t *strides) {
  unsigned char geom[GEOM_BYTES], *at = geom;
  return put_geometry(&at, geom + geom_bytes(kind), ndim, shape, strides);
}

void gw__ipc_handle_encode(const gw__ipc_fields *f, gw_ipc_handle *out) {
  unsigned char b[GW_IPC_HANDLE_BYTES] = {0};
  unsigned char *at = b + OFF_GEOM;
  (void)put_geometry(&at, at + geom_bytes(f->share.kind), f->ndim, f->shape, f->strides);
  b[OFF_GEOM_LEN] = (unsigned char)(at - (b + OFF_GEOM));
  memcpy(b, IPC_MAGIC, 4);
  b[4] = f->share.kind == GW__IPC_LEGACY ? IPC_VERSION_LEGACY : IPC_VERSION;
  if (f->share.kind != GW__IPC_LEGACY) {
    b[OFF_KIND] = (unsigned char)f->share.kind;
    gw__put_le32(b + OFF_POOL_FD,
                 (uint32_t)(f->share.kind == GW__IPC_VMM ? f->share.nchunks : f->share.fd));
    gw__put_le64(b + OFF_POOL_ID, f->share.pool_id);
  }
  b[5] = (unsigned char)f->backend;
  b[6] = (unsigned char)f->dtype;
  b[7] = (unsigned char)f->ndim;
  b[8] = f->readonly ? FLAG_READONLY : 0;
  gw__put_le32(b + OFF_DEVICE, (uint32_t)f->device);
  gw__put_le32(b + OFF_PID, (uint32_t)f->pid);
  gw__put_le64(b + OFF_NONCE, f->nonce);
  gw__put_le64(b + OFF_ALLOC_ID, f->alloc_id);
  gw__put_le64(b + OFF_BASE, f->base);
  gw__put_le64(b + OFF_EXTENT, f->extent);
  gw__put_le64(b + OFF_OFFSET, f->offset);
  memcpy(b + OFF_UUID, f->uuid, 16);
  memcpy(b + OFF_RT, f->rt, GW__IPC_RT_BYTES);
  gw__put_le32(b + OFF_CHECK, gw__crc32(b, OFF_CHECK));
  memcpy(out->bytes, b, sizeof b);
}

/* ---- decode ---- */

static gw_status bad(const char *why, ...) __attribute__((format(printf, 1, 2)));
static gw_status bad(const char *why, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, why);
  vsnprintf(msg, sizeof msg, why, ap);
  va_end(ap);
  return gw__fail(GW_EINVAL, "h: %s", msg);
}

/* Magic, version and check value: a handle of this format, whole. */
static gw_status check_envelope(const unsigned char *b) {
  if (memcmp(b, IPC_MAGIC, 4) != 0)
    return bad("not a gpuwrap IPC handle (magic %02x%02x%02x%02x, want \"GWIP\")", b[0], b[1], b[2],
               b[3]);
  if (b[4] > IPC_VERSION)
    return bad("handle version %d is newer than this gpuwrap's %d (export and open with the "
               "same gpuwrap version)",
               b[4], IPC_VERSION);
  if (b[4] == 0) return bad("handle version 0 does not exist (damaged handle)");
  if (b[4] < IPC_VERSION_LEGACY)
    return bad("handle version %d is older than this gpuwrap's %d and no longer opened: it "
               "names the device by the exporter's ordinal, which this process may number "
               "differently (CUDA_VISIBLE_DEVICES); export it again with this gpuwrap",
               b[4], IPC_VERSION);
  uint32_t want = gw__get_le32(b + OFF_CHECK), got = gw__crc32(b, OFF_CHECK);
  if (want != got)
    return bad("check value %08x does not match the contents (%08x): damaged or truncated "
               "handle",
               want, got);
  return GW_OK;
}

/* The fixed fields, each checked on its own. */
static gw_status read_fields(const unsigned char *b, gw__ipc_fields *r) {
  r->backend = (gw_backend)b[5];
  if (r->backend != GW_BACKEND_CPU && r->backend != GW_BACKEND_CUDA && r->backend != GW_BACKEND_HIP)
    return bad("backend %d is not cpu, cuda or hip", b[5]);
  r->dtype = (gw_dtype)b[6];
  if (b[6] >= GW_DTYPE_COUNT) return bad("dtype %d is not a gw_dtype", b[6]);
  r->ndim = b[7];
  if (r->ndim > GW_MAX_DIMS) return bad("ndim %d exceeds %d", r->ndim, GW_MAX_DIMS);
  if (b[8] & ~FLAG_READONLY) return bad("unknown flags 0x%x", b[8]);
  r->readonly = b[8] & FLAG_READONLY;
  r->device = (int32_t)gw__get_le32(b + OFF_DEVICE);
  if (r->device < 0) return bad("device %d is negative", r->device);
  r->pid = gw__get_le32(b + OFF_PID);
  r->nonce = gw__get_le64(b + OFF_NONCE);
  r->alloc_id = gw__get_le64(b + OFF_ALLOC_ID);
  r->base = gw__get_le64(b + OFF_BASE);
  r->extent = gw__get_le64(b + OFF_EXTENT);
  r->offset = gw__get_le64(b + OFF_OFFSET);
  memcpy(r->uuid, b + OFF_UUID, 16);
  memcpy(r->rt, b + OFF_RT, GW__IPC_RT_BYTES);
  memset(&r->share, 0, sizeof r->share);
  if (b[4] == IPC_VERSION && b[OFF_KIND] == GW__IPC_VMM) {
    r->share.kind = GW__IPC_VMM;
    r->share.nchunks = (int32_t)gw__get_le32(b + OFF_POOL_FD);
    r->share.pool_id = gw__get_le64(b + OFF_POOL_ID);
    if (r->share.nchunks < 1 || r->share.nchunks > GW__IPC_VMM_MAX_CHUNKS)
      return bad("VMM chunk count %d is not 1 to %d", r->share.nchunks, GW__IPC_VMM_MAX_CHUNKS);
    if (r->share.pool_id == 0) return bad("VMM chunk id is zero (damaged handle)");
    if (r->share.nchunks > GW__IPC_VMM_HANDLE_CHUNKS) {
      /* The chunks are listed in the manifest (ipc_manifest.c), read at open. */
      r->share.manifest_fd = (int32_t)gw__get_le32(r->rt);
      r->share.manifest_digest = gw__get_le64(r->rt + 4);
      if (r->share.manifest_fd < 0)
        return bad("VMM manifest descriptor %d is negative", r->share.manifest_fd);
      if (r->share.manifest_digest == 0) return bad("VMM manifest digest is zero (damaged handle)");
      for (int i = 12; i < GW__IPC_RT_BYTES; i++)
        if (r->rt[i]) return bad("byte %d after the VMM manifest's digest is not zero", OFF_RT + i);
    }
    uint64_t total = r->share.nchunks > GW__IPC_VMM_HANDLE_CHUNKS ? r->extent : 0;
    for (int i = 0; r->share.nchunks <= GW__IPC_VMM_HANDLE_CHUNKS && i < GW__IPC_VMM_HANDLE_CHUNKS;
         i++) {
      int32_t fd = (int32_t)gw__get_le32(r->rt + 8 * i);
      uint64_t bytes = (uint64_t)gw__get_le32(r->rt + 8 * i + 4) << 12;
      if (i >= r->share.nchunks) {
        if (fd || bytes) return bad("VMM chunk %d after the last is not zero", i);
        continue;
      }
      if (fd < 0 || bytes == 0)
        return bad("VMM chunk %d: descriptor %d, %llu bytes", i, fd, (unsigned long long)bytes);
      r->share.chunk_fd[i] = fd;
      r->share.chunk_bytes[i] = bytes;
      total += bytes;
    }
    if (total != r->extent)
      return bad("VMM chunks' %llu bytes are not the extent %llu", (unsigned long long)total,
                 (unsigned long long)r->extent);
  } else if (b[4] == IPC_VERSION) {
    if (b[OFF_KIND] != GW__IPC_POOL)
      return bad("version 3 kind %d is not 1 (pool memory) nor 2 (VMM memory)", b[OFF_KIND]);
    r->share.kind = GW__IPC_POOL;
    r->share.fd = (int32_t)gw__get_le32(b + OFF_POOL_FD);
    r->share.pool_id = gw__get_le64(b + OFF_POOL_ID);
    if (r->share.fd < 0) return bad("pool descriptor %d is negative", r->share.fd);
    if (r->share.pool_id == 0) return bad("pool id is zero (damaged handle)");
  }
  if (r->pid == 0 || r->pid > INT32_MAX)
    return bad("exporter pid %llu is not a pid", (unsigned long long)r->pid);
  if (r->nonce == 0) return bad("exporter nonce is zero (damaged handle)");
  if (r->base == 0 || r->extent == 0 || r->extent > PTRDIFF_MAX ||
      r->base > UINTPTR_MAX - r->extent)
    return bad("allocation [%#llx, +%llu) is not a valid range", (unsigned long long)r->base,
               (unsigned long long)r->extent);
  return GW_OK;
}

/* Shape and strides, and nothing but zeros after them. */
static gw_status read_geometry(const unsigned char *b, gw__ipc_fields *r) {
  unsigned len = b[OFF_GEOM_LEN], room = (unsigned)geom_bytes(r->share.kind);
  if (len > room) return bad("geometry length %u exceeds %u", len, room);
  const unsigned char *at = b + OFF_GEOM, *end = at + len;
  for (int i = 0; i < 2 * r->ndim; i++) {
    uint64_t v;
    if (!gw__get_varint(&at, end, &v))
      return bad("geometry: value %d of %d is cut short", i, 2 * r->ndim);
    if (i < r->ndim) {
      if (v > INT64_MAX) return bad("shape[%d] %llu exceeds int64", i, (unsigned long long)v);
      r->shape[i] = (int64_t)v;
    } else {
      r->strides[i - r->ndim] = gw__unzigzag(v);
    }
  }
  if (at != end) return bad("geometry: %d bytes left over after %d dims", (int)(end - at), r->ndim);
  for (const unsigned char *z = end; z < b + OFF_GEOM + room; z++)
    if (*z) return bad("byte %d after the geometry is not zero", (int)(z - b));
  return GW_OK;
}

/* The elements within the allocation, element 0 aligned. */
static gw_status check_extent(const gw__ipc_fields *r) {
  int64_t lo, hi, numel;
  gw_status s = gw__span(r->ndim, r->shape, r->strides, gw__dtype_size(r->dtype), &lo, &hi, &numel);
  if (s != GW_OK) return bad("shape/strides: %s", gw_last_error());
  if (numel > 0 && (r->offset > r->extent || (lo < 0 && (uint64_t)-lo > r->offset) ||
                    (uint64_t)hi > r->extent - r->offset))
    return bad("the elements [%lld, %lld) from offset %llu reach outside the allocation's %llu "
               "bytes",
               (long long)lo, (long long)hi, (unsigned long long)r->offset,
               (unsigned long long)r->extent);
  if (r->offset > r->extent)
    return bad("offset %llu is past the allocation's %llu bytes", (unsigned long long)r->offset,
               (unsigned long long)r->extent);
  size_t align = gw__dtype_size(r->dtype); /* as gw_wrap: complex aligns like its parts */
  if (r->dtype == GW_COMPLEX64 || r->dtype == GW_COMPLEX128) align /= 2;
  if ((r->base + r->offset) % align)
    return bad("element 0 at offset %llu is misaligned for %s", (unsigned long long)r->offset,
               gw_dtype_name(r->dtype));
  return GW_OK;
}

gw_status gw__ipc_handle_decode(const gw_ipc_handle *h, gw__ipc_fields *out) {
  const unsigned char *b = h->bytes;
  gw__ipc_fields r;
  gw_status s = check_envelope(b);
  if (s == GW_OK) s = read_fields(b, &r);
  if (s == GW_OK) s = read_geometry(b, &r);
  if (s == GW_OK) s = check_extent(&r);
  if (s == GW_OK) *out = r;
  return s;
}
