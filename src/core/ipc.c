/*
 * Memory from another process: the handle (gw_ipc_export / gw_ipc_open) and the
 * process-wide import table.
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
 * Sixteen dims of two int64 do not fit beside the rest; varints do for any array of up to
 * 6 dims (6 x (9 + 10) = 114 bytes) and for up to 16 when the values are small. What does
 * not fit is refused at export (GW_ENOTSUP), never truncated. Version 1 (device by
 * ordinal, identity by pid and start time) is refused with the reason: its ordinal is the
 * exporter's numbering, which the importer cannot check.
 *
 * The import table holds one entry per allocation mapped from another process, keyed by
 * (backend, device, exporter pid and nonce, allocation id, base, extent, the runtime's
 * handle bytes: where the runtime has no allocation id, as HIP, a new allocation at the
 * same address differs there, as in UCX's cuda_ipc cache): the runtimes
 * refuse a second open of one allocation in a process, and a mapping must be closed
 * exactly once, so every open of any handle of the allocation shares the entry and takes a
 * reference, and the last opened array's release closes it. One mutex: opens and closes
 * are runtime calls of milliseconds, and an open of an allocation already mapped is a
 * look-up in a short list.
 */
#include "internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define IPC_MAGIC "GWIP"
#define IPC_VERSION 2
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
#define GEOM_BYTES 114
#define OFF_CHECK 252
_Static_assert(OFF_UUID + 16 == OFF_RT && OFF_RT + GW__IPC_RT_BYTES == OFF_GEOM_LEN &&
                   OFF_GEOM + GEOM_BYTES == OFF_CHECK && OFF_CHECK + 4 == GW_IPC_HANDLE_BYTES,
               "the handle's fields tile its 256 bytes");

/* ---- CRC-32 (reflected, polynomial 0xEDB88320) ---- */
/* Eight bytes a step through eight tables (slicing-by-8): a byte-at-a-time loop is one
 * table load per byte in a dependent chain, a good part of an open of an already-mapped
 * allocation, whose target is a microsecond. */

static uint32_t crc_table[8][256];

__attribute__((constructor)) static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = le32(p) ^ c, hi = le32(p + 4);
    c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
        crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
        crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
  }
  for (; n > 0; n--, p++) c = crc_table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* ---- little-endian fields ---- */

static void put_u64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}
static void put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

/* ---- geometry varints ---- */

/* Append v; false when it does not fit in [*at, end). */
static bool put_varint(unsigned char **at, const unsigned char *end, uint64_t v) {
  do {
    if (*at == end) return false;
    unsigned char b = v & 0x7F;
    v >>= 7;
    *(*at)++ = (unsigned char)(b | (v ? 0x80 : 0));
  } while (v);
  return true;
}

/* Read one; false for a truncated or over-long (more than 64 bits) varint. */
static bool get_varint(const unsigned char **at, const unsigned char *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*at == end) return false;
    unsigned char b = *(*at)++;
    if (shift == 63 && (b & 0x7E)) return false; /* bits past 64 */
    v |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return true;
    }
  }
  return false;
}

static uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* ---- who we are ---- */

/* The exporting process is (pid, nonce): a 64-bit random number drawn at this address
 * space's first use of IPC. The pid alone is reused by another process, and the pid with
 * the start time (what version 1 used) is also the same process after an exec, whose
 * fresh address space has none of the exporter's memory; static storage does not survive
 * an exec, so a nonce kept in it does not either, and no marker on disk or in /proc has to
 * be trusted. A forked child forgets both (gw__ipc_child) and draws its own. */
static _Atomic(uint64_t) self_pid, self_nonce;

static uint64_t draw_nonce(void) {
  uint64_t n = 0;
  if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n) {
    /* No getrandom (an old kernel, a seccomp filter): the clock, the pid and this
     * address space's layout (ASLR), mixed; still fresh after an exec. */
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    n = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ ((uint64_t)getpid() << 44) ^
        (uint64_t)(uintptr_t)&n ^ ((uint64_t)(uintptr_t)&self_nonce << 17);
    n *= 0x9E3779B97F4A7C15ull;
  }
  return n ? n : 1; /* 0 is "not drawn yet" */
}

