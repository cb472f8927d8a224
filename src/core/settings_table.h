/*
 * Every GPUWRAP_* environment variable gpuwrap reads, declared once: one row each.
 *
 *   X(ID, NAME, TYPE, DEFAULT, MIN, MAX, CHOICES, WHO, DOC)
 *
 * TYPE is BOOL (0/1, yes/no, on/off, true/false), INT (a decimal integer in [MIN, MAX]; a
 * leading 0 is not octal), BYTES (a decimal integer in [MIN, MAX] with an optional k/K, m/M
 * or g/G suffix for KiB, MiB, GiB), CHOICE
 * (one of the '|'-separated CHOICES; read as its index) or TEXT (any string; its reader
 * checks what the string means). DEFAULT is the value as a user would write it. WHO is the
 * part of gpuwrap that reads it. An empty variable counts as unset. settings.c is the one
 * parser; `gpuwrap info --settings` and docs/API.md's settings table are made from these
 * rows. Adding a setting is adding a row here and reading it with gw__setting_int() or
 * gw__setting_text() where it is used (plugins: through the host API).
 */
#ifndef GW_CORE_SETTINGS_TABLE_H
#define GW_CORE_SETTINGS_TABLE_H

#define GW__SETTINGS(X)                                                                       \
  X(BACKEND, "GPUWRAP_BACKEND", CHOICE, "auto", 0, 0, "auto|cpu|cuda|hip", "core",            \
    "backend GW_BACKEND_AUTO picks: auto (the first GPU backend with a device, else cpu) or " \
    "one backend")                                                                            \
  X(PLUGIN_DIR, "GPUWRAP_PLUGIN_DIR", TEXT, "", 0, 0, "", "core",                             \
    "directory searched first for the GPU backend plugins (libgpuwrap-cuda.so, "              \
    "libgpuwrap-hip.so)")                                                                     \
  X(CPU_DEVICES, "GPUWRAP_CPU_DEVICES", INT, "1", 1, 64, "", "cpu",                           \
    "number of devices the CPU model has")                                                    \
  X(CPU_STREAM_DELAY_US, "GPUWRAP_CPU_STREAM_DELAY_US", INT, "0", 0, 10000000, "", "cpu",     \
    "microseconds the CPU model waits before each stream item runs (tests: makes ordering "   \
    "mistakes show)")                                                                         \
  X(CPU_PAGEABLE_ACCESS, "GPUWRAP_CPU_PAGEABLE_ACCESS", BOOL, "0", 0, 1, "", "cpu",           \
    "the CPU model's devices reach pageable host memory directly (models HMM/ATS): wraps of " \
    "pageable memory register nothing")                                                       \
  X(CPU_NO_HOST_PTR, "GPUWRAP_CPU_NO_HOST_PTR", BOOL, "0", 0, 1, "", "cpu",                   \
    "the CPU model's devices cannot use the host address of registered memory "               \
    "(canUseHostPointerForRegisteredMem = 0)")                                                \
  X(CPU_NO_READONLY_REGISTER, "GPUWRAP_CPU_NO_READONLY_REGISTER", BOOL, "0", 0, 1, "", "cpu", \
    "the CPU model has no read-only registration (as a runtime without "                      \
    "cudaHostRegisterReadOnly)")                                                              \
  X(CPU_MPS, "GPUWRAP_CPU_MPS", BOOL, "0", 0, 1, "", "cpu",                                   \
    "the CPU model's devices run several processes' work concurrently, as CUDA devices "      \
    "under MPS do (the halo's AUTO then takes the IPC path between ranks sharing a device)")  \
  X(CPU_VISIBLE_DEVICES, "GPUWRAP_CPU_VISIBLE_DEVICES", TEXT, "", 0, 0, "", "cpu",            \
    "the CPU model's devices this process sees, as CUDA_VISIBLE_DEVICES: machine device "     \
    "numbers (below GPUWRAP_CPU_DEVICES), comma-separated, in the order of its ordinals; "    \
    "unset: all")                                                                             \
  X(CPU_IPC_NO_ALLOC_ID, "GPUWRAP_CPU_IPC_NO_ALLOC_ID", BOOL, "0", 0, 1, "", "cpu",           \
    "the CPU model's IPC export gives allocation id 0 (tests: models HIP, whose runtime "     \
    "has none)")                                                                              \
  X(CPU_FAIL, "GPUWRAP_CPU_FAIL", TEXT, "", 0, 0, "", "cpu",                                  \
    "failure injection (tests): op:N[:status],... makes the N-th call of a CPU-model "        \
    "operation fail")                                                                         \
  X(STAGING, "GPUWRAP_STAGING", BOOL, "1", 0, 1, "", "staging",                               \
    "GPU backend: contiguous pageable copies go through the staging pipeline (pinned bounce " \
    "buffers, host threads); 0: the runtime's own pageable copy")                             \
  X(STAGING_MIN, "GPUWRAP_STAGING_MIN", BYTES, "1M", 0, 1099511627776LL, "", "staging",       \
    "smallest copy staged")                                                                   \
  X(STAGING_CHUNK, "GPUWRAP_STAGING_CHUNK", BYTES, "4M", 4096, 1073741824, "", "staging",     \
    "bounce buffer size, the largest chunk (rounded up to whole pages)")                      \
  X(STAGING_THREADS, "GPUWRAP_STAGING_THREADS", INT, "0", 0, 64, "", "staging",               \
    "host threads copying, the caller included; 0: three quarters of the CPUs, at most 12")   \
  X(STAGING_BUFFERS, "GPUWRAP_STAGING_BUFFERS", INT, "6", 2, 16, "", "staging",               \
    "bounce buffers, the pipeline's depth")                                                   \
  X(STAGING_SMALL, "GPUWRAP_STAGING_SMALL", BYTES, "4M", 0, 1099511627776LL, "", "staging",   \
    "copies up to this size go in 256 KiB chunks")                                            \
  X(STAGING_SPLIT, "GPUWRAP_STAGING_SPLIT", INT, "4", 1, 64, "", "staging",                   \
    "larger copies below SPLIT x CHUNK are cut into SPLIT chunks")                            \
  X(STAGING_PIECE, "GPUWRAP_STAGING_PIECE", BYTES, "16K", 4096, 1073741824, "", "staging",    \
    "smallest piece one thread copies (rounded up to whole pages)")                           \
  X(STAGING_NT_UP_MAX, "GPUWRAP_STAGING_NT_UP_MAX", BYTES, "32M", 0, 1099511627776LL, "",     \
    "staging",                                                                                \
    "host-to-device copies up to this size fill the bounce buffers with "                     \
    "non-temporal stores (0: never)")                                                         \
  X(STAGING_EDGE_TAIL, "GPUWRAP_STAGING_EDGE_TAIL", INT, "3", 0, 64, "", "staging",           \
    "larger host-to-device copies demote the lines of their last this-many chunks to the "    \
    "shared cache after filling them (cldemote; a no-op on CPUs without it)")                 \
  X(STAGING_LINGER_US, "GPUWRAP_STAGING_LINGER_US", INT, "100", 0, 1000000, "", "staging",    \
    "microseconds the copy threads keep spinning after a copy before they sleep")             \
  X(STAGING_SPINS, "GPUWRAP_STAGING_SPINS", INT, "4096", 1, 1073741824, "", "staging",        \
    "idle pauses of a copy thread before it yields its CPU")                                  \
  X(HALO_GPU_AWARE, "GPUWRAP_HALO_GPU_AWARE", CHOICE, "auto", 0, 0, "auto|0|1", "halo",       \
    "whether MPI takes device memory: auto asks the MPI library; 0 or 1 overrides it")        \
  X(HALO_SHM, "GPUWRAP_HALO_SHM", BOOL, "1", 0, 1, "", "halo",                                \
    "ranks of one node exchange host-path faces through an MPI shared-memory window")         \
  X(HALO_SHM_GROUP, "GPUWRAP_HALO_SHM_GROUP", INT, "0", 0, 1048576, "", "halo",               \
    "treat each N consecutive ranks as one node for the shared-memory window and for which "  \
    "neighbours count as on-node for the IPC path (tests of several nodes on one machine); "  \
    "0: the real nodes")                                                                      \
  X(HALO_CHUNK, "GPUWRAP_HALO_CHUNK", BYTES, "128K", 0, 1099511627776LL, "", "halo",          \
    "host-path messages are cut into pieces of this size to pipeline pack, MPI and unpack "   \
    "(0: whole messages); the ranks use the smallest")                                        \
  X(HALO_NCCL_SELF, "GPUWRAP_HALO_NCCL_SELF", BOOL, "0", 0, 1, "", "halo",                    \
    "a rank's own periodic neighbour goes through NCCL too (default: direct face copies, "    \
    "which are faster)")                                                                      \
  X(HALO_AUTO_MPS, "GPUWRAP_HALO_AUTO_MPS", CHOICE, "mode", 0, 0, "mode|ipc|host", "halo",    \
    "AUTO between ranks sharing a device under MPS: mode (by the call: IPC for "              \
    "gw_halo_update and gw_halo_start/finish, the host path for the stream-ordered calls), "  \
    "ipc (IPC for both) or host (the host path for both)")                                    \
  X(HALO_IPC_DIRECT, "GPUWRAP_HALO_IPC_DIRECT", BOOL, "0", 0, 1, "", "halo",                  \
    "the IPC path packs straight into the neighbours' ghost cells (their fields exported "    \
    "once at plan creation): no receive buffer, no unpack; unless every rank has 1 and "      \
    "every field exports, every rank keeps the buffers; opt-in: a start then waits for the "  \
    "neighbours' start of the same plan (docs/HALO.md)")                                      \
  X(HALO_IPC_SIGNAL, "GPUWRAP_HALO_IPC_SIGNAL", BOOL, "0", 0, 1, "", "halo",                  \
    "with GPUWRAP_HALO_IPC_DIRECT=1, each dim's packs signal the neighbours on the device "   \
    "(one kernel stores and waits for words in their memory; no MPI token, event or host "    \
    "wait); opt-in until measured on a GPU (issue 46, docs/BENCHMARKS.md)")                   \
  X(NCCL_LIB, "GPUWRAP_NCCL_LIB", TEXT, "libnccl.so.2", 0, 0, "", "halo",                     \
    "the NCCL library the halo's NCCL path loads")                                            \
  X(LIB, "GPUWRAP_LIB", TEXT, "", 0, 0, "", "python",                                         \
    "libgpuwrap.so the Python package loads first (read by the package's loader, not the "    \
    "library)")                                                                               \
  X(PYEXT_DIR, "GPUWRAP_PYEXT_DIR", TEXT, "", 0, 0, "", "python",                             \
    "where the Python package compiles its extension when run from a source tree "            \
    "(default: <build>/python-ext)")                                                          \
  X(PREFIX, "GPUWRAP_PREFIX", TEXT, "", 0, 0, "", "python-build",                             \
    "building the Python package: link the gpuwrap installed under this prefix")              \
  X(BUILD_DIR, "GPUWRAP_BUILD_DIR", TEXT, "build", 0, 0, "", "python-build",                  \
    "building the Python package: bundle the library of this CMake build directory")

#endif /* GW_CORE_SETTINGS_TABLE_H */
