/*
 * Backend lookup. The CPU backend is built in; GPU backends are plugins loaded with dlopen
 * on first use, so the core loads and runs on machines with no GPU driver even when it was
 * built with CUDA or HIP support. A plugin that cannot be loaded (no driver: its
 * libcuda.so.1 dependency is missing) makes the backend unavailable, with dlerror's text
 * kept for gw_last_error().
 */
#include "internal.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *file; /* plugin file name */
  pthread_once_t once;
  const gw__backend_ops *ops;
  char why[384]; /* why it is unavailable */
} plugin_slot;

static plugin_slot cuda_slot = {"libgpuwrap-cuda.so", PTHREAD_ONCE_INIT, NULL, ""};
static plugin_slot hip_slot = {"libgpuwrap-hip.so", PTHREAD_ONCE_INIT, NULL, ""};

/* Directory of the library holding this code, so an installed or built tree finds the
 * plugins beside it. */
static int own_dir(char *buf, size_t n) {
  Dl_info info;
  if (!dladdr(&cuda_slot, &info) || !info.dli_fname) return 0;
  const char *slash = strrchr(info.dli_fname, '/');
  if (!slash) return 0;
  size_t len = (size_t)(slash - info.dli_fname);
  if (len + 1 > n) return 0;
  memcpy(buf, info.dli_fname, len);
  buf[len] = '\0';
  return 1;
}

static void *try_open(const char *dir, const char *file, char *why, size_t whyn) {
  char path[PATH_MAX];
  int n = dir ? snprintf(path, sizeof path, "%s/%s", dir, file) : snprintf(path, sizeof path, "%s", file);
  if (n < 0 || (size_t)n >= sizeof path) return NULL; /* a path that long cannot exist */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    /* A plugin that exists but cannot load (missing driver) is the interesting reason:
     * keep it over "no such file" from the other places we look. */
    if (e && (why[0] == '\0' || !strstr(e, "No such file")))
      snprintf(why, whyn, "%s", e);
  }
  return h;
}

static void load(plugin_slot *s) {
  char dir[PATH_MAX];
  const char *env = getenv("GPUWRAP_PLUGIN_DIR");
  void *h = NULL;
  if (env && *env) h = try_open(env, s->file, s->why, sizeof s->why);
  if (!h && own_dir(dir, sizeof dir)) h = try_open(dir, s->file, s->why, sizeof s->why);
  if (!h && own_dir(dir, sizeof dir)) {
    /* installed layout: <libdir>/libgpuwrap.so and <libdir>/gpuwrap/<plugin> */
    size_t len = strlen(dir);
    if (len + 9 < sizeof dir) {
      memcpy(dir + len, "/gpuwrap", 9);
      h = try_open(dir, s->file, s->why, sizeof s->why);
    }
  }
  if (!h) h = try_open(GW_PLUGIN_BUILD_DIR, s->file, s->why, sizeof s->why);
  if (!h) h = try_open(GW_PLUGIN_INSTALL_DIR, s->file, s->why, sizeof s->why);
  if (!h) {
    if (s->why[0] == '\0') snprintf(s->why, sizeof s->why, "%s: not found", s->file);
    return;
  }
  gw__plugin_entry_fn entry;
  /* POSIX guarantees object and function pointers convert through dlsym's void *. */
  *(void **)(&entry) = dlsym(h, GW__PLUGIN_ENTRY);
  if (!entry) {
    snprintf(s->why, sizeof s->why, "%s: no %s symbol", s->file, GW__PLUGIN_ENTRY);
    dlclose(h);
    return;
  }
  const gw__backend_ops *ops = entry(&gw__host, GW__BACKEND_ABI);
  if (!ops || ops->abi != GW__BACKEND_ABI) {
    snprintf(s->why, sizeof s->why, "%s: backend ABI mismatch (core %d)", s->file,
             GW__BACKEND_ABI);
    dlclose(h);
    return;
  }
  /* Kept loaded for the life of the process: arrays may outlive any context. */
  s->ops = ops;
}

static void load_cuda(void) { load(&cuda_slot); }
static void load_hip(void) { load(&hip_slot); }

const gw__backend_ops *gw__backend_get(gw_backend b) {
  plugin_slot *s;
  switch (b) {
  case GW_BACKEND_CPU:
    return &gw__cpu_ops;
  case GW_BACKEND_CUDA:
    s = &cuda_slot;
    pthread_once(&s->once, load_cuda);
    break;
  case GW_BACKEND_HIP:
    s = &hip_slot;
    pthread_once(&s->once, load_hip);
    break;
  default:
    /* Unreachable from the API: gw_context_create and gw_backend_device_count refuse other
     * values (and AUTO) with GW_EINVAL first. Callers turn NULL into GW_ENODEV, so say it
     * in those terms rather than leave an "invalid argument" text behind that status. */
    gw__fail(GW_ENODEV, "backend %d (%s): no such backend", (int)b, gw_backend_name(b));
    return NULL;
  }
  if (!s->ops) gw__fail(GW_ENODEV, "backend %s unavailable: %s", gw_backend_name(b), s->why);
  return s->ops;
}
