/*
 * Backend lookup. The CPU backend is built in; GPU backends are plugins loaded with dlopen
 * on first use, so the core loads and runs on machines with no GPU driver even when it was
 * built with CUDA or HIP support. A plugin that cannot be loaded (no driver: its
 * libcuda.so.1 dependency is missing) makes the backend unavailable, with dlerror's text
 * kept for gw_last_error().
 *
 * Where plugins are looked for. No path is compiled in (an install must keep working
 * when its prefix is moved, and must never reach back into the build tree); every place is
 * found at run time, in this order:
 *   1. $GPUWRAP_PLUGIN_DIR, when set and non-empty: an explicit override wins, so it is
 *      looked at first; one that is not a directory (a typo, a path of another machine)
 *      makes the GPU backends unavailable with that reason, rather than be passed over
 *      for whatever plugin the other places have;
 *   2. <dir>/gpuwrap, where <dir> is the directory of the object holding this code
 *      (dladdr): the installed layout, <libdir>/libgpuwrap.so beside <libdir>/gpuwrap/libgpuwrap-cuda.so;
 *   3. <dir> itself: the build tree, where the library and the plugins share build/lib;
 *   4. 2 and 3 again for the symlink-resolved <dir>, when it differs (a Spack view or a
 *      module tree that links libgpuwrap.so in from the real prefix).
 * The first place that HAS the plugin file decides: that file is loaded, or its failure is
 * the answer (so an override is never silently passed over for another copy, and a build
 * tree never picks up a stale installed plugin). When no place has it, the message lists
 * every place looked at. Programs linked with libgpuwrap.a hold this code in the
 * executable itself, so <dir> is the executable's directory there.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  const char *file; /* plugin file name */
  pthread_once_t once;
  const gw__backend_ops *ops;
  char why[448]; /* why it is unavailable (gw_last_error() holds 512 with our prefix) */
} plugin_slot;

static plugin_slot cuda_slot = {"libgpuwrap-cuda.so", PTHREAD_ONCE_INIT, NULL, ""};
static plugin_slot hip_slot = {"libgpuwrap-hip.so", PTHREAD_ONCE_INIT, NULL, ""};

/* The reason text, cut to fit: a long path loses its tail, not the call its buffer. */
__attribute__((format(printf, 3, 4))) static void add_why(plugin_slot *s, size_t at,
                                                          const char *fmt, ...) {
  if (at >= sizeof s->why) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->why + at, sizeof s->why - at, fmt, ap);
  va_end(ap);
}
#define set_why(s, ...) add_why((s), 0, __VA_ARGS__)

/* Directory part of path into buf; 0 when path has none. */
static int dir_of(const char *path, char *buf, size_t n) {
  const char *slash = strrchr(path, '/');
  if (!slash) return 0;
  size_t len = (size_t)(slash - path);
  if (len == 0) len = 1; /* "/libgpuwrap.so": the root directory */
  if (len + 1 > n) return 0;
  memcpy(buf, path, len);
  buf[len] = '\0';
  return 1;
}

/* Path of the object (libgpuwrap.so, or the executable linked with libgpuwrap.a) that holds
 * this code. dladdr names the file as the loader opened it; glibc gives argv[0] for the main
 * program, which may lack a directory (found through PATH): /proc/self/exe then. */
static int own_path(char *buf, size_t n) {
  Dl_info info;
  /* Any address inside this object does; a static object cannot be interposed. */
  if (dladdr(&cuda_slot, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
    if (strlen(info.dli_fname) + 1 > n) return 0;
    memcpy(buf, info.dli_fname, strlen(info.dli_fname) + 1);
    return 1;
  }
  ssize_t len = readlink("/proc/self/exe", buf, n - 1);
  if (len <= 0) return 0;
  buf[len] = '\0';
  return 1;
}

/* The lookup's buffers: ~40 KiB, on the heap rather than on the stack of whichever (maybe
 * small-stacked) thread makes the first context. */
typedef struct {
  char dirs[5][PATH_MAX]; /* candidate directories, in order */
  int n;
  char self[PATH_MAX], dir[PATH_MAX], tidy[PATH_MAX], real[PATH_MAX];
  char file[PATH_MAX + 64];
} search_list;

static void add_dir(search_list *l, const char *dir, const char *sub) {
  if (l->n >= (int)(sizeof l->dirs / sizeof l->dirs[0])) return;
  char *d = l->dirs[l->n];
  int w = sub ? snprintf(d, PATH_MAX, "%s/%s", dir, sub) : snprintf(d, PATH_MAX, "%s", dir);
  if (w < 0 || w >= PATH_MAX) return; /* a path that long cannot exist */
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->dirs[i], d) == 0) return; /* looked at already */
  l->n++;
}

/* The candidate directories in order; 0, or -1 with s->why set when GPUWRAP_PLUGIN_DIR
 * names no directory. */
