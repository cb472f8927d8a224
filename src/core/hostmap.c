/*
 * What the process's memory map says about a span of host memory, read from
 * /proc/self/maps. Registrations need it for read-only memory (measured on the H200, driver
 * 580.159.04): a plain cudaHostRegister of pages the process cannot write is "invalid
 * value"; cudaHostRegisterReadOnly registers PROT_READ MAP_SHARED file mappings and
 * mprotect'ed anonymous memory, but on a PROT_READ MAP_PRIVATE file mapping it never
 * returns. Only the memory map tells those apart before the call: the pointer query and
 * the registration itself cannot (the one call that would tell is the one that hangs).
 *
 * Cost: one read of /proc/self/maps, stopping at the first mapping past the span (the
 * kernel formats each line under the mm's read lock: ~0.1-0.5 us a mapping, so tens of
 * microseconds in a large process), against ~100 us for a registration. Call it only when
 * the answer matters: before a registration that needs GW__REG_READONLY, and after a plain
 * registration was refused (GW_EINVAL), never on the warm path.
 *
 * Written for any caller, a forked child of a threaded process included: open/read/close
 * only (async-signal-safe), no allocation beyond a stack buffer, no stdio (its FILE lock
 * may be held by a thread that does not exist after fork), no lock of its own. Lines of
 * any length parse, since the parser is a per-character state machine over whatever
 * pieces read() returns. The map can change while it is read (another thread's mmap);
 * each line is one consistent mapping, which is all a registration of live memory needs.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

enum { F_LO, F_HI, F_PERMS, F_OFFSET, F_DEV, F_INODE, F_PATH, F_BAD };

typedef struct {
  int field;
  uintptr_t lo, hi;
  char perms[4];
  int nperms;
  unsigned long long inode;
  size_t npath; /* characters of the path seen (stored: the first sizeof path - 1) */
  char path[sizeof((gw__hostmap *)0)->what_path];
} line;

typedef struct {
  uintptr_t lo, hi, cur; /* the span, and the first byte not accounted for yet */
  int rank; /* what the note describes: 0 none, 1 hole, 2 read-only, 3 private, 4 kernel's */
  int done; /* a mapping at or past hi was seen: stop reading */
  gw__hostmap *out;
} scan;

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Keep the most telling mapping for the caller's message: a private file mapping (the one
 * that must never reach the runtime) beats a read-only one, which beats a hole. */
static void note(scan *s, int rank, uintptr_t lo, uintptr_t hi, const char *perms,
                 const char *path) {
  if (rank <= s->rank) return;
  s->rank = rank;
  gw__hostmap *o = s->out;
  o->what_lo = lo;
  o->what_hi = hi;
  memcpy(o->what_perms, perms, 4);
  o->what_perms[4] = '\0';
  size_t n = strlen(path);
  if (n >= sizeof o->what_path) n = sizeof o->what_path - 1;
  memcpy(o->what_path, path, n);
  o->what_path[n] = '\0';
}

static void hole(scan *s, uintptr_t lo, uintptr_t hi) {
  s->out->mapped = false;
  note(s, 1, lo, hi, "----", "");
}

