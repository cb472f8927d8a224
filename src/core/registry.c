/*
 * The registration registry: the host ranges gpuwrap itself page-locked, reference counted.
 *
 * The runtimes refuse a registration that overlaps an existing one ("already registered")
 * and unregister only by exact base, so wrapping one buffer twice, or overlapping pieces of
 * it, needs bookkeeping: ranges never overlap; a wrap takes a reference on every range
 * under its span and registers only the gaps, and it remembers exactly which ranges it
 * referenced (gw__reghold): parts of the span that someone else had pinned may later be
 * unpinned and registered by another wrap, and this wrap's release must not touch those.
 *
 * Ranges are byte ranges, not whole pages. CUDA tracks registrations by byte (two disjoint
 * byte ranges of one page register fine, measured on the H200), and a page-aligned
 * registration reaches into the neighbours of the wrapped buffer: on the H200 (README.md,
 * "Registrations are byte ranges"), a plain cudaMemcpy of a malloc'd neighbour whose first
 * page had been registered that way failed with "invalid argument", as did DMA copies of a
 * buffer whose span a neighbour's registration partly covered. Registering exactly the
 * wrapped bytes leaves other memory as it was. Memory someone else pinned is
 * used as it is and never registered or unregistered here. One table per backend (keyed by
 * its ops table), one process-wide lock: its write side serialises the runtime calls
 * (milliseconds long anyway); a warm wrap is a binary search under the read side, and its
 * reference goes on a count of its thread's own (warm_counts), so that threads wrapping one
 * registered buffer share no written cache line.
 */
