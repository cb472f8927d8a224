// Kernels of the GPU backend: N-d strided fill and copy, and a vectorised contiguous fill.
// Compiled by nvcc for CUDA and by hipcc for HIP (-DGW_VENDOR_HIP); the C backend reaches
// them only through the extern "C" launchers declared in kernels.h.
//
// Every kernel is a grid-stride loop (the grid is capped at the blocks resident on the
// device, any size works; the contiguous fill of device memory from 64 MiB runs one store
// per thread instead, gwk_fill says why). Strided kernels move "words": the widest of
// 16/8/4/2/1 bytes that divides the element size, the addresses and all strides, so
// complex64 with 4-byte alignment and complex128 with 8-byte alignment work as well as
// aligned data.
#include <stdint.h>
#include <string.h>

#if defined(GW_VENDOR_HIP)
#include <hip/hip_runtime.h>
typedef hipStream_t gwk_stream;
#define gwkGetLastError() ((int)hipGetLastError())
#define gwkOccupancy(n, k, t) \
  (hipOccupancyMaxActiveBlocksPerMultiprocessor((n), (k), (t), 0) == hipSuccess)
#else
#include <cuda_runtime.h>
typedef cudaStream_t gwk_stream;
#define gwkGetLastError() ((int)cudaGetLastError())
#define gwkOccupancy(n, k, t) \
  (cudaOccupancyMaxActiveBlocksPerMultiprocessor((n), (k), (t), 0) == cudaSuccess)
#endif

#include "kernels.h"

namespace {

constexpr int KMAX = GW_MAX_DIMS + 1; // + the words-within-an-element dim
constexpr int THREADS = 256;

struct alignas(16) V16 {
  uint64_t a, b;
};

// Shape and up to two stride sets, passed by value (well under the parameter limit).
struct Region {
  int ndim;
  int64_t shape[KMAX];
  int64_t s0[KMAX]; // dst strides, bytes
  int64_t s1[KMAX]; // src strides, bytes
};

template <typename W> struct Pat { W w[16 / sizeof(W)]; };

template <typename W>
__global__ void k_fill_nd(Region r, char *dst, Pat<W> pat, int wpe, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x) {
    uint64_t rem = i;
    int64_t off = 0;
    for (int d = r.ndim - 1; d >= 0; d--) {
      uint64_t ext = (uint64_t)r.shape[d];
      off += (int64_t)(rem % ext) * r.s0[d];
      rem /= ext;
    }
    // With wpe > 1 the innermost dim is the word within the element: index i % wpe.
    *reinterpret_cast<W *>(dst + off) = pat.w[wpe == 1 ? 0 : (int)(i % (uint64_t)wpe)];
  }
}

// I: the index type (32 bits below 2^32 elements: see copy_item_in).
template <typename W, typename I>
__device__ __forceinline__ void copy_nd_in(const Region &r, char *dst, const char *src, I n) {
  const I step = (I)((uint64_t)gridDim.x * blockDim.x); // fits I: the caller checked n + step
  for (I i = (I)(blockIdx.x * (uint64_t)blockDim.x + threadIdx.x); i < n; i += step) {
    I rem = i;
    int64_t od = 0, os = 0;
    for (int d = r.ndim - 1; d >= 0; d--) {
      I ext = (I)r.shape[d];
      int64_t c = (int64_t)(rem % ext);
      rem /= ext;
      od += c * r.s0[d];
      os += c * r.s1[d];
    }
    *reinterpret_cast<W *>(dst + od) = *reinterpret_cast<const W *>(src + os);
  }
}

template <typename W> __global__ void k_copy_nd(Region r, char *dst, const char *src, uint64_t n) {
  uint64_t step = (uint64_t)gridDim.x * blockDim.x;
  if (n + step <= UINT32_MAX)
    copy_nd_in<W, uint32_t>(r, dst, src, (uint32_t)n);
  else
    copy_nd_in<W, uint64_t>(r, dst, src, n);
}

