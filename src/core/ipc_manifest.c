/*
 * The manifest of a VMM span of more chunks than a handle holds (ipc_manifest.h).
 *
 * A handle's 64 runtime bytes hold 8 chunks (descriptor and size each). A larger span (a
 * PyTorch tensor under expandable_segments spans a 20 MiB chunk per 20 MiB) lists its
 * chunks in a memfd written once and sealed (F_SEAL_WRITE, SHRINK, GROW: no process that
 * holds it can change the list after the handle's digest was taken), which the handle
 * names as it names a chunk: by its descriptor number in the exporter, taken by the
 * importer with pidfd_getfd or received over a Unix socket with the chunks' descriptors.
 *
 * The exporter keeps one manifest per span base: exporting the same span again names the
 * same descriptor (so the importer's table finds the span mapped already: its key holds
 * the descriptor number and digest); a span of other chunks at that base replaces it
 * (closed). Each is a few KiB of memory at most (1024 entries of 8 bytes).
 */
#include "ipc_manifest.h"
#include "vec.h"

#include "codec.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

struct manifest {
  uintptr_t span_base;
  int nchunks;
  uint64_t digest;
  int fd;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct manifest *made; /* lock */
static size_t n_made, cap_made;

void gw__ipc_manifest_lock(int on) { on ? pthread_mutex_lock(&lock) : pthread_mutex_unlock(&lock); }

void gw__ipc_manifest_child(void) {
  for (size_t i = 0; i < n_made; i++) close(made[i].fd); /* the parent's, inherited */
  n_made = 0;
  pthread_mutex_unlock(&lock);
}

static void put_entries(const gw__ipc_share *sh, unsigned char *b) {
  for (int i = 0; i < sh->nchunks; i++) {
    gw__put_le32(b + GW__IPC_MANIFEST_ENTRY * i, (uint32_t)sh->chunk_fd[i]);
    gw__put_le32(b + GW__IPC_MANIFEST_ENTRY * i + 4, (uint32_t)(sh->chunk_bytes[i] >> 12));
  }
}

/* FNV-1a, 64 bits, of the entries' bytes: identity and a check against a wrong file, not
 * a defence against a forger (who could as well forge the handle). */
static uint64_t digest_of(const unsigned char *b, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  return h ? h : 1;
}

uint64_t gw__ipc_manifest_digest(const gw__ipc_share *sh) {
  unsigned char b[GW__IPC_VMM_MAX_CHUNKS * GW__IPC_MANIFEST_ENTRY];
  put_entries(sh, b);
  return digest_of(b, (size_t)sh->nchunks * GW__IPC_MANIFEST_ENTRY);
}

/* A new sealed memfd holding b's n bytes. */
static gw_status new_manifest(const unsigned char *b, size_t n, int *out) {
  int fd = memfd_create("gpuwrap-vmm-manifest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return gw__fail(GW_EBACKEND, "a: memfd_create for the VMM manifest: %s", strerror(errno));
  size_t done = 0;
  while (done < n) {
    ssize_t r = pwrite(fd, b + done, n - done, (off_t)done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    done += (size_t)r;
  }
  int err = done < n ? (errno ? errno : EIO) : 0;
  if (!err && fcntl(fd, F_ADD_SEALS, SEALS) != 0) err = errno;
  if (err) {
    close(fd);
    return gw__fail(GW_EBACKEND, "a: writing the VMM manifest (%zu bytes): %s", n, strerror(err));
  }
  *out = fd;
  return GW_OK;
}

gw_status gw__ipc_manifest_export(gw__ipc_share *sh) {
  unsigned char b[GW__IPC_VMM_MAX_CHUNKS * GW__IPC_MANIFEST_ENTRY];
  size_t n = (size_t)sh->nchunks * GW__IPC_MANIFEST_ENTRY;
  put_entries(sh, b);
  uint64_t digest = digest_of(b, n);
  pthread_mutex_lock(&lock);
  size_t i = 0;
  while (i < n_made && made[i].span_base != sh->span_base) i++;
  sh->manifest_digest = digest;
  if (i < n_made && made[i].nchunks == sh->nchunks && made[i].digest == digest) {
    sh->manifest_fd = made[i].fd;
    pthread_mutex_unlock(&lock);
    return GW_OK;
  }
  if (i == n_made) {
    struct manifest *p = gw__vec_room(made, n_made, &cap_made, sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&lock);
      return gw__fail(GW_ENOMEM, "gw_ipc_export: out of host memory");
    }
    made = p;
  }
  int got = -1;
  gw_status s = new_manifest(b, n, &got);
  if (s == GW_OK) {
    if (i < n_made)
      close(made[i].fd); /* the span's older chunks' list */
    else
      n_made++;
    made[i] = (struct manifest){sh->span_base, sh->nchunks, digest, got};
    sh->manifest_fd = got;
  }
  pthread_mutex_unlock(&lock);
  return s;
}

static gw_status bad(const char *why, int fd) {
  return gw__fail(GW_EINVAL, "h: the VMM manifest (descriptor %d here): %s", fd, why);
}

gw_status gw__ipc_manifest_read(int fd, const gw__ipc_fields *d, int *chunk_fd,
                                uint64_t *chunk_bytes) {
  int count = d->share.nchunks;
  size_t want = (size_t)count * GW__IPC_MANIFEST_ENTRY;
  struct stat st;
  if (fstat(fd, &st) != 0) return bad("fstat failed: not a descriptor", fd);
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & SEALS) != SEALS)
    return bad("not a sealed memfd (the handle's manifest descriptor names another file: a "
               "damaged handle, or the exporter's span changed)",
               fd);
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != want) {
    char why[160];
    snprintf(why, sizeof why, "%lld bytes, not the %zu of the handle's %d chunks",
             (long long)st.st_size, want, count);
    return bad(why, fd);
  }
  unsigned char b[GW__IPC_VMM_MAX_CHUNKS * GW__IPC_MANIFEST_ENTRY];
  size_t done = 0;
  while (done < want) {
    ssize_t r = pread(fd, b + done, want - done, (off_t)done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return bad("cut short while read", fd);
    done += (size_t)r;
  }
  if (digest_of(b, want) != d->share.manifest_digest)
    return bad("its digest is not the handle's (another span's list, or a damaged handle)", fd);
  uint64_t total = 0;
  for (int i = 0; i < count; i++) {
    int32_t cfd = (int32_t)gw__get_le32(b + GW__IPC_MANIFEST_ENTRY * i);
    uint64_t bytes = (uint64_t)gw__get_le32(b + GW__IPC_MANIFEST_ENTRY * i + 4) << 12;
    if (cfd < 0 || bytes == 0) {
      char why[120];
      snprintf(why, sizeof why, "chunk %d: descriptor %d, %llu bytes", i, cfd,
               (unsigned long long)bytes);
      return bad(why, fd);
    }
    chunk_fd[i] = cfd;
    chunk_bytes[i] = bytes;
    total += bytes;
  }
  if (total != d->extent) {
    char why[160];
    snprintf(why, sizeof why, "the chunks' %llu bytes are not the extent %llu",
             (unsigned long long)total, (unsigned long long)d->extent);
    return bad(why, fd);
  }
  return GW_OK;
}
