#!/usr/bin/env bash
# Issue 46 item 1 on the GPU machine: the overlapped step of diffusion3d (one rank, periodic
# 256^3) split vs signal, eager and as a graph, A/B interleaved in one run; --check of both.
# Usage: scripts/gpu-overlap.sh [rounds]   logs under $OUT/overlap (default ./gpu-out)
set -uo pipefail
rounds=${1:-3}
OUT=${OUT:-$PWD/gpu-out}; L=$OUT/overlap; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
B=build/gpu-overlap
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$L/gpu.txt"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON -DGW_HIP=OFF \
  -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$L/configure.txt" 2>&1
cmake --build $B -j"$(nproc)" --target gpuwrap gpuwrap-cuda diffusion3d > "$L/build.txt" 2>&1 ||
  { grep -E "error" "$L/build.txt" | head -20; exit 1; }
R="--allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
d3d() { timeout 120 mpirun $R "$@"; }
for by in split signal; do
  d3d -np 1 $B/bin/diffusion3d -n 64 -s 7 --periodic --overlap --overlap-by $by --check > "$L/check-$by.txt" 2>&1
  echo "check $by rc=$?: $(grep -E '^check' "$L/check-$by.txt")"
  d3d -np 1 $B/bin/diffusion3d -n 64 -s 7 --periodic --overlap --graph --overlap-by $by --check > "$L/check-graph-$by.txt" 2>&1
  echo "check graph $by rc=$?: $(grep -E '^check' "$L/check-graph-$by.txt")"
done
for r in $(seq "$rounds"); do
  for g in "" "--graph"; do
    for by in split signal; do
      f="$L/r$r-$by${g:+-graph}.txt"
      d3d -np 1 $B/bin/diffusion3d -n 256 -s 200 --periodic --overlap $g --overlap-by $by > "$f" 2>&1
      echo "round $r $by ${g:-eager} rc=$?: $(grep -E 'overlap: time/step' "$f" | sed 's/.*= //') | $(grep -E 'alone \(no exchange\)' "$f" | sed 's/^ *//') | $(grep -E 'time/step' "$f" | head -1 | sed 's/^ *//')"
    done
  done
done
