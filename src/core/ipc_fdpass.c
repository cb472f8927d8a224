/*
 * Pool and VMM memory handles over a Unix socket (ipc_fdpass.h, docs/IPC.md "Passing the
 * descriptors over a Unix socket").
 *
 * A version-3 handle names descriptors by their numbers in the exporting process, which
 * gw_ipc_open takes with pidfd_getfd: that needs ptrace access to the exporter, which Yama
 * (ptrace_scope 1: only ancestors) and container seccomp profiles refuse. SCM_RIGHTS needs
 * nothing but the socket: gw_ipc_handle_send sends the handle's bytes and the descriptors it
 * names in one message, and gw_ipc_handle_recv files what arrives in a table keyed as the
 * handle names them (exporter pid, nonce, descriptor number), where the import table's
 * take_fd looks first (ipc_table.c).
 *
 * Lifetime of a received descriptor: the first gw_ipc_open of its handle that gets to the
 * import table consumes it (uses it to map, or closes it where the memory is mapped already
 * or the open fails); a newer receive of the same key replaces (closes) it; one never used
 * stays until the process ends (close-on-exec, so an exec does not keep it); a forked child
 * closes its copies (the entries are the parent's to use, once). A handle of this very
 * process received back has nothing to take (its open uses the memory itself): its
 * descriptors are closed on arrival.
 *
 * The exporter's side: a send checks that each descriptor the handle names is still the
 * file export found there (fstat's device and inode, recorded at gw_ipc_export): a pool
 * destroyed or a chunk released, its number reused by another file, is refused rather than
 * sent.
 *
 * One mutex for both lists; it nests inside the import table's (take_fd runs under it).
 */
#include "ipc_fdpass.h"

#include "ipc_manifest.h"
#include "proc_identity.h"
#include "vec.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most descriptors one message carries (Linux's SCM_MAX_FD): a VMM handle whose
 * manifest lists more than SEND_MAX - 1 chunks is refused by the socket path (its open
 * takes them with pidfd_getfd instead; docs/IPC.md). */
#define SEND_MAX 253
/* A message may carry more descriptors than a handle names (a confused or hostile peer):
 * room for all Linux lets one message carry, so that every one that arrived is counted and
 * closed (MSG_CTRUNC, a kernel with a larger limit, is refused as well). */
#define RECV_ROOM SEND_MAX

struct sent_fd { /* a descriptor this process exported */
  int fd;
  dev_t dev;
  ino_t ino;
};

struct got_fd { /* a descriptor received for another process's handle */
  struct got_fd *next;
  uint64_t pid, nonce;
  int their_fd;   /* its number in the exporter, as the handle names it */
  int fd;         /* ours */
  uint64_t group; /* a manifest handle's: its digest (its descriptors are dropped together) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sent_fd *sent; /* lock */
static size_t n_sent, cap_sent;
static struct got_fd *got; /* lock */

void gw__ipc_fd_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }

/* A forked child: the received descriptors are copies of the parent's entries, which the
 * parent may use; the child closes its copies rather than use them a second time (it
 * receives its own). It exports nothing of the parent's (a new identity, proc_identity.c),
 * so the record of sent descriptors goes too. */
void gw__ipc_fd_child(void) {
  for (struct got_fd *g = got, *next; g; g = next) {
    next = g->next;
    close(g->fd);
    free(g);
  }
  got = NULL;
  n_sent = 0;
  pthread_mutex_unlock(&lock);
}

/* ---- the exporter's record ---- */

gw_status gw__ipc_fd_exported(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return gw__fail(GW_EBACKEND, "a: the backend exported descriptor %d, which is not open: %s", fd,
                    strerror(errno));
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < n_sent && sent[i].fd != fd) i++;
  if (i == n_sent) {
    struct sent_fd *p = gw__vec_room(sent, n_sent, &cap_sent, sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&lock);
      return gw__fail(GW_ENOMEM, "gw_ipc_export: out of host memory");
    }
    sent = p;
  }
  if (i == n_sent) n_sent++;
  sent[i] = (struct sent_fd){.fd = fd, .dev = st.st_dev, .ino = st.st_ino};
  pthread_mutex_unlock(&lock);
  return GW_OK;
}

