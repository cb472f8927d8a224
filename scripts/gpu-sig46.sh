#!/bin/bash
# Issue 46, item 2: the IPC halo path with device-side signalling (stream memory operations
# on flag words in the mapped blocks) against interprocess events + MPI tokens
# (GPUWRAP_HALO_IPC_SIGNAL=0), on one GPU shared by the ranks under MPS.
# Usage (as root, on a CUDA machine): OUT=/some/dir scripts/gpu-sig46.sh [BUILD_DIR]
# Logs: $OUT/sig46/ (summary.txt first). Target: "IPC / host update" <= 0.25 in the
# --halo-bench runs (256^3 float64, one 512 KiB face each way).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
L=$OUT/sig46; mkdir -p "$L"
B=${1:-build/gpu-sig46} # an existing build directory is reused as it is
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$L/summary.txt"; }

{ nvidia-smi; nvidia-smi -q | grep -iE "driver version|cuda version|product name"; } > "$L/nvidia-smi.txt" 2>&1
log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';')"
. scripts/gpu-common.sh
gw_gpu_build "$B" "$L" || { log "build FAILED"; grep -E "error" "$L/build.txt" | head -30; exit 1; }
log "built"
# does this device have the 64-bit stream memory operations the signalling needs?
cat > "$L/attr.c" <<'C'
#include <cuda.h>
#include <stdio.h>
int main(void) {
  CUdevice d; int nor = -1, b64 = -1;
  if (cuInit(0) || cuDeviceGet(&d, 0)) return 1;
  cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, d);
  cuDeviceGetAttribute(&b64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, d);
  printf("CAN_USE_STREAM_WAIT_VALUE_NOR=%d CAN_USE_64_BIT_STREAM_MEM_OPS=%d\n", nor, b64);
  return 0;
}
C
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
cc -I"$CUDA_HOME/include" "$L/attr.c" -o "$L/attr" -L"$CUDA_HOME/lib64/stubs" -lcuda 2>>"$L/build.txt" &&
  log "device: $("$L/attr")"

R="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x GPUWRAP_BACKEND=cuda"
D=$B/bin/diffusion3d

nvidia-cuda-mps-control -d && log "MPS started"
# the CUDA halo tests (IPC path under MPS included; NCCL ones skip where ranks share a GPU)
ctest --test-dir $B -L halo -R '^cuda\.' --timeout 300 --output-on-failure > "$L/ctest_cuda_halo.txt" 2>&1
log "ctest cuda halo: $(grep -E 'tests passed|tests failed|No tests' "$L/ctest_cuda_halo.txt")"
ctest --test-dir $B -R '^cuda\..*(stream|ipc)' --timeout 300 --output-on-failure > "$L/ctest_cuda_streams_ipc.txt" 2>&1
log "ctest cuda stream/ipc: $(grep -E 'tests passed|tests failed' "$L/ctest_cuda_streams_ipc.txt")"

# A/B: the halo update alone, two rounds each, signalling on (1) and off (0: events + tokens)
# GW_SIG46_QUICK=1: one A/B round, the overlapped time/step only, --check at 2 and 4 ranks
# periodic only, no compute-sanitizer (a batch short of device time)
quick=${GW_SIG46_QUICK:-0}
rounds="1 2"; [ "$quick" = 1 ] && rounds=1
for round in $rounds; do
  for sig in 1 0; do
    for p in ipc host; do
      f="$L/bench_${p}_sig${sig}_r$round.txt"
      timeout 180 $R -x GPUWRAP_HALO_IPC_SIGNAL=$sig -np 2 $D -n 256 -s 300 --periodic --halo-bench --path $p > "$f" 2>&1
      log "halo-bench --path $p SIGNAL=$sig round $round rc=$? | $(grep -E 'update, (host|IPC) path|IPC / host' "$f" | tr -s ' ' | tr '\n' '|' | cut -c1-300)"
    done
  done
done
# time/step blocking and overlapped, every path choice, signalling on and off
for sig in 1 0; do
  modes=("" "--overlap"); [ "$quick" = 1 ] && modes=("--overlap")
  for mode in "${modes[@]}"; do
    for p in ipc host auto; do
      f="$L/step_${p}_sig${sig}${mode:+_overlap}.txt"
      timeout 180 $R -x GPUWRAP_HALO_IPC_SIGNAL=$sig -np 2 $D -n 256 -s 300 --periodic $mode --path $p > "$f" 2>&1
      log "np2 --periodic $mode --path $p SIGNAL=$sig rc=$? | $(grep -E 'time/step|halo path|max\(stencil' "$f" | tr -s ' ' | tr '\n' '|' | cut -c1-300)"
    done
  done
done
# --check bit for bit on the IPC path (signalling on), blocking and overlapped
for np in 2 4; do
  opts=("--periodic" "" "--periodic --overlap" "--overlap"); [ "$quick" = 1 ] && opts=("--periodic" "--periodic --overlap")
  for opt in "${opts[@]}"; do
    f="$L/check_np${np}$(echo "$opt" | tr -d ' -').txt"
    timeout 180 $R -np $np $D -n 32 -s 20 --path ipc --check $opt > "$f" 2>&1
    log "check --path ipc np=$np $opt rc=$? $(grep -iE 'check' "$f" | tr '\n' ' ' | cut -c1-200)"
  done
done
echo quit | nvidia-cuda-mps-control; log "MPS stopped"

# compute-sanitizer on a short IPC run with device signalling (without MPS: the sanitizer's
# tools do not attach to MPS clients; two time-sliced contexts are slow, not wrong)
if [ "$quick" = 1 ]; then
  log "compute-sanitizer: skipped (GW_SIG46_QUICK=1)"
elif command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    f="$L/sanitizer_$tool.txt"
    timeout 540 $R -np 2 compute-sanitizer --tool $tool --error-exitcode 99 $D -n 16 -s 4 --periodic --path ipc --check > "$f" 2>&1
    log "compute-sanitizer $tool --path ipc np=2 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|check' "$f" | tr '\n' ' ' | cut -c1-300)"
  done
else
  log "compute-sanitizer: not found, skipped"
fi
log "done"
