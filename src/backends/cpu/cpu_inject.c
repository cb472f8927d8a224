/*
 * Failure injection and call counters of the CPU backend (include/gpuwrap/cpu_testing.h).
 *
 * A trigger is a countdown: "the nth call from now" is armed as remaining = nth and
 * decremented by each matching call while armed; the call that brings it to 0 fails and
 * disarms it. Counting only while armed is what makes "from now" hold without snapshots
 * of the counters. GPUWRAP_CPU_FAIL is parsed before the first call is counted, so there
 * "from now" means "from the start of the process".
 */
#include "cpu_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

atomic_long gw__cpu_calls[GW_CPU_OP_COUNT];
atomic_int gw__cpu_armed;
atomic_int gw__cpu_inject_ready;

typedef struct {
  long remaining; /* 0: disarmed */
  gw_status status;
} trigger;

static pthread_mutex_t inject_lock = PTHREAD_MUTEX_INITIALIZER;
void gw__cpu_inject_lock(int on) {
  on ? pthread_mutex_lock(&inject_lock) : pthread_mutex_unlock(&inject_lock);
}
static trigger op_trigger[GW_CPU_OP_COUNT]; /* inject_lock */
static trigger any_trigger;                 /* inject_lock */
static atomic_long failures;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static char env_error[256]; /* written once, inside env_once */

static const char *const op_names[GW_CPU_OP_COUNT] = {
    [GW_CPU_OP_CONTEXT_INIT] = "context_init",
    [GW_CPU_OP_QUERY] = "query",
    [GW_CPU_OP_ALLOC] = "alloc",
    [GW_CPU_OP_FREE] = "free",
    [GW_CPU_OP_REGISTER] = "register",
    [GW_CPU_OP_UNREGISTER] = "unregister",
    [GW_CPU_OP_DEVICE_ADDRESS] = "device_address",
    [GW_CPU_OP_COPY] = "copy",
    [GW_CPU_OP_FILL] = "fill",
    [GW_CPU_OP_SYNCHRONIZE] = "synchronize",
    [GW_CPU_OP_STREAM_CREATE] = "stream_create",
    [GW_CPU_OP_STREAM_DESTROY] = "stream_destroy",
    [GW_CPU_OP_STREAM_SYNCHRONIZE] = "stream_synchronize",
    [GW_CPU_OP_STREAM_BORROW] = "stream_borrow",
    [GW_CPU_OP_EVENT_CREATE] = "event_create",
    [GW_CPU_OP_EVENT_RECORD] = "event_record",
    [GW_CPU_OP_STREAM_WAIT_EVENT] = "stream_wait_event",
    [GW_CPU_OP_IPC_EXPORT] = "ipc_export",
    [GW_CPU_OP_IPC_OPEN] = "ipc_open",
    [GW_CPU_OP_IPC_CLOSE] = "ipc_close",
    [GW_CPU_OP_IPC_EVENT_CREATE] = "ipc_event_create",
    [GW_CPU_OP_IPC_EVENT_OPEN] = "ipc_event_open",
    [GW_CPU_OP_IPC_POOL_IMPORT] = "ipc_pool_import",
    [GW_CPU_OP_IPC_VMM_IMPORT] = "ipc_vmm_import",
};

GW_API const char *gw_cpu_op_name(gw_cpu_op op) {
  if ((int)op < 0 || op >= GW_CPU_OP_COUNT) return "unknown";
  return op_names[op];
}

/* inject_lock held. */
static void recount_armed(void) {
  int n = any_trigger.remaining > 0;
  for (int i = 0; i < GW_CPU_OP_COUNT; i++) n += op_trigger[i].remaining > 0;
  atomic_store_explicit(&gw__cpu_armed, n, memory_order_relaxed);
}

/* An injected "failure" must fail: GW_OK or a positive value becomes GW_EBACKEND. */
static gw_status failing(gw_status s) { return (int)s < 0 ? s : GW_EBACKEND; }

/* ---- GPUWRAP_CPU_FAIL=op:N[:status][,op:N[:status]...] ---- */

static int parse_long(const char *s, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end) return -1;
  *out = v;
  return 0;
}

/* A status by number ("-2"), by name ("GW_ENOMEM") or by short name ("ENOMEM"). */
static int parse_status(const char *s, gw_status *out) {
  long v;
  if (parse_long(s, &v) == 0) {
    if (v >= 0 || v < -1000) return -1;
    *out = (gw_status)v;
    return 0;
  }
  static const struct {
    const char *name;
    gw_status value;
  } table[] = {
#define GW_STATUS_NAME_(name, value, text) {#name, name},
      GW_STATUS_TABLE(GW_STATUS_NAME_)
#undef GW_STATUS_NAME_
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    const char *n = table[i].name;
    if (table[i].value < 0 && (strcmp(s, n) == 0 || strcmp(s, n + 3) == 0)) {
      *out = table[i].value;
      return 0;
    }
  }
  return -1;
}