/* Whether this process's descriptor `fd` is still the file it exported as `fd`. */
static gw_status still_exported(int fd, const char *what) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return gw__fail(GW_EBACKEND,
                    "h: names %s descriptor %d, which this process no longer has open (the "
                    "pool destroyed, the chunk released?): %s",
                    what, fd, strerror(errno));
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < n_sent && sent[i].fd != fd) i++;
  bool known = i < n_sent, same = known && sent[i].dev == st.st_dev && sent[i].ino == st.st_ino;
  pthread_mutex_unlock(&lock);
  if (!known)
    return gw__fail(GW_EINVAL,
                    "h: names %s descriptor %d, which gw_ipc_export of this process never "
                    "exported (a handle rewritten?)",
                    what, fd);
  if (!same)
    return gw__fail(GW_EBACKEND,
                    "h: names %s descriptor %d, which is another file now than the one exported "
                    "(the pool destroyed or the chunk released, its number reused)",
                    what, fd);
  return GW_OK;
}

/* ---- the importer's table ---- */

int gw__ipc_fd_claim(uint64_t pid, uint64_t nonce, int fd) {
  pthread_mutex_lock(&lock);
  int mine = -1;
  for (struct got_fd **p = &got; *p; p = &(*p)->next) {
    struct got_fd *g = *p;
    if (g->pid == pid && g->nonce == nonce && g->their_fd == fd) {
      *p = g->next;
      mine = g->fd;
      free(g);
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return mine;
}

static bool listed(const gw__ipc_fields *d) {
  return d->share.kind == GW__IPC_VMM && d->share.nchunks > GW__IPC_VMM_HANDLE_CHUNKS;
}

/* The descriptors d's handle names, in the order a send puts them in its message: a
 * manifest handle's manifest, then the chunks it lists, read from `manifest` (this
 * process's copy of it). *n is their count. */
static gw_status named_fds(const gw__ipc_fields *d, int manifest, int out[SEND_MAX], int *n) {
  *n = 0;
  if (d->share.kind == GW__IPC_POOL) {
    out[0] = d->share.fd;
    *n = 1;
  } else if (listed(d)) {
    if (d->share.nchunks + 1 > SEND_MAX)
      return gw__fail(GW_ENOTSUP,
                      "h: VMM memory of %d chunks: a message over a Unix socket carries at most "
                      "%d descriptors (the manifest and %d chunks); open it with pidfd_getfd "
                      "(gw_ipc_open of the bytes alone), or export a smaller view",
                      d->share.nchunks, SEND_MAX, SEND_MAX - 1);
    int fds[GW__IPC_VMM_MAX_CHUNKS];
    uint64_t bytes[GW__IPC_VMM_MAX_CHUNKS];
    gw_status s = gw__ipc_manifest_read(manifest, d, fds, bytes);
    if (s != GW_OK) return s;
    out[0] = d->share.manifest_fd;
    memcpy(out + 1, fds, (size_t)d->share.nchunks * sizeof(int));
    *n = 1 + d->share.nchunks;
  } else if (d->share.kind == GW__IPC_VMM) {
    for (int i = 0; i < d->share.nchunks; i++) out[i] = d->share.chunk_fd[i];
    *n = d->share.nchunks;
  }
  return GW_OK;
}

void gw__ipc_fd_drop(const gw__ipc_fields *d) {
  if (listed(d)) { /* the manifest's and its chunks' descriptors, as received together */
    pthread_mutex_lock(&lock);
    for (struct got_fd **p = &got; *p;) {
      struct got_fd *g = *p;
      if (g->pid == d->pid && g->nonce == d->nonce && g->group == d->share.manifest_digest) {
        *p = g->next;
        close(g->fd);
        free(g);
      } else {
        p = &g->next;
      }
    }
    pthread_mutex_unlock(&lock);
    return;
  }
  int fds[SEND_MAX], n = 0;
  (void)named_fds(d, -1, fds, &n);
  for (int i = 0; i < n; i++) {
    int mine = gw__ipc_fd_claim(d->pid, d->nonce, fds[i]);
    if (mine >= 0) close(mine);
  }
}

/* ---- the socket ---- */

/* sock is a Unix socket (SCM_RIGHTS is theirs); its type. */
static gw_status check_sock(int sock, int *type) {
  if (sock < 0) return gw__fail(GW_EINVAL, "sock: %d is not a descriptor", sock);
  socklen_t len = sizeof *type;
  if (getsockopt(sock, SOL_SOCKET, SO_TYPE, type, &len) != 0)
    return gw__fail(GW_EINVAL, "sock: descriptor %d is not a socket: %s", sock, strerror(errno));
  struct sockaddr_storage sa;
  len = sizeof sa;
  if (getsockname(sock, (struct sockaddr *)&sa, &len) != 0)
    return gw__fail(GW_EINVAL, "sock: getsockname of %d: %s", sock, strerror(errno));
  if (sa.ss_family != AF_UNIX)
    return gw__fail(GW_EINVAL,
                    "sock: descriptor %d is a socket of address family %d, not a Unix socket "
                    "(AF_UNIX: only those carry descriptors)",
                    sock, (int)sa.ss_family);
  return GW_OK;
}

/* Wait until sock is ready for `events` (the rest of a message on a non-blocking socket). */
static int wait_ready(int sock, short events) {
  struct pollfd p = {.fd = sock, .events = events};
  int r;
  while ((r = poll(&p, 1, -1)) < 0 && errno == EINTR) {
  }
  return r < 0 ? errno : 0;
}

static gw_status sock_error(const char *call, int sock, int err) {
  if (err == EPIPE || err == ECONNRESET || err == ENOTCONN)
    return gw__fail(GW_EBACKEND, "sock: %s on %d: the peer closed the socket: %s", call, sock,
                    strerror(err));
  return gw__fail(err == EBADF || err == ENOTSOCK ? GW_EINVAL : GW_EBACKEND, "sock: %s on %d: %s",
                  call, sock, strerror(err));
}

static const char *kind_name(int kind) {
  return kind == GW__IPC_POOL  ? "pool memory"
         : kind == GW__IPC_VMM ? "VMM memory"
                               : "device memory";
}

gw_status gw_ipc_handle_send(int sock, const gw_ipc_handle *h) {
  if (!h) return gw__fail(GW_EINVAL, "h: NULL");
  gw__ipc_fields d;
  gw_status s = gw__ipc_handle_decode(h, &d);
  if (s != GW_OK) return s;
  int fds[SEND_MAX], n = 0;
  if (d.share.kind != GW__IPC_LEGACY) {
    uint64_t pid, nonce;
    gw__proc_identity(&pid, &nonce);
    if (d.pid != pid || d.nonce != nonce)
      return gw__fail(GW_EINVAL,
                      "h: %s exported by process %llu%s, not by this one (%llu): the descriptors "
                      "it names are the exporter's, so only the exporting process can send them "
                      "(forward the bytes to it, or have it send)",
                      kind_name(d.share.kind), (unsigned long long)d.pid,
                      d.pid == pid ? " (this process before an exec)" : "",
                      (unsigned long long)pid);
    /* A manifest is checked before it is read for the chunks it lists. */
    if (listed(&d)) s = still_exported(d.share.manifest_fd, "VMM memory's manifest");
    if (s == GW_OK) s = named_fds(&d, d.share.manifest_fd, fds, &n);
    if (s != GW_OK) return s;
    for (int i = 0; i < n; i++) {
      s = still_exported(fds[i], kind_name(d.share.kind));
      if (s != GW_OK) return s;
    }
  }
  int type;
  s = check_sock(sock, &type);
  if (s != GW_OK) return s;

  union {
    struct cmsghdr align;
    char b[CMSG_SPACE(SEND_MAX * sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  size_t done = 0;
  while (done < GW_IPC_HANDLE_BYTES) {
    struct iovec iov = {.iov_base = (void *)(h->bytes + done),
                        .iov_len = GW_IPC_HANDLE_BYTES - done};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (done == 0 && n > 0) { /* the descriptors travel with the first byte */
      m.msg_control = ctl.b;
      m.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
      struct cmsghdr *c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
      memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
    }
    /* MSG_NOSIGNAL: a peer gone is an error to return, not SIGPIPE to die of. */
    ssize_t r = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && done == 0)
      return gw__fail(GW_EBUSY,
                      "sock: %d is non-blocking and full: nothing sent; send again when it is "
                      "writable",
                      sock);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int err = wait_ready(sock, POLLOUT); /* the rest of a message begun */
      if (err) return sock_error("poll", sock, err);
      continue;
    }
    if (r < 0) {
      if (errno == EBADF && n > 0)
        return gw__fail(GW_EBACKEND,
                        "sock: sendmsg on %d: %s (a descriptor the handle names was closed "
                        "while it was being sent?)",
                        sock, strerror(errno));
      return sock_error("sendmsg", sock, errno);
    }
    done += (size_t)r;
  }
  return GW_OK;
}

static void close_all(const int *fds, int n) {
  for (int i = 0; i < n; i++) close(fds[i]);
}

/* The descriptors of m's SCM_RIGHTS messages, appended to fds[*n] (closed where there is
 * no room: *extra counts them). */
static void collect_fds(struct msghdr *m, int *fds, int *n, int *extra) {
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*n < RECV_ROOM) {
        fds[(*n)++] = fd;
      } else {
        close(fd);
        (*extra)++;
      }
    }
  }
}