/* This process's identity, read once: getpid is a system call (glibc no longer caches it),
 * a good part of an open of an already-mapped allocation. A forked child forgets it
 * (gw__ipc_child, from the fork handler) and makes its own at its first use. Two threads
 * making it at once may draw two nonces: the one stored last wins, so a handle exported
 * with the other would not be recognised; the compare-exchange keeps the first. */
static void identity(uint64_t *pid, uint64_t *nonce) {
  uint64_t me = atomic_load_explicit(&self_pid, memory_order_acquire);
  if (me == 0) {
    uint64_t none = 0, mine = draw_nonce();
    atomic_compare_exchange_strong_explicit(&self_nonce, &none, mine, memory_order_relaxed,
                                            memory_order_relaxed);
    me = (uint64_t)getpid();
    atomic_store_explicit(&self_pid, me, memory_order_release);
  }
  *pid = me;
  *nonce = atomic_load_explicit(&self_nonce, memory_order_relaxed);
}

/* ---- the decoded handle ---- */

typedef struct {
  gw_backend backend;
  gw_dtype dtype;
  int ndim;
  bool readonly;
  int device; /* the exporter's ordinal */
  uint64_t pid, nonce, alloc_id, base, extent, offset;
  unsigned char uuid[16];
  unsigned char rt[GW__IPC_RT_BYTES];
  int64_t shape[GW_MAX_DIMS], strides[GW_MAX_DIMS];
} decoded;

static gw_status bad(const char *why, ...) __attribute__((format(printf, 1, 2)));
static gw_status bad(const char *why, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, why);
  vsnprintf(msg, sizeof msg, why, ap);
  va_end(ap);
  return gw__fail(GW_EINVAL, "h: %s", msg);
}

