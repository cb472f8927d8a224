#!/bin/bash
# The NCCL halo path on one H200 (issue 19): build, the halo tests (CUDA NCCL test at one
# rank: periodic dims are NCCL send/receive to itself), diffusion3d 256^3 periodic with the
# NCCL path against the host path, blocking and --overlap. Logs under $1 (default: $OUT):
# summary.txt (card, driver, date, one line per step) and all.txt (every log, in order):
# two files, as the device tool returns only a few. One rank only: two-GPU numbers need
# nvidia-h200-x2 (then add -np 2 runs with --t1 from the -np 1 run).
L=${1:-${OUT:-/tmp/h200_nccl}}
mkdir -p "$L"
M="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -2;
  ldconfig -p | grep -i nccl; } > "$L/summary.txt" 2>&1
t0=$(date +%s)
{ cmake -S . -B bn -DCMAKE_BUILD_TYPE=Release -DGW_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build bn -j16 --target gpuwrap-cuda test_halo_nccl test_halo_mpi test_halo_fields diffusion3d; } \
  > "$L/all.txt" 2>&1 || { echo "build failed" >> "$L/summary.txt"; tail -40 "$L/all.txt"; exit 1; }
echo "build $(( $(date +%s) - t0 )) s" >> "$L/summary.txt"
export GPUWRAP_BACKEND=cuda
T=$(mktemp -d)
timeout 60 $M -np 1 bn/bin/test_halo_nccl cuda > "$T/test_nccl_np1.txt" 2>&1
echo "test_halo_nccl cuda np1 rc=$? $(grep -E 'nccl:|all ok|skipped' "$T/test_nccl_np1.txt" | tr '\n' '|')" >> "$L/summary.txt"
timeout 40 ctest --test-dir bn -R 'halo\.(nccl|mpi\.np1|fields\.np1)' --output-on-failure > "$T/ctest_halo.txt" 2>&1
echo "ctest halo subset rc=$? $(grep 'tests passed' "$T/ctest_halo.txt")" >> "$L/summary.txt"
D=bn/bin/diffusion3d
run() { # name, args...
  local n=$1; shift
  timeout 40 $M -np 1 $D "$@" > "$T/d3d_$n.txt" 2>&1
  echo "d3d $n rc=$? $(grep -E 'halo path|time/step|halo/step|overlap:|check|update|weak' "$T/d3d_$n.txt" | tr -s ' ' | tr '\n' '|')" >> "$L/summary.txt"
}
run check_nccl -n 32 -s 20 --periodic --check --path nccl
run check_nccl_overlap -n 32 -s 20 --periodic --overlap --check --path nccl
run host -n 256 -s 100 --periodic --path host
run nccl -n 256 -s 100 --periodic --path nccl
run host_overlap -n 256 -s 100 --periodic --overlap --path host
run nccl_overlap -n 256 -s 100 --periodic --overlap --path nccl
GPUWRAP_HALO_NCCL_SELF=1 run nccl_self1_overlap -n 256 -s 100 --periodic --overlap --path nccl
run auto -n 256 -s 100 --periodic
run nccl_bench -n 256 -s 200 --periodic --halo-bench --path nccl
for f in "$T"/*.txt; do echo "=== $f"; cat "$f"; done > "$L/all.txt"
cat "$L/summary.txt"
