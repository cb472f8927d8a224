#!/usr/bin/env bash
# Issue 46 item 2, packing into the neighbours' ghost cells (GPUWRAP_HALO_IPC_DIRECT=1)
# against the IPC path's receive buffers (=0), on one GPU under MPS. Run as root on a
# one-GPU machine from the repository root:
#   OUT=/some/dir scripts/gpu-ipc-direct.sh [BUILD_DIR]   (default build/ipc-direct) logs under $OUT (default ./ipc-direct-out)
# 1. build (sm_90, scripts/gpu-common.sh), start MPS;
# 2. 3 alternating rounds of `diffusion3d -n 256 -s 200 --halo-bench --mem device --path
#    ipc` at 2 ranks (one 512 KiB face each way), =0 then =1, each printing its
#    "IPC / host update" line (the target: <= 0.25x); then one round of the same
#    --periodic (two faces each way);
# 3. `--path ipc --check` with the setting on at 2 and 4 ranks, blocking, periodic and
#    overlapped (bit for bit with the one-rank reference, or exit 1);
# 4. stop MPS. The summary is $OUT/summary.txt; each run's output in $OUT/logs/.
set -uo pipefail
B=${1:-build/ipc-direct}
OUT=${OUT:-$PWD/ipc-direct-out}
L=$OUT/logs
mkdir -p "$L"
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(($(date +%s) - t0)) "$*" | tee -a "$OUT/summary.txt"; }

log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';')"
log "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
export PATH=/usr/local/cuda/bin:$PATH
# only what the runs need: the library, the CUDA plugin, diffusion3d (no tests)
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON \
  -DGW_HIP=OFF -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$L/configure.txt" 2>&1
cmake --build "$B" -j"$(nproc)" --target gpuwrap gpuwrap-cuda diffusion3d > "$L/build.txt" 2>&1 || {
  log "configure or build FAILED"
  tail -30 "$L/configure.txt"
  grep -E "error" "$L/build.txt" | head -30
  exit 1
}
log "built"
D=$B/bin/diffusion3d
[ -x $D ] || { log "no $D (MPI missing at configure?)"; exit 1; }

# two processes on one GPU: under MPS (without it the contexts are time-sliced)
nvidia-cuda-mps-control -d && log "MPS started"
R="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x GPUWRAP_BACKEND=cuda"
fail=0

# one run: $1 setting, $2 log name, the rest diffusion3d's arguments
bench() {
  local v=$1 name=$2
  shift 2
  timeout 300 $R -np 2 -x GPUWRAP_HALO_IPC_DIRECT=$v $D "$@" > "$L/$name.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || fail=1
  log "IPC_DIRECT=$v $* rc=$rc: $(grep -oE 'holds [0-9]+ bytes of buffers' "$L/$name.txt"); $(grep -E 'IPC / host update' "$L/$name.txt" | sed 's/^ *//')"
}
for round in 1 2 3; do
  for v in 0 1; do
    bench $v "bench_r${round}_direct$v" -n 256 -s 200 --halo-bench --mem device --path ipc
  done
done
for v in 0 1; do
  bench $v "bench_periodic_direct$v" -n 256 -s 200 --periodic --halo-bench --mem device --path ipc
done

for np in 2 4; do
  for opt in "" "--periodic" "--overlap" "--periodic --overlap"; do
    name="check_np${np}_$(echo "x$opt" | tr -d ' -')"
    timeout 300 $R -np $np -x GPUWRAP_HALO_IPC_DIRECT=1 $D -n 32 -s 20 --path ipc --check $opt > "$L/$name.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || fail=1
    log "IPC_DIRECT=1 --check np=$np $opt rc=$rc: $(grep -E 'check:|halo path' "$L/$name.txt" | tr '\n' ' ')"
  done
done

echo quit | nvidia-cuda-mps-control
log "done (fail=$fail)"
exit $fail
