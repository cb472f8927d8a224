#!/usr/bin/env bash
# One device session's batch for issue 45 (one H100 or H200, as root, from the
# repository root): builds once (scripts/gpu-common.sh) into BUILD_DIR, then runs, each
# under its own time limit so that one stage's hang leaves the others' results:
#   gpu-bench45.sh  the pool/VMM IPC cycle tests and `gpuwrap bench --only ipc --strict` x2
#   gpu-fdpass.sh   the socket path (gw_ipc_handle_send / _recv) on CUDA, with memcheck
#   gpu-py45.sh     PyTorch expandable segments and cuda.core pools from Python, examples
# Usage: scripts/gpu-batch.sh [BUILD_DIR] [STAGE ...]   (default build/h200, every stage)
# Logs: $OUT/<stage>/summary.txt each, $OUT/batch.txt, all tarred into $OUT/batch.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; export OUT
B=${1:-build/h200}; shift || true
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(bench45 fdpass py45)
mkdir -p "$OUT/build"
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$OUT/batch.txt"; }
. scripts/gpu-common.sh
gw_gpu_build "$B" "$OUT/build" || { log "build FAILED"; grep -E "error" "$OUT/build/build.txt" | head -20; exit 1; }
log "built $B"
declare -A limit=([bench45]=200 [fdpass]=90 [py45]=130)
for s in "${stages[@]}"; do
  timeout "${limit[$s]:-300}" bash "scripts/gpu-$s.sh" "$B" > "$OUT/$s.log" 2>&1
  log "$s rc=$?"
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 # (a stage cut off may leave MPS up)
done
tar czf "$OUT/batch.tgz" -C "$OUT" batch.txt build $(printf '%s ' "${stages[@]}") $(printf '%s.log ' "${stages[@]}") 2>/dev/null