/* Everything that can be checked without the runtime; *d is filled only on success. */
static gw_status decode(const gw_ipc_handle *h, decoded *d) {
  const unsigned char *b = h->bytes;
  if (memcmp(b, IPC_MAGIC, 4) != 0)
    return bad("not a gpuwrap IPC handle (magic %02x%02x%02x%02x, want \"GWIP\")", b[0], b[1], b[2],
               b[3]);
  if (b[4] > IPC_VERSION)
    return bad("handle version %d is newer than this gpuwrap's %d (export and open with the "
               "same gpuwrap version)",
               b[4], IPC_VERSION);
  if (b[4] == 0) return bad("handle version 0 does not exist (damaged handle)");
  if (b[4] < IPC_VERSION)
    return bad("handle version %d is older than this gpuwrap's %d and no longer opened: it "
               "names the device by the exporter's ordinal, which this process may number "
               "differently (CUDA_VISIBLE_DEVICES); export it again with this gpuwrap",
               b[4], IPC_VERSION);
  uint32_t want = get_u32(b + OFF_CHECK), got = crc32_of(b, OFF_CHECK);
  if (want != got)
    return bad("check value %08x does not match the contents (%08x): damaged or truncated "
               "handle",
               want, got);
  decoded r;
  r.backend = (gw_backend)b[5];
  if (r.backend != GW_BACKEND_CPU && r.backend != GW_BACKEND_CUDA && r.backend != GW_BACKEND_HIP)
    return bad("backend %d is not cpu, cuda or hip", b[5]);
  r.dtype = (gw_dtype)b[6];
  if (b[6] >= GW_DTYPE_COUNT) return bad("dtype %d is not a gw_dtype", b[6]);
  r.ndim = b[7];
  if (r.ndim > GW_MAX_DIMS) return bad("ndim %d exceeds %d", r.ndim, GW_MAX_DIMS);
  if (b[8] & ~FLAG_READONLY) return bad("unknown flags 0x%x", b[8]);
  r.readonly = b[8] & FLAG_READONLY;
  r.device = (int32_t)get_u32(b + OFF_DEVICE);
  if (r.device < 0) return bad("device %d is negative", r.device);
  r.pid = get_u32(b + OFF_PID);
  r.nonce = get_u64(b + OFF_NONCE);
  r.alloc_id = get_u64(b + OFF_ALLOC_ID);
  r.base = get_u64(b + OFF_BASE);
  r.extent = get_u64(b + OFF_EXTENT);
  r.offset = get_u64(b + OFF_OFFSET);
  memcpy(r.uuid, b + OFF_UUID, 16);
  memcpy(r.rt, b + OFF_RT, GW__IPC_RT_BYTES);
  if (r.pid == 0 || r.pid > INT32_MAX)
    return bad("exporter pid %llu is not a pid", (unsigned long long)r.pid);
  if (r.nonce == 0) return bad("exporter nonce is zero (damaged handle)");
  if (r.base == 0 || r.extent == 0 || r.extent > PTRDIFF_MAX || r.base > UINTPTR_MAX - r.extent)
    return bad("allocation [%#llx, +%llu) is not a valid range", (unsigned long long)r.base,
               (unsigned long long)r.extent);
  unsigned len = b[OFF_GEOM_LEN];
  if (len > GEOM_BYTES) return bad("geometry length %u exceeds %d", len, GEOM_BYTES);
  const unsigned char *at = b + OFF_GEOM, *end = at + len;
  for (int i = 0; i < 2 * r.ndim; i++) {
    uint64_t v;
    if (!get_varint(&at, end, &v))
      return bad("geometry: value %d of %d is cut short", i, 2 * r.ndim);
    if (i < r.ndim) {
      if (v > INT64_MAX) return bad("shape[%d] %llu exceeds int64", i, (unsigned long long)v);
      r.shape[i] = (int64_t)v;
    } else {
      r.strides[i - r.ndim] = unzigzag(v);
    }
  }
  if (at != end) return bad("geometry: %d bytes left over after %d dims", (int)(end - at), r.ndim);
  for (const unsigned char *z = end; z < b + OFF_CHECK; z++)
    if (*z) return bad("byte %d after the geometry is not zero", (int)(z - b));
  int64_t lo, hi, numel;
  gw_status s = gw__span(r.ndim, r.shape, r.strides, gw__dtype_size(r.dtype), &lo, &hi, &numel);
  if (s != GW_OK) return bad("shape/strides: %s", gw_last_error());
  if (numel > 0 && (r.offset > r.extent || (lo < 0 && (uint64_t)-lo > r.offset) ||
                    (uint64_t)hi > r.extent - r.offset))
    return bad("the elements [%lld, %lld) from offset %llu reach outside the allocation's %llu "
               "bytes",
               (long long)lo, (long long)hi, (unsigned long long)r.offset,
               (unsigned long long)r.extent);
  if (r.offset > r.extent)
    return bad("offset %llu is past the allocation's %llu bytes", (unsigned long long)r.offset,
               (unsigned long long)r.extent);
  size_t align = gw__dtype_size(r.dtype); /* as gw_wrap: complex aligns like its parts */
  if (r.dtype == GW_COMPLEX64 || r.dtype == GW_COMPLEX128) align /= 2;
  if ((r.base + r.offset) % align)
    return bad("element 0 at offset %llu is misaligned for %s", (unsigned long long)r.offset,
               gw_dtype_name(r.dtype));
  *d = r;
  return GW_OK;
}

/* ---- export ---- */

