/* `gpuwrap info`: which backends are built in, their devices, what each can do, and the
 * settings. What is found is gathered once into a report, then printed as text or JSON, so
 * the two forms cannot disagree. */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

static const char *version_text(void) {
  static char v[32];
  snprintf(v, sizeof v, "%d.%d.%d", GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
  return v;
}

static void info_usage(FILE *f) {
  fprintf(f, "usage: gpuwrap info [--settings] [--json] [--help]\n"
             "\n"
             "Lists the backends gpuwrap knows (cpu, cuda, hip): present or absent and why,\n"
             "their devices, and per device what it can do: which memory kinds can be\n"
             "allocated (a tiny gw_alloc of each), whether pageable host memory is reached\n"
             "directly or registered on wrap, and whether gw_fill runs on wrapped pinned memory.\n"
             "Then the GPUWRAP_* settings that are set.\n"
             "\n"
             "  --settings  every GPUWRAP_* setting: type, default, range, value now, and what it does\n"
             "  --json      the same report as one JSON object (with --settings: every setting)\n"
             "\n"
             "Exit status 0 (also when no GPU backend is present); 1 when a setting is not valid.\n");
}

#define KINDS 4
static const gw_memkind kinds[KINDS] = {GW_MEM_DEVICE, GW_MEM_PINNED, GW_MEM_MANAGED, GW_MEM_HOST};

typedef struct {
  int context_ok;
  char context_why[512];
  char alloc[KINDS][512]; /* "yes (query: ...)" or "no (...)" */
  const char *pageable;   /* what wrapping pageable memory does */
  char pageable_why[512];
  const char *registered_address; /* "equals" / "differs from" / NULL */
  int fill_ok;
  char fill_why[512];
} device_report;

typedef struct {
  gw_backend id;
  int present, count;
  char why[512];
  device_report *dev; /* count entries */
} backend_report;

typedef struct {
  backend_report backend[3];
  int auto_ok;
  gw_backend auto_backend;
  int auto_device;
  char auto_why[512];
} report;

/* Try a tiny allocation of `kind`; "yes ..." or the reason it is not available. */
static void try_alloc(gw_context *ctx, gw_memkind kind, char *buf, size_t n) {
  int64_t shape[1] = {16};
  gw_array *a = NULL;
  gw_status s = gw_alloc(ctx, kind, GW_FLOAT32, 1, shape, &a);
  if (s != GW_OK) {
    snprintf(buf, n, "no (%s: %s)", gw_err_name(s), gw_last_error());
    return;
  }
  gw_ptrinfo pi;
  void *probe = gw_host_data(a) ? gw_host_data(a) : gw_data(a);
  if (gw_pointer_query(ctx, probe, &pi) == GW_OK)
    snprintf(buf, n, "yes (query: %s, device %d)", gw_memkind_name(pi.kind), pi.device);
  else
    snprintf(buf, n, "yes");
  gw_release(a);
}

/* What wrapping a page of malloc'd memory does on this device. */
static void probe_pageable(gw_context *ctx, device_report *r) {
  size_t bytes = 1 << 16;
  float *p = malloc(bytes);
  if (!p) {
    r->pageable = "not probed (out of host memory)";
    return;
  }
  memset(p, 0, bytes);
  int64_t shape[1] = {(int64_t)(bytes / sizeof(float))};
  gw_array *a = NULL;
  gw_status s = gw_wrap(ctx, p, GW_FLOAT32, 1, shape, NULL, 0, &a);
  if (s != GW_OK) {
    r->pageable = "wrap failed";
    snprintf(r->pageable_why, sizeof r->pageable_why, "%s: %s", gw_err_name(s), gw_last_error());
    free(p);
    return;
  }
  gw_ptrinfo pi;
  memset(&pi, 0, sizeof pi);
  gw_pointer_query(ctx, p, &pi);
  if (pi.flags & GW_PTR_GPUWRAP_REGISTERED)
    r->pageable = "registered on wrap (device cannot read pageable memory directly)";
  else if (gw_data(a))
    r->pageable = "used directly, no registration (device reads pageable memory: HMM/ATS)";
  else
    r->pageable = "host-only after wrap (not registered, no device address)";
  if (gw_data(a)) r->registered_address = gw_data(a) == (void *)p ? "equals" : "differs from";
  float one = 1.0f;
  s = gw_fill(a, &one);
  if (s == GW_OK) s = gw_synchronize(ctx);
  r->fill_ok = s == GW_OK && p[0] == 1.0f;
  if (s != GW_OK) snprintf(r->fill_why, sizeof r->fill_why, "%s", gw_last_error());
  gw_release(a);
  free(p);
}

static void probe_device(gw_backend b, int dev, device_report *r) {
  gw_context *ctx = NULL;
  gw_status s = gw_context_create(b, dev, &ctx);
  if (s != GW_OK) {
    snprintf(r->context_why, sizeof r->context_why, "%s: %s", gw_err_name(s), gw_last_error());
    return;
  }
  r->context_ok = 1;
  for (int k = 0; k < KINDS; k++) try_alloc(ctx, kinds[k], r->alloc[k], sizeof r->alloc[k]);
  probe_pageable(ctx, r);
  gw_context_destroy(ctx);
}

static int gather(report *r) {
  static const gw_backend backends[3] = {GW_BACKEND_CPU, GW_BACKEND_CUDA, GW_BACKEND_HIP};
  for (int i = 0; i < 3; i++) {
    backend_report *br = &r->backend[i];
    br->id = backends[i];
    gw_status s = gw_backend_device_count(br->id, &br->count);
    if (s != GW_OK) {
      snprintf(br->why, sizeof br->why, "%s: %s", gw_err_name(s), gw_last_error());
      br->count = 0;
      continue;
    }
    br->present = 1;
    br->dev = br->count ? calloc((size_t)br->count, sizeof *br->dev) : NULL;
    if (br->count && !br->dev) return -1;
    for (int d = 0; d < br->count; d++) probe_device(br->id, d, &br->dev[d]);
  }
  gw_context *ctx = NULL;
  gw_status s = gw_context_create(GW_BACKEND_AUTO, 0, &ctx);
  if (s == GW_OK) {
    r->auto_ok = 1;
    r->auto_backend = gw_context_backend(ctx);
    r->auto_device = gw_context_device(ctx);
    gw_context_destroy(ctx);
  } else {
    snprintf(r->auto_why, sizeof r->auto_why, "%s: %s", gw_err_name(s), gw_last_error());
  }
  return 0;
}

static void print_text(const report *r, int all_settings) {
  printf("gpuwrap %s\n", version_text());
  for (int i = 0; i < 3; i++) {
    const backend_report *br = &r->backend[i];
    if (!br->present) {
      printf("\nbackend %s: absent (%s)\n", gw_backend_name(br->id), br->why);
      continue;
    }
    printf("\nbackend %s: present, %d device%s\n", gw_backend_name(br->id), br->count, br->count == 1 ? "" : "s");
    if (br->id == GW_BACKEND_CPU) printf("  (a model of a GPU runtime's memory rules, computing on the host)\n");
    for (int d = 0; d < br->count; d++) {
      const device_report *dr = &br->dev[d];
      if (!dr->context_ok) {
        printf("  device %d: cannot create a context (%s)\n", d, dr->context_why);
        continue;
      }
      printf("  device %d:\n", d);
      for (int k = 0; k < KINDS; k++) printf("    alloc %-8s %s\n", gw_memkind_name(kinds[k]), dr->alloc[k]);
      printf("    pageable host:  %s%s%s%s\n", dr->pageable, *dr->pageable_why ? " (" : "", dr->pageable_why,
             *dr->pageable_why ? ")" : "");
      if (dr->registered_address) printf("    registered memory: device address %s the host address\n", dr->registered_address);
      if (!*dr->pageable_why)
        printf("    gw_fill on wrapped host memory: %s%s%s\n", dr->fill_ok ? "ok" : "failed", *dr->fill_why ? " - " : "",
               dr->fill_why);
    }
  }
  if (r->auto_ok)
    printf("\nauto picks: %s device %d\n", gw_backend_name(r->auto_backend), r->auto_device);
  else
    printf("\nauto picks nothing (%s)\n", r->auto_why);

  printf("\nsettings%s:\n", all_settings ? "" : " that are set (gpuwrap info --settings lists them all)");
  int shown = 0;
  for (int i = 0; i < gw_setting_count(); i++) {
    gw_setting_info s;
    if (gw_setting_describe(i, &s) != GW_OK || (!all_settings && !s.value)) continue;
    shown++;
    if (!all_settings) {
      printf("  %s=%s%s%s\n", s.name, s.value, s.valid ? "" : "   NOT VALID: ", s.valid ? "" : s.problem);
      continue;
    }
    printf("  %s (%s, %s; default %s%s%s)\n", s.name, s.component, s.type, *s.default_value ? s.default_value : "unset",
           *s.range ? ", " : "", s.range);
    printf("      %s\n", s.doc);
    if (s.value) printf("      now: %s%s%s\n", s.value, s.valid ? "" : "   NOT VALID: ", s.valid ? "" : s.problem);
  }
  if (!shown) printf("  (none)\n");
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(const char *s) {
  putchar('"');
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static void print_json(const report *r, int all_settings) {
  printf("{\"version\": ");
  json_str(version_text());
  printf(", \"backends\": [");
  for (int i = 0; i < 3; i++) {
    const backend_report *br = &r->backend[i];
    printf("%s{\"name\": ", i ? ", " : "");
    json_str(gw_backend_name(br->id));
    printf(", \"present\": %s, \"devices\": [", br->present ? "true" : "false");
    for (int d = 0; d < br->count; d++) {
      const device_report *dr = &br->dev[d];
      printf("%s{\"device\": %d, \"context\": %s", d ? ", " : "", d, dr->context_ok ? "true" : "false");
      if (!dr->context_ok) {
        printf(", \"why\": ");
        json_str(dr->context_why);
      } else {
        printf(", \"alloc\": {");
        for (int k = 0; k < KINDS; k++) {
          printf("%s", k ? ", " : "");
          json_str(gw_memkind_name(kinds[k]));
          printf(": ");
          json_str(dr->alloc[k]);
        }
        printf("}, \"pageable\": ");
        json_str(dr->pageable);
        if (*dr->pageable_why) {
          printf(", \"pageable_why\": ");
          json_str(dr->pageable_why);
        }
        printf(", \"registered_address\": ");
        if (dr->registered_address) json_str(dr->registered_address);
        else printf("null");
        printf(", \"fill_on_wrapped_host\": %s", dr->fill_ok ? "true" : "false");
      }
      printf("}");
    }
    printf("]");
    if (!br->present) {
      printf(", \"why\": ");
      json_str(br->why);
    }
    printf("}");
  }
  printf("], \"auto\": ");
  if (r->auto_ok) {
    printf("{\"backend\": ");
    json_str(gw_backend_name(r->auto_backend));
    printf(", \"device\": %d}", r->auto_device);
  } else {
    printf("{\"backend\": null, \"why\": ");
    json_str(r->auto_why);
    printf("}");
  }
  printf(", \"settings\": [");
  int first = 1;
  for (int i = 0; i < gw_setting_count(); i++) {
    gw_setting_info s;
    if (gw_setting_describe(i, &s) != GW_OK || (!all_settings && !s.value)) continue;
    printf("%s{\"name\": ", first ? "" : ", ");
    first = 0;
    json_str(s.name);
    printf(", \"component\": ");
    json_str(s.component);
    printf(", \"type\": ");
    json_str(s.type);
    printf(", \"default\": ");
    json_str(s.default_value);
    printf(", \"range\": ");
    json_str(s.range);
    printf(", \"doc\": ");
    json_str(s.doc);
    printf(", \"value\": ");
    if (s.value) json_str(s.value);
    else printf("null");
    printf(", \"valid\": %s", s.valid ? "true" : "false");
    if (!s.valid) {
      printf(", \"problem\": ");
      json_str(s.problem);
    }
    printf("}");
  }
  printf("]}\n");
}

int gw_tool_info(int argc, char **argv) {
  int json = 0, all_settings = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      info_usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--settings") == 0) {
      all_settings = 1;
    } else {
      fprintf(stderr, "gpuwrap info: unknown option '%s'\nRun 'gpuwrap info --help' for usage.\n", argv[i]);
      return GW_TOOL_EXIT_USAGE;
    }
  }
  report r;
  memset(&r, 0, sizeof r);
  if (gather(&r) != 0) {
    fprintf(stderr, "gpuwrap info: out of host memory\n");
    return 1;
  }
  if (json) print_json(&r, all_settings);
  else print_text(&r, all_settings);
  for (int i = 0; i < 3; i++) free(r.backend[i].dev);
  if (gw_settings_check() != GW_OK) {
    fprintf(stderr, "gpuwrap info: %s\n", gw_last_error());
    return 1;
  }
  return 0;
}
