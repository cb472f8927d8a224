/*
 * `gpuwrap bench` internals: the raw-runtime baseline interface, results, statistics.
 *
 * Every measured path runs twice in one process, side by side: once through the raw
 * runtime (the CPU backend's modelled runtime + memcpy, or the CUDA driver API loaded with
 * dlopen) and once through gpuwrap, on the same buffers. Both sides are synchronous calls
 * (complete on return) and are timed with the same timer (device events on CUDA, the host
 * clock on the CPU backend).
 */
#ifndef GW_TOOL_BENCH_H
#define GW_TOOL_BENCH_H

#include "tool.h"

#include <stdint.h>

/* ---- the raw runtime side -------------------------------------------------------------- */
typedef struct gw_raw {
  const char *name;       /* what the raw side is */
  const char *timer_what; /* how device work is timed */
  const char *query_what; /* the raw pointer query, or NULL if the runtime has none */
  const char *fill_what;  /* the raw device fill */
  const char *device;     /* the device's name as the runtime reports it */
  /* One raw pointer query (NULL if none). 0 on success. */
  int (*query)(const void *p);
  /* Allocate/free GW_MEM_DEVICE, GW_MEM_PINNED or GW_MEM_MANAGED memory. */
  int (*alloc)(gw_memkind kind, size_t bytes, void **out);
  void (*free)(gw_memkind kind, void *p);
  /* Page-lock / unlock host memory (exact base on unregister). */
  int (*host_register)(void *p, size_t bytes);
  int (*host_unregister)(void *p);
  /* Device address of pinned / registered host memory. */
  int (*device_ptr)(void *host, void **dev);
  /* Synchronous copies (addresses as the host knows them: unified addressing). */
  int (*copy)(void *dst, const void *src, size_t bytes);
  int (*copy2d)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                size_t height);
  /* Synchronous fill of `bytes` (multiple of 16) at device address `dev` with a 32-bit word. */
  int (*fill32)(void *dev, size_t bytes, uint32_t word);
  /* The runtime's own 32-bit memset of the same (synchronous); NULL where there is none. */
  int (*memset32)(void *dev, size_t bytes, uint32_t word);
  /* Time device work: begin, then end returns elapsed seconds once the work is done. */
  void (*timer_begin)(void);
  double (*timer_end)(void);
  /* Free device memory in bytes (SIZE_MAX if unlimited/unknown). */
  size_t (*device_free_mem)(void);
  /* Text of the last raw failure. */
  const char *(*last_error)(void);
  void (*close)(void);
} gw_raw;

/* Open the raw side for a backend/device; 0 on success, else err says why. */
int gw_raw_cpu_open(int device, gw_raw *out, char *err, size_t n);
int gw_raw_cuda_open(int device, gw_raw *out, char *err, size_t n);

/* ---- statistics ------------------------------------------------------------------------- */
typedef struct {
  int n;                        /* samples; 0 = not measured */
  double med, min, max, q1, q3; /* seconds per operation */
} gw_stat;
/* Sort samples (seconds per op) in place and summarise them. */
gw_stat gw_stat_of(double *samples, int n);
/* Paired rounds: raw[i] and gw[i] were timed in the same round, side by side (their order
 * alternating round by round), so a drift of the machine lands on both. The summary of the
 * per-round ratios, as gw_result_ratio orients them (gw/raw time for latencies, raw/gw time
 * = gw/raw bandwidth for bandwidths). Call before gw_stat_of sorts either array. */
gw_stat gw_paired_of(const double *raw, const double *gw, int n, int bandwidth);

/* ---- verdicts of --strict ---------------------------------------------------------------- */
typedef enum {
  GW_VERDICT_NONE = -1, /* not measured */
  GW_VERDICT_NO = 0,    /* the whole spread misses the target */
  GW_VERDICT_YES = 1,   /* the whole spread meets it */
  GW_VERDICT_UNSURE = 2 /* the spread straddles the target: within noise, never a miss */
} gw_verdict;
/* A ratio measured as per-round ratios with spread [lo, hi] (the interquartile range)
 * against `target`, an upper bound (at_most: lower is better) or a lower bound. YES / NO
 * only when all of [lo, hi] is on one side of the target; a bound it touches counts as met. */
gw_verdict gw_bench_verdict(double lo, double hi, double target, int at_most);
/* Several verdicts that must all be met (a target at every size): NO if any is NO, else
 * UNSURE if any is UNSURE, else YES if any is YES, else NONE. */
gw_verdict gw_verdict_all(gw_verdict a, gw_verdict b);
/* The verdict function's fixed cases (`gpuwrap bench --self-test`): 0 when all pass. */
int gw_bench_self_test(FILE *f);

/* ---- results ----------------------------------------------------------------------------- */
typedef enum { GW_UNIT_LATENCY, GW_UNIT_BANDWIDTH } gw_unit;