// Contiguous fill: 16-byte stores in a grid-stride loop, the same loop as the bench's raw
// PTX fill (tools/raw_cuda.c), so the two differ only in how they are launched; plus a
// bytewise head up to a 16-byte boundary and a bytewise tail, written by the first threads.
// `body` is the pattern as it lies from p + head (rotated by `head`: the element size
// divides 16, so the pattern has period 16). Every byte comes out of `body`'s two 64-bit
// halves by shifts: indexing a byte array with a thread-dependent index put the 16-byte
// pattern in local memory, and every thread of every launch stored it there on entry
// (16 st.local.u8 per thread, ~4 MB of local stores per launch at the capped grid, which
// slowed small fills well below the raw kernel). ptxas: no stack frame.
__device__ __forceinline__ char body_byte(V16 body, uint64_t k) { // k: byte of the period
  uint64_t w = (k & 8) ? body.b : body.a;
  return (char)(w >> (8 * (k & 7)));
}

__global__ void __launch_bounds__(THREADS)
    k_fill_contig(char *p, uint32_t head, uint64_t n16, uint32_t tail, V16 body) {
  uint64_t gid = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  char *b = p + head;
  V16 *q = reinterpret_cast<V16 *>(b);
  for (uint64_t i = gid; i < n16; i += (uint64_t)gridDim.x * blockDim.x) q[i] = body;
  if (gid < head) // byte j of the head is byte (16 - head + j) of body's period
    p[gid] = body_byte(body, 16 - head + gid);
  if (gid < tail) b[16 * n16 + gid] = body_byte(body, gid);
}

// The grids of the grid-stride loops: `max_blocks` (SMs x 8, gpu_backend.c) assumes 8
// blocks of 256 threads resident per SM, 2048 threads. A kernel that holds more than 32
// registers per thread fits fewer, and the blocks past what fits ran as a second, partial
// wave doing a full block's share each (ncu showed it for the halo shell's k_copy_batch at
// 38 registers, docs/BENCHMARKS.md). So each kernel's
// cap is scaled to the blocks that really fit, asked of the runtime once per kernel
// (`per_sm` caches it; the first device's answer serves the process: on another
// architecture the grid is only less well sized, never wrong). Forcing 32 registers
// (__launch_bounds__(256, 8)) instead made ptxas spill 44-48 bytes in the copy kernels.
constexpr int ASSUMED_PER_SM = 8;
int resident_cap(const void *kernel, int *per_sm, int max_blocks) {
  int n = __atomic_load_n(per_sm, __ATOMIC_RELAXED);
  if (n == 0) {
    if (!gwkOccupancy(&n, kernel, THREADS) || n < 1 || n > ASSUMED_PER_SM) {
      (void)gwkGetLastError();
      n = ASSUMED_PER_SM;
    }
    __atomic_store_n(per_sm, n, __ATOMIC_RELAXED);
  }
  if (max_blocks <= 0) return max_blocks;
  int sms = max_blocks / ASSUMED_PER_SM;
  return sms > 0 ? sms * n : max_blocks;
}

unsigned grid_for(uint64_t n, int max_blocks) {
  uint64_t b = (n + THREADS - 1) / THREADS;
  if (b < 1) b = 1;
  if (max_blocks > 0 && b > (uint64_t)max_blocks) b = (uint64_t)max_blocks;
  return (unsigned)b;
}

// Widest word dividing the element size, the addresses and every stride.
size_t word_size(size_t elem, uintptr_t a0, uintptr_t a1, int ndim, const int64_t *s0,
                 const int64_t *s1) {
  uint64_t bits = elem | a0 | a1;
  for (int d = 0; d < ndim; d++) bits |= (uint64_t)s0[d] | (s1 ? (uint64_t)s1[d] : 0);
  for (size_t w = 16; w > 1; w /= 2)
    if ((bits & (w - 1)) == 0) return w;
  return 1;
}

// Region of words: the element dims, plus one innermost dim of `wpe` words if wpe > 1.
Region words_region(int ndim, const int64_t *shape, const int64_t *s0, const int64_t *s1, size_t w,
                    size_t wpe, uint64_t *n) {
  Region r;
  memset(&r, 0, sizeof r);
  r.ndim = ndim;
  *n = 1;
  for (int d = 0; d < ndim; d++) {
    r.shape[d] = shape[d];
    r.s0[d] = s0[d];
    r.s1[d] = s1 ? s1[d] : 0;
    *n *= (uint64_t)shape[d];
  }
  if (wpe > 1) {
    r.shape[ndim] = (int64_t)wpe;
    r.s0[ndim] = (int64_t)w;
    r.s1[ndim] = (int64_t)w;
    r.ndim = ndim + 1;
    *n *= wpe;
  }
  return r;
}

