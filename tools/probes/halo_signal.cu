/*
 * halo_signal: how fast can one IPC halo face go between two ranks on one GPU (under MPS)?
 * Issue 46 item 2's question, outside the library: a 512 KiB face each way (the plane
 * diffusion3d --halo-bench sends at 2 ranks), each rank packing straight into its
 * neighbour's ghost plane (an IPC mapping), with the two orderings a blocking update needs
 * ("your ghosts are free" before the pack, "landed" after it) done five ways:
 *
 *   host      the host path's shape: device to pinned host, MPI_Sendrecv, host to device
 *   tokens    0-byte MPI_Sendrecv ("free"), cudaMemcpyAsync into the peer + synchronize,
 *             0-byte MPI_Sendrecv ("landed"): the host-signal floor
 *   memops    cuStreamWriteValue32 / cuStreamWaitValue32 around the copy on one stream,
 *             one synchronize: stream memory operations
 *   kernel    one kernel: block 0 writes the peer's "free" word, every block spins on its
 *             own until the peer's says free, copies its part, writes its "landed" word in
 *             the peer's memory; block 0 spins until all the peer's blocks landed; then
 *             one synchronize. No MPI, one launch.
 *             (kernel8/32/132: that many blocks of 1024 threads; hybrid32: the "free"
 *             words by stream memory operations, the rest in a 32-block kernel)
 *   copy      cudaMemcpyAsync into the peer + synchronize, no ordering (the floor)
 *
 * Usage: mpirun -np 2 halo_signal [iterations]   (both ranks on one GPU, MPS running)
 * Prints each variant's median of rounds (us per update) and its ratio to `host`, and
 * checks every element of each rank's ghost plane against its neighbour's data.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
    }                                                                                    \
  } while (0)
#define CKD(x)                                                            \
  do {                                                                    \
    CUresult r_ = (x);                                                    \
    if (r_ != CUDA_SUCCESS) {                                             \
      fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)r_); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                       \
    }                                                                     \
  } while (0)

static const size_t FACE = 258 * 258 * 8; /* ~520 KiB, the plane of a 256^3 field with halos */
static const int NB = 264; /* the most blocks of a signalling kernel (2 per SM of an H100) */

/* One rank's exported block: its ghost plane, then the words its neighbour writes. */
struct words {
  unsigned free_in; /* the neighbour's ghosts are free for this rank's pack */
  unsigned pad[31];
  unsigned landed_in[NB]; /* the neighbour's block b landed in this rank's ghosts */
};

__device__ static bool reached(unsigned v, unsigned epoch) { return (int)(v - epoch) >= 0; }

__global__ void sig_pack(const double2 *__restrict__ src, double2 *peer_ghost, size_t n2,
                         words *mine, words *peer, unsigned epoch, int wait_free) {
  if (threadIdx.x == 0 && wait_free) {
    if (blockIdx.x == 0) {
      __threadfence_system(); /* (this stream's earlier work on our ghosts is done) */
      *(volatile unsigned *)&peer->free_in = epoch;
    }
    while (!reached(*(volatile unsigned *)&mine->free_in, epoch)) {
    }
    __threadfence();
  }
  __syncthreads();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n2;
       i += (size_t)gridDim.x * blockDim.x)
    peer_ghost[i] = src[i];
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    *(volatile unsigned *)&peer->landed_in[blockIdx.x] = epoch;
    if (blockIdx.x == 0) {
      for (int b = 0; b < (int)gridDim.x; b++)
        while (!reached(*(volatile unsigned *)&mine->landed_in[b], epoch)) {
        }
      __threadfence();
    }
  }
}

