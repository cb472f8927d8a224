#!/usr/bin/env bash
# Issue 46 item 1 on the GPU machine: diffusion3d's overlapped step (one rank, periodic
# 256^3), eager and replayed as a graph, for each --shell-k given, interleaved in rounds on
# one machine; --check of each first. Prints time/step / max(stencil, halo) and the split
# stencil alone (no exchange) per run.
# Usage: scripts/gpu-overlap.sh [rounds] [shell-k ...]   (default: 2 rounds, --shell-k 0 1)
#        logs under $OUT/overlap (default ./gpu-out), tarred to $OUT/overlap.tgz
set -uo pipefail
rounds=${1:-2}; shift || true
ks=("$@"); [ ${#ks[@]} -eq 0 ] && ks=(0 1)
OUT=${OUT:-$PWD/gpu-out}; L=$OUT/overlap; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
B=build/gpu-overlap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$L/gpu.txt"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON -DGW_HIP=OFF \
  -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$L/configure.txt" 2>&1
cmake --build $B -j"$(nproc)" --target gpuwrap gpuwrap-cuda diffusion3d > "$L/build.txt" 2>&1 ||
  { grep -E "error" "$L/build.txt" | head -20; exit 1; }
R="--allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
d3d() { timeout 120 mpirun $R -np 1 $B/bin/diffusion3d --periodic --overlap "$@"; }
for k in "${ks[@]}"; do
  for g in "" "--graph"; do
    d3d -n 64 -s 7 --shell-k "$k" $g --check > "$L/check-k$k${g:+-graph}.txt" 2>&1
    echo "check --shell-k $k ${g:-eager} rc=$?: $(grep -E '^check' "$L/check-k$k${g:+-graph}.txt")"
  done
done
for r in $(seq "$rounds"); do
  for g in "" "--graph"; do
    for k in "${ks[@]}"; do
      f="$L/r$r-k$k${g:+-graph}.txt"
      d3d -n 256 -s 200 --shell-k "$k" $g > "$f" 2>&1
      echo "round $r --shell-k $k ${g:-eager} rc=$?: $(grep -E 'overlap: time/step' "$f" | sed 's/.*= \([0-9.]*\) .*/\1/')x max(stencil, halo);" \
        "split alone $(grep -E 'alone \(no exchange\)' "$f" | sed 's/.*= \([0-9.]*\) x.*/\1/')x the stencil;" \
        "$(grep -E 'time/step' "$f" | head -1 | sed 's/^ *time.step \([0-9.]* ms\).*/\1/')/step"
    done
  done
done
tar czf "$OUT/overlap.tgz" -C "$OUT" overlap
