#!/usr/bin/env bash
# Issue 46 item 3 on the GPU machine: AUTO's pick for two ranks sharing one GPU under MPS,
# against both forced paths, blocking and overlapped (`diffusion3d -np 2 -n 256 --periodic
# [--overlap] [--path host|ipc]`), interleaved in rounds on one machine; --check under
# AUTO at 2 and 4 ranks first. Prints time/step and the path each run took.
# Usage (as root, from the repository root): scripts/gpu-auto.sh [BUILD_DIR] [rounds]
#        (default build/h200, 2 rounds); logs under $OUT/auto (default ./gpu-out)
set -uo pipefail
B=${1:-build/h200}; rounds=${2:-2}
OUT=${OUT:-$PWD/gpu-out}; L=$OUT/auto; mkdir -p "$L"
. scripts/gpu-common.sh
gw_gpu_build "$B" "$L" || { grep -E "error" "$L/build.txt" | head -20; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
nvidia-cuda-mps-control -d && echo "MPS started"
trap 'echo quit | nvidia-cuda-mps-control' EXIT
R="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x GPUWRAP_BACKEND=cuda"
for np in 2 4; do
  for ov in "" --overlap; do
    f="$L/check-np$np${ov}.txt"
    timeout 120 $R -np $np "$B/bin/diffusion3d" -n 32 -s 11 --periodic --check $ov > "$f" 2>&1
    echo "check np $np ${ov:-blocking} rc=$?: $(grep -E '^check' "$f")"
  done
done
for r in $(seq "$rounds"); do
  for ov in "" --overlap; do
    for p in auto host ipc; do
      f="$L/r$r-$p${ov}.txt"
      timeout 120 $R -np 2 "$B/bin/diffusion3d" -n 256 -s 300 --periodic --path $p $ov > "$f" 2>&1
      echo "round $r ${ov:-blocking} --path $p rc=$?: $(grep -E 'time/step' "$f" | head -1 | sed 's/^ *time.step \([0-9.]* ms\).*/\1/')/step;" \
        "halo path $(sed -n 's/.*halo path \(.*\) (MPI GPU-aware.*/\1/p' "$f" | head -1)"
    done
  done
done