static void finish_line(scan *s, line *l) {
  if (l->field < F_INODE || l->field == F_BAD || l->nperms != 4 || l->hi <= l->lo)
    return; /* not a mapping line: nothing to learn from it */
  if (l->hi <= s->cur) return;
  if (l->lo >= s->hi) {
    s->done = 1;
    return;
  }
  if (l->lo > s->cur) hole(s, s->cur, l->lo);
  l->path[l->npath < sizeof l->path ? l->npath : sizeof l->path - 1] = '\0';
  bool writable = l->perms[1] == 'w';
  /* A file mapping has an inode; [heap], [stack], [vdso] and anonymous memory have none.
   * A path that is not a [pseudo] name also counts, so a filesystem reporting inode 0
   * errs on the side of "private file" (host-only), never on the side of a hang. */
  bool file = l->inode != 0 || (l->npath > 0 && l->path[0] != '[');
  bool private_file = l->perms[3] == 'p' && file;
  /* The kernel's own pages (the vDSO and its data, the legacy vsyscall page) are mapped
   * with VM_IO/VM_PFNMAP or are no user memory at all: pinning them fails, whatever the
   * runtime's flags (and what such a failure says is the runtime's, not the reason). */
  bool special = !file && l->npath >= 2 && l->path[0] == '[' && l->path[1] == 'v';
  if (!writable) {
    s->out->readonly = true;
    note(s, 2, l->lo, l->hi, l->perms, l->path);
  }
  if (l->perms[0] != 'r') s->out->noaccess = true;
  if (private_file) {
    s->out->private_file = true;
    note(s, 3, l->lo, l->hi, l->perms, l->path);
  }
  if (special) {
    s->out->special = true;
    note(s, 4, l->lo, l->hi, l->perms, l->path);
  }
  s->cur = l->hi < s->hi ? l->hi : s->hi;
  if (s->cur >= s->hi) s->done = 1;
}

/* One character of a hex address field, *v: a digit, or `end`, which moves on to the next
 * field; anything else spoils the line. */
static void hex_char(line *l, char c, char end, uintptr_t *v) {
  int d;
  if (c == end)
    l->field++;
  else if ((d = hexval(c)) >= 0)
    *v = *v * 16 + (uintptr_t)d;
  else
    l->field = F_BAD;
}

/* One character of the map: "lo-hi perms offset major:minor inode   path\n". */
static void feed(scan *s, line *l, char c) {
  if (c == '\n') {
    finish_line(s, l);
    *l = (line){0};
    return;
  }
  switch (l->field) {
  case F_LO: hex_char(l, c, '-', &l->lo); break;
  case F_HI: hex_char(l, c, ' ', &l->hi); break;
  case F_PERMS:
    if (c == ' ')
      l->field = F_OFFSET;
    else if (l->nperms < 4)
      l->perms[l->nperms++] = c;
    else
      l->field = F_BAD;
    break;
  case F_OFFSET:
    if (c == ' ') l->field = F_DEV;
    break;
  case F_DEV:
    if (c == ' ') l->field = F_INODE;
    break;
  case F_INODE:
    if (c == ' ')
      l->field = F_PATH;
    else if (c >= '0' && c <= '9')
      l->inode = l->inode * 10 + (unsigned)(c - '0');
    else
      l->field = F_BAD;
    break;
  case F_PATH:
    if (l->npath == 0 && c == ' ') break; /* the column padding before the path */
    if (l->npath < sizeof l->path - 1) l->path[l->npath] = c;
    l->npath++;
    break;
  default: /* F_BAD: skip to the end of the line */ break;
  }
}

gw_status gw__host_mapping(uintptr_t lo, uintptr_t hi, gw__hostmap *out) {
  *out = (gw__hostmap){.mapped = true, .writable = true};
  if (hi <= lo) return GW_OK; /* an empty span: nothing to ask */
  int fd;
  do fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int e = errno;
    *out = (gw__hostmap){.err = e ? e : EIO};
    return GW_ENOTSUP;
  }
  scan s = {.lo = lo, .hi = hi, .cur = lo, .out = out};
  line l = {0};
  char buf[4096];
  int err = 0;
  while (!s.done) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno ? errno : EIO;
      break;
    }
    if (n == 0) {
      feed(&s, &l, '\n'); /* a last line without its newline */
      break;
    }
    for (ssize_t i = 0; i < n && !s.done; i++) feed(&s, &l, buf[i]);
  }
  close(fd);
  if (err) {
    *out = (gw__hostmap){.err = err};
    return GW_EBACKEND;
  }
  if (s.cur < hi) hole(&s, s.cur, hi);
  out->writable = out->mapped && !out->readonly;
  return GW_OK;
}
