/*
 * `gpuwrap demo`: the scenario gpuwrap exists for, step by step, printing what gpuwrap
 * detected (gw_pointer_query) and did, and checking each step. Exit 0 only if every check
 * passed; 77 if the backend asked for is not available; 2 for bad usage.
 */
#include "alloc_count.h"
#include "gpuwrap/cpu.h"
#include "tool.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define DEMO_EXIT_SKIP 77

typedef struct {
  gw_context *ctx;
  int is_cpu;
  int pageable_direct; /* device reads pageable memory: wraps do not register */
  int checks, failed;
} demo;

static void expect(demo *d, int ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect(demo *d, int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("    [%s] ", ok ? " ok " : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  d->checks++;
  if (!ok) d->failed++;
}

static void step(const char *title) { printf("\n== %s\n", title); }

/* Query and print; returns the info (kind UNKNOWN if the query failed). */
static gw_ptrinfo query(demo *d, const char *label, const void *p) {
  gw_ptrinfo pi = {.struct_size = sizeof pi};
  memset(&pi, 0, sizeof pi);
  gw_status s = gw_pointer_query(d->ctx, p, &pi);
  if (s != GW_OK) {
    expect(d, 0, "gw_pointer_query(%s): %s: %s", label, gw_err_name(s), gw_last_error());
    return pi;
  }
  printf("    query %-22s ", label);
  gw_tool_print_ptrinfo(stdout, "", &pi);
  return pi;
}

static int registered(const gw_ptrinfo *pi) { return (pi->flags & GW_PTR_GPUWRAP_REGISTERED) != 0; }

/*
 * Memory made outside gpuwrap's wraps, as another library would: on the CPU backend the
 * modelled runtime's own allocator (cudaMalloc & co.); on a GPU backend a gw_alloc'd array
 * (`owner`) whose address we then wrap as a foreign pointer.
 */
static gw_status foreign_alloc(demo *d, gw_memkind kind, int device, size_t bytes, void **p,
                               gw_array **owner) {
  *owner = NULL;
  if (d->is_cpu) return gw_cpu_runtime_alloc(kind, device, bytes, p);
  gw_context *c = d->ctx;
  gw_status s = GW_OK;
  if (device != gw_context_device(d->ctx)) {
    s = gw_context_create(gw_context_backend(d->ctx), device, &c);
    if (s != GW_OK) return s;
  }
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  s = gw_alloc(c, kind, GW_FLOAT32, 1, shape, owner);
  if (s == GW_OK) *p = kind == GW_MEM_DEVICE ? gw_data(*owner) : gw_host_data(*owner);
  if (c != d->ctx) gw_context_destroy(c);
  return s;
}

static void foreign_free(demo *d, void *p, gw_array *owner) {
  if (d->is_cpu)
    gw_cpu_runtime_free(p);
  else
    gw_release(owner);
}

static int all_equal(const float *v, size_t n, float x) {
  for (size_t i = 0; i < n; i++)
    if (v[i] != x) return 0;
  return 1;
}

static void step_pageable(demo *d) {
  step("1. wrap a pageable host matrix (malloc'd, 64 x 48 float32)");
  enum { R = 64, C = 48 };
  float *m = malloc(sizeof(float) * R * C);
  if (!m) {
    expect(d, 0, "malloc");
    return;
  }
  for (int i = 0; i < R * C; i++) m[i] = (float)i;
  gw_ptrinfo pi = query(d, "before wrap", m);
  expect(d, pi.kind == GW_MEM_HOST && pi.device == -1 && !registered(&pi),
         "plain malloc memory is pageable host memory, no device");
  int64_t shape[2] = {R, C};
  gw_array *a = NULL;
  gw_status s = gw_wrap(d->ctx, m, GW_FLOAT32, 2, shape, NULL, 0, &a);
  expect(d, s == GW_OK, "gw_wrap(m, float32, {64, 48}, flags 0): %s %s", gw_err_name(s),
         s ? gw_last_error() : "");
  if (s != GW_OK) {
    free(m);
    return;
  }
  printf("    array: kind=%s device=%d data=%p host_data=%p owns=%d\n", gw_memkind_name(gw_kind(a)),
         gw_device(a), gw_data(a), gw_host_data(a), gw_owns(a));
  pi = query(d, "after wrap", m);
  d->pageable_direct = !registered(&pi) && pi.kind == GW_MEM_HOST && gw_data(a) != NULL;
  if (d->pageable_direct) {
    printf("    the device reads pageable memory directly (HMM/ATS): nothing to register\n");
  } else {
    expect(d, registered(&pi) && pi.kind == GW_MEM_PINNED,
           "the wrap page-locked the matrix (pinned, gpuwrap-registered)");
    expect(d, pi.base && (char *)pi.base <= (char *)m && pi.extent >= sizeof(float) * R * C,
           "the registration covers the matrix (base %p, %zu bytes)", pi.base, pi.extent);
  }
  expect(d, gw_data(a) != NULL && gw_host_data(a) == (void *)m,
         "device address set, host address is the pointer");
  float v = 2.5f;
  s = gw_fill(a, &v);
  if (s == GW_OK) s = gw_synchronize(d->ctx);
  expect(d, s == GW_OK, "gw_fill(2.5) on the device, then gw_synchronize: %s %s", gw_err_name(s),
         s ? gw_last_error() : "");
  printf("    host sees m[0]=%g m[1]=%g m[%d]=%g\n", (double)m[0], (double)m[1], R * C - 1,
         (double)m[R * C - 1]);
  expect(d, all_equal(m, R * C, 2.5f), "every element of the host matrix is 2.5");

  int64_t start[2] = {3, 0}, vshape[2] = {1, C};
  gw_array *row = NULL;
  s = gw_view(a, start, vshape, NULL, &row);
  if (s == GW_OK) {
    v = 7.0f;
    s = gw_fill(row, &v);
    if (s == GW_OK) s = gw_synchronize(d->ctx);
    gw_release(row);
  }
  expect(d, s == GW_OK && all_equal(m + 3 * C, C, 7.0f) && m[3 * C - 1] == 2.5f && m[4 * C] == 2.5f,
         "gw_fill(7) on a view of row 3 changed row 3 only (m[3][0]=%g, m[2][47]=%g)",
         (double)m[3 * C], (double)m[3 * C - 1]);
  gw_release(a);
  pi = query(d, "after release", m);
  expect(d, pi.kind == GW_MEM_HOST && !registered(&pi), "release unregistered it: pageable again");
  free(m);
}

static void step_device(demo *d, int ndev) {
  step("2. wrap a device array allocated elsewhere");
  size_t bytes = 1 << 20;
  void *p = NULL;
  gw_array *owner = NULL;
  gw_status s = foreign_alloc(d, GW_MEM_DEVICE, gw_context_device(d->ctx), bytes, &p, &owner);
  expect(d, s == GW_OK, "%s of 1 MiB device memory: %s %s",
         d->is_cpu ? "gw_cpu_runtime_alloc (the modelled cudaMalloc)" : "gw_alloc(GW_MEM_DEVICE)",
         gw_err_name(s), s ? gw_last_error() : "");
  if (s != GW_OK) return;
  gw_ptrinfo pi = query(d, "device pointer", p);
  expect(d,
         pi.kind == GW_MEM_DEVICE && pi.device == gw_context_device(d->ctx) && pi.host_ptr == NULL,
         "detected: device memory of device %d, not host-accessible", gw_context_device(d->ctx));
  pi = query(d, "pointer + 1000 bytes", (char *)p + 1000);
  expect(d, pi.base == p && pi.extent >= bytes,
         "an interior pointer reports the allocation's base and extent");

  size_t live = d->is_cpu ? gw_cpu_live_allocations() : 0;
  int64_t shape[2] = {256, 1024};
  gw_array *a = NULL;
  s = gw_wrap(d->ctx, p, GW_FLOAT32, 2, shape, NULL, 0, &a);
  expect(d, s == GW_OK, "gw_wrap(p, float32, {256, 1024}, flags 0): no flag needed: %s %s",
         gw_err_name(s), s ? gw_last_error() : "");
  if (s == GW_OK) {
    printf("    array: kind=%s device=%d data=%p host_data=%p owns=%d\n",
           gw_memkind_name(gw_kind(a)), gw_device(a), gw_data(a), gw_host_data(a), gw_owns(a));
    expect(d,
           gw_kind(a) == GW_MEM_DEVICE && gw_data(a) == p && gw_host_data(a) == NULL && !gw_owns(a),
           "device array over the same memory, borrowed, no host address");
    if (d->is_cpu)
      expect(d, gw_cpu_live_allocations() == live,
             "the wrap allocated no memory in the runtime (%zu allocations before and after)",
             live);
    float v = 4.0f, *h = calloc(256 * 1024, sizeof(float));
    gw_array *ha = NULL;
    s = h ? gw_fill(a, &v) : GW_ENOMEM;
    if (s == GW_OK) s = gw_wrap(d->ctx, h, GW_FLOAT32, 2, shape, NULL, GW_WRAP_NO_REGISTER, &ha);
    if (s == GW_OK) s = gw_copy(ha, a);
    expect(d, s == GW_OK && all_equal(h, 256 * 1024, 4.0f),
           "gw_fill(4) on the device, gw_copy to the host: h[0]=%g %s", h ? (double)h[0] : 0.0,
           s ? gw_last_error() : "");
    gw_release(ha);
    free(h);
    gw_release(a);
    if (d->is_cpu)
      expect(d, gw_cpu_live_allocations() == live,
             "release of a borrowed wrap left the memory allocated");
  }
  foreign_free(d, p, owner);

  if (ndev < 2) {
    printf("    (one device: the other-device case needs 2; on the CPU backend set "
           "GPUWRAP_CPU_DEVICES=2)\n");
    return;
  }
  s = foreign_alloc(d, GW_MEM_DEVICE, 1, bytes, &p, &owner);
  expect(d, s == GW_OK, "allocate on device 1: %s", s ? gw_last_error() : "ok");
  if (s != GW_OK) return;
  pi = query(d, "device-1 pointer", p);
  shape[0] = 16;
  s = gw_wrap(d->ctx, p, GW_FLOAT32, 2, shape, NULL, 0, &a);
  expect(
      d, s == GW_OK && pi.device == 1 && gw_device(a) == 1,
      "a context on device %d wraps memory of device 1: the array's device is the pointer's (%d)",
      gw_context_device(d->ctx), s == GW_OK ? gw_device(a) : -1);
  if (s == GW_OK) gw_release(a);
  foreign_free(d, p, owner);
}

static void step_two_wraps(demo *d) {
  step("3. two wraps of one buffer: registered once, until the last goes");
  size_t n = 64 * 1024; /* floats: 256 KiB */
  float *buf = malloc(n * sizeof(float));
  if (!buf) {
    expect(d, 0, "malloc");
    return;
  }
  memset(buf, 0, n * sizeof(float));
  size_t ranges0 = gw_registry_ranges();
  int64_t all[1] = {(int64_t)n}, half[1] = {(int64_t)(n / 2)};
  gw_array *a = NULL, *b = NULL;
  gw_status s = gw_wrap(d->ctx, buf, GW_FLOAT32, 1, all, NULL, 0, &a);
  expect(d, s == GW_OK, "wrap A: the whole buffer (256 KiB): %s %s", gw_err_name(s),
         s ? gw_last_error() : "");
  if (s != GW_OK) {
    free(buf);
    return;
  }
  gw_ptrinfo pi = query(d, "after wrap A", buf);
  s = gw_wrap(d->ctx, buf + n / 4, GW_FLOAT32, 1, half, NULL, 0, &b);
  expect(d, s == GW_OK, "wrap B: the middle half, overlapping A (no \"already registered\"): %s %s",
         gw_err_name(s), s ? gw_last_error() : "");
  pi = query(d, "after wrap B", buf + n / 4);
  printf("    gpuwrap registry: %zu range(s)\n", gw_registry_ranges());
  gw_release(a);
  pi = query(d, "after releasing A", buf + n / 2);
  if (!d->pageable_direct) expect(d, registered(&pi), "still registered: B holds a reference");
  printf("    gpuwrap registry: %zu range(s)\n", gw_registry_ranges());
  gw_release(b);
  pi = query(d, "after releasing B", buf + n / 2);
  expect(d, !registered(&pi) && pi.kind == GW_MEM_HOST, "unregistered once, with the last wrap");
  expect(d, gw_registry_ranges() == ranges0, "gpuwrap registry back to %zu range(s)", ranges0);
  free(buf);
}

static int deleter_calls;
static void demo_deleter(void *p, void *user) {
  (void)user;
  deleter_calls++;
  free(p);
}

static void step_ownership(demo *d) {
  step("4. owning vs borrowing");
  int64_t shape[1] = {1024};
  float *p = malloc(1024 * sizeof(float));
  gw_array *a = NULL;
  gw_status s = p ? gw_wrap(d->ctx, p, GW_FLOAT32, 1, shape, NULL, 0, &a) : GW_ENOMEM;
  expect(d, s == GW_OK && !gw_owns(a), "borrowed wrap (flags 0): gw_owns = %d",
         s == GW_OK ? gw_owns(a) : -1);
  gw_release(a);
  if (p) {
    p[0] = 1.0f; /* still ours after the release */
    free(p);
  }

  p = malloc(1024 * sizeof(float));
  if (!p) {
    expect(d, 0, "malloc");
    return;
  }
  int observe = gw_tool_alloc_counting();
  gw_tool_watch_free(p);
  s = gw_wrap(d->ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a);
  expect(d, s == GW_OK && gw_owns(a),
         "owning wrap (GW_WRAP_OWN) of a malloc'd buffer: gw_owns = %d %s",
         s == GW_OK ? gw_owns(a) : -1, s ? gw_last_error() : "");
  if (s != GW_OK) {
    free(p);
    return;
  }
  gw_array *second = NULL;
  s = gw_wrap(d->ctx, p, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &second);
  printf("    second owning wrap of it: %s: %s\n", gw_err_name(s), gw_last_error());
  expect(d, s == GW_EOWNED, "a second owner is refused (it would be a double free)");
  if (s == GW_OK) gw_release(second);
  int64_t start[1] = {10}, vshape[1] = {100};
  gw_array *view = NULL;
  s = gw_view(a, start, vshape, NULL, &view);
  expect(d, s == GW_OK, "a view of elements 10..109 keeps the buffer alive");
  gw_release(a);
  if (observe)
    expect(d, !gw_tool_watch_freed(),
           "after releasing the array: not freed yet (the view holds it)");
  gw_release(view);
  if (observe)
    expect(d, gw_tool_watch_freed(), "after releasing the view: free() was called on the buffer");
  else
    printf("    (this build cannot observe free(); see GW_TOOL_ALLOC_COUNT)\n");

  deleter_calls = 0;
  p = malloc(1024 * sizeof(float));
  s = p ? gw_wrap_with_deleter(d->ctx, p, GW_FLOAT32, 1, shape, NULL, 0, demo_deleter, NULL, &a)
        : GW_ENOMEM;
  expect(d, s == GW_OK, "gw_wrap_with_deleter: %s", s ? gw_last_error() : "ok");
  if (s == GW_OK) {
    gw_retain(a);
    gw_release(a);
    expect(d, deleter_calls == 0, "deleter not called while a reference remains");
    gw_release(a);
    expect(d, deleter_calls == 1, "deleter called exactly once, with the last reference (%d call)",
           deleter_calls);
  } else {
    free(p);
  }

  if (d->is_cpu) {
    void *dp = NULL;
    if (gw_cpu_runtime_alloc(GW_MEM_DEVICE, 0, 4096, &dp) == GW_OK) {
      size_t live = gw_cpu_live_allocations();
      s = gw_wrap(d->ctx, dp, GW_FLOAT32, 1, shape, NULL, GW_WRAP_OWN, &a);
      if (s == GW_OK) gw_release(a);
      expect(d, s == GW_OK && gw_cpu_live_allocations() == live - 1,
             "owning wrap of device memory: release ran the backend's device free (%zu -> %zu live "
             "allocations)",
             live, gw_cpu_live_allocations());
      if (s != GW_OK) gw_cpu_runtime_free(dp);
    }
  }
}

static void step_managed_pinned(demo *d) {
  step("5. a managed and a pinned allocation, told apart");
  size_t bytes = 1 << 16;
  void *pp = NULL, *mp = NULL;
  gw_array *po = NULL, *mo = NULL;
  int dev = gw_context_device(d->ctx);
  gw_status s = foreign_alloc(d, GW_MEM_PINNED, dev, bytes, &pp, &po);
  expect(d, s == GW_OK, "pinned allocation (cudaMallocHost-like): %s", s ? gw_last_error() : "ok");
  gw_status sm = foreign_alloc(d, GW_MEM_MANAGED, dev, bytes, &mp, &mo);
  if (sm == GW_ENOTSUP)
    printf("    managed memory not supported here: %s\n", gw_last_error());
  else
    expect(d, sm == GW_OK, "managed allocation (cudaMallocManaged-like): %s",
           sm ? gw_last_error() : "ok");
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  if (s == GW_OK) {
    gw_ptrinfo pi = query(d, "pinned pointer", pp);
    gw_array *a = NULL;
    gw_status w = gw_wrap(d->ctx, pp, GW_FLOAT32, 1, shape, NULL, 0, &a);
    expect(d,
           pi.kind == GW_MEM_PINNED && w == GW_OK && gw_kind(a) == GW_MEM_PINNED &&
               gw_host_data(a) && gw_data(a),
           "pinned: host and device addresses, not gpuwrap-registered%s",
           registered(&pi) ? " (BUT FLAGGED)" : "");
    if (w == GW_OK) gw_release(a);
    foreign_free(d, pp, po);
  }
  if (sm == GW_OK) {
    gw_ptrinfo pi = query(d, "managed pointer", mp);
    gw_array *a = NULL;
    gw_status w = gw_wrap(d->ctx, mp, GW_FLOAT32, 1, shape, NULL, 0, &a);
    expect(d,
           pi.kind == GW_MEM_MANAGED && w == GW_OK && gw_kind(a) == GW_MEM_MANAGED &&
               gw_host_data(a) && gw_data(a),
           "managed: host and device both see it");
    if (w == GW_OK) gw_release(a);
    foreign_free(d, mp, mo);
  }
  if (!d->is_cpu) return;
  /* Host memory registered by someone else: gpuwrap uses it, never unregisters or frees it. */
  size_t pg = 4096;
  char *h = aligned_alloc(pg, 4 * pg);
  if (!h) return;
  memset(h, 0, 4 * pg);
  s = gw_cpu_runtime_register(h, 4 * pg);
  expect(d, s == GW_OK, "someone else registers a host buffer (cudaHostRegister-like)");
  if (s != GW_OK) {
    free(h);
    return;
  }
  gw_ptrinfo pi = query(d, "foreign-registered", h);
  expect(d, pi.kind == GW_MEM_PINNED && (pi.flags & GW_PTR_HOST_REGISTERED) && !registered(&pi),
         "pinned, registered by someone else (not by gpuwrap)");
  size_t regs = gw_cpu_live_registrations();
  gw_array *a = NULL;
  int64_t n4[1] = {(int64_t)(pg)};
  s = gw_wrap(d->ctx, h, GW_FLOAT32, 1, n4, NULL, GW_WRAP_OWN, &a);
  printf("    owning wrap of it: %s: %s\n", gw_err_name(s), gw_last_error());
  expect(d, s == GW_EINVAL,
         "GW_WRAP_OWN refused: gpuwrap will not free or unregister memory it did not register");
  if (s == GW_OK) gw_release(a);
  s = gw_wrap(d->ctx, h, GW_FLOAT32, 1, n4, NULL, 0, &a);
  if (s == GW_OK) gw_release(a);
  expect(d, s == GW_OK && gw_cpu_live_registrations() == regs,
         "borrowed wrap and release left the registration alone");
  gw_cpu_runtime_unregister(h);
  free(h);
}

static void step_bad_input(demo *d) {
  step("6. bad input and what gpuwrap says");
  int64_t shape[1] = {10};
  gw_array *a = NULL;
  gw_status s = gw_wrap(d->ctx, NULL, GW_FLOAT32, 1, shape, NULL, 0, &a);
  printf("    gw_wrap(NULL, 10 elements): %s: %s\n", gw_err_name(s), gw_last_error());
  expect(d, s == GW_EINVAL && a == NULL && gw_last_error()[0],
         "refused with GW_EINVAL and a message, out left untouched");
  char *buf = malloc(64);
  if (!buf) return;
  s = gw_wrap(d->ctx, buf + 1, GW_FLOAT32, 1, shape, NULL, 0, &a);
  printf("    gw_wrap(p + 1 byte, float32): %s: %s\n", gw_err_name(s), gw_last_error());
  expect(d, s == GW_EINVAL, "a misaligned pointer is refused");
  int64_t neg[1] = {-3};
  s = gw_wrap(d->ctx, buf, GW_FLOAT32, 1, neg, NULL, 0, &a);
  printf("    gw_wrap(shape {-3}): %s: %s\n", gw_err_name(s), gw_last_error());
  expect(d, s == GW_EINVAL, "a negative extent is refused");
  s = gw_wrap(d->ctx, buf, GW_FLOAT32, 1, shape, NULL, 1u << 30, &a);
  printf("    gw_wrap(flags 1<<30): %s: %s\n", gw_err_name(s), gw_last_error());
  expect(d, s == GW_EINVAL, "unknown flags are refused");
  int64_t zero[1] = {0};
  s = gw_wrap(d->ctx, NULL, GW_FLOAT32, 1, zero, NULL, 0, &a);
  expect(d, s == GW_OK, "but NULL with zero elements is a valid empty array: %s", gw_err_name(s));
  if (s == GW_OK) gw_release(a);
  free(buf);

  void *p = NULL;
  gw_array *owner = NULL;
  s = foreign_alloc(d, GW_MEM_DEVICE, gw_context_device(d->ctx), 4096, &p, &owner);
  if (s != GW_OK) return;
  int64_t big[1] = {2048}; /* 8 KiB of float32 over a 4 KiB allocation */
  s = gw_wrap(d->ctx, p, GW_FLOAT32, 1, big, NULL, 0, &a);
  printf("    gw_wrap(8 KiB over a 4 KiB device allocation): %s: %s\n", gw_err_name(s),
         gw_last_error());
  expect(d, s == GW_ERANGE, "a span past the allocation is refused with GW_ERANGE");
  if (s == GW_OK) gw_release(a);
  foreign_free(d, p, owner);
}

static void demo_usage(FILE *f) {
  fprintf(
      f,
      "usage: gpuwrap demo [--backend cpu|cuda|hip|auto] [--device N] [--help]\n"
      "\n"
      "Walks through what gpuwrap is for, printing what it detected and did at each step,\n"
      "and checks every step:\n"
      "  1. wrap a pageable host matrix: registered, filled on the device, seen by the host\n"
      "  2. wrap device memory allocated elsewhere: kind and device detected, nothing allocated\n"
      "  3. two wraps of one buffer: registered until the last one goes\n"
      "  4. owning vs borrowing: GW_WRAP_OWN frees on release, deleters run once\n"
      "  5. a managed and a pinned allocation told apart\n"
      "  6. bad input, with gw_err_name() and gw_last_error()\n"
      "Exit status: 0 every check passed, 1 a check failed, 77 backend not available,\n"
      "2 bad usage. Default backend: auto (GPUWRAP_BACKEND overrides it).\n");
}

int gw_tool_demo(int argc, char **argv) {
  gw_backend backend = GW_BACKEND_AUTO;
  int device = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      demo_usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--backend") == 0 || strcmp(argv[i], "--device") == 0) {
      const char *opt = argv[i], *v = i + 1 < argc ? argv[++i] : NULL, *why = NULL;
      if (!v)
        why = "needs a value";
      else if (opt[2] == 'b' && gw_tool_parse_backend(v, &backend) != 0)
        why = "not one of auto, cpu, cuda, hip";
      else if (opt[2] == 'd' && gw_tool_parse_int(v, 0, INT_MAX, &device) != 0)
        why = "not a device number (0, 1, ...)";
      if (why)
        return gw_tool_usage_error("demo", "%s%s%s%s: %s", opt, v ? " '" : "", v ? v : "",
                                   v ? "'" : "", why);
    } else {
      return gw_tool_usage_error("demo", "unknown option '%s'", argv[i]);
    }
  }
  demo d;
  memset(&d, 0, sizeof d);
  gw_status s = gw_context_create(backend, device, &d.ctx);
  if (s != GW_OK) {
    gw_tool_context_error("demo", backend, device, s);
    return DEMO_EXIT_SKIP;
  }
  gw_backend b = gw_context_backend(d.ctx);
  d.is_cpu = b == GW_BACKEND_CPU;
  int ndev = 0;
  gw_backend_device_count(b, &ndev);
  printf("gpuwrap demo: backend %s, device %d (of %d)%s\n", gw_backend_name(b),
         gw_context_device(d.ctx), ndev,
         d.is_cpu ? " - the CPU backend models a GPU runtime's memory rules" : "");
  size_t regs0 = d.is_cpu ? gw_cpu_live_registrations() : 0;
  size_t allocs0 = d.is_cpu ? gw_cpu_live_allocations() : 0;

  step_pageable(&d);
  step_device(&d, ndev);
  step_two_wraps(&d);
  step_ownership(&d);
  step_managed_pinned(&d);
  step_bad_input(&d);

  step("afterwards");
  expect(&d, gw_registry_ranges() == 0, "gpuwrap's registry is empty (%zu ranges)",
         gw_registry_ranges());
  if (d.is_cpu) {
    expect(&d, gw_cpu_live_registrations() == regs0 && gw_cpu_live_allocations() == allocs0,
           "the modelled runtime holds what it held before: %zu registrations, %zu allocations",
           gw_cpu_live_registrations(), gw_cpu_live_allocations());
  }
  gw_context_destroy(d.ctx);
  printf("\ndemo: %d checks, %d failed\n", d.checks, d.failed);
  return d.failed ? 1 : 0;
}
