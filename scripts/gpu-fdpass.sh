#!/usr/bin/env bash
# The socket path of pool and VMM IPC on CUDA (gw_ipc_handle_send / gw_ipc_handle_recv),
# on a GPU machine (one H100 or H200): cuda.test_vmm_cuda.fdpass_two_processes (the
# importer exec'd with pidfd_getfd refused, so every open goes through the descriptors
# received), beside the pidfd_getfd tests it mirrors, then the same test under
# compute-sanitizer memcheck. The test prints each step's descriptor counts ("importer step
# K: descriptors ...") and the exporter's; ctest -V keeps them.
# Usage: scripts/gpu-fdpass.sh [BUILD_DIR]   logs under $OUT/fdpass (default ./gpu-out/fdpass)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
L=$OUT/fdpass; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$L/summary.txt"; }

log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';')"
log "yama ptrace_scope: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo absent)"

B=${1:-build/gpu-fdpass} # an existing build directory is reused as it is
. scripts/gpu-common.sh
gw_gpu_build "$B" "$L" || { log "build FAILED"; grep -E "error" "$L/build.txt" | head -30; exit 1; }
log "built"

ctest --test-dir $B -R '^cuda\.test_vmm_cuda\.(fdpass|pool_ipc|vmm_ipc)_two_processes$' \
  --timeout 600 --output-on-failure -V > "$L/ctest.txt" 2>&1
rc=$?
log "ctest rc=$rc: $(grep -E 'tests passed|tests failed' "$L/ctest.txt")"
grep -E "importer step|exporter: descriptors|Passed|\*\*\*Failed|Skipped|FAIL|SKIP" "$L/ctest.txt" \
  | sed 's/^[0-9]*: //' | tee -a "$L/summary.txt"

if command -v compute-sanitizer >/dev/null; then
  (cd $B/tests/gpu && GPUWRAP_BACKEND=cuda GPUWRAP_TEST_BACKEND=cuda compute-sanitizer \
    --tool memcheck --target-processes all --error-exitcode 9 ./test_vmm_cuda fdpass_two_processes) \
    > "$L/memcheck.txt" 2>&1
  m=$?
  log "memcheck rc=$m: $(grep -E 'ERROR SUMMARY' "$L/memcheck.txt" | tr '\n' ' ')"
  [ $m -eq 0 ] || rc=$m
fi
exit $rc