template <typename W>
void launch_fill(const Region &r, char *dst, const unsigned char *value, size_t elem, int wpe,
                 uint64_t n, gwk_stream s, int max_blocks) {
  Pat<W> pat;
  memset(&pat, 0, sizeof pat);
  memcpy(&pat, value, elem);
  static int per_sm;
  max_blocks = resident_cap((const void *)k_fill_nd<W>, &per_sm, max_blocks);
  k_fill_nd<W><<<grid_for(n, max_blocks), THREADS, 0, s>>>(r, dst, pat, wpe, n);
}

template <typename W>
void launch_copy(const Region &r, char *dst, const char *src, uint64_t n, gwk_stream s,
                 int max_blocks) {
  static int per_sm;
  max_blocks = resident_cap((const void *)k_copy_nd<W>, &per_sm, max_blocks);
  k_copy_nd<W><<<grid_for(n, max_blocks), THREADS, 0, s>>>(r, dst, src, n);
}

// ---- batched copy ----
// One descriptor per transfer; dims are right-aligned (dims [BD - ndim, BD) are used), so
// the index loop is unrolled over a fixed count and its arrays stay in registers.
constexpr int BD = GWK_BATCH_DIMS;

struct BatchItem {
  char *dst;
  const char *src;
  uint64_t n;           // words
  uint32_t first_block; // this transfer's blocks: [first_block, first_block + nblocks)
  uint32_t nblocks;
  int32_t ndim;
  int32_t w; // word size, bytes
  int64_t shape[BD];
  int64_t s0[BD]; // dst strides, bytes
  int64_t s1[BD]; // src strides, bytes
};

struct Batch {
  int n;
  BatchItem t[GWK_BATCH_MAX];
};
static_assert(sizeof(Batch) <= 4096, "the batch must fit the 4 KiB kernel parameter limit");

#if defined(GW_VENDOR_HIP)
#define GWK_GRID_CONSTANT
#else
// Read in place from the parameter bank: the block-uniform, dynamically indexed item
// would otherwise be copied to local memory first.
#define GWK_GRID_CONSTANT __grid_constant__
#endif

// I: the index type of the element loop. A 64-bit division is a long emulated sequence on
// the GPU, and with one per dim per element it made the halo's shell copy (26 boxes, 3 MB)
// cost more in arithmetic than in memory traffic; below 2^32 elements (every halo face)
// the loop divides in 32 bits. Offsets stay 64-bit.
template <typename W, typename I>
__device__ __forceinline__ void copy_item_in(const BatchItem &t, I first, I step) {
  const I n = (I)t.n;
  for (I i = first; i < n; i += step) {
    I rem = i;
    int64_t od = 0, os = 0;
#pragma unroll
    for (int d = BD - 1; d >= 0; d--) {
      if (d < BD - t.ndim) break;
      I ext = (I)t.shape[d];
      int64_t c = (int64_t)(rem % ext);
      rem /= ext;
      od += c * t.s0[d];
      os += c * t.s1[d];
    }
    *reinterpret_cast<W *>(t.dst + od) = *reinterpret_cast<const W *>(t.src + os);
  }
}

template <typename W>
__device__ __forceinline__ void copy_item(const BatchItem &t, uint64_t first, uint64_t step) {
  if (t.n + step <= UINT32_MAX) // i + step never wraps in 32 bits
    copy_item_in<W, uint32_t>(t, (uint32_t)first, (uint32_t)step);
  else
    copy_item_in<W, uint64_t>(t, first, step);
}

// The copies of block blockIdx.x of a batch (each block serves one transfer).
__device__ __forceinline__ void copy_batch_block(const Batch &b) {
  int k = 0; // the transfer of this block (block-uniform: no divergence)
  while (k + 1 < b.n && blockIdx.x >= b.t[k + 1].first_block) k++;
  const BatchItem &t = b.t[k];
  uint64_t first = (uint64_t)(blockIdx.x - t.first_block) * THREADS + threadIdx.x;
  uint64_t step = (uint64_t)t.nblocks * THREADS;
  switch (t.w) {
  case 16: copy_item<V16>(t, first, step); break;
  case 8: copy_item<uint64_t>(t, first, step); break;
  case 4: copy_item<uint32_t>(t, first, step); break;
  case 2: copy_item<uint16_t>(t, first, step); break;
  default: copy_item<uint8_t>(t, first, step); break;
  }
}

