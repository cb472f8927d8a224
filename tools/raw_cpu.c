/*
 * Raw baseline for the CPU backend: the modelled runtime's own calls (gw_cpu_runtime_*,
 * the model's cudaMalloc/cudaHostRegister) and plain memcpy/stores, timed with the host
 * clock. The model has no raw pointer-query call, so query ratios are n/a on this backend.
 */
#include "bench.h"
#include "gpuwrap/cpu.h"

#include <string.h>

static int raw_device;
static char raw_err[256];
static double t0;

static int status(gw_status s, const char *what) {
  if (s == GW_OK) return 0;
  snprintf(raw_err, sizeof raw_err, "%s: %s: %s", what, gw_err_name(s), gw_last_error());
  return -1;
}

static int cpu_alloc(gw_memkind kind, size_t bytes, void **out) {
  return status(gw_cpu_runtime_alloc(kind, raw_device, bytes, out), "gw_cpu_runtime_alloc");
}
static void cpu_free(gw_memkind kind, void *p) {
  (void)kind;
  gw_cpu_runtime_free(p);
}
static int cpu_register(void *p, size_t bytes) {
  return status(gw_cpu_runtime_register(p, bytes), "gw_cpu_runtime_register");
}
static int cpu_unregister(void *p) {
  return status(gw_cpu_runtime_unregister(p), "gw_cpu_runtime_unregister");
}
static int cpu_device_ptr(void *host, void **dev) {
  *dev = host; /* one address space */
  return 0;
}
static int cpu_copy(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
  return 0;
}
static int cpu_copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                      size_t height) {
  for (size_t r = 0; r < height; r++)
    memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
  return 0;
}
static int cpu_fill32(void *dev, size_t bytes, uint32_t word) {
  /* 64 bytes by stores, then doubling memcpy: as fast as a fill gets without intrinsics. */
  char *p = dev;
  size_t done = bytes < 64 ? bytes : 64;
  for (size_t i = 0; i + 4 <= done; i += 4) memcpy(p + i, &word, 4);
  while (done < bytes) {
    size_t n = done < bytes - done ? done : bytes - done;
    memcpy(p + done, p, n);
    done += n;
  }
  return 0;
}
static void cpu_timer_begin(void) { t0 = gw_tool_now(); }
static double cpu_timer_end(void) { return gw_tool_now() - t0; }
static size_t cpu_free_mem(void) { return SIZE_MAX; }
static const char *cpu_last_error(void) { return raw_err; }
static void cpu_close(void) {}

int gw_raw_cpu_open(int device, gw_raw *out, char *err, size_t n) {
  (void)err;
  (void)n;
  raw_device = device;
  *out = (gw_raw){
      .name = "CPU model runtime (gw_cpu_runtime_*) + memcpy",
      .timer_what = "host clock (CLOCK_MONOTONIC)",
      .query_what = NULL,
      .fill_what = "32-bit store loop",
      .device = "gpuwrap's CPU model (no GPU)",
      .query = NULL,
      .alloc = cpu_alloc,
      .free = cpu_free,
      .host_register = cpu_register,
      .host_unregister = cpu_unregister,
      .device_ptr = cpu_device_ptr,
      .copy = cpu_copy,
      .copy2d = cpu_copy2d,
      .fill32 = cpu_fill32,
      .timer_begin = cpu_timer_begin,
      .timer_end = cpu_timer_end,
      .device_free_mem = cpu_free_mem,
      .last_error = cpu_last_error,
      .close = cpu_close,
  };
  return 0;
}