gw_status gw_ipc_export(gw_array *a, gw_ipc_handle *out) {
  if (!a) return gw__fail(GW_EINVAL, "a: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  const gw_array *root = a->root ? a->root : a;
  gw_context *ctx = a->ctx;
  if (root->kind != GW_MEM_DEVICE)
    return gw__fail(GW_ENOTSUP,
                    "a: %s memory; only device memory can be exported to another process "
                    "(the runtimes' IPC maps device allocations; host memory is shared with "
                    "shm/mmap and wrapped on the other side)",
                    gw_memkind_name(root->kind));
  if (!ctx->ops->ipc_export)
    return gw__fail(GW_ENOTSUP, "a: the %s backend cannot export memory", ctx->ops->name);
  if (!a->dev0)
    return gw__fail(GW_EINVAL, "a: has no memory to export (no elements, NULL address)");
  unsigned char b[GW_IPC_HANDLE_BYTES] = {0};
  /* The geometry first: what does not fit is refused before any runtime call. */
  unsigned char *at = b + OFF_GEOM;
  const unsigned char *end = at + GEOM_BYTES;
  bool fits = true;
  for (int i = 0; i < a->ndim && fits; i++) fits = put_varint(&at, end, (uint64_t)a->shape[i]);
  for (int i = 0; i < a->ndim && fits; i++) fits = put_varint(&at, end, zigzag(a->strides[i]));
  if (!fits)
    return gw__fail(GW_ENOTSUP,
                    "a: its %d dims' shape and strides do not fit the %d bytes a handle has "
                    "for them (any array of up to 6 dims fits, more when the extents and "
                    "strides are small); export a reshaped or smaller-dimensional view",
                    a->ndim, GEOM_BYTES);
  b[OFF_GEOM_LEN] = (unsigned char)(at - (b + OFF_GEOM));
  /* The allocation holding element 0: views and interior pointers export its base plus
   * their offset (the runtimes map whole allocations: HIP maps an interior pointer's
   * handle at the allocation's base). */
  gw_ptrinfo info;
  gw_status s = ctx->ops->query(ctx->state, a->dev0, &info);
  if (s != GW_OK) return s;
  if (info.kind != GW_MEM_DEVICE || !info.base || !info.extent)
    return gw__fail(GW_ENOTSUP, "a: %p is %s memory of no known device allocation now",
                    (void *)a->dev0, gw_memkind_name(info.kind));
  int64_t lo, hi, numel;
  s = gw__span(a->ndim, a->shape, a->strides, gw__dtype_size(a->dtype), &lo, &hi, &numel);
  if (s != GW_OK) return s;
  uint64_t offset = (uint64_t)(a->dev0 - (char *)info.base);
  if (numel > 0 && ((lo < 0 && (uint64_t)-lo > offset) || (uint64_t)hi > info.extent - offset))
    return gw__fail(GW_ERANGE, "a: its elements reach outside the allocation [%p, +%zu)", info.base,
                    info.extent);
  uint64_t alloc_id = 0;
  s = ctx->ops->ipc_export(ctx->state, info.base, info.extent, info.device, b + OFF_RT, &alloc_id);
  if (s != GW_OK) return s;
  /* The device's UUID: the context's where the memory is its device's, else the backend's
   * (zero where neither can say; the importer then goes by the ordinal). */
  unsigned char uuid[16] = {0};
  if (info.device == ctx->device)
    memcpy(uuid, ctx->caps.device_uuid, 16);
  else if (ctx->ops->device_uuid && ctx->ops->device_uuid(info.device, uuid) != GW_OK)
    memset(uuid, 0, 16);
  uint64_t pid, nonce;
  identity(&pid, &nonce);
  memcpy(b, IPC_MAGIC, 4);
  b[4] = IPC_VERSION;
  b[5] = (unsigned char)ctx->backend;
  b[6] = (unsigned char)a->dtype;
  b[7] = (unsigned char)a->ndim;
  b[8] = a->readonly ? FLAG_READONLY : 0;
  put_u32(b + OFF_DEVICE, (uint32_t)info.device);
  put_u32(b + OFF_PID, (uint32_t)pid);
  put_u64(b + OFF_NONCE, nonce);
  put_u64(b + OFF_ALLOC_ID, alloc_id);
  put_u64(b + OFF_BASE, (uint64_t)(uintptr_t)info.base);
  put_u64(b + OFF_EXTENT, info.extent);
  put_u64(b + OFF_OFFSET, offset);
  memcpy(b + OFF_UUID, uuid, 16);
  put_u32(b + OFF_CHECK, crc32_of(b, OFF_CHECK));
  memcpy(out->bytes, b, sizeof b);
  return GW_OK;
}

/* ---- the import table ---- */

struct gw__ipc_map {
  struct gw__ipc_map *next;
  const gw__backend_ops *ops;
  gw_context *ctx; /* the context that opened it (retained: close needs its state) */
  int ctx_ref;
  int device; /* this process's ordinal */
  uint64_t pid, nonce, alloc_id, base, extent;
  unsigned char rt[GW__IPC_RT_BYTES]; /* the runtime's handle it was opened with */
  char *local;                        /* the allocation's base in this process */
  long refs;                          /* opened arrays (roots) on it; lock */
  bool listed;                        /* in the table (found by opens); lock */
  bool forked; /* inherited by a forked child: the parent's runtime's, never closed here */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw__ipc_map *table; /* lock */

void gw__ipc_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }

/* A forked child: the mappings are the parent's runtime's (on CUDA the child cannot use
 * them, and closing them is not its business). Arrays the child inherited keep their
 * entries until released, but nothing is closed for them and new opens map anew (the CPU
 * model forgets its own list of them alike, cpu_ipc.c). The child is not the exporter of
 * the parent's handles either: it draws its own identity. */
void gw__ipc_child(void) {
  atomic_store_explicit(&self_pid, 0, memory_order_relaxed);
  atomic_store_explicit(&self_nonce, 0, memory_order_release);
  for (struct gw__ipc_map *m = table; m; m = m->next) {
    m->listed = false;
    m->forked = true;
  }
  table = NULL;
  pthread_mutex_unlock(&lock);
}

/* The entry of the handle's allocation. One of the same exporter and base whose allocation
 * id, extent or runtime handle differs is of a released allocation whose address a new one
 * reuses (stale): it leaves the table (its arrays keep it until released, and its
 * close), so the new allocation is mapped anew rather than served the old mapping. */
static struct gw__ipc_map *find(const gw__backend_ops *ops, const decoded *d, int device) {
  for (struct gw__ipc_map **p = &table; *p;) {
    struct gw__ipc_map *m = *p;
    if (m->ops != ops || m->device != device || m->pid != d->pid || m->nonce != d->nonce ||
        m->base != d->base) {
      p = &m->next;
      continue;
    }
    if (m->alloc_id == d->alloc_id && m->extent == d->extent &&
        memcmp(m->rt, d->rt, GW__IPC_RT_BYTES) == 0)
      return m;
    *p = m->next; /* stale */
    m->listed = false;
  }
  return NULL;
}

static void unlink_entry(struct gw__ipc_map *m) {
  for (struct gw__ipc_map **p = &table; *p; p = &(*p)->next)
    if (*p == m) {
      *p = m->next;
      return;
    }
}

void gw__ipc_unref(struct gw__ipc_map *m) {
  pthread_mutex_lock(&lock);
  if (--m->refs > 0) {
    pthread_mutex_unlock(&lock);
    return;
  }
  /* Closed under the lock: an open of the same allocation racing with this close finds it
   * either mapped or gone, never half-closed (the runtime would refuse the re-open). */
  if (m->listed) unlink_entry(m);
  if (!m->forked) {
    /* A close the runtime refuses is reported (the backend set gw_last_error; a release
     * cannot return it) and the entry goes all the same: kept, it would pin its context
     * for the life of the process. What the runtime kept is the runtime's; a later open
     * of the allocation asks the runtime again. */
    (void)m->ops->ipc_close(m->ctx->state, m->device, m->local);
  }
  gw__owned_drop(m->local);
  pthread_mutex_unlock(&lock);
  gw__context_release(m->ctx, m->ctx_ref);
  free(m);
}

/* A root array over [p, ...) of the handle's device memory, borrowed. */
static gw_status new_opened(gw_context *ctx, const decoded *d, int device, char *first,
                            gw_array **out) {
  gw_array *a = gw__new_root(ctx, d->dtype, d->ndim, d->shape, d->strides);
  if (!a) return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
  a->readonly = d->readonly;
  if (d->readonly) a->ro_why = GW__RO_ASKED;
  a->dev0 = first;
  a->kind = GW_MEM_DEVICE;
  a->device = device;
  *out = a;
  return GW_OK;
}

static void uuid_text(const unsigned char u[16], char out[37]) {
  static const int dash[4] = {4, 6, 8, 10};
  char *at = out;
  for (int i = 0, k = 0; i < 16; i++) {
    if (k < 4 && i == dash[k]) {
      *at++ = '-';
      k++;
    }
    at += sprintf(at, "%02x", u[i]);
  }
}

/* This process's ordinal of the handle's device: the one with the handle's UUID among the
 * devices it sees (the context's first: the common case, no runtime call); by the
 * exporter's ordinal where the UUID is unknown (all zero) on either side. */
static gw_status local_device(gw_context *ctx, const decoded *d, int *out) {
  int count = 0;
  gw_status s = ctx->ops->device_count(&count);
  if (s != GW_OK) return s;
  static const unsigned char zero[16];
  bool known = memcmp(d->uuid, zero, 16) != 0;
  if (known && memcmp(d->uuid, ctx->caps.device_uuid, 16) == 0) {
    *out = ctx->device;
    return GW_OK;
  }
  if (known && ctx->ops->device_uuid) {
    for (int i = 0; i < count; i++) {
      unsigned char u[16];
      s = ctx->ops->device_uuid(i, u);
      if (s != GW_OK) return s; /* it said why */
      if (memcmp(u, d->uuid, 16) == 0) {
        *out = i;
        return GW_OK;
      }
    }
    char text[37];
    uuid_text(d->uuid, text);
    return gw__fail(GW_ENODEV,
                    "h: exported from %s device %s (the exporter's device %d), which is none of "
                    "the %d device%s this process sees (a launcher's CUDA_VISIBLE_DEVICES?)",
                    ctx->ops->name, text, d->device, count, count == 1 ? "" : "s");
  }
  if (d->device >= count)
    return gw__fail(GW_ENODEV, "h: exported from %s device %d; this process sees %d device%s",
                    ctx->ops->name, d->device, count, count == 1 ? "" : "s");
  *out = d->device;
  return GW_OK;
}

/* An open in the exporting process: the memory must be a live device allocation with the
 * handle's base, extent, device and (where the runtime has one) allocation id, as export
 * found it; a released allocation, one that reuses its address, or a handle rewritten to
 * name other memory is refused rather than opened over whatever is there now. */
static gw_status check_own(gw_context *ctx, const decoded *d, int device) {
  void *base = (void *)(uintptr_t)d->base;
  gw_ptrinfo info;
  gw_status s = ctx->ops->query(ctx->state, base, &info);
  if (s != GW_OK) return s;
  if (info.kind != GW_MEM_DEVICE)
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process, but %p is %s memory now, not device memory "
                    "(the allocation was released, or the handle names other memory)",
                    base, gw_memkind_name(info.kind));
  if ((uintptr_t)info.base != d->base || info.extent != d->extent || info.device != device)
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process as the allocation [%p, +%llu) of device %d, but "
                    "the device allocation there now is [%p, +%zu) of device %d (released, "
                    "its address reused)",
                    base, (unsigned long long)d->extent, device, info.base, info.extent,
                    info.device);
  if (d->alloc_id == 0) return GW_OK; /* the runtime has no id (HIP): base and extent it is */
  unsigned char rt[GW__IPC_RT_BYTES];
  uint64_t id = 0;
  s = ctx->ops->ipc_export(ctx->state, base, (size_t)d->extent, device, rt, &id);
  if (s != GW_OK) {
    char why[256];
    snprintf(why, sizeof why, "%s", gw_last_error());
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process, but the allocation at %p cannot be "
                    "identified now: %s",
                    base, why);
  }
  if (id != d->alloc_id)
    return gw__fail(GW_EBACKEND,
                    "h: exported by this process as allocation %llu at %p, which was released: "
                    "allocation %llu reuses its address",
                    (unsigned long long)d->alloc_id, base, (unsigned long long)id);
  return GW_OK;
}