typedef struct {
  char section[16]; /* query, wrap, register, copy, face, zerocopy, fill */
  char path[64];    /* e.g. "device->pinned" */
  char note[96];    /* what each side is, where it is not obvious */
  size_t bytes;     /* bytes moved/registered per op (0 for latencies of size-free ops) */
  int threads;
  gw_unit unit;
  gw_stat raw, gw;
  /* Per-round ratios of paired rounds (gw_paired_of), n == 0 when the sides were not timed
   * side by side. The baseline is the raw side, except for "wrap pageable warm (threads)",
   * whose pairs are against the device wrap from as many threads (its target's ratio). */
  gw_stat paired;
  double allocs_per_op; /* heap allocations per gpuwrap op; < 0 when not counted */
} gw_result;

typedef struct {
  gw_backend backend;
  int device;
  int quick;
  int threads;
  size_t max_size;
  double time_scale; /* multiplies repetition counts */
  /* The host timer's floor (gw_bench_timer_floor): its resolution, the cost of one read,
   * and of one step of an empty timed loop; in seconds. */
  double timer_res_s, timer_read_s, empty_loop_s;
  gw_context *ctx;
  gw_raw raw;
  int errors; /* failed calls: the run is not trustworthy */
  gw_result *res;
  int nres, cap;
} gw_bench;

/* Measure the host timer's floor into b (a few ms). */
void gw_bench_timer_floor(gw_bench *b);

gw_result *gw_bench_add(gw_bench *b, const char *section, const char *path, size_t bytes,
                        gw_unit unit);
/* Record a failure of a call the benchmark depends on (printed on stderr, counted). */
void gw_bench_error(gw_bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Progress lines on stderr, numbered within a section: gw_bench_progress_plan names the
 * section and how many items it has (counted as its loops will run them), then each
 * gw_bench_progress is "[bench SECTION N/M] ...". An item skipped (memory not available)
 * leaves its number unused, so N can end below M; N never goes past M: a section that runs
 * more steps than it planned is reported by gw_bench_progress_done (an error of the run,
 * gw_bench_progress_miscounts) instead of M growing as the count goes. */
void gw_bench_progress_plan(const char *section, int total);
void gw_bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gw_bench_progress_done(void);
int gw_bench_progress_miscounts(void);
/* ratio: gw time / raw time for latencies, gw bandwidth / raw bandwidth for bandwidths
 * (medians); < 0 if either side is missing. */
double gw_result_ratio(const gw_result *r);
/* Bandwidth in GB/s of a median (bytes / seconds). */
double gw_result_gbps(const gw_result *r, const gw_stat *s);
/* Repetitions for `bytes` per op, scaled by the run's time scale. */
int gw_bench_reps(const gw_bench *b, size_t bytes, int min_reps, int max_reps);

/* ---- N-thread latency harness (bench_threads.c) ------------------------------------------ */
/* `n` calls of the measured operation on thread `thread` (0 .. threads-1); 0 on success, else
 * writes why into err. Runs on all threads at once, so it must be thread-safe. */
typedef int (*gw_batch_fn)(void *arg, int thread, int n, char *err, size_t errn);
/* Time fn from `threads` threads (thread 0 is the caller) released together by a barrier:
 * each runs `batches` timed batches of `batch` calls. Returns per-call seconds over every
 * thread's batches (n == 0, and an error recorded as `what`, on failure). If allocs_per_call
 * is not NULL it gets the heap allocations per call inside the timed batches, all threads
 * together (< 0 when not counted). */
gw_stat gw_bench_threads(gw_bench *b, const char *what, int threads, int batches, int batch,
                         gw_batch_fn fn, void *arg, double *allocs_per_call);

/* Sections. */
void gw_bench_query(gw_bench *b);
void gw_bench_wrap(gw_bench *b);
void gw_bench_register(gw_bench *b);
void gw_bench_copy(gw_bench *b);
void gw_bench_face(gw_bench *b);
void gw_bench_fill(gw_bench *b);
void gw_bench_ipc(gw_bench *b); /* bench_ipc.c */

/* Outputs. */
void gw_bench_print_table(const gw_bench *b, FILE *f);
/* The performance targets (docs/BENCHMARKS.md) and their verdicts; returns the number of
 * strict targets whose verdict is NO (UNSURE and informational lines never count). */
int gw_bench_print_targets(const gw_bench *b, FILE *f);
int gw_bench_write_json(const gw_bench *b, const char *path);
int gw_bench_write_csv(const gw_bench *b, const char *path);
int gw_bench_write_svg(const gw_bench *b, const char *path);

/* Page-aligned host memory (pageable), and its release. Pages are touched if `touch`. */
void *gw_bench_host_alloc(size_t bytes, int touch);
void gw_bench_host_free(void *p, size_t bytes);

/* gw_release that accepts NULL. */
static inline void gw_bench_release(gw_array *a) {
  if (a) gw_release(a);
}

#endif /* GW_TOOL_BENCH_H */