__global__ void __launch_bounds__(THREADS) k_copy_batch(const GWK_GRID_CONSTANT Batch b) {
  copy_batch_block(b);
}

// ---- signalled batch (backend.h: gw__signals) ----
// The whole order of a halo face between two processes in one launch: no host call, no
// event and no MPI message between the caller's work and the neighbour's. Every block
// waits for the neighbours' "free" words before copying (one thread polls, the block
// waits at the barrier), so the grid is kept small (SIGNAL_MAX_BLOCKS): blocks that spin
// must leave the device to the work the neighbours finish before they store those words.
constexpr int SIGNAL_MAX_BLOCKS = 32;

static_assert(sizeof(Batch) + sizeof(gw__signals) <= 4096,
              "the kernel's parameters must fit 4 KiB");

__device__ __forceinline__ bool reached(const uint32_t *w, uint32_t epoch) {
  return !w || (int32_t)(*(const volatile uint32_t *)w - epoch) >= 0;
}

__device__ __forceinline__ void store(uint32_t *w, uint32_t v) {
  if (w) *(volatile uint32_t *)w = v;
}

__global__ void __launch_bounds__(THREADS)
    k_copy_batch_signalled(const GWK_GRID_CONSTANT Batch b, const GWK_GRID_CONSTANT gw__signals g) {
  if (threadIdx.x == 0) {
    if (blockIdx.x == 0) { // the stream's earlier work is complete: our ghost cells are free
      __threadfence_system();
      store(g.post[0], g.epoch);
      store(g.post[1], g.epoch);
    }
    while (!reached(g.wait[0], g.epoch) || !reached(g.wait[1], g.epoch)) {
    }
    __threadfence_system(); // (acquire: nothing of the copies moves before the wait)
  }
  __syncthreads();
  if (b.n > 0) copy_batch_block(b);
  // The last block to finish stores "landed" (every block's copies fenced before its
  // count, as cooperative groups' grid barrier orders them), resets the count for the
  // next run and waits for the neighbours' "landed": the kernel, and with it the stream's
  // later work, ends only once our ghost cells hold their data.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    if (atomicAdd(g.count, 1u) == gridDim.x - 1) {
      __threadfence_system();
      store(g.done[0], g.epoch);
      store(g.done[1], g.epoch);
      *g.count = 0;
      while (!reached(g.until[0], g.epoch) || !reached(g.until[1], g.epoch)) {
      }
      __threadfence_system();
    }
  }
}

} // namespace

namespace {
// b <- the descriptors of x[0..m) (m <= GWK_BATCH_MAX), their blocks shared out of
// max_blocks; returns the grid's blocks.
uint32_t make_batch(Batch &b, const gw__xfer *const *x, int m, int max_blocks) {
  memset(&b, 0, sizeof b);
  b.n = m;
  uint64_t total = 0;
  for (int k = 0; k < m; k++) {
    const gw__xfer *xi = x[k];
    size_t w = word_size(xi->elem, (uintptr_t)xi->dst, (uintptr_t)xi->src, xi->ndim, xi->dst_stride,
                         xi->src_stride);
    if (w > xi->elem) w = xi->elem;
    uint64_t nw;
    Region r =
        words_region(xi->ndim, xi->shape, xi->dst_stride, xi->src_stride, w, xi->elem / w, &nw);
    BatchItem &t = b.t[k];
    t.dst = xi->dst;
    t.src = xi->src;
    t.n = nw;
    t.ndim = r.ndim; // <= BD: GWK_BATCH_FITS (the caller checks)
    t.w = (int32_t)w;
    for (int d = 0; d < BD; d++) { // right-aligned; unused leading dims stay 0
      int from = d - (BD - r.ndim);
      if (from < 0) continue;
      t.shape[d] = r.shape[from];
      t.s0[d] = r.s0[from];
      t.s1[d] = r.s1[from];
    }
    total += nw;
  }
  // Blocks per transfer: one per THREADS words, the whole grid capped at max_blocks
  // (SMs x 8) shared in proportion to the words, at least one each (grid-stride loops).
  uint64_t cap = max_blocks > 0 ? (uint64_t)max_blocks : UINT32_MAX / 2;
  uint32_t blocks = 0;
  for (int k = 0; k < m; k++) {
    uint64_t want = (b.t[k].n + THREADS - 1) / THREADS;
    uint64_t share = total > 0 ? cap * b.t[k].n / total : 1;
    if (want > share) want = share;
    if (want < 1) want = 1;
    b.t[k].first_block = blocks;
    b.t[k].nblocks = (uint32_t)want;
    blocks += (uint32_t)want;
  }
  return blocks;
}

// Its status is the launch's (see gwk_fill): no cudaGetLastError after a success.
template <typename... A> int launch(const void *kernel, uint32_t blocks, gwk_stream s, A *...a) {
  void *args[] = {(void *)a...};
#if defined(GW_VENDOR_HIP)
  return (int)hipLaunchKernel(kernel, dim3(blocks), dim3(THREADS), args, 0, s);
#else
  return (int)cudaLaunchKernel(kernel, dim3(blocks), dim3(THREADS), args, 0, s);
#endif
}
} // namespace