gw_status gw_ipc_open(gw_context *ctx, const gw_ipc_handle *h, gw_array **out) {
  if (!ctx) return gw__fail(GW_EINVAL, "ctx: NULL");
  if (!h) return gw__fail(GW_EINVAL, "h: NULL");
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  decoded d;
  gw_status s = decode(h, &d);
  if (s != GW_OK) return s;
  if (d.backend != ctx->backend)
    return gw__fail(GW_EINVAL, "h: exported by the %s backend; ctx is a %s context",
                    gw_backend_name(d.backend), ctx->ops->name);
  if (!ctx->ops->ipc_open)
    return gw__fail(GW_ENOTSUP, "ctx: the %s backend cannot open memory of another process",
                    ctx->ops->name);
  int device = -1;
  s = local_device(ctx, &d, &device);
  if (s != GW_OK) return s;

  uint64_t pid, nonce;
  identity(&pid, &nonce);
  gw_array *a = NULL;
  if (d.pid == pid && d.nonce == nonce) {
    /* The exporting process: the memory is here already, and the runtimes refuse to open
     * their own handle (cudaErrorDeviceUninitialized, measured). */
    s = check_own(ctx, &d, device);
    if (s != GW_OK) return s;
    s = new_opened(ctx, &d, device, (char *)(uintptr_t)(d.base + d.offset), &a);
    if (s != GW_OK) return s;
    a->ctx_ref = gw__context_retain(ctx);
    *out = a;
    return GW_OK;
  }

  pthread_mutex_lock(&lock);
  struct gw__ipc_map *m = find(ctx->ops, &d, device);
  if (!m) {
    m = calloc(1, sizeof *m);
    if (!m) {
      pthread_mutex_unlock(&lock);
      return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
    }
    void *local = NULL;
    s = ctx->ops->ipc_open(ctx->state, d.rt, device, (size_t)d.extent, &local);
    if (s == GW_OK) {
      /* Owned by the table: an owning wrap of any of its bytes would free (cudaFree) a
       * mapping, which only a close may undo. */
      s = gw__owned_claim(local, (size_t)d.extent, false, false);
      if (s != GW_OK) (void)ctx->ops->ipc_close(ctx->state, device, local);
    }
    if (s != GW_OK) {
      pthread_mutex_unlock(&lock);
      free(m);
      return s;
    }
    *m = (struct gw__ipc_map){.next = table,
                              .ops = ctx->ops,
                              .ctx = ctx,
                              .device = device,
                              .pid = d.pid,
                              .nonce = d.nonce,
                              .alloc_id = d.alloc_id,
                              .base = d.base,
                              .extent = d.extent,
                              .local = local,
                              .listed = true};
    memcpy(m->rt, d.rt, GW__IPC_RT_BYTES);
    m->ctx_ref = gw__context_retain(ctx);
    table = m;
  }
  m->refs++;
  pthread_mutex_unlock(&lock);
  s = new_opened(ctx, &d, device, m->local + d.offset, &a);
  if (s != GW_OK) {
    gw__ipc_unref(m);
    return s;
  }
  a->ipc = m;
  a->ctx_ref = gw__context_retain(ctx);
  *out = a;
  return GW_OK;
}
