/*
 * gw_info_report: which backends are built in, their devices, what each can do, and the
 * settings. The library owns the report so that every face prints the same one (`gpuwrap
 * info`, `python3 -m gpuwrap info`). What is found is gathered once, then printed as text
 * or JSON, so the two forms cannot disagree.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  gw_ptrinfo pi = {.struct_size = sizeof pi};
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
  gw_ptrinfo pi = {.struct_size = sizeof pi};
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

static gw_status gather(report *r) {
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
    if (br->count && !br->dev) return gw__fail(GW_ENOMEM, "gw_info_report: out of host memory");
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

static void print_text(FILE *f, const report *r, int all_settings) {
  fprintf(f, "gpuwrap %s\n", gw_version_string());
  for (int i = 0; i < 3; i++) {
    const backend_report *br = &r->backend[i];
    if (!br->present) {
      fprintf(f, "\nbackend %s: absent (%s)\n", gw_backend_name(br->id), br->why);
      continue;
    }
    fprintf(f, "\nbackend %s: present, %d device%s\n", gw_backend_name(br->id), br->count,
            br->count == 1 ? "" : "s");
    if (br->id == GW_BACKEND_CPU)
      fprintf(f, "  (a model of a GPU runtime's memory rules, computing on the host)\n");
    for (int d = 0; d < br->count; d++) {
      const device_report *dr = &br->dev[d];
      if (!dr->context_ok) {
        fprintf(f, "  device %d: cannot create a context (%s)\n", d, dr->context_why);
        continue;
      }
      fprintf(f, "  device %d:\n", d);
      for (int k = 0; k < KINDS; k++)
        fprintf(f, "    alloc %-8s %s\n", gw_memkind_name(kinds[k]), dr->alloc[k]);
      fprintf(f, "    pageable host:  %s%s%s%s\n", dr->pageable, *dr->pageable_why ? " (" : "",
              dr->pageable_why, *dr->pageable_why ? ")" : "");
      if (dr->registered_address)
        fprintf(f, "    registered memory: device address %s the host address\n",
                dr->registered_address);
      if (!*dr->pageable_why)
        fprintf(f, "    gw_fill on wrapped host memory: %s%s%s\n", dr->fill_ok ? "ok" : "failed",
                *dr->fill_why ? " - " : "", dr->fill_why);
    }
  }
  if (r->auto_ok)
    fprintf(f, "\nauto picks: %s device %d\n", gw_backend_name(r->auto_backend), r->auto_device);
  else
    fprintf(f, "\nauto picks nothing (%s)\n", r->auto_why);

  fprintf(f, "\nsettings%s:\n",
          all_settings ? "" : " that are set (gpuwrap info --settings lists them all)");
  int shown = 0;
  for (int i = 0; i < gw_setting_count(); i++) {
    gw_setting_info s = {.struct_size = sizeof s};
    if (gw_setting_describe(i, &s) != GW_OK || (!all_settings && !s.value)) continue;
    shown++;
    if (!all_settings) {
      fprintf(f, "  %s=%s%s%s\n", s.name, s.value,
              s.valid ? "" : "   NOT VALID: ", s.valid ? "" : s.problem);
      continue;
    }
    fprintf(f, "  %s (%s, %s; default %s%s%s)\n", s.name, s.component, s.type,
            *s.default_value ? s.default_value : "unset", *s.range ? ", " : "", s.range);
    fprintf(f, "      %s\n", s.doc);
    if (s.value)
      fprintf(f, "      now: %s%s%s\n", s.value,
              s.valid ? "" : "   NOT VALID: ", s.valid ? "" : s.problem);
  }
  if (!shown) fprintf(f, "  (none)\n");
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

/* `, "key": ` and s as a JSON string (NULL: ""), or null for a NULL s where `nullable`. */
static void json_field(FILE *f, const char *key, const char *s, bool nullable) {
  fprintf(f, ", \"%s\": ", key);
  if (!s && nullable)
    fprintf(f, "null");
  else
    json_str(f, s);
}