static int search_dirs(plugin_slot *s, search_list *l) {
  l->n = 0;
  const char *env = gw__setting_text(GW__SET_PLUGIN_DIR);
  if (env) {
    struct stat st;
    int bad = stat(env, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
    if (bad) {
      set_why(s,
              "GPUWRAP_PLUGIN_DIR='%.200s': %s; set it to the directory that holds %s, or unset it",
              env, strerror(bad), s->file);
      return -1;
    }
    add_dir(l, env, NULL);
  }
  if (!own_path(l->self, sizeof l->self)) return 0;
  if (dir_of(l->self, l->dir, sizeof l->dir)) {
    /* The directory as the loader reached it ("bin/../lib" from an $ORIGIN rpath), tidied
     * for the messages; the file's own symlinks are kept for step 4. */
    const char *d = realpath(l->dir, l->tidy) ? l->tidy : l->dir;
    add_dir(l, d, "gpuwrap");
    add_dir(l, d, NULL);
  }
  if (realpath(l->self, l->real) && dir_of(l->real, l->dir, sizeof l->dir)) {
    add_dir(l, l->dir, "gpuwrap");
    add_dir(l, l->dir, NULL);
  }
  return 0;
}

/* The first candidate directory that has the plugin file: its dlopen handle (NULL with
 * s->why set when it cannot be loaded, or when no directory has it). */
static void *open_plugin(plugin_slot *s, search_list *l) {
  for (int i = 0; i < l->n; i++) {
    int w = snprintf(l->file, sizeof l->file, "%s/%s", l->dirs[i], s->file);
    if (w < 0 || (size_t)w >= sizeof l->file) continue;
    /* Only a file that is there counts: its load (or its loader's message, which names the
     * dependency that is missing: "libcuda.so.1: cannot open shared object file") is the
     * answer, rather than "no such file" for the plugin from some other place. */
    if (access(l->file, F_OK) != 0) continue;
    void *h = dlopen(l->file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      /* glibc names the plugin only when the plugin itself is bad; a missing dependency
       * reads "libcuda.so.1: cannot open ...": keep that first and say whose it is. */
      if (e && !strstr(e, s->file))
        set_why(s, "%s (needed by %s)", e, l->file);
      else
        set_why(s, "%s", e ? e : "dlopen failed");
    }
    return h;
  }
  set_why(s, "%s not found (looked in", s->file);
  for (int i = 0; i < l->n; i++) add_why(s, strlen(s->why), "%s %s", i ? "," : "", l->dirs[i]);
  add_why(s, strlen(s->why), "%s; GPUWRAP_PLUGIN_DIR overrides)", l->n ? "" : " nowhere");
  return NULL;
}

/* What a plugin may call in the core: the table every plugin's entry point is given. It
 * lives with the loader that hands it out, above errors.c and settings.c, so that neither of
 * those two calls into the other's direction (errors.c is the bottom of the core). */
static gw_status host_setting_int(int id, long long *out) {
  return gw__setting_int((gw__setting_id)id, out);
}
static const char *host_setting_text(int id) { return gw__setting_text((gw__setting_id)id); }

const gw__host_api gw__host = {.abi = GW__BACKEND_ABI,
                               .fail = gw__fail,
                               .nsettings = GW__SETTING_COUNT,
                               .setting_int = host_setting_int,
                               .setting_text = host_setting_text};

static void load(plugin_slot *s) {
  search_list *l = malloc(sizeof *l);
  if (!l) {
    set_why(s, "%s: out of memory looking for it", s->file);
    return;
  }
  void *h = search_dirs(s, l) == 0 ? open_plugin(s, l) : NULL;
  if (!h) {
    free(l);
    return;
  }
  gw__plugin_entry_fn entry;
  /* POSIX guarantees object and function pointers convert through dlsym's void *. */
  *(void **)(&entry) = dlsym(h, GW__PLUGIN_ENTRY);
  const gw__backend_ops *ops = entry ? entry(&gw__host, GW__BACKEND_ABI) : NULL;
  if (!entry)
    set_why(s, "%s: no %s symbol", l->file, GW__PLUGIN_ENTRY);
  else if (!ops || ops->abi != GW__BACKEND_ABI)
    set_why(s, "%s: backend ABI mismatch (core %d)", l->file, GW__BACKEND_ABI);
  free(l);
  if (!ops || ops->abi != GW__BACKEND_ABI) {
    dlclose(h);
    return;
  }
  /* Kept loaded for the life of the process: arrays may outlive any context. */
  __atomic_store_n(&s->ops, ops, __ATOMIC_RELEASE);
}

static void load_cuda(void) { load(&cuda_slot); }
static void load_hip(void) { load(&hip_slot); }

/* The plugin's ops once loaded, else NULL (never loads it: fork and stream checks only
 * concern backends in use). */
static const gw__backend_ops *loaded(plugin_slot *s) {
  return __atomic_load_n(&s->ops, __ATOMIC_ACQUIRE);
}

void gw__backends_fork_lock(int on) {
  const gw__backend_ops *all[3] = {&gw__cpu_ops, loaded(&cuda_slot), loaded(&hip_slot)};
  for (int k = 0; k < 3; k++) {
    int i = on ? k : 2 - k;
    if (all[i] && all[i]->proc_fork_lock) all[i]->proc_fork_lock(on);
  }
}

const gw__backend_ops *gw__backend_owning_stream(const gw__backend_ops *self, const void *native) {
  const gw__backend_ops *all[3] = {&gw__cpu_ops, loaded(&cuda_slot), loaded(&hip_slot)};
  for (int i = 0; i < 3; i++)
    if (all[i] && all[i] != self && all[i]->stream_owns_native &&
        all[i]->stream_owns_native(native))
      return all[i];
  return NULL;
}

const gw__backend_ops *gw__backend_get(gw_backend b) {
  plugin_slot *s;
  switch (b) {
  case GW_BACKEND_CPU: return &gw__cpu_ops;
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
