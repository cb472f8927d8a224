/* Core-private declarations: contexts, arrays, the registry, errors. Never installed. */
#ifndef GW_CORE_INTERNAL_H
#define GW_CORE_INTERNAL_H

#include "backend.h"
#include "gpuwrap.h"
#include "private.h"
#include "settings.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors (errors.c) ---- */
/* Record detail for gw_last_error() and return s. */
gw_status gw__fail(gw_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* What plugins are given to call back into the core (plugin.c). */
extern const gw__host_api gw__host;

/* ---- element sizes (dtype.c) ---- */
/* What gw_dtype_size answers, inline: calls of the exported function from inside the
 * library go through the PLT, on every wrap. */
extern const unsigned char gw__dtype_bytes[GW_DTYPE_COUNT];
static inline size_t gw__dtype_size(gw_dtype t) {
  return (unsigned)t < GW_DTYPE_COUNT ? gw__dtype_bytes[t] : 0;
}
/* The alignment an element needs (natural alignment): its size, a component's for the
 * complex types (they align like their real parts). */
static inline size_t gw__dtype_align(gw_dtype t) {
  size_t s = gw__dtype_size(t);
  return (t == GW_COMPLEX64 || t == GW_COMPLEX128) ? s / 2 : s;
}

/* ---- contexts (context.c) ---- */
/*
 * References on a context: the creator's, and one per live array, stream and pending-work
 * event. Every wrap and every release from every thread takes or drops one, so they are
 * counted per thread (context.c): each count on a cache line of its own, written by its
 * thread (and by a release, from elsewhere, of a reference taken there). On one shared count, 8 threads wrapping through one context spent ~1 us a
 * wrap bouncing its line (measured on the H200: ~0.1 us with a context per thread).
 */
#define GW__CTX_SLOTS 64
typedef struct {
  _Alignas(64) _Atomic(uint64_t) n; /* references on this count; GW__CTX_DYING once folded */
} gw__ctx_slot;
struct gw_context {
  const gw__backend_ops *ops;
  void *state;
  gw_backend backend;
  int device;
  gw__caps caps;
  /* The creator's reference, and every reference once the creator has let go (the counts
   * are folded into it then, context.c); the context goes when it reaches 0. */
  _Atomic(uint64_t) central;
  gw__ctx_slot slot[GW__CTX_SLOTS]; /* the context is allocated aligned (context.c) */
};
/* Take a reference on ctx (held by the caller, or by something the caller holds); returns
 * the token that gw__context_release needs back: which count the reference is on. */
int gw__context_retain(gw_context *ctx);
void gw__context_release(gw_context *ctx, int token);

/* ---- registry references held by one acquire (registry.c) ---- */
/*
 * Exactly the ranges one acquire took a reference on, by start address. A range with a
 * reference cannot leave the table, so its start names it until the holder releases it;
 * a range registered later in a hole of the span (memory someone else had pinned when the
 * wrap was made) is not in the list and is never touched by this holder's release.
 */
typedef struct {
  uint32_t n;        /* ranges held */
  uint32_t warm;     /* n == 1 from gw__registry_try_ref: 1 + the warm count it is on, else 0 */
  uintptr_t first;   /* the start of the only range, n == 1 (the common case: no malloc) */
  uintptr_t *starts; /* n starts when n > 1 (malloc'd, freed by release) */
  bool readonly;     /* some range is registered read-only: the device must not write */
} gw__reghold;

/* ---- arrays (array.c) ---- */
typedef enum {
  GW__FREE_NONE = 0, /* borrowed */
  GW__FREE_BACKEND,  /* ops->mem_free(kind, device, base) */
  GW__FREE_LIBC,     /* free(base): an owned pageable wrap (Base.unsafe_wrap semantics) */
  GW__FREE_DELETER,  /* deleter(base, user) */
} gw__freeway;

/*
 * A root array owns the memory record inline (one heap allocation per wrap); a view points
 * at its root and keeps it alive.
 */
/* Why an array is read-only: what a refused write says (transfer.c). */
typedef enum {
  GW__RO_ASKED = 1, /* GW_WRAP_READONLY (a READ_ONLY DLPack import wraps with it) */
  GW__RO_SHARED,    /* its bytes are in a registration gpuwrap made read-only */
  GW__RO_PAGES,     /* host-only memory whose pages the process cannot write */
} gw__ro_why;

/* The asynchronous work one stream queued on a root's memory so far (stream.c). */
typedef struct {
  uint64_t stream;  /* the gw_stream's id (never reused); 0: the slot is unused */
  void *event;      /* a backend event of ctx recorded on that stream, or NULL */
  gw_context *ctx;  /* retained while event lives */
  int ref;          /* the token of that reference */
  uint64_t capture; /* 0, or the id of the graph capture of that stream the event was
                     * recorded in: a node of that graph, never queried (the runtime refuses
                     * it), waited on only inside that capture, no work of the memory's */
} gw__pend;

struct gw_array {
  atomic_int refs;
  gw_array *root; /* NULL for a root */
  gw_context *ctx;
  gw_dtype dtype;
  int ndim;
  bool readonly;
  unsigned char ro_why; /* why readonly (gw__ro_why), for the error a write gets */
  atomic_bool
      write_ok; /* passed transfer.c's write checks (once): elements apart, pages writable */
  atomic_bool pages_ok; /* root of host-only memory: its pages were found writable (once) */
  char *dev0;           /* device-usable address of element 0, or NULL */
  char *host0;          /* host-usable address of element 0, or NULL */
  /* root only: the import-table entry whose mapping this array holds (ipc_table.c), or NULL */
  struct gw__ipc_map *ipc;
  int64_t shape[GW_MAX_DIMS];
  int64_t strides[GW_MAX_DIMS];
  /* root only */
  gw_memkind kind;
  int device;
  gw__freeway freeway;
  void *free_ptr; /* what the free/deleter gets */
  gw_deleter deleter;
  void *deleter_user;
  gw__reghold hold; /* the registry references this wrap took (n == 0: none) */
  bool in_owned_table;
  bool in_deleter_table; /* deleter_slot is its entry among the deleter spans (owned.c) */
  size_t deleter_slot;
  int ctx_ref; /* the token of the array's reference on ctx (gw__context_retain) */
  /* the pending work on this memory: one event per stream that touched it (stream.c) */
  atomic_flag pend_lock;
  gw__pend pend;       /* the first stream's, inline: one stream needs no allocation */
  gw__pend *pend_more; /* the other streams' (malloc'd), pend_nmore of pend_cap in use */
  int pend_nmore, pend_cap;
};

/* The array that holds a's memory record: a itself for a root, else its root. Not const:
 * through any array, const or not, callers note pending work on (and read) its root. */
static inline gw_array *gw__root(const gw_array *a) { return a->root ? a->root : (gw_array *)a; }

/* ---- streams and pending work (stream.c) ---- */
struct gw_stream {
  gw_context *ctx;
  uint64_t id;  /* unique in the process: names the stream in arrays' pending work */
  int ctx_ref;  /* the token of the stream's reference on ctx */
  void *handle; /* the backend's stream object */
  bool borrowed;
};
/* Async work touching a's memory was just queued on st: st's pending-work event on a's
 * root follows st (the other streams' stay). Never fails: where the event cannot be made,
 * kept or recorded it waits for st instead, so that nothing is pending that gw_array_wait
 * or a release could miss. */
void gw__pending_note(const gw_array *a, gw_stream *st);
/* The same for work just recorded into a graph capture of st (gw__capturing said so): the
 * event goes in a slot of its own (st's eager slot keeps following the work queued before
 * the capture began), so that gw_array_wait on another stream of the capture joins the
 * captured work. No host wait is possible here (a capture cannot be synchronised): a
 * failure is returned, the work stays captured. */
gw_status gw__pending_note_captured(const gw_array *a, gw_stream *st, uint64_t capture);
/* Whether st is being captured into a graph now (*capture: the capture's id, 0 when not):
 * the one query an asynchronous call makes (transfer.c, "Capture"). A failure: st may not
 * be used now. */
static inline gw_status gw__capturing(gw_stream *st, uint64_t *capture) {
  *capture = 0;
  return st->ctx->ops->stream_capturing(st->ctx->state, st->handle, capture);
}
/* Root teardown: the events go with the memory. */
void gw__pending_fini(gw_array *root);
/* Wait on the host until the root's pending work, on every stream, is complete (before its
 * memory is freed or unregistered). */
void gw__pending_drain(gw_array *root);

/* Byte span [lo, hi) of the elements relative to element 0 (strides may be negative). */
/* A root array of ctx (one reference) with its geometry and nothing else: no memory, kind
 * GW_MEM_UNKNOWN, device -1, nothing pending; NULL when out of host memory. The caller
 * fills in the memory (wrap.c, ipc.c). */
gw_array *gw__new_root(gw_context *ctx, gw_dtype dtype, int ndim, const int64_t *shape,
                       const int64_t *strides);
gw_status gw__span(int ndim, const int64_t *shape, const int64_t *strides, size_t elem, int64_t *lo,
                   int64_t *hi, int64_t *numel);
bool gw__is_c_contiguous(const gw_array *a);
int64_t gw__numel(int ndim, const int64_t *shape);
/* A shape's checks, as every call that takes ndim and shape makes them (gw_wrap*,
 * gw_alloc, gw_reshape): ndim in [0, GW_MAX_DIMS], shape not NULL where ndim > 0, no
 * negative extent. GW_EINVAL with a message naming the argument. */
gw_status gw__check_shape(int ndim, const int64_t *shape);

/* ---- registration registry (registry.c) ---- */
/* Take a reference on every range of ours under [lo, hi) and, when `may_register`, register
 * the gaps that no one pinned yet (memory someone else pinned is used as it is). Without
 * `may_register` a gap that would need a registration fails with GW_ENOTREG. `regflags`
 * (GW__REG_*) ask new registrations to be read-only. *out lists what was taken; on failure
 * nothing is held and the runtime holds what it held before. GW_ENOTSUP: memory that
 * cannot be page-locked at all (read-only pages the device cannot register read-only, a
 * read-only private file mapping); gw_last_error() says why. */
gw_status gw__registry_acquire(gw_context *ctx, uintptr_t lo, uintptr_t hi, bool may_register,
                               unsigned regflags, gw__reghold *out);
/* What the registry said about one address at one moment: whether it lay in a range of
 * ours, and the registry's change count then (see gw__registry_unchanged). */
typedef struct {
  unsigned long seq;
  bool ours;
} gw__regsnap;
/* One more reference on the single range of ours that holds all of [lo, hi), under the read
 * lock and without a runtime call (the warm wrap); false if there is none. Either way *snap
 * tells whether p (the wrapped pointer) lay in a range of ours, so the wrap needs no second
 * look-up after its query (gw__registry_unchanged). */
bool gw__registry_try_ref(const gw__backend_ops *ops, uintptr_t p, uintptr_t lo, uintptr_t hi,
                          gw__reghold *out, gw__regsnap *snap);
/* The same look-up of p, without taking a reference. No lock while the registry is empty. */
void gw__registry_snapshot(const gw__backend_ops *ops, uintptr_t p, gw__regsnap *snap);
/* Odd while a registry writer holds the lock; changes with every writer (registry.c). */
extern atomic_ulong gw__registry_seq;
/*
 * Whether no writer has touched the registry since *snap was taken: then snap->ours still
 * holds, and a runtime query made in between saw exactly gpuwrap's registrations of then
 * (a pinned answer for an address not ours is someone else's pinning). One atomic load.
 * Acquire, after the caller's query: a registration that query saw was made after its
 * writer's first increment (under the write lock), and the runtime's own synchronisation
 * of its pointer table orders that registration before the query's answer, so the new
 * value is seen here.
 */
static inline bool gw__registry_unchanged(const gw__regsnap *snap) {
  return !(snap->seq & 1) &&
         atomic_load_explicit(&gw__registry_seq, memory_order_acquire) == snap->seq;
}
/* Drop exactly the references in *h; unregister ranges that reach zero. Empties *h. */
void gw__registry_release(gw_context *ctx, gw__reghold *h);
/* Whether [p, p+1) lies in a range gpuwrap registered (for GW_PTR_GPUWRAP_REGISTERED). */
bool gw__registry_contains(const gw__backend_ops *ops, uintptr_t p, uintptr_t *base, size_t *len);
/* Ranges in all tables (registry.c). While it is 0 no pointer is gpuwrap's: a query of
 * pinned memory tests it inline, without a call or the lock. */
extern atomic_size_t gw__registry_total;
static inline bool gw__registry_empty(void) {
  return atomic_load_explicit(&gw__registry_total, memory_order_relaxed) == 0;
}
size_t gw__page_size(void);

/* ---- memory from another process (ipc.c; its import table ipc_table.c) ---- */
/* Drop an opened array's reference on its mapping; the last one closes it (array.c). */
void gw__ipc_unref(struct gw__ipc_map *m);

/* ---- fork safety (fork.c): each module's lock, taken (1) / released (0) around fork ---- */
void gw__pin_lock(int on);
void gw__registry_lock(int on);
void gw__owned_lock(int on);
void gw__registry_forget_all(void);
/* The import table's lock (taken after the registry's, before owned's), and the child's
 * reset: the parent's mappings are never closed by the child (ipc_table.c). */
void gw__ipc_lock(int on);
void gw__ipc_child(void);
/* The lock of the descriptors passed over Unix sockets (taken after the import table's,
 * which holds it while take_fd looks there), and the child's reset: it closes its copies of
 * the descriptors received, the parent's to use (ipc_fdpass.c). */
void gw__ipc_fd_lock(int on);
void gw__ipc_fd_child(void);
/* The exporter's VMM manifests (ipc_manifest.c): its lock (a leaf), and a forked child's
 * forgetting of them (it is not their exporter; it closes its copies, releases the lock). */
void gw__ipc_manifest_lock(int on);
void gw__ipc_manifest_child(void);

/* ---- ownership table (owned.c): addresses owned by live arrays ---- */
/* Record [p, p + bytes) (bytes 0 counts as 1) as owned; GW_EOWNED if any byte of it is
 * inside a span a live array owns. `libc`: p will be free()d, so its whole malloc block
 * is owned. `fresh`: gw_alloc's memory, just allocated, which no live array can hold, so
 * the deleter arrays' spans (a list searched end to end) are not searched. */
gw_status gw__owned_claim(void *p, size_t bytes, bool libc, bool fresh);
/* GW_EOWNED if p lies inside a span a live array owns (checked first, so that a second
 * owner hears it is one, whatever else is wrong with the wrap). */
gw_status gw__owned_check(void *p);
void gw__owned_drop(void *p);
/* An array with a deleter spans [lo, hi): owning wraps of any byte of it are GW_EOWNED until
 * gw__owned_forget_deleter(slot). *slot (the array's deleter_slot) is the entry's place,
 * which the table keeps up to date. GW_ENOMEM only. */
gw_status gw__owned_note_deleter(void *lo, void *hi, size_t *slot);
void gw__owned_forget_deleter(size_t *slot);

/* ---- copy planning (copy_plan.c) ---- */
gw_status gw__plan_copy(const gw_array *dst, const gw_array *src, gw__xfer *x);
void gw__plan_fill(const gw_array *dst, const void *value, gw__fillspec *f);
/* Normalise dims in place: drop extent-1 dims, order by dst stride, merge. */
void gw__xfer_normalise(gw__xfer *x);

/* ---- host memory map (hostmap.c) ---- */
/* What /proc/self/maps says about a span of host memory. */
typedef struct {
  bool mapped;       /* every byte of the span lies in some mapping */
  bool writable;     /* every byte is mapped and writable */
  bool readonly;     /* some mapped byte is not writable (PROT_READ, or no access at all) */
  bool noaccess;     /* some mapped byte cannot even be read (PROT_NONE) */
  bool private_file; /* some byte is in a MAP_PRIVATE mapping of a file ('p', an inode) */
  bool special;      /* some byte is in pages the kernel provides ([vdso], [vvar],
                        [vvar_vclock], [vsyscall]): no runtime can page-lock them */
  /* For messages: the first kernel-provided or private file mapping, else the first
   * non-writable mapping,
   * else the first hole (perms "----", path ""); all zero when there is nothing to say. */
  uintptr_t what_lo, what_hi;
  char what_perms[5];
  char what_path[80]; /* truncated; "" for anonymous memory */
  int err;            /* errno when the map could not be read */
} gw__hostmap;
/*
 * Describe [lo, hi) (hi <= lo: everything true/false as for a writable span). Costs one
 * read of /proc/self/maps (up to the first mapping past hi), so call it only when it
 * matters: before a registration that would pass GW__REG_READONLY (a private file
 * mapping must never get it: that call never returns on CUDA), and after a plain
 * registration was refused (GW_EINVAL: were the pages read-only?). Not on the warm path.
 * Fork- and thread-safe, allocation-free. GW_ENOTSUP when the map cannot be opened (no
 * /proc), GW_EBACKEND when reading it failed; then out->err is the errno and nothing is
 * known, so the caller must assume the worst (no read-only registration). Records nothing
 * for gw_last_error(): the caller's message says what it decided.
 */
gw_status gw__host_mapping(uintptr_t lo, uintptr_t hi, gw__hostmap *out);

/* ---- batched copies (transfer.c): declared in private.h ---- */

#endif /* GW_CORE_INTERNAL_H */
