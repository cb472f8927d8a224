#!/usr/bin/env bash
# Issue 45's targets on a GPU machine (one H100 or H200), as root:
#   - the IPC cycle tests on CUDA: cuda.test_vmm_cuda.{pool,vmm}_ipc_cycles, GW_TEST_IPC_CYCLES
#     (default 10^4) export/open/release cycles each across two processes; each prints its
#     time and the descriptors / free memory it compared;
#   - the two-process pool and VMM IPC tests;
#   - `gpuwrap bench --backend cuda --only ipc --strict` twice (a strict target is one whose
#     verdict does not flip between two runs): first open of legacy / pool / VMM memory vs
#     the raw import calls (<= 1.2x), an open of a mapped allocation (<= 1 us).
# All under MPS (two processes on one GPU; without it their contexts are time-sliced):
# nvidia-cuda-mps-control -d before, `echo quit | nvidia-cuda-mps-control` after.
# Usage: scripts/gpu-bench45.sh [BUILD_DIR]   logs under $OUT/bench45 (default ./gpu-out/bench45)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
L=$OUT/bench45; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$L/summary.txt"; }

{ nvidia-smi; nvidia-smi -q | grep -iE "driver version|cuda version|product name"; } > "$L/nvidia-smi.txt" 2>&1
log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';')"
log "yama ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)"

B=${1:-build/gpu-bench45} # an existing build directory is reused as it is
. scripts/gpu-common.sh
gw_gpu_build "$B" "$L" || { log "build FAILED"; grep -E "error" "$L/build.txt" | head -30; exit 1; }
log "built"

nvidia-cuda-mps-control -d && log "MPS started"
trap 'echo quit | nvidia-cuda-mps-control; log "MPS stopped"' EXIT

ctest --test-dir $B -R '^cuda\.test_vmm_cuda\.(pool|vmm)_ipc_(two_processes|cycles)$' \
  --timeout 600 --output-on-failure -V > "$L/ctest_cycles.txt" 2>&1
log "cycle and two-process tests: $(grep -E 'tests passed|tests failed' "$L/ctest_cycles.txt")"
grep -E "cycles in|Passed|\*\*\*Failed|Skipped|FAIL" "$L/ctest_cycles.txt" | sed 's/^[0-9]*: //' | tee -a "$L/summary.txt"

for run in 1 2; do
  $B/bin/gpuwrap bench --backend cuda --only ipc --strict --json "$L/bench_ipc_$run.json" \
    > "$L/bench_ipc_$run.txt" 2> "$L/bench_ipc_$run.err"
  log "bench --only ipc run $run rc=$?"
  grep -E "^ +(pool: |vmm: )?(first open|open\+release)|gw_ipc_open" "$L/bench_ipc_$run.txt" | tee -a "$L/summary.txt"
done