/* One message from sock: the handle's bytes into buf, its descriptors into fds. Every
 * descriptor received is in fds (for the caller to close or keep) whatever it returns. */
static gw_status recv_message(int sock, unsigned char *buf, int *fds, int *nfds) {
  int type;
  gw_status s = check_sock(sock, &type);
  if (s != GW_OK) return s;
  union {
    struct cmsghdr align;
    char b[CMSG_SPACE(RECV_ROOM * sizeof(int))];
  } ctl;
  size_t done = 0;
  int extra = 0;
  bool ctrunc = false, trunc = false, eof = false;
  while (done < GW_IPC_HANDLE_BYTES) {
    struct iovec iov = {.iov_base = buf + done, .iov_len = GW_IPC_HANDLE_BYTES - done};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    /* Close-on-exec: a received descriptor never reaches an exec'd image. */
    ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && done == 0)
      return gw__fail(GW_EBUSY,
                      "sock: %d is non-blocking and has no message waiting; receive again when "
                      "it is readable",
                      sock);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int err = wait_ready(sock, POLLIN); /* the rest of a message begun */
      if (err) return sock_error("poll", sock, err);
      continue;
    }
    if (r < 0) return sock_error("recvmsg", sock, errno);
    collect_fds(&m, fds, nfds, &extra);
    ctrunc |= (m.msg_flags & MSG_CTRUNC) != 0;
    trunc |= (m.msg_flags & MSG_TRUNC) != 0;
    if (r == 0) {
      eof = true;
      break;
    }
    done += (size_t)r;
    if (type != SOCK_STREAM || ctrunc) break; /* one datagram or record is the message */
  }
  if (ctrunc || extra)
    return gw__fail(GW_EINVAL,
                    "sock: the message carried more descriptors than %d (control data "
                    "truncated: MSG_CTRUNC); a handle names at most %d; every one received "
                    "is closed",
                    RECV_ROOM, SEND_MAX);
  if (done == 0 && eof)
    return gw__fail(GW_EBACKEND,
                    "sock: no handle: the peer closed socket %d (or sent an empty message)", sock);
  if (trunc)
    return gw__fail(GW_EINVAL,
                    "sock: a message of more than %d bytes, not a handle (truncated: MSG_TRUNC)",
                    GW_IPC_HANDLE_BYTES);
  if (done < GW_IPC_HANDLE_BYTES)
    return gw__fail(
        GW_EINVAL, "sock: %zu bytes received, not a handle's %d (%s)", done, GW_IPC_HANDLE_BYTES,
        type == SOCK_STREAM ? "the peer closed the socket in the middle" : "a short message");
  return GW_OK;
}

