#!/usr/bin/env bash
# Issue 45 item 3 on the GPU machine: Array.ipc_handle() / Context.ipc_open() of a PyTorch
# tensor made under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (VMM memory) and of a
# cuda.core IPC-enabled memory resource's Buffer (pool memory), each opened in a second,
# exec'd process, every element checked.
# Usage (repository root as the working directory, python3 with torch, cuda.core, numpy):
#   scripts/gpu-py45.sh [BUILD_DIR]
# BUILD_DIR: an existing build directory to reuse as it is; default build/gpu-py45,
# configured here for CUDA with sm_90 (scripts/gpu-common.sh, as scripts/h200.sh builds).
# Logs under $OUT/py45/ ($OUT default ./gpu-out): summary.txt, one file per step.
# Exit status 0 when no step failed (skips are reported in summary.txt), 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
L=$OUT/py45
mkdir -p "$L"
B=${1:-build/gpu-py45}
t0=$(date +%s)
failed=0
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$L/summary.txt"; }

{ nvidia-smi; uname -a; cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo "no Yama"; } > "$L/system.txt" 2>&1
log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tr '\n' ';') kernel $(uname -r) ptrace_scope $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo none)"
python3 - > "$L/versions.txt" 2>&1 <<'PY'
import importlib.metadata as md
for name in ("torch", "cuda-core", "cuda-bindings", "cupy-cuda12x", "cupy-cuda13x", "numpy", "pytest"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "not installed")
PY
log "python: $(python3 --version 2>&1); $(grep -v 'not installed' "$L/versions.txt" | tr '\n' ';')"

. scripts/gpu-common.sh
if ! gw_gpu_build "$B" "$L"; then
  log "configure or build of $B FAILED"
  tail -30 "$L/configure.txt" 2>/dev/null | tee -a "$L/summary.txt"
  grep -E "error" "$L/build.txt" 2>/dev/null | head -30 | tee -a "$L/summary.txt"
  exit 1
fi
log "built $B"
gw_gpu_pyenv "$B"
export PYTHONUNBUFFERED=1

step() { # name timeout command...: run, log its status and last line; a status other than 0/77 fails
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$L/$name.txt" 2>&1
  local rc=$?
  log "$name rc=$rc $(grep -vE '^\s*$' "$L/$name.txt" | tail -1 | cut -c1-300)"
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then failed=1; fi
  return 0
}

step info 60 python3 -m gpuwrap info
# the C side of the same paths, for reference (two processes, every element)
step ctest_c_pool_vmm 600 ctest --test-dir "$B" -R '^cuda\.test_vmm_cuda\.' --timeout 300 --output-on-failure
# the GPU Python tests (their own runner: no pytest needed; every SKIP says why)
step test_ipc_pool_vmm_gpu 900 python3 tests/python/test_ipc_pool_vmm_gpu.py
grep -E '^(PASS|SKIP|FAIL) ' "$L/test_ipc_pool_vmm_gpu.txt" | tee -a "$L/summary.txt"
# the CPU model's Python tests of the same paths, where pytest is here
if python3 -c "import pytest" 2>/dev/null; then
  step test_ipc_pool_vmm_cpu 600 env GPUWRAP_BACKEND=cpu python3 -m pytest -p no:cacheprovider -q -rs \
    tests/python/test_ipc_pool_vmm.py tests/python/test_ipc.py
else
  log "test_ipc_pool_vmm_cpu: skipped (no pytest for $(command -v python3))"
fi
# the examples: producer/consumer pairs (and the legacy-memory one beside them)
step example_ipc_torch_expandable 300 python3 examples/ipc_torch_expandable.py
step example_ipc_cuda_core 300 python3 examples/ipc_cuda_core.py
step example_ipc_torch 300 python3 examples/ipc_torch.py

log "done: $([ $failed = 0 ] && echo 'no step failed' || echo 'a step FAILED')"
exit $failed
