/* `gpuwrap bench`: options, the raw side's selection, the sections, the outputs. */
#include "alloc_count.h"
#include "bench.h"

#include <limits.h>

#include <stdlib.h>
#include <string.h>

#define BENCH_EXIT_SKIP 77

static void bench_usage(FILE *f) {
  fprintf(
      f,
      "usage: gpuwrap bench [--backend cpu|cuda|auto] [--device N] [--quick] [--only LIST]\n"
      "                     [--max-size SIZE] [--threads N] [--scale X] [--strict]\n"
      "                     [--json FILE] [--csv FILE] [--svg FILE] [--help]\n"
      "\n"
      "Measures, side by side in one run, the raw runtime call and gpuwrap's for each path,\n"
      "and prints their ratio:\n"
      "  query     gw_pointer_query vs the raw pointer query, per memory kind, 1 and N threads\n"
      "  wrap      gw_wrap + gw_release per kind (device, pinned, managed, pageable cold, and\n"
      "            pageable warm after gw_pin), with heap allocations per wrap; device and\n"
      "            pageable warm also from N threads at once (registry contention)\n"
      "  register  registration cost against size, touched and untouched pages\n"
      "  copy      every pair of host, pinned, device, managed from 4 KiB to --max-size\n"
      "  face      halo faces (x, y, z) of an N^3 float64 device array to/from pinned memory\n"
      "  fill      gw_fill of wrapped pinned memory (zero-copy kernel), device, managed\n"
      "  ipc       gw_ipc_open + gw_release of another process's device memory (cudaMalloc,\n"
      "            an IPC pool's, VMM over 2 chunks): the first open (maps it) vs the raw\n"
      "            import calls + close in alternating rounds, and an open of an allocation\n"
      "            mapped already\n"
      "Raw side: CPU backend - the modelled runtime (gw_cpu_runtime_*) and memcpy, host clock;\n"
      "CUDA - the driver API through dlopen(\"libcuda.so.1\"), CUDA events. HIP has no raw side\n"
      "here. Each measurement: warm-up, many repetitions, median with min/max; inputs rotate\n"
      "through arenas of >= 256 MiB (quick: 8 MiB) so caches do not flatter small sizes.\n"
      "\n"
      "  --quick         small sizes and few repetitions (seconds on the CPU backend; max size 1 "
      "MiB)\n"
      "  --only LIST     comma-separated sections (default: all)\n"
      "  --max-size S    largest size, e.g. 256M (default 1G, quick 1M)\n"
      "  --threads N     threads for the contended query and wrap rows (default 8)\n"
      "  --scale X       multiply repetition counts by X (default 1)\n"
      "  --strict        exit 1 when a strict performance target reads NO. Each ratio target\n"
      "                  is timed in alternating rounds with its raw baseline and judged on\n"
      "                  the per-round ratios: YES / NO only when their interquartile range\n"
      "                  is all on one side of the target, else UNSURE (within noise), which\n"
      "                  never fails. Absolute times (<= 150 ns) are informational, shown\n"
      "                  with the host timer's floor. The targets were set for an H100 or\n"
      "                  H200: the run prints its device; on the CPU backend they are shown,\n"
      "                  not judged, and --strict never fails on a timing\n"
      "  --json/--csv/--svg FILE   write the results (SVG: bandwidth against size per path)\n"
      "Progress goes to stderr, results to stdout. Exit status: 0 ok, 1 a call failed or data\n"
      "was wrong (or --strict and a target missed), 2 bad usage, 77 backend not available.\n");
}

static const struct {
  const char *name;
  void (*run)(gw_bench *);
} sections[] = {
    {"query", gw_bench_query}, {"wrap", gw_bench_wrap}, {"register", gw_bench_register},
    {"copy", gw_bench_copy},   {"face", gw_bench_face}, {"fill", gw_bench_fill},
    {"ipc", gw_bench_ipc},
};
#define NSECTIONS (int)(sizeof sections / sizeof sections[0])

static int in_list(const char *list, const char *name) {
  if (!list) return 1;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == n && strncmp(p, name, n) == 0) return 1;
    if (!e) break;
    p = e + 1;
  }
  return 0;
}