gw_status gw_ipc_handle_recv(int sock, gw_ipc_handle *out) {
  if (!out) return gw__fail(GW_EINVAL, "out: NULL");
  unsigned char buf[GW_IPC_HANDLE_BYTES];
  int fds[RECV_ROOM], n = 0;
  gw_status s = recv_message(sock, buf, fds, &n);
  if (s != GW_OK) {
    close_all(fds, n);
    return s;
  }
  gw__ipc_fields d;
  gw_ipc_handle h;
  memcpy(h.bytes, buf, sizeof h.bytes);
  s = gw__ipc_handle_decode(&h, &d);
  if (s != GW_OK) {
    close_all(fds, n);
    char why[256];
    snprintf(why, sizeof why, "%s", gw_last_error());
    return gw__fail(s,
                    "sock: the %d bytes received are not a valid handle (%d descriptor%s "
                    "with them closed): %s",
                    GW_IPC_HANDLE_BYTES, n, n == 1 ? "" : "s", why);
  }
  int named[SEND_MAX], want = 0;
  /* A manifest handle: the manifest comes first, and lists the chunks' numbers. */
  s = listed(&d) && n > 0 ? named_fds(&d, fds[0], named, &want) : named_fds(&d, -1, named, &want);
  if (s == GW_ENOTSUP && listed(&d)) {
    close_all(fds, n);
    return s;
  }
  if (s != GW_OK) {
    close_all(fds, n);
    char why[256];
    snprintf(why, sizeof why, "%s", gw_last_error());
    return gw__fail(s, "sock: the VMM manifest received (%d descriptor%s closed): %s", n,
                    n == 1 ? "" : "s", why);
  }
  if (listed(&d) && n == 0) want = 1 + d.share.nchunks;
  if (n != want) {
    close_all(fds, n);
    if (d.share.kind == GW__IPC_VMM)
      return gw__fail(GW_EINVAL,
                      "sock: a VMM memory handle of %d chunks came with %d descriptor%s, not %d "
                      "(one per chunk%s); every one received is closed",
                      d.share.nchunks, n, n == 1 ? "" : "s", want,
                      listed(&d) ? ", and the manifest first" : "");
    return gw__fail(GW_EINVAL,
                    "sock: a %s handle came with %d descriptor%s, not %d; every one received is "
                    "closed",
                    kind_name(d.share.kind), n, n == 1 ? "" : "s", want);
  }
  uint64_t pid, nonce;
  gw__proc_identity(&pid, &nonce);
  if (n > 0 && d.pid == pid && d.nonce == nonce) {
    close_all(fds, n); /* our own handle: its open is the memory itself, no descriptor */
    n = 0;
  }
  /* Every entry made before any is filed: a failure files none. */
  struct got_fd *made[SEND_MAX] = {0};
  for (int i = 0; i < n; i++) {
    made[i] = malloc(sizeof *made[i]);
    if (!made[i]) {
      for (int k = 0; k < i; k++) free(made[k]);
      close_all(fds, n);
      return gw__fail(GW_ENOMEM, "gw_ipc_handle_recv: out of host memory");
    }
    *made[i] = (struct got_fd){.pid = d.pid,
                               .nonce = d.nonce,
                               .their_fd = named[i],
                               .fd = fds[i],
                               .group = listed(&d) ? d.share.manifest_digest : 0};
  }
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n; i++) {
    /* A newer receive of the same descriptor replaces the older (closed). */
    for (struct got_fd **p = &got; *p; p = &(*p)->next)
      if ((*p)->pid == d.pid && (*p)->nonce == d.nonce && (*p)->their_fd == named[i]) {
        struct got_fd *old = *p;
        *p = old->next;
        close(old->fd);
        free(old);
        break;
      }
    made[i]->next = got;
    got = made[i];
  }
  pthread_mutex_unlock(&lock);
  memcpy(out->bytes, buf, sizeof out->bytes);
  return GW_OK;
}