extern "C" int gwk_copy_batch(const gw__xfer *const *x, int n, void *stream, int max_blocks) {
  gwk_stream s = (gwk_stream)stream;
  static int per_sm;
  max_blocks = resident_cap((const void *)k_copy_batch, &per_sm, max_blocks);
  for (int at = 0; at < n; at += GWK_BATCH_MAX) {
    int m = n - at < GWK_BATCH_MAX ? n - at : GWK_BATCH_MAX;
    Batch b;
    uint32_t blocks = make_batch(b, x + at, m, max_blocks);
    int e = launch((const void *)k_copy_batch, blocks, s, &b);
    if (e != 0) return e;
  }
  return 0;
}

extern "C" int gwk_copy_batch_signalled(const gw__xfer *const *x, int n, void *stream,
                                        const gw__signals *sig) {
  if (n > GWK_BATCH_MAX) return -1; // (the caller checks: one launch)
  Batch b;
  uint32_t blocks = make_batch(b, x, n, SIGNAL_MAX_BLOCKS);
  if (blocks < 1) blocks = 1; // (no copy: the signals alone)
  gw__signals g = *sig;       // (by value: the kernel's parameter)
  return launch((const void *)k_copy_batch_signalled, blocks, (gwk_stream)stream, &b, &g);
}

// The contiguous fill's one-store-per-thread grid (gwk_fill says why and what measured it).
constexpr uint64_t FILL_ONE_PER_THREAD_MIN = (uint64_t)64 << 20;
// The largest grid: CUDA's gridDim.x limit; on HIP gridDim x blockDim must stay below 2^32
// work items (HIP's documented launch limit: a grid of INT_MAX blocks would fail there
// from a 64 GiB fill). Beyond it the loop strides.
#if defined(GW_VENDOR_HIP)
constexpr int FILL_GRID_MAX = (int)(0xffffffffu / THREADS);
#else
constexpr int FILL_GRID_MAX = 0x7fffffff;
#endif