int gw_tool_bench(int argc, char **argv) {
  gw_bench b;
  memset(&b, 0, sizeof b);
  b.threads = 8;
  b.time_scale = 1;
  const char *json = NULL, *csv = NULL, *svg = NULL, *only = NULL;
  int strict = 0;
  size_t max_size = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    const char *why = NULL; /* a bad value: what is wrong with it */
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      bench_usage(stdout);
      return 0;
    } else if (strcmp(a, "--quick") == 0) {
      b.quick = 1;
      continue;
    } else if (strcmp(a, "--strict") == 0) {
      strict = 1;
      continue;
    } else if (strcmp(a, "--self-test") == 0) {
      /* not in --help: the verdict function's fixed cases, for the test suite */
      return gw_bench_self_test(stdout);
    }
    static const char *const with_value[] = {"--backend", "--device",   "--threads",
                                             "--scale",   "--max-size", "--only",
                                             "--json",    "--csv",      "--svg"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
      known |= strcmp(a, with_value[k]) == 0;
    if (!known) return gw_tool_usage_error("bench", "unknown option '%s'", a);
    if (!v) return gw_tool_usage_error("bench", "%s needs a value", a);
    i++;
    if (strcmp(a, "--backend") == 0) {
      if (gw_tool_parse_backend(v, &b.backend) != 0) why = "not one of auto, cpu, cuda, hip";
    } else if (strcmp(a, "--device") == 0) {
      if (gw_tool_parse_int(v, 0, INT_MAX, &b.device) != 0) why = "not a device number (0, 1, ...)";
    } else if (strcmp(a, "--threads") == 0) {
      if (gw_tool_parse_int(v, 1, 256, &b.threads) != 0) why = "not a whole number from 1 to 256";
    } else if (strcmp(a, "--scale") == 0) {
      char *end = NULL;
      double x = strtod(v, &end);
      if (end == v || *end != '\0' || !(x > 0) || x > 1e6)
        why = "not a number above 0 (and at most 1e6)";
      else
        b.time_scale = x;
    } else if (strcmp(a, "--max-size") == 0) {
      max_size = gw_tool_parse_size(v);
      if (max_size < 4096 || max_size > ((size_t)1 << 40))
        why = "not a size from 4K to 1T (bytes, or with a K, M, G suffix)";
    } else if (strcmp(a, "--only") == 0) {
      only = v;
      int any = 0;
      for (int s = 0; s < NSECTIONS; s++) any += in_list(only, sections[s].name);
      if (!any) why = "names no section";
    } else if (strcmp(a, "--json") == 0) {
      json = v;
    } else if (strcmp(a, "--csv") == 0) {
      csv = v;
    } else {
      svg = v;
    }
    if (why) return gw_tool_usage_error("bench", "%s '%s': %s", a, v, why);
  }
  b.max_size = max_size ? max_size : b.quick ? (size_t)1 << 20 : (size_t)1 << 30;

  gw_status s = gw_context_create(b.backend, b.device, &b.ctx);
  if (s != GW_OK) {
    gw_tool_context_error("bench", b.backend, b.device, s);
    return BENCH_EXIT_SKIP;
  }
  b.backend = gw_context_backend(b.ctx);
  char err[512] = "";
  int rc = -1;
  if (b.backend == GW_BACKEND_CPU)
    rc = gw_raw_cpu_open(b.device, &b.raw, err, sizeof err);
  else if (b.backend == GW_BACKEND_CUDA)
    rc = gw_raw_cuda_open(b.device, &b.raw, err, sizeof err);
  else
    snprintf(err, sizeof err, "no raw baseline for the %s backend in this tool",
             gw_backend_name(b.backend));
  if (rc != 0) {
    fprintf(stderr, "gpuwrap bench: raw side unavailable: %s\n", err);
    gw_context_destroy(b.ctx);
    return BENCH_EXIT_SKIP;
  }
  char sz[32];
  printf("gpuwrap bench: backend %s, device %d%s, sizes 4 KiB .. %s\n", gw_backend_name(b.backend),
         b.device, b.quick ? " (quick)" : "", gw_tool_fmt_size(b.max_size, sz, sizeof sz));
  printf("raw side: %s\ntimer: %s\nheap allocations: %s\n", b.raw.name, b.raw.timer_what,
         gw_tool_alloc_counting()
             ? "counted (malloc & co. defined by the tool, see tools/alloc_count.h)"
             : "not counted in this build");

  gw_bench_timer_floor(&b);
  double t0 = gw_tool_now();
  for (int i = 0; i < NSECTIONS; i++)
    if (in_list(only, sections[i].name)) sections[i].run(&b);
  gw_bench_progress_done();
  b.errors += gw_bench_progress_miscounts();

  gw_bench_print_table(&b, stdout);
  int missed = gw_bench_print_targets(&b, stdout);
  printf("\n%d results in %.1f s, %d error(s)\n", b.nres, gw_tool_now() - t0, b.errors);
  int io = 0;
  if (json && gw_bench_write_json(&b, json))
    io = fprintf(stderr, "gpuwrap bench: cannot write %s\n", json);
  if (csv && gw_bench_write_csv(&b, csv))
    io = fprintf(stderr, "gpuwrap bench: cannot write %s\n", csv);
  if (svg && gw_bench_write_svg(&b, svg))
    io = fprintf(stderr, "gpuwrap bench: cannot write %s\n", svg);
  b.raw.close();
  gw_context_destroy(b.ctx);
  free(b.res);
  return b.errors || io || (strict && missed) ? 1 : 0;
}