#include "brlock.h"
#include "internal.h"
#include "vec.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The warm references of one range: one count per reader stripe of the lock (brlock.h), so
 * per thread, each on a cache line of its own. Threads wrapping slices of one gw_pin'ned
 * buffer (a halo exchange's) take and drop warm references all the time; on one shared
 * count every wrap and every release bounced its line between the cores (8 threads: the
 * warm wrap 1.3-1.6x the device wrap, whose only shared state is the runtime's query).
 * Made by a range's first warm reference, freed with the range.
 */
typedef struct {
  _Alignas(64) atomic_long n;
} warm_slot;
typedef struct {
  warm_slot slot[BR_STRIPES];
} warm_counts;

/*
 * A range is in use while refs + the sum of its warm counts is > 0. `refs` counts the
 * acquires and pins (changed under the write lock, and dropped under the read lock by a
 * release); warm references (gw__registry_try_ref) never touch it, so it stays a read-mostly
 * line that a warm release only reads: while refs > 0 (the gw_pin of the buffer, or the wrap
 * that registered it) no warm release can be the last, and it needs no sum.
 */
typedef struct {
  uintptr_t lo, hi; /* [lo, hi) */
  atomic_long refs;
  _Atomic(warm_counts *) warm; /* NULL until the first warm reference */
  bool ro;                     /* registered read-only: arrays over it are read-only */
} range;

typedef struct {
  const gw__backend_ops *ops;
  range *r;
  size_t n, cap;
} table;

#define MAX_TABLES 4
static table tables[MAX_TABLES];
/* Readers: the warm path (a wrap of memory gpuwrap already registered takes and drops a
 * reference with atomics) and look-ups. Writers: anything that changes the table or calls
 * the runtime. Threads wrapping registered buffers then do not serialise on the registry
 * (brlock.h: readers do not even share a cache line). */
static br_lock lock = BR_LOCK_INITIALIZER;
/* Ranges in all tables; read without the lock so queries of foreign pinned memory skip it. */
atomic_size_t gw__registry_total;
/*
 * Bumped when a writer takes the lock and again when it lets go (odd while one is at work),
 * so an unchanged even value means no writer did anything in between: neither the table
 * nor the runtime's registrations made by gpuwrap changed (every registration and
 * unregistration gpuwrap makes happens under the write lock, and is in the table whenever
 * no writer holds it). What lets a wrap of memory pinned by someone else (a cudaHostAlloc
 * pointer) trust the one look-up it made before its query (gw__regsnap) instead of making
 * a second one, under the lock, after it (gw__registry_unchanged, internal.h).
 */
atomic_ulong gw__registry_seq;

static void wlock(void) {
  br_write_lock(&lock);
  /* After the readers drained: a reader never sees it odd. */
  atomic_fetch_add(&gw__registry_seq, 1);
}

static void wunlock(void) {
  atomic_fetch_add(&gw__registry_seq, 1);
  br_write_unlock(&lock);
}

size_t gw__page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

void gw__registry_lock(int on) { on ? wlock() : wunlock(); }

/* A child after fork shares none of the parent's registrations with its runtime: it must
 * never unregister them, so it starts with an empty registry and the lock released (called
 * with the lock held, from the fork handler in fork.c). */
void gw__registry_forget_all(void) {
  for (int i = 0; i < MAX_TABLES; i++) {
    for (size_t k = 0; k < tables[i].n; k++) free(atomic_load(&tables[i].r[k].warm));
    free(tables[i].r);
    tables[i] = (table){0};
  }
  atomic_store(&gw__registry_total, 0);
  wunlock(); /* the forking thread took it; no reader exists in the child */
}

static table *table_for(const gw__backend_ops *ops, int create) {
  for (int i = 0; i < MAX_TABLES; i++)
    if (tables[i].ops == ops) return &tables[i];
  if (!create) return NULL;
  for (int i = 0; i < MAX_TABLES; i++)
    if (!tables[i].ops) {
      tables[i].ops = ops;
      return &tables[i];
    }
  return NULL;
}

/* Index of the first range with hi > p (ranges sorted, disjoint). */
static size_t first_after(const table *t, uintptr_t p) {
  return gw__vec_bound(t->r, t->n, sizeof *t->r, offsetof(range, hi), p, true);
}

static gw_status insert(table *t, size_t at, uintptr_t lo, uintptr_t hi, bool ro) {
  range *r = gw__vec_room(t->r, t->n, &t->cap, sizeof *t->r);
  if (!r) return gw__fail(GW_ENOMEM, "registry: out of host memory");
  t->r = r;
  memmove(&t->r[at + 1], &t->r[at], (t->n - at) * sizeof *t->r);
  t->r[at].lo = lo;
  t->r[at].hi = hi;
  t->r[at].ro = ro;
  atomic_init(&t->r[at].refs, 1);
  atomic_init(&t->r[at].warm, NULL);
  t->n++;
  atomic_fetch_add(&gw__registry_total, 1);
  return GW_OK;
}

/* Read-only memory can be registered in a single way, and one kind of it never (measured
 * on the H200, driver 580.159.04; backend.h): a plain registration of pages the process
 * cannot write is "invalid value"; cudaHostRegisterReadOnly takes PROT_READ shared file
 * mappings and mprotect'ed memory, and never returns on a MAP_PRIVATE file mapping. */
#define KERNEL_PAGES \
  "pages the kernel provides (vDSO, vvar, vsyscall), which no runtime can page-lock"

static gw_status cannot_register(uintptr_t a, size_t len, const gw__hostmap *m, const char *why) {
  return gw__fail(GW_ENOTSUP,
                  "ptr: [%p, %p) cannot be page-locked: %s (mapping [%p, %p) %s %s); the "
                  "array is host-only and its copies stage",
                  (void *)a, (void *)(a + len), why, (void *)m->what_lo, (void *)m->what_hi,
                  m->what_perms, m->what_path[0] ? m->what_path : "(anonymous)");
}

/*
 * Register [a, a + len) for a wrap or a pin. GW__REG_READONLY in regflags (a
 * GW_WRAP_READONLY wrap) asks for a read-only registration where the device has one. A
 * plain registration the runtime refuses (GW_EINVAL) is retried read-only when the memory
 * map shows pages the process cannot write. The map is read only on those two cold paths
 * (one read of /proc/self/maps, against ~100 us for the registration), and a private file
 * mapping is never handed to the runtime with the read-only flag. GW_ENOTSUP: the memory
 * cannot be registered at all (the wrap becomes host-only). *ro: the registration is
 * read-only (the device must not write through it).
 */
static gw_status do_register_as_asked(gw_context *ctx, uintptr_t a, size_t len, unsigned regflags,
                                      bool *ro) {
  gw__hostmap m;
  gw_status s;
  *ro = false;
  if (regflags & GW__REG_READONLY) {
    bool known = gw__host_mapping(a, a + len, &m) == GW_OK;
    if (known && m.special) return cannot_register(a, len, &m, KERNEL_PAGES);
    if (ctx->caps.host_register_readonly && known && m.mapped && !m.private_file) {
      s = ctx->ops->host_register(ctx->state, (void *)a, len, GW__REG_READONLY);
      *ro = s == GW_OK;
      return s;
    }
    /* No read-only registration for this memory: a plain one, if its pages are writable. */
    if (known && !m.writable && m.mapped && m.what_perms[0] == 'r')
      return cannot_register(a, len, &m,
                             m.private_file ? "a read-only private file mapping (the runtime's "
                                              "read-only registration never returns on one)"
                                            : "read-only pages, and this device has no "
                                              "read-only registration");
    return ctx->ops->host_register(ctx->state, (void *)a, len, 0);
  }
  s = ctx->ops->host_register(ctx->state, (void *)a, len, 0);
  if (s != GW_EINVAL) return s;
  /* Its own reason unless the span is mapped and its first unwritable mapping readable
   * (pages with no access at all are no read-only memory). */
  if (gw__host_mapping(a, a + len, &m) != GW_OK || !m.mapped || !m.readonly ||
      (!m.private_file && !m.special && m.what_perms[0] != 'r'))
    return s;
  if (m.special) return cannot_register(a, len, &m, KERNEL_PAGES);
  if (m.private_file)
    return cannot_register(a, len, &m,
                           "a read-only private file mapping (the runtime's "
                           "read-only registration never returns on one)");
  if (!ctx->caps.host_register_readonly)
    return cannot_register(a, len, &m,
                           "read-only pages, and this device has no read-only "
                           "registration");
  s = ctx->ops->host_register(ctx->state, (void *)a, len, GW__REG_READONLY);
  *ro = s == GW_OK;
  return s;
}

/* The same; a refusal ("invalid value") of memory that is not mapped, wholly or in part,
 * says so and names the argument: the runtime's own text is only "invalid value" (CUDA
 * refuses such a range, measured on the H200, and the CPU model as it does). */
static gw_status do_register(gw_context *ctx, uintptr_t a, size_t len, unsigned regflags,
                             bool *ro) {
  gw_status s = do_register_as_asked(ctx, a, len, regflags, ro);
  gw__hostmap m;
  if (s != GW_EINVAL || gw__host_mapping(a, a + len, &m) != GW_OK || m.mapped) return s;
  char said[256];
  snprintf(said, sizeof said, "%s", gw_last_error());
  char where[64] = "";
  if (strcmp(m.what_perms, "----") == 0 && !m.what_path[0]) /* the map's finding is the hole */
    snprintf(where, sizeof where, " (hole [%p, %p))", (void *)m.what_lo, (void *)m.what_hi);
  return gw__fail(GW_EINVAL, "ptr: [%p, %p) is not mapped%s: the runtime cannot page-lock it (%s)",
                  (void *)a, (void *)(a + len), where, said);
}

/* ---- the starts of the ranges one acquire references, collected as it goes ---- */
typedef struct {
  uintptr_t inl[4]; /* most acquires reference one range */
  uintptr_t *v;
  size_t n, cap;
} startlist;
#define STARTLIST_INIT(l) \
  { .v = (l).inl, .cap = 4 }

static gw_status sl_reserve(startlist *l, size_t want) {
  if (want <= l->cap) return GW_OK;
  size_t cap = l->cap * 2 > want ? l->cap * 2 : want;
  uintptr_t *v = malloc(cap * sizeof *v);
  if (!v) return gw__fail(GW_ENOMEM, "registry: out of host memory");
  memcpy(v, l->v, l->n * sizeof *v);
  if (l->v != l->inl) free(l->v);
  l->v = v;
  l->cap = cap;
  return GW_OK;
}

static void sl_free(startlist *l) {
  if (l->v != l->inl) free(l->v);
}

/* Index of the range starting exactly at lo, or t->n (lock held). */
static size_t find_start(const table *t, uintptr_t lo) {
  size_t i = first_after(t, lo);
  return (i < t->n && t->r[i].lo == lo) ? i : t->n;
}

/* Whether no reference of any kind is left on r (write lock held: no warm reference can
 * come or go meanwhile). */
static bool unused(const range *r) {
  if (atomic_load(&r->refs) != 0) return false;
  warm_counts *w = atomic_load(&r->warm);
  for (int s = 0; w && s < BR_STRIPES; s++)
    if (atomic_load_explicit(&w->slot[s].n, memory_order_relaxed) != 0) return false;
  return true;
}

/* Unregister range i and take it out of the table (write lock held, no reference left). A
 * failed unregister cannot be reported from a release; the range leaves the table either
 * way, so gpuwrap never unregisters it twice. */
static void remove_at(gw_context *ctx, table *t, size_t i) {
  (void)ctx->ops->host_unregister(ctx->state, (void *)t->r[i].lo);
  free(atomic_load(&t->r[i].warm));
  memmove(&t->r[i], &t->r[i + 1], (t->n - i - 1) * sizeof *t->r);
  t->n--;
  atomic_fetch_sub(&gw__registry_total, 1);
}

/* Drop the reference held on each listed range; unregister those at zero (write lock). */
static void drop_starts(gw_context *ctx, table *t, const uintptr_t *starts, size_t n) {
  for (size_t k = 0; k < n; k++) {
    size_t i = find_start(t, starts[k]);
    if (i < t->n && atomic_fetch_sub(&t->r[i].refs, 1) == 1 && unused(&t->r[i]))
      remove_at(ctx, t, i);
  }
}

/* Is p pinned by someone else? 1 yes (*start, *end: that pinning's bounds as far as the
 * runtime says), 0 no, <0 the query's failure status. */
static int pinned_elsewhere(gw_context *ctx, uintptr_t p, uintptr_t *start, uintptr_t *end) {
  gw_ptrinfo info;
  gw_status s = ctx->ops->mem_query(ctx->state, (const void *)p, &info);
  if (s != GW_OK) return s;
  if (info.kind == GW_MEM_HOST) return 0;
  size_t page = gw__page_size();
  bool known = info.base && info.extent;
  /* Without a known extent, assume the rest of the page is theirs too. */
  *start = known ? (uintptr_t)info.base : p;
  *end = known ? (uintptr_t)info.base + info.extent : ((p / page) + 1) * page;
  if (*end <= p) *end = p + 1;
  return 1;
}

/* [a, b) was just registered: record it as a range this acquire holds, or undo it. */
static gw_status add_range(gw_context *ctx, table *t, startlist *held, uintptr_t a, uintptr_t b,
                           bool ro) {
  gw_status s = sl_reserve(held, held->n + 1);
  if (s == GW_OK) s = insert(t, first_after(t, a), a, b, ro);
  if (s != GW_OK) {
    (void)ctx->ops->host_unregister(ctx->state, (void *)a);
    return s;
  }
  held->v[held->n++] = a;
  return GW_OK;
}

/* Where after a someone else's pinning may start, sampling one byte per page of (a, b): a
 * foreign range that covers a page boundary is found with its exact start. */
static gw_status scan_foreign(gw_context *ctx, uintptr_t a, uintptr_t b, uintptr_t *out) {
  size_t page = gw__page_size();
  /* Past a few thousand pages the bisection (log2 of the span trial registrations) is
   * cheaper than one query per page. */
  if ((b - a) / page > 4096) {
    *out = b;
    return GW_OK;
  }
  for (uintptr_t x = (a / page + 1) * page; x < b; x += page) {
    uintptr_t fs = x, fe = x;
    int foreign = pinned_elsewhere(ctx, x, &fs, &fe);
    if (foreign < 0) return (gw_status)foreign;
    if (foreign) {
      b = fs > a && fs < x ? fs : x;
      break;
    }
  }
  *out = b;
  return GW_OK;
}

/*
 * A foreign range hidden inside one page: registering [a, m) succeeds exactly when no
 * foreign byte lies below m, so a binary search with trial registrations is exact. A trial
 * registration that cannot be undone (its unregister failed) is kept as a range this
 * acquire holds (*kept): recorded, it is unregistered with the wrap, so the runtime never
 * keeps a registration gpuwrap does not know about.
 */
static gw_status bisect_foreign(gw_context *ctx, table *t, startlist *held, uintptr_t a,
                                uintptr_t b, unsigned regflags, uintptr_t *out, bool *kept) {
  uintptr_t good = a + 1, bad = b; /* [a, good) is free; [a, bad) is not */
  *kept = false;
  while (bad - good > 1) {
    uintptr_t mid = good + (bad - good) / 2;
    bool ro;
    gw_status s = do_register(ctx, a, mid - a, regflags, &ro);
    if (s == GW_OK) {
      if (ctx->ops->host_unregister(ctx->state, (void *)a) != GW_OK) {
        s = add_range(ctx, t, held, a, mid, ro);
        if (s != GW_OK) return s;
        *kept = true;
        *out = mid;
        return GW_OK;
      }
      good = mid;
    } else if (s == GW_EALREADY) {
      bad = mid;
    } else {
      return s;
    }
  }
  *out = good;
  return GW_OK;
}

/*
 * Cover the gap [a, b) that no range of ours holds: register it, leaving alone any part
 * someone else pinned, without fragments (one registration per free stretch: a DMA copy
 * may not span two registrations). Each new range is added to *held.
 */
static gw_status cover_gap(gw_context *ctx, table *t, uintptr_t a, uintptr_t b, unsigned regflags,
                           startlist *held) {
  /* The wrap queried its pointer before taking the lock; the gap is asked about again here
   * because only an answer given under the lock can tell someone else's pinning from a
   * range of ours released meanwhile (one query, ~0.1 us, against a registration of
   * ~100 us). */
  while (a < b) {
    uintptr_t fs = a, fe = b;
    int foreign = pinned_elsewhere(ctx, a, &fs, &fe);
    if (foreign < 0) return (gw_status)foreign;
    if (foreign) {
      a = fe < b ? fe : b;
      continue;
    }
    bool ro;
    gw_status s = do_register(ctx, a, b - a, regflags, &ro);
    if (s == GW_OK) return add_range(ctx, t, held, a, b, ro);
    if (s != GW_EALREADY) return s;
    uintptr_t stop = b;
    s = scan_foreign(ctx, a, b, &stop);
    if (s == GW_OK) s = do_register(ctx, a, stop - a, regflags, &ro);
    if (s == GW_EALREADY) {
      bool kept = false;
      s = bisect_foreign(ctx, t, held, a, stop, regflags, &stop, &kept);
      if (s == GW_OK && kept) {
        a = stop;
        continue;
      }
      if (s == GW_OK) s = do_register(ctx, a, stop - a, regflags, &ro);
    }
    if (s == GW_OK) s = add_range(ctx, t, held, a, stop, ro);
    if (s != GW_OK) return s;
    a = stop; /* someone else's pinning starts here: the loop skips it */
  }
  return GW_OK;
}

/* Without registering: every byte of the gap [a, b) must be pinned by someone else. */
static gw_status gap_is_pinned(gw_context *ctx, uintptr_t a, uintptr_t b) {
  while (a < b) {
    uintptr_t fs = a, fe = b;
    int foreign = pinned_elsewhere(ctx, a, &fs, &fe);
    if (foreign < 0) return (gw_status)foreign;
    if (!foreign)
      return gw__fail(GW_ENOTREG,
                      "ptr: byte %p of the span is pageable and may not be "
                      "registered",
                      (void *)a);
    a = fe;
  }
  return GW_OK;
}

gw_status gw__registry_acquire(gw_context *ctx, uintptr_t lo, uintptr_t hi, bool may_register,
                               unsigned regflags, gw__reghold *out) {
  startlist held = STARTLIST_INIT(held);
  wlock();
  table *t = table_for(ctx->ops, 1);
  if (!t) {
    wunlock();
    return gw__fail(GW_ENOMEM, "registry: too many backends");
  }
  uintptr_t cur = lo;
  gw_status s = GW_OK;
  while (cur < hi) {
    size_t i = first_after(t, cur);
    if (i < t->n && t->r[i].lo <= cur) {
      s = sl_reserve(&held, held.n + 1);
      if (s != GW_OK) break;
      held.v[held.n++] = t->r[i].lo;
      atomic_fetch_add(&t->r[i].refs, 1);
      cur = t->r[i].hi;
      continue;
    }
    uintptr_t gap_end = (i < t->n && t->r[i].lo < hi) ? t->r[i].lo : hi;
    s = may_register ? cover_gap(ctx, t, cur, gap_end, regflags, &held)
                     : gap_is_pinned(ctx, cur, gap_end);
    if (s != GW_OK) break;
    cur = gap_end;
  }
  gw__reghold h = {.n = (uint32_t)held.n};
  for (size_t k = 0; s == GW_OK && k < held.n; k++) {
    size_t i = find_start(t, held.v[k]);
    if (i < t->n && t->r[i].ro) h.readonly = true;
  }
  if (s == GW_OK && held.n == 1) {
    h.first = held.v[0];
  } else if (s == GW_OK && held.n > 1) {
    h.starts = malloc(held.n * sizeof *h.starts);
    if (!h.starts)
      s = gw__fail(GW_ENOMEM, "registry: out of host memory");
    else
      memcpy(h.starts, held.v, held.n * sizeof *h.starts);
  }
  if (s != GW_OK)
    drop_starts(ctx, t, held.v, held.n);
  else
    *out = h;
  wunlock();
  sl_free(&held);
  return s;
}

/* The range of ours holding all of [lo, hi), or -1 (lock held). */
static ptrdiff_t covering(const table *t, uintptr_t lo, uintptr_t hi) {
  size_t i = first_after(t, lo);
  return (i < t->n && t->r[i].lo <= lo && hi <= t->r[i].hi) ? (ptrdiff_t)i : -1;
}

/* Whether p lies in a range of t (lock held). */
static bool holds(const table *t, uintptr_t p) {
  size_t i = first_after(t, p);
  return i < t->n && t->r[i].lo <= p;
}

/* r's warm counts, made on first use (read lock held; NULL when out of memory: the caller
 * takes a plain reference instead). Freed only by remove_at, under the write lock, so a
 * reader that found them may use them until it lets go of its read lock. */
static warm_counts *warm_of(range *r) {
  warm_counts *w = atomic_load_explicit(&r->warm, memory_order_acquire);
  if (w) return w;
  warm_counts *n = aligned_alloc(_Alignof(warm_counts), sizeof *n);
  if (!n) return NULL;
  for (int s = 0; s < BR_STRIPES; s++) atomic_init(&n->slot[s].n, 0);
  if (atomic_compare_exchange_strong_explicit(&r->warm, &w, n, memory_order_acq_rel,
                                              memory_order_acquire))
    return n;
  free(n); /* another reader made them first: w is theirs */
  return w;
}

bool gw__registry_try_ref(const gw__backend_ops *ops, uintptr_t p, uintptr_t lo, uintptr_t hi,
                          gw__reghold *out, gw__regsnap *snap) {
  /* Read before the range count: a writer that added a range after this value makes it
   * change (gw__registry_seq), so "empty" is only trusted while that stays unchanged. */
  snap->seq = atomic_load_explicit(&gw__registry_seq, memory_order_acquire);
  snap->ours = false;
  if (atomic_load_explicit(&gw__registry_total, memory_order_relaxed) == 0) return false;
  bool ok = false;
  int rs = br_read_lock(&lock);
  /* Even: no writer holds the lock now. */
  snap->seq = atomic_load_explicit(&gw__registry_seq, memory_order_relaxed);
  table *t = table_for(ops, 0);
  ptrdiff_t i = t ? covering(t, lo, hi) : -1;
  if (i >= 0) {
    range *r = &t->r[i];
    /* A warm reference, on this thread's own count: no line shared with other threads is
     * written (brlock.h: the read lock itself writes only this thread's stripe). */
    warm_counts *w = warm_of(r);
    if (w)
      atomic_fetch_add(&w->slot[rs].n, 1);
    else
      atomic_fetch_add(&r->refs, 1);
    *out = (gw__reghold){.n = 1, .first = r->lo, .warm = w ? rs + 1 : 0, .readonly = r->ro};
    ok = true;
  } else if (t) {
    snap->ours = holds(t, p);
  }
  br_read_unlock(&lock, rs);
  return ok;
}

void gw__registry_snapshot(const gw__backend_ops *ops, uintptr_t p, gw__regsnap *snap) {
  snap->seq = atomic_load_explicit(&gw__registry_seq, memory_order_acquire);
  snap->ours = false;
  if (atomic_load_explicit(&gw__registry_total, memory_order_relaxed) == 0) return;
  int rs = br_read_lock(&lock);
  snap->seq = atomic_load_explicit(&gw__registry_seq, memory_order_relaxed);
  table *t = table_for(ops, 0);
  snap->ours = t && holds(t, p);
  br_read_unlock(&lock, rs);
}

/* Whether any warm count of w is > 0 (read lock held). Sequentially consistent loads: see
 * release_one. */
static bool warm_held(warm_counts *w) {
  for (int s = 0; s < BR_STRIPES; s++)
    if (atomic_load(&w->slot[s].n) != 0) return true;
  return false;
}

/* Drop the one reference h holds (h->n == 1), on its range's warm count or its refs. */
static void release_one(gw_context *ctx, const gw__reghold *h) {
  /* Under the read lock while others still use the range (the common case): an atomic
   * decrement and, for a warm reference, a read of the range's refs. The last reference
   * goes through the write lock. A warm reference is dropped on the stripe it was taken
   * on: no thread-local look-up (usually this thread's stripe; any stripe is correct). */
  int rs = h->warm ? br_read_lock_on(&lock, (int)h->warm - 1) : br_read_lock(&lock);
  table *t = table_for(ctx->ops, 0);
  size_t i = t ? find_start(t, h->first) : 0;
  if (!t || i == t->n) { /* cannot happen: a held range stays in the table */
    br_read_unlock(&lock, rs);
    return;
  }
  range *r = &t->r[i];
  bool maybe_last;
  if (h->warm) {
    /* The count it was taken on (another thread's, when the array moved between threads),
     * which never goes below 0. Then refs and the other counts, in this order, all
     * sequentially consistent: of two releases that drop the last references at once,
     * each reads the other's count after its own decrement, so at least one of them sees
     * that nothing is left (a release of the last refs reference reads the warm counts
     * under the write lock, after its decrement). Only then the write lock: while the
     * range is still in use (the gw_pin of a buffer whose slices are wrapped), no warm
     * release takes it. */
    warm_counts *w = atomic_load_explicit(&r->warm, memory_order_acquire);
    maybe_last = atomic_fetch_sub(&w->slot[h->warm - 1].n, 1) == 1 && atomic_load(&r->refs) == 0 &&
                 !warm_held(w);
  } else {
    maybe_last = atomic_fetch_sub(&r->refs, 1) == 1;
  }
  br_read_unlock(&lock, rs);
  if (!maybe_last) return;
  /* Between the locks someone may have taken a new reference (then it stays) or another
   * releaser may have removed it already (then it is gone, or a new range starts there,
   * which its own last holder removes). */
  wlock();
  i = find_start(t, h->first);
  if (i < t->n && unused(&t->r[i])) remove_at(ctx, t, i);
  wunlock();
}

void gw__registry_release(gw_context *ctx, gw__reghold *h) {
  if (h->n == 1) {
    release_one(ctx, h);
  } else if (h->n > 1) {
    wlock();
    table *t = table_for(ctx->ops, 0);
    if (t) drop_starts(ctx, t, h->starts, h->n);
    wunlock();
    free(h->starts);
  }
  *h = (gw__reghold){0};
}

bool gw__registry_contains(const gw__backend_ops *ops, uintptr_t p, uintptr_t *base, size_t *len) {
  bool found = false;
  if (atomic_load_explicit(&gw__registry_total, memory_order_relaxed) == 0) return false;
  int rs = br_read_lock(&lock);
  table *t = table_for(ops, 0);
  if (t) {
    size_t i = first_after(t, p);
    if (i < t->n && t->r[i].lo <= p) {
      found = true;
      if (base) *base = t->r[i].lo;
      if (len) *len = t->r[i].hi - t->r[i].lo;
    }
  }
  br_read_unlock(&lock, rs);
  return found;
}

size_t gw_registry_ranges(void) {
  size_t n = 0;
  int rs = br_read_lock(&lock);
  for (int i = 0; i < MAX_TABLES; i++) n += tables[i].n;
  br_read_unlock(&lock, rs);
  return n;
}