static int parse_entry(char *entry) {
  char *save = NULL;
  char *op = strtok_r(entry, ":", &save);
  char *nth = strtok_r(NULL, ":", &save);
  char *status = strtok_r(NULL, ":", &save);
  if (!op || !nth || strtok_r(NULL, ":", &save)) return -1;
  long n;
  if (parse_long(nth, &n) || n < 0) return -1;
  gw_status st = GW_EBACKEND;
  if (status && parse_status(status, &st)) return -1;
  if (strcmp(op, "any") == 0) {
    any_trigger = (trigger){n, st};
    return 0;
  }
  for (int i = 0; i < GW_CPU_OP_COUNT; i++) {
    if (strcmp(op, op_names[i]) == 0) {
      op_trigger[i] = (trigger){n, st};
      return 0;
    }
  }
  return -1;
}

static void parse_env(void) {
  const char *env = gw__setting_text(GW__SET_CPU_FAIL);
  if (env) {
    char buf[512];
    if (strlen(env) >= sizeof buf) {
      snprintf(env_error, sizeof env_error, "GPUWRAP_CPU_FAIL is longer than %zu characters",
               sizeof buf - 1);
    } else {
      memcpy(buf, env, strlen(env) + 1);
      char *save = NULL;
      for (char *e = strtok_r(buf, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char copy[512];
        memcpy(copy, e, strlen(e) + 1);
        if (parse_entry(e)) {
          /* Silently ignoring a typo would make an error-path test pass without
           * testing anything, so context_init reports it. */
          snprintf(env_error, sizeof env_error,
                   "GPUWRAP_CPU_FAIL: bad entry '%.64s' (expected op:N or op:N:status, op one "
                   "of the gw_cpu_op_name() names or 'any', status a number or GW_E* name)",
                   copy);
          break;
        }
      }
    }
    pthread_mutex_lock(&inject_lock);
    recount_armed();
    pthread_mutex_unlock(&inject_lock);
  }
  atomic_store_explicit(&gw__cpu_inject_ready, 1, memory_order_release);
}

void gw__cpu_inject_init(void) { pthread_once(&env_once, parse_env); }

const char *gw__cpu_inject_env_error(void) {
  gw__cpu_inject_init();
  return env_error[0] ? env_error : NULL;
}

gw_status gw__cpu_inject_slow(gw_cpu_op op, long callno) {
  gw_status st = GW_OK;
  pthread_mutex_lock(&inject_lock);
  trigger *t = &op_trigger[op];
  if (t->remaining > 0 && --t->remaining == 0) st = failing(t->status);
  if (any_trigger.remaining > 0 && --any_trigger.remaining == 0 && st == GW_OK)
    st = failing(any_trigger.status);
  if (st != GW_OK) recount_armed();
  pthread_mutex_unlock(&inject_lock);
  if (st == GW_OK) return GW_OK;
  atomic_fetch_add_explicit(&failures, 1, memory_order_relaxed);
  return gw__fail(st, "injected failure: %s call #%ld", op_names[op], callno);
}

/* ---- public controls ---- */

GW_API void gw_cpu_fail_op(gw_cpu_op op, long nth, gw_status status) {
  if ((int)op < 0 || op >= GW_CPU_OP_COUNT) return;
  gw__cpu_inject_init();
  pthread_mutex_lock(&inject_lock);
  op_trigger[op] = (trigger){nth > 0 ? nth : 0, status};
  recount_armed();
  pthread_mutex_unlock(&inject_lock);
}

GW_API void gw_cpu_fail_any(long nth, gw_status status) {
  gw__cpu_inject_init();
  pthread_mutex_lock(&inject_lock);
  any_trigger = (trigger){nth > 0 ? nth : 0, status};
  recount_armed();
  pthread_mutex_unlock(&inject_lock);
}

GW_API void gw_cpu_fail_reset(void) {
  gw__cpu_inject_init();
  pthread_mutex_lock(&inject_lock);
  memset(op_trigger, 0, sizeof op_trigger);
  any_trigger = (trigger){0, GW_OK};
  recount_armed();
  pthread_mutex_unlock(&inject_lock);
}

GW_API long gw_cpu_failures_injected(void) {
  return atomic_load_explicit(&failures, memory_order_relaxed);
}

GW_API long gw_cpu_op_calls(gw_cpu_op op) {
  if (op == GW_CPU_OP_COUNT) {
    long total = 0;
    for (int i = 0; i < GW_CPU_OP_COUNT; i++)
      total += atomic_load_explicit(&gw__cpu_calls[i], memory_order_relaxed);
    return total;
  }
  if ((int)op < 0 || op > GW_CPU_OP_COUNT) return 0;
  return atomic_load_explicit(&gw__cpu_calls[op], memory_order_relaxed);
}