__global__ void fill(double *p, size_t n, double base) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = base + (double)i;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (!rank) fprintf(stderr, "halo_signal: run with mpirun -np 2\n");
    MPI_Finalize();
    return 2;
  }
  int iters = argc > 1 ? atoi(argv[1]) : 2000;
  int peer = 1 - rank;
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  /* block: ghost plane | words ; boundary plane separate */
  size_t blk_bytes = FACE + sizeof(words);
  char *blk;
  double *boundary;
  CK(cudaMalloc(&blk, blk_bytes));
  CK(cudaMemset(blk, 0, blk_bytes));
  CK(cudaMalloc(&boundary, FACE));
  size_t n = FACE / 8;
  fill<<<64, 256>>>(boundary, n, 1e6 * (rank + 1));
  CK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t mh, ph;
  CK(cudaIpcGetMemHandle(&mh, blk));
  MPI_Sendrecv(&mh, sizeof mh, MPI_BYTE, peer, 0, &ph, sizeof ph, MPI_BYTE, peer, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  char *pblk;
  CK(cudaIpcOpenMemHandle((void **)&pblk, ph, cudaIpcMemLazyEnablePeerAccess));
  words *mine = (words *)(blk + FACE), *theirs = (words *)(pblk + FACE);
  double *peer_ghost = (double *)pblk;
  char *pin_send, *pin_recv;
  CK(cudaMallocHost(&pin_send, FACE));
  CK(cudaMallocHost(&pin_recv, FACE));

  unsigned epoch = 0;
  const char *names[] = {"host",     "tokens",    "memops",   "kernel8",
                         "kernel32", "kernel132", "hybrid32", "copy"};
  const int NV = 8, ROUNDS = 7;
  std::vector<double> t[NV];
  for (int r = 0; r < ROUNDS; r++)
    for (int v = 0; v < NV; v++) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; i++) {
        switch (v) {
        case 0:
          CK(cudaMemcpyAsync(pin_send, boundary, FACE, cudaMemcpyDeviceToHost, s));
          CK(cudaStreamSynchronize(s));
          MPI_Sendrecv(pin_send, (int)FACE, MPI_BYTE, peer, 1, pin_recv, (int)FACE, MPI_BYTE, peer,
                       1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          CK(cudaMemcpyAsync(blk, pin_recv, FACE, cudaMemcpyHostToDevice, s));
          CK(cudaStreamSynchronize(s));
          break;
        case 1:
          MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 2, NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
          CK(cudaMemcpyAsync(peer_ghost, boundary, FACE, cudaMemcpyDeviceToDevice, s));
          CK(cudaStreamSynchronize(s));
          MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 3, NULL, 0, MPI_BYTE, peer, 3, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
          break;
        case 2:
          ++epoch;
          CKD(cuStreamWriteValue32(s, (CUdeviceptr)&theirs->free_in, epoch, 0));
          CKD(cuStreamWaitValue32(s, (CUdeviceptr)&mine->free_in, epoch, CU_STREAM_WAIT_VALUE_GEQ));
          CK(cudaMemcpyAsync(peer_ghost, boundary, FACE, cudaMemcpyDeviceToDevice, s));
          CKD(cuStreamWriteValue32(s, (CUdeviceptr)&theirs->landed_in[0], epoch, 0));
          CKD(cuStreamWaitValue32(s, (CUdeviceptr)&mine->landed_in[0], epoch,
                                  CU_STREAM_WAIT_VALUE_GEQ));
          CK(cudaStreamSynchronize(s));
          break;
        case 3:
        case 4:
        case 5: {
          int nb = v == 3 ? 8 : v == 4 ? 32 : 132;
          ++epoch;
          sig_pack<<<nb, 1024, 0, s>>>((const double2 *)boundary, (double2 *)peer_ghost, FACE / 16,
                                       mine, theirs, epoch, 1);
          CK(cudaGetLastError());
          CK(cudaStreamSynchronize(s));
          break;
        }
        case 6: /* the free words by stream memory operations (no SM spins on them), the
                   landed ones by the kernel */
          ++epoch;
          CKD(cuStreamWriteValue32(s, (CUdeviceptr)&theirs->free_in, epoch, 0));
          CKD(cuStreamWaitValue32(s, (CUdeviceptr)&mine->free_in, epoch, CU_STREAM_WAIT_VALUE_GEQ));
          sig_pack<<<32, 1024, 0, s>>>((const double2 *)boundary, (double2 *)peer_ghost, FACE / 16,
                                       mine, theirs, epoch, 0);
          CK(cudaGetLastError());
          CK(cudaStreamSynchronize(s));
          break;
        case 7:
          CK(cudaMemcpyAsync(peer_ghost, boundary, FACE, cudaMemcpyDeviceToDevice, s));
          CK(cudaStreamSynchronize(s));
          break;
        }
      }
      double dt = (MPI_Wtime() - t0) / iters * 1e6, mx;
      MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      /* (memops and kernel share the epoch: the kernel's wait on a word memops left behind
       * takes its neighbour's write of this epoch, which every kernel block makes) */
      t[v].push_back(mx);
      /* every element of the ghost plane is the neighbour's boundary */
      MPI_Barrier(MPI_COMM_WORLD);
      std::vector<double> g(n);
      CK(cudaMemcpy(g.data(), blk, FACE, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t i = 0; i < n; i++) bad += g[i] != 1e6 * (peer + 1) + (double)i;
      if (bad) {
        fprintf(stderr, "rank %d: %s left %zu of %zu ghost elements wrong\n", rank, names[v], bad,
                n);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      CK(cudaMemset(blk, 0xff, FACE)); /* poison for the next variant */
      CK(cudaDeviceSynchronize());
      MPI_Barrier(MPI_COMM_WORLD);
    }
  if (!rank) {
    double host = 0;
    for (int v = 0; v < NV; v++) {
      std::vector<double> x = t[v];
      std::sort(x.begin(), x.end());
      double med = x[x.size() / 2];
      if (v == 0) host = med;
      printf("%-7s %8.2f us/update  (min %.2f max %.2f)  %.3fx host\n", names[v], med, x.front(),
             x.back(), med / host);
    }
  }
  CK(cudaIpcCloseMemHandle(pblk));
  MPI_Barrier(MPI_COMM_WORLD);
  CK(cudaFree(blk));
  CK(cudaFree(boundary));
  CK(cudaFreeHost(pin_send));
  CK(cudaFreeHost(pin_recv));
  MPI_Finalize();
  return 0;
}
