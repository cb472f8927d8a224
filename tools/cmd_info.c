/* `gpuwrap info`: which backends are built in, their devices, and what each can do. */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

static void info_usage(FILE *f) {
  fprintf(f, "usage: gpuwrap info [--help]\n"
             "\n"
             "Lists the backends gpuwrap knows (cpu, cuda, hip): present or absent and why,\n"
             "their devices, and per device what it can do: which memory kinds can be\n"
             "allocated (a tiny gw_alloc of each), whether pageable host memory is reached\n"
             "directly or registered on wrap, and whether gw_fill runs on wrapped pinned memory.\n"
             "Exit status 0 (also when no GPU backend is present).\n");
}

/* Try a tiny allocation of `kind`; "yes" or the reason it is not available. */
static const char *try_alloc(gw_context *ctx, gw_memkind kind, char *buf, size_t n) {
  int64_t shape[1] = {16};
  gw_array *a = NULL;
  gw_status s = gw_alloc(ctx, kind, GW_FLOAT32, 1, shape, &a);
  if (s != GW_OK) {
    snprintf(buf, n, "no (%s: %s)", gw_err_name(s), gw_last_error());
    return buf;
  }
  gw_ptrinfo pi;
  void *probe = gw_host_data(a) ? gw_host_data(a) : gw_data(a);
  if (gw_pointer_query(ctx, probe, &pi) == GW_OK)
    snprintf(buf, n, "yes (query: %s, device %d)", gw_memkind_name(pi.kind), pi.device);
  else
    snprintf(buf, n, "yes");
  gw_release(a);
  return buf;
}

/* What wrapping a page of malloc'd memory does on this device. */
static void probe_pageable(gw_context *ctx) {
  size_t bytes = 1 << 16;
  float *p = malloc(bytes);
  if (!p) return;
  memset(p, 0, bytes);
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  gw_array *a = NULL;
  gw_status s = gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, 0, &a);
  if (s != GW_OK) {
    printf("    pageable host:  wrap failed (%s: %s)\n", gw_err_name(s), gw_last_error());
    free(p);
    return;
  }
  gw_ptrinfo pi;
  memset(&pi, 0, sizeof pi);
  gw_pointer_query(ctx, p, &pi);
  if (pi.flags & GW_PTR_GPUWRAP_REGISTERED)
    printf("    pageable host:  registered on wrap (device cannot read pageable memory directly)\n");
  else if (gw_data(a))
    printf("    pageable host:  used directly, no registration (device reads pageable memory: HMM/ATS)\n");
  else
    printf("    pageable host:  host-only after wrap (not registered, no device address)\n");
  if (gw_data(a))
    printf("    registered memory: device address %s the host address\n",
           gw_data(a) == (void *)p ? "equals" : "differs from");
  float one = 1.0f;
  s = gw_fill(a, &one);
  if (s == GW_OK) s = gw_synchronize(ctx);
  printf("    gw_fill on wrapped host memory: %s%s%s\n", s == GW_OK && p[0] == 1.0f ? "ok" : "failed",
         s == GW_OK ? "" : " - ", s == GW_OK ? "" : gw_last_error());
  gw_release(a);
  free(p);
}

static void describe_device(gw_backend b, int dev) {
  gw_context *ctx = NULL;
  gw_status s = gw_context_create(b, dev, &ctx);
  if (s != GW_OK) {
    printf("  device %d: cannot create a context (%s: %s)\n", dev, gw_err_name(s), gw_last_error());
    return;
  }
  char buf[512];
  printf("  device %d:\n", dev);
  static const gw_memkind kinds[] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED, GW_MEM_HOST};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    printf("    alloc %-8s %s\n", gw_memkind_name(kinds[i]), try_alloc(ctx, kinds[i], buf, sizeof buf));
  probe_pageable(ctx);
  gw_context_destroy(ctx);
}

int gw_tool_info(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      info_usage(stdout);
      return 0;
    }
    /* as gw_tool_usage_error says it: this file is compiled into the Python extension
     * too (`python -m gpuwrap info`), which has the public API only, not tools/util.c */
    fprintf(stderr, "gpuwrap info: unknown option '%s'\nRun 'gpuwrap info --help' for the usage.\n", argv[i]);
    return GW_TOOL_EXIT_USAGE;
  }
  printf("gpuwrap %d.%d.%d\n", GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
  const char *env = getenv("GPUWRAP_BACKEND");
  if (env && *env) printf("GPUWRAP_BACKEND=%s (overrides auto)\n", env);
  static const gw_backend backends[] = {GW_BACKEND_CPU, GW_BACKEND_CUDA, GW_BACKEND_HIP};
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
    gw_backend b = backends[i];
    int count = 0;
    gw_status s = gw_backend_device_count(b, &count);
    if (s != GW_OK) {
      printf("\nbackend %s: absent (%s: %s)\n", gw_backend_name(b), gw_err_name(s), gw_last_error());
      continue;
    }
    printf("\nbackend %s: present, %d device%s\n", gw_backend_name(b), count, count == 1 ? "" : "s");
    if (b == GW_BACKEND_CPU) {
      static const char *model_env[] = {"GPUWRAP_CPU_DEVICES", "GPUWRAP_CPU_PAGEABLE_ACCESS",
                                        "GPUWRAP_CPU_NO_HOST_PTR", "GPUWRAP_CPU_FAIL"};
      printf("  (a model of a GPU runtime's memory rules, computing on the host)\n");
      for (size_t k = 0; k < sizeof model_env / sizeof model_env[0]; k++) {
        const char *v = getenv(model_env[k]);
        if (v && *v) printf("  %s=%s\n", model_env[k], v);
      }
    }
    for (int d = 0; d < count; d++) describe_device(b, d);
  }
  gw_context *ctx = NULL;
  gw_status s = gw_context_create(GW_BACKEND_AUTO, 0, &ctx);
  if (s == GW_OK) {
    printf("\nauto picks: %s device %d\n", gw_backend_name(gw_context_backend(ctx)), gw_context_device(ctx));
    gw_context_destroy(ctx);
  } else {
    printf("\nauto picks nothing (%s: %s)\n", gw_err_name(s), gw_last_error());
  }
  return 0;
}
