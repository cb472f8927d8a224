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
 *     9   3  zero
 *    12   4  device (int32)
 *    16   8  exporter's pid
 *    24   8  exporter's start time (clock ticks after boot, /proc/self/stat field 22):
 *            with the pid it tells a reused pid apart
 *    32   8  allocation id (the runtime's buffer id; 0 where it has none)
 *    40   8  allocation base in the exporter
 *    48   8  allocation extent (bytes)
 *    56   8  byte offset of element 0 from the base
 *    64  64  the runtime's IPC handle (GW__IPC_RT_BYTES)
 *   128   1  length L of the geometry (<= GEOM_BYTES)
 *   129 123  geometry: shape as unsigned LEB128, then strides as zigzag LEB128 (elements);
 *            the bytes after L are zero
 *   252   4  CRC-32 (ISO-HDLC, as zlib's crc32) of bytes 0..251
 * Sixteen dims of two int64 do not fit beside the rest; varints do for any array of up to
 * 6 dims and for up to 16 when the values are small. What does not fit is refused at
 * export (GW_ENOTSUP), never truncated.
 *
 * The import table holds one entry per allocation mapped from another process, keyed by
 * (backend, device, exporter pid and start time, allocation id, base, extent): the runtimes
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
#include <unistd.h>

#define IPC_MAGIC "GWIP"
#define IPC_VERSION 1
#define FLAG_READONLY 1u
#define OFF_RT 64
#define OFF_GEOM_LEN 128
#define OFF_GEOM 129
#define GEOM_BYTES 123
#define OFF_CHECK 252

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

/* Clock ticks after boot at which this process started (field 22 of /proc/self/stat), or 0
 * when /proc cannot say. Cached per pid: a forked child is another process. */
static _Atomic(uint64_t) self_pid, self_start;

static uint64_t read_start_time(void) {
  FILE *f = fopen("/proc/self/stat", "re");
  if (!f) return 0;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name (field 2) may hold spaces and parentheses: count from its last ')'. */
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  p++;
  for (int field = 2; field < 22 && p; field++) p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* This process's identity, read once: getpid is a system call (glibc no longer caches it),
 * a good part of an open of an already-mapped allocation. A forked child forgets it
 * (gw__ipc_child, from the fork handler) and reads its own at its first use. */
static void identity(uint64_t *pid, uint64_t *start) {
  uint64_t me = atomic_load_explicit(&self_pid, memory_order_acquire);
  if (me == 0) {
    me = (uint64_t)getpid();
    atomic_store_explicit(&self_start, read_start_time(), memory_order_relaxed);
    atomic_store_explicit(&self_pid, me, memory_order_release);
  }
  *pid = me;
  *start = atomic_load_explicit(&self_start, memory_order_relaxed);
}

/* ---- the decoded handle ---- */

typedef struct {
  gw_backend backend;
  gw_dtype dtype;
  int ndim;
  bool readonly;
  int device;
  uint64_t pid, start, alloc_id, base, extent, offset;
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
  if (b[9] | b[10] | b[11]) return bad("reserved bytes 9..11 are not zero");
  r.device = (int32_t)get_u32(b + 12);
  if (r.device < 0) return bad("device %d is negative", r.device);
  r.pid = get_u64(b + 16);
  r.start = get_u64(b + 24);
  r.alloc_id = get_u64(b + 32);
  r.base = get_u64(b + 40);
  r.extent = get_u64(b + 48);
  r.offset = get_u64(b + 56);
  memcpy(r.rt, b + OFF_RT, GW__IPC_RT_BYTES);
  if (r.pid == 0 || r.pid > INT32_MAX)
    return bad("exporter pid %llu is not a pid", (unsigned long long)r.pid);
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
  uint64_t pid, start;
  identity(&pid, &start);
  memcpy(b, IPC_MAGIC, 4);
  b[4] = IPC_VERSION;
  b[5] = (unsigned char)ctx->backend;
  b[6] = (unsigned char)a->dtype;
  b[7] = (unsigned char)a->ndim;
  b[8] = a->readonly ? FLAG_READONLY : 0;
  put_u32(b + 12, (uint32_t)info.device);
  put_u64(b + 16, pid);
  put_u64(b + 24, start);
  put_u64(b + 32, alloc_id);
  put_u64(b + 40, (uint64_t)(uintptr_t)info.base);
  put_u64(b + 48, info.extent);
  put_u64(b + 56, offset);
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
  int device;
  uint64_t pid, start, alloc_id, base, extent;
  char *local; /* the allocation's base in this process */
  long refs;   /* opened arrays (roots) on it; lock */
  bool listed; /* in the table; a forked child's inherited entries are not */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct gw__ipc_map *table; /* lock */

void gw__ipc_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }

/* A forked child: the mappings are the parent's runtime's (on CUDA the child cannot use
 * them, and closing them is not its business). Arrays the child inherited keep their
 * entries until released, but nothing is closed for them and new opens map anew. */
void gw__ipc_child(void) {
  atomic_store_explicit(&self_pid, 0, memory_order_release); /* identity() reads the child's */
  for (struct gw__ipc_map *m = table; m; m = m->next) m->listed = false;
  table = NULL;
  pthread_mutex_unlock(&lock);
}

static struct gw__ipc_map *find(const gw__backend_ops *ops, const decoded *d) {
  for (struct gw__ipc_map *m = table; m; m = m->next)
    if (m->ops == ops && m->device == d->device && m->pid == d->pid && m->start == d->start &&
        m->alloc_id == d->alloc_id && m->base == d->base && m->extent == d->extent)
      return m;
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
  if (m->listed) {
    if (m->ops->ipc_close(m->ctx->state, m->device, m->local) != GW_OK) {
      /* The runtime kept the mapping (and said why; a release cannot report it): the entry
       * stays with it, so the next open of the allocation reuses it rather than being
       * refused as a second open, and its last release tries the close again. */
      pthread_mutex_unlock(&lock);
      return;
    }
    unlink_entry(m);
  }
  gw__owned_drop(m->local);
  pthread_mutex_unlock(&lock);
  gw__context_release(m->ctx, m->ctx_ref);
  free(m);
}

/* A root array over [p, ...) of the handle's device memory, borrowed. */
static gw_status new_opened(gw_context *ctx, const decoded *d, char *first, gw_array **out) {
  gw_array *a = gw__new_root(ctx, d->dtype, d->ndim, d->shape, d->strides);
  if (!a) return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
  a->readonly = d->readonly;
  if (d->readonly) a->ro_why = GW__RO_ASKED;
  a->dev0 = first;
  a->kind = GW_MEM_DEVICE;
  a->device = d->device;
  *out = a;
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
  int count = 0;
  s = ctx->ops->device_count(&count);
  if (s != GW_OK) return s;
  if (d.device >= count)
    return gw__fail(GW_ENODEV, "h: exported from %s device %d; this process sees %d device%s",
                    ctx->ops->name, d.device, count, count == 1 ? "" : "s");

  uint64_t pid, start;
  identity(&pid, &start);
  gw_array *a;
  if (d.pid == pid && d.start == start) {
    /* The exporting process: the memory is here already, and the runtimes refuse to open
     * their own handle (cudaErrorDeviceUninitialized, measured). */
    s = new_opened(ctx, &d, (char *)(uintptr_t)(d.base + d.offset), &a);
    if (s != GW_OK) return s;
    a->ctx_ref = gw__context_retain(ctx);
    *out = a;
    return GW_OK;
  }

  pthread_mutex_lock(&lock);
  struct gw__ipc_map *m = find(ctx->ops, &d);
  if (!m) {
    m = calloc(1, sizeof *m);
    if (!m) {
      pthread_mutex_unlock(&lock);
      return gw__fail(GW_ENOMEM, "gw_ipc_open: out of host memory");
    }
    void *local = NULL;
    s = ctx->ops->ipc_open(ctx->state, d.rt, d.device, (size_t)d.extent, &local);
    if (s == GW_OK) {
      /* Owned by the table: an owning wrap of any of its bytes would free (cudaFree) a
       * mapping, which only a close may undo. */
      s = gw__owned_claim(local, (size_t)d.extent, false, false);
      if (s != GW_OK) (void)ctx->ops->ipc_close(ctx->state, d.device, local);
    }
    if (s != GW_OK) {
      pthread_mutex_unlock(&lock);
      free(m);
      return s;
    }
    *m = (struct gw__ipc_map){.next = table,
                              .ops = ctx->ops,
                              .ctx = ctx,
                              .device = d.device,
                              .pid = d.pid,
                              .start = d.start,
                              .alloc_id = d.alloc_id,
                              .base = d.base,
                              .extent = d.extent,
                              .local = local,
                              .listed = true};
    m->ctx_ref = gw__context_retain(ctx);
    table = m;
  }
  m->refs++;
  pthread_mutex_unlock(&lock);
  s = new_opened(ctx, &d, m->local + d.offset, &a);
  if (s != GW_OK) {
    gw__ipc_unref(m);
    return s;
  }
  a->ipc = m;
  a->ctx_ref = gw__context_retain(ctx);
  *out = a;
  return GW_OK;
}