extern "C" int gwk_fill(const gw__fillspec *f, void *stream, int max_blocks) {
  gwk_stream s = (gwk_stream)stream;
  size_t elem = f->elem;
  bool contiguous = f->ndim == 0 || (f->ndim == 1 && f->stride[0] == (int64_t)elem);
  if (contiguous && 16 % elem == 0) {
    uint64_t bytes = elem * (f->ndim == 0 ? 1 : (uint64_t)f->shape[0]);
    unsigned char pat[16];
    for (size_t i = 0; i < 16; i++) pat[i] = f->value[i % elem];
    uintptr_t a = (uintptr_t)f->dst;
    uint64_t head = (16 - a % 16) % 16;
    if (head > bytes) head = bytes;
    uint64_t n16 = (bytes - head) / 16, tail = (bytes - head) % 16;
    unsigned char rot[16];
    for (size_t t = 0; t < 16; t++) rot[t] = pat[(head + t) % 16];
    V16 body;
    memcpy(&body, rot, 16);
    // The grid of the raw kernel: one thread per 16 bytes up to the blocks that fit (at
    // most SMs x 8 of 256, full occupancy on sm_90), at least one block: smaller grids
    // (2 or 4 blocks per SM) were no faster (docs/BENCHMARKS.md).
    uint64_t work = n16 > 16 ? n16 : 16; // enough threads for head and tail
    static int per_sm;
    // From FILL_ONE_PER_THREAD_MIN bytes of the device's own memory up: one 16-byte store
    // per thread, the grid as large as the fill (the loop then runs once), which writes HBM
    // faster than the resident grid's strided loop from 64 MiB (docs/BENCHMARKS.md, the
    // fill_kernels probe); below, the two are alike, so the resident grid stays. Not for
    // host memory: a zero-copy fill is the link's speed.
    bool one_per_thread = f->kind == GW_MEM_DEVICE && bytes >= FILL_ONE_PER_THREAD_MIN;
    unsigned grid = grid_for(
        work, one_per_thread ? FILL_GRID_MAX
                             : resident_cap((const void *)k_fill_contig, &per_sm, max_blocks));
    char *dst = f->dst;
    uint32_t h32 = (uint32_t)head, t32 = (uint32_t)tail;
#if defined(GW_VENDOR_HIP)
    k_fill_contig<<<grid, THREADS, 0, s>>>(dst, h32, n16, t32, body);
    return gwkGetLastError();
#else
    // cudaLaunchKernel directly: what <<<>>> ends in, without its push/pop of the launch
    // configuration. Its own status is the launch's (a <<<>>> caller needs cudaGetLastError
    // because <<<>>> returns nothing): the runtime here is the plugin's own (static), whose
    // last-error slot holds only gpuwrap's errors, and every failure path clears it
    // (gwg_fail), so a cudaGetLastError after a successful launch answers cudaSuccess and
    // cost 23-27 ns (fill_gap) to ~40 (from the plugin) per launch for nothing. An error of
    // earlier asynchronous work is returned by the launch itself, or by the synchronize.
    // The driver's cuLaunchKernel (the bench's raw launch) was tried twice, on
    // cudaGetFuncBySymbol and on cudaGetKernel handles, for every kernel here: no gain in
    // `gpuwrap bench` beyond its spread (docs/BENCHMARKS.md). Not kept.
    void *args[] = {&dst, &h32, &n16, &t32, &body};
    return (int)cudaLaunchKernel((const void *)k_fill_contig, dim3(grid), dim3(THREADS), args, 0,
                                 s);
#endif
  }
  size_t w = word_size(elem, (uintptr_t)f->dst, 0, f->ndim, f->stride, nullptr);
  if (w > elem) w = elem;
  int wpe = (int)(elem / w);
  uint64_t n;
  Region r = words_region(f->ndim, f->shape, f->stride, nullptr, w, (size_t)wpe, &n);
  switch (w) {
  case 16: launch_fill<V16>(r, f->dst, f->value, elem, wpe, n, s, max_blocks); break;
  case 8: launch_fill<uint64_t>(r, f->dst, f->value, elem, wpe, n, s, max_blocks); break;
  case 4: launch_fill<uint32_t>(r, f->dst, f->value, elem, wpe, n, s, max_blocks); break;
  case 2: launch_fill<uint16_t>(r, f->dst, f->value, elem, wpe, n, s, max_blocks); break;
  default: launch_fill<uint8_t>(r, f->dst, f->value, elem, wpe, n, s, max_blocks); break;
  }
  return gwkGetLastError();
}

extern "C" int gwk_copy(const gw__xfer *x, void *stream, int max_blocks) {
  gwk_stream s = (gwk_stream)stream;
  size_t w = word_size(x->elem, (uintptr_t)x->dst, (uintptr_t)x->src, x->ndim, x->dst_stride,
                       x->src_stride);
  if (w > x->elem) w = x->elem;
  uint64_t n;
  Region r = words_region(x->ndim, x->shape, x->dst_stride, x->src_stride, w, x->elem / w, &n);
  switch (w) {
  case 16: launch_copy<V16>(r, x->dst, x->src, n, s, max_blocks); break;
  case 8: launch_copy<uint64_t>(r, x->dst, x->src, n, s, max_blocks); break;
  case 4: launch_copy<uint32_t>(r, x->dst, x->src, n, s, max_blocks); break;
  case 2: launch_copy<uint16_t>(r, x->dst, x->src, n, s, max_blocks); break;
  default: launch_copy<uint8_t>(r, x->dst, x->src, n, s, max_blocks); break;
  }
  return gwkGetLastError();
}