static void print_json(FILE *f, const report *r, int all_settings) {
  fprintf(f, "{\"version\": ");
  json_str(f, gw_version_string());
  fprintf(f, ", \"backends\": [");
  for (int i = 0; i < 3; i++) {
    const backend_report *br = &r->backend[i];
    fprintf(f, "%s{\"name\": ", i ? ", " : "");
    json_str(f, gw_backend_name(br->id));
    fprintf(f, ", \"present\": %s, \"devices\": [", br->present ? "true" : "false");
    for (int d = 0; d < br->count; d++) {
      const device_report *dr = &br->dev[d];
      fprintf(f, "%s{\"device\": %d, \"context\": %s", d ? ", " : "", d,
              dr->context_ok ? "true" : "false");
      if (!dr->context_ok) {
        json_field(f, "why", dr->context_why, false);
      } else {
        fprintf(f, ", \"alloc\": {");
        for (int k = 0; k < KINDS; k++) {
          fprintf(f, "%s", k ? ", " : "");
          json_str(f, gw_memkind_name(kinds[k]));
          fprintf(f, ": ");
          json_str(f, dr->alloc[k]);
        }
        fprintf(f, "}");
        json_field(f, "pageable", dr->pageable, false);
        if (*dr->pageable_why) json_field(f, "pageable_why", dr->pageable_why, false);
        json_field(f, "registered_address", dr->registered_address, true);
        fprintf(f, ", \"fill_on_wrapped_host\": %s", dr->fill_ok ? "true" : "false");
      }
      fprintf(f, "}");
    }
    fprintf(f, "]");
    if (!br->present) json_field(f, "why", br->why, false);
    fprintf(f, "}");
  }
  fprintf(f, "], \"auto\": ");
  if (r->auto_ok) {
    fprintf(f, "{\"backend\": ");
    json_str(f, gw_backend_name(r->auto_backend));
    fprintf(f, ", \"device\": %d}", r->auto_device);
  } else {
    fprintf(f, "{\"backend\": null");
    json_field(f, "why", r->auto_why, false);
    fprintf(f, "}");
  }
  fprintf(f, ", \"settings\": [");
  int first = 1;
  for (int i = 0; i < gw_setting_count(); i++) {
    gw_setting_info s = {.struct_size = sizeof s};
    if (gw_setting_describe(i, &s) != GW_OK || (!all_settings && !s.value)) continue;
    fprintf(f, "%s{\"name\": ", first ? "" : ", ");
    first = 0;
    json_str(f, s.name);
    json_field(f, "component", s.component, false);
    json_field(f, "type", s.type, false);
    json_field(f, "default", s.default_value, false);
    json_field(f, "range", s.range, false);
    json_field(f, "doc", s.doc, false);
    json_field(f, "value", s.value, true);
    fprintf(f, ", \"valid\": %s", s.valid ? "true" : "false");
    if (!s.valid) json_field(f, "problem", s.problem, false);
    fprintf(f, "}");
  }
  fprintf(f, "]}\n");
}

gw_status gw_info_report(FILE *out, unsigned flags) {
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  if (flags & ~(unsigned)(GW_INFO_JSON | GW_INFO_ALL_SETTINGS))
    return gw__fail(GW_EINVAL, "flags: 0x%x has unknown bits", flags);
  report r;
  memset(&r, 0, sizeof r);
  gw_status st = gather(&r);
  if (st == GW_OK) {
    int all = (flags & GW_INFO_ALL_SETTINGS) != 0;
    if (flags & GW_INFO_JSON)
      print_json(out, &r, all);
    else
      print_text(out, &r, all);
    fflush(out);
  }
  for (int i = 0; i < 3; i++) free(r.backend[i].dev);
  return st == GW_OK ? gw_settings_check() : st;
}
