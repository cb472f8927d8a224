#!/usr/bin/env bash
# The batched GPU run (device machine with one or two H200s): build with CUDA, the whole
# suite on the CUDA backend, compute-sanitizer, DLPack consumers, MPI halo, bench.
# Usage: scripts/h200.sh [quick|full|check]   logs under $OUT (default ./h200-out)
#        check: build, suite, compute-sanitizer of the IPC, graph and stream tests only, the
#        DLPack consumers, then under MPS the two-process IPC tests and the IPC halo path
#        bit for bit at 2 and 4 ranks; no benchmarks (a correctness pass in about 8 minutes)
#        GW_H200_SANITIZE=0 skips the compute-sanitizer pass (minutes of device time)
set -uo pipefail
mode=${1:-quick}
OUT=${OUT:-$PWD/h200-out}
L=$OUT/logs; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$OUT/summary.txt"; }

{ nvidia-smi; nvidia-smi -q | grep -iE "driver version|cuda version|product name|link|bus id"; } > "$L/nvidia-smi.txt" 2>&1
log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';')"

. scripts/gpu-common.sh  # gw_gpu_build: the configure and build the GPU scripts share
gw_gpu_build build/h200 "$L" || { log "configure or build FAILED"; tail -30 "$L/configure.txt"; grep -E "error" "$L/build.txt" | head -30; exit 1; }
grep -E "warning:" "$L/build.txt" | sort -u | head -20 | tee -a "$OUT/summary.txt"
log "built"

build/h200/bin/gpuwrap info > "$L/info.txt" 2>&1; log "info rc=$?"
build/h200/bin/gpuwrap demo --backend cuda > "$L/demo.txt" 2>&1; log "demo rc=$? $(tail -1 "$L/demo.txt")"

ctest --test-dir build/h200 -j8 --timeout 600 --output-on-failure > "$L/ctest.txt" 2>&1
log "ctest (all backends): $(grep -E 'tests passed|tests failed' "$L/ctest.txt")"
grep -E "\*\*\*Failed|\(Failed\)|Timeout|Not Run" "$L/ctest.txt" | head -40 | tee -a "$OUT/summary.txt"
log "tests passed/skipped/failed: $(grep -cE 'Test +#[0-9]+: .* +Passed' "$L/ctest.txt")/$(grep -cE 'Test +#[0-9]+: .*Skipped' "$L/ctest.txt")/$(grep -cE 'Test +#[0-9]+: .*(Failed|Exception|Timeout)' "$L/ctest.txt")"

# compute-sanitizer over the CUDA tests through CTest's memory checker (tests/CMakeLists.txt
# configures it: MemoryCheckType CudaSanitizer, --tool memcheck --report-api-errors no
# --error-exitcode 99; API errors the library handles on purpose, a refused registration
# or the DMA-over-two-registrations retry, are not memory errors). Not under the tool:
# perf, Python and MPI tests (labels); the staging, stress, fuzz and bench cases, as
# before; the command-line tool's (cuda.tool.*). racecheck: the CUDA plugin's own tests
# (cuda.test_cuda.*), as before.
if [ "${GW_H200_SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    sel=(-L cuda -LE 'perf|python|mpi' -E 'staging|stress|fuzz|bench|\.tool\.')
    [ "$mode" = check ] && sel=(-R '^cuda\.(test_ipc|test_vmm_cuda|test_graphs|test_stream_order|test_streams|test_fail|test_dlpack)\.')
    [ $tool = racecheck ] && sel=(-R '^cuda\.test_cuda\.')
    timeout 3000 ctest --test-dir build/h200 -T memcheck "${sel[@]}" --timeout 300 --output-on-failure \
      --overwrite "MemoryCheckCommandOptions=--tool $tool --report-api-errors no --error-exitcode 99" \
      > "$L/$tool.txt" 2>&1
    log "compute-sanitizer $tool (ctest -T memcheck) rc=$?: $(grep -E 'tests passed|tests failed' "$L/$tool.txt")"
    # (CTest's memory check counts a skipped test's exit code 77 as a defect: the lines of
    # the tests it lists as skipped are left out)
    skipped=$(grep -oE '[0-9]+ - [^ ]+ \(Skipped\)' "$L/$tool.txt" | awk '{print $3}' | paste -sd'|')
    grep -E "\(Failed\)|Timeout|Defect|ERROR SUMMARY: [1-9]|SUMMARY: [1-9]" "$L/$tool.txt" |
      grep -vE " (${skipped:-^}) " | head -10 | tee -a "$OUT/summary.txt"
    cat build/h200/Testing/Temporary/MemoryChecker.*.log > "$L/$tool-logs.txt" 2>/dev/null
  done
elif [ "${GW_H200_SANITIZE:-1}" = 1 ]; then
  log "compute-sanitizer: not found, skipped"
fi

# DLPack against the real consumers
GPUWRAP_LIB=$PWD/build/h200/lib/libgpuwrap.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 \
  timeout 300 python3 tests/dlpack/test_torch_cupy.py > "$L/dlpack_torch_cupy.txt" 2>&1
log "dlpack torch/cupy rc=$? $(tail -1 "$L/dlpack_torch_cupy.txt")"
GPUWRAP_LIB=$PWD/build/h200/lib/libgpuwrap.so PYTHONPATH=$PWD/python timeout 120 python3 examples/share_with_torch.py > "$L/share_with_torch.txt" 2>&1
log "share_with_torch rc=$?"
GPUWRAP_LIB=$PWD/build/h200/lib/libgpuwrap.so PYTHONPATH=$PWD/python timeout 300 python3 examples/ipc_torch.py > "$L/ipc_torch.txt" 2>&1
log "ipc_torch rc=$? $(tail -1 "$L/ipc_torch.txt")"
# gpuwrap inside torch.cuda.graph (issue 35): captured calls replayed, refusals, a neighbour thread
GPUWRAP_LIB=$PWD/build/h200/lib/libgpuwrap.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 \
  timeout 300 python3 tests/dlpack/test_graphs_torch.py > "$L/graphs_torch.txt" 2>&1
log "graphs torch rc=$? $(tail -1 "$L/graphs_torch.txt")"
GPUWRAP_LIB=$PWD/build/h200/lib/libgpuwrap.so PYTHONPATH=$PWD/python timeout 120 python3 examples/graph_torch.py > "$L/graph_torch.txt" 2>&1
log "graph_torch example rc=$?"

GPUWRAP_LIB=$PWD/build/h200/lib/libgpuwrap.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 \
  timeout 300 python3 tests/dlpack/test_exchange_torch.py > "$L/exchange_torch.txt" 2>&1
log "exchange torch rc=$? $(tail -1 "$L/exchange_torch.txt")"

if [ "$mode" = check ]; then
  # two processes on the one GPU: under MPS (without it the contexts are time-sliced)
  nvidia-cuda-mps-control -d && log "MPS started"
  ctest --test-dir build/h200 -R '^cuda\.test_ipc\.' --timeout 300 --output-on-failure > "$L/ctest_ipc_mps.txt" 2>&1
  log "cuda.test_ipc under MPS: $(grep -E 'tests passed|tests failed' "$L/ctest_ipc_mps.txt")"
  R="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x GPUWRAP_BACKEND=cuda"
  for np in 2 4; do
    for opt in "--periodic" "" "--periodic --overlap"; do
      timeout 120 $R -np $np build/h200/bin/diffusion3d -n 32 -s 20 --path ipc --check $opt > "$L/ipc_check_np$np.txt" 2>&1
      log "diffusion3d --path ipc --check np=$np $opt rc=$? $(grep -E 'check:|halo path' "$L/ipc_check_np$np.txt" | tr '\n' ' ')"
    done
  done
  timeout 120 $R -np 2 build/h200/bin/diffusion3d -n 256 -s 200 --periodic --halo-bench --path ipc > "$L/halo_bench_ipc.txt" 2>&1
  log "halo-bench np=2 --path ipc rc=$? $(grep -iE 'update|ratio' "$L/halo_bench_ipc.txt" | tr '\n' ' ' | cut -c1-600)"
  echo quit | nvidia-cuda-mps-control
  tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
  log "done"
  exit 0
fi

# staging bandwidth next to cudaMemcpy
GPUWRAP_TEST_BACKEND=cuda timeout 300 build/h200/tests/gpu/test_staging bandwidth > "$L/staging_bw.txt" 2>&1
log "staging bandwidth rc=$?"; tail -12 "$L/staging_bw.txt" >> "$OUT/summary.txt"

# MPI halo on the GPUs (one rank per GPU)
ngpu=$(nvidia-smi -L | wc -l)
if command -v mpirun >/dev/null && [ -x build/h200/bin/diffusion3d ]; then
  M="mpirun --allow-run-as-root --oversubscribe --bind-to none -x GPUWRAP_BACKEND=cuda"
  for np in 1 $ngpu; do
    timeout 300 $M -np $np build/h200/tests/halo/test_halo_mpi > "$L/halo_test_np$np.txt" 2>&1
    log "halo test np=$np rc=$? $(tail -1 "$L/halo_test_np$np.txt")"
    timeout 300 $M -np $np build/h200/bin/diffusion3d -n 64 -s 20 --check > "$L/diff_check_np$np.txt" 2>&1
    log "diffusion3d --check np=$np rc=$? $(tail -2 "$L/diff_check_np$np.txt" | tr '\n' ' ')"
    # the GPU stencil (default on CUDA) against the host reference: split-phase and periodic too
    timeout 300 $M -np $np build/h200/bin/diffusion3d -n 64 -s 20 --periodic --overlap --check > "$L/diff_check_gpu_overlap_np$np.txt" 2>&1
    log "diffusion3d --check (gpu stencil, periodic, overlap) np=$np rc=$? $(grep -E 'stencil|check:' "$L/diff_check_gpu_overlap_np$np.txt" | tr '\n' ' ')"
    # --graph: one step per parity captured, replayed; bit for bit with the eager run
    # (np > 1 needs the NCCL path: the MPI paths refuse a capture, GW_ENOTSUP)
    for ov in "" --overlap; do
      timeout 300 $M -np $np build/h200/bin/diffusion3d -n 64 -s 20 --periodic --graph $ov --check > "$L/diff_graph${ov}_np$np.txt" 2>&1
      log "diffusion3d --graph $ov --check np=$np rc=$? $(grep -E 'graph|check:' "$L/diff_graph${ov}_np$np.txt" | tr '\n' ' ')"
      timeout 300 $M -np $np build/h200/bin/diffusion3d -n 256 -s 100 --periodic --graph $ov > "$L/diff_graph${ov}_n256_np$np.txt" 2>&1
      log "diffusion3d --graph $ov n=256 np=$np rc=$? $(grep -E 'time/step|graph|overlap:' "$L/diff_graph${ov}_n256_np$np.txt" | tr '\n' ' ')"
    done
    for n in 128 256 384; do
      timeout 300 $M -np $np build/h200/bin/diffusion3d -n $n -s 100 --mem device --halo-only --path host > "$L/diff_halo_np${np}_n$n.txt" 2>&1
      log "diffusion3d halo-only (non-periodic) np=$np n=$n rc=$? $(grep -E 'time/step|bytes sent' "$L/diff_halo_np${np}_n$n.txt" | tr '\n' ' ')"
    done
    timeout 300 $M -np $np build/h200/bin/diffusion3d -n 256 -s 50 --periodic --stencil host --mem managed > "$L/diff_weak_np$np.txt" 2>&1
    log "diffusion3d periodic n=256 (stencil on the host, managed memory) np=$np rc=$? $(grep -E 'time/step|halo/step' "$L/diff_weak_np$np.txt" | tr '\n' ' ')"
    # weak scaling with the GPU stencil (device memory, CUDA kernel): same -n per rank
    timeout 300 $M -np $np build/h200/bin/diffusion3d -n 256 -s 100 --periodic --stencil gpu > "$L/diff_gpu_np$np.txt" 2>&1
    log "diffusion3d periodic n=256 GPU stencil np=$np rc=$? $(grep -E 'stencil|time/step|halo/step' "$L/diff_gpu_np$np.txt" | tr '\n' ' ')"
  done
  # weak-scaling efficiency t1/tN (time/step at np=1 over np=$ngpu, same -n per rank)
  t1=$(awk '/time\/step/{print $2; exit}' "$L/diff_gpu_np1.txt" 2>/dev/null)
  tN=$(awk '/time\/step/{print $2; exit}' "$L/diff_gpu_np$ngpu.txt" 2>/dev/null)
  if [ -n "$t1" ] && [ -n "$tN" ]; then
    log "diffusion3d GPU weak scaling n=256: t1=$t1 ms t$ngpu=$tN ms efficiency=$(awk -v a="$t1" -v b="$tN" 'BEGIN{printf "%.3f", a/b}')"
  fi
fi

# issue 17 targets: the halo update against its raw stages, local periodic copies, overlap
if command -v mpirun >/dev/null && [ -x build/h200/bin/diffusion3d ]; then
  R="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x GPUWRAP_BACKEND=cuda"
  # the host path between the two ranks of this node: the shared-memory window (default),
  # then MPI carrying the faces (GPUWRAP_HALO_SHM=0), in pieces and whole
  for rep in 1 2; do
    timeout 120 $R -np 2 build/h200/bin/diffusion3d -n 256 -s 200 --halo-bench --path host > "$L/halo_bench_np2_shm$rep.txt" 2>&1
    log "halo-bench np=2 host path 256^3 shared memory (run $rep) rc=$? $(grep -iE 'update|ratio|sum|raw' "$L/halo_bench_np2_shm$rep.txt" | tr '\n' ' ' | cut -c1-900)"
  done
  for chunk in 131072 0; do
    GPUWRAP_HALO_SHM=0 GPUWRAP_HALO_CHUNK=$chunk timeout 120 $R -x GPUWRAP_HALO_SHM -x GPUWRAP_HALO_CHUNK -np 2 build/h200/bin/diffusion3d -n 256 -s 200 --halo-bench --path host > "$L/halo_bench_np2_chunk$chunk.txt" 2>&1
    log "halo-bench np=2 host path 256^3 MPI transport chunk=$chunk rc=$? $(grep -iE 'update|ratio|sum' "$L/halo_bench_np2_chunk$chunk.txt" | tr '\n' ' ' | cut -c1-600)"
  done
  timeout 120 $R -np 1 build/h200/bin/diffusion3d -n 256 -s 200 --periodic --halo-bench > "$L/halo_bench_np1_periodic.txt" 2>&1
  log "halo-bench np=1 periodic 256^3 rc=$? $(grep -iE 'update|ratio|local' "$L/halo_bench_np1_periodic.txt" | tr '\n' ' ' | cut -c1-600)"
  for ov in "" "--overlap" "--overlap"; do
    timeout 120 $R -np 1 build/h200/bin/diffusion3d -n 256 -s 200 --periodic $ov > "$L/diff_np1_periodic$ov.txt" 2>&1
    log "diffusion3d np=1 periodic 256^3 ${ov:-blocking} rc=$? $(grep -iE 'time/step|max\(|stencil/step|halo/step' "$L/diff_np1_periodic$ov.txt" | tr '\n' ' ' | cut -c1-600)"
  done
  for p in "" "--periodic"; do
    timeout 120 $R -np 2 build/h200/bin/diffusion3d -n 32 -s 20 --overlap --check $p > "$L/diff_np2_check_overlap$p.txt" 2>&1
    log "diffusion3d np=2 --overlap --check $p rc=$? $(grep -E 'check:' "$L/diff_np2_check_overlap$p.txt" | tr '\n' ' ')"
    timeout 120 $R -np 2 build/h200/bin/diffusion3d -n 32 -s 20 --check $p > "$L/diff_np2_check$p.txt" 2>&1
    log "diffusion3d np=2 --check $p (blocking, shared memory) rc=$? $(grep -E 'check:|halo path' "$L/diff_np2_check$p.txt" | tr '\n' ' ')"
  done
fi

# the main job as a new user runs it (issue 16 item 5): tools checked, nothing downloaded
if [ "${GW_H200_RUNDEMO:-1}" = 1 ]; then
  timeout 300 scripts/run-demo > "$L/run-demo.txt" 2>&1
  log "scripts/run-demo rc=$? $(tail -2 "$L/run-demo.txt" | tr '\n' ' ')"
fi

# the bench
if [ "$mode" = full ]; then
  timeout 540 build/h200/bin/gpuwrap bench --backend cuda --json "$OUT/bench.json" --csv "$OUT/bench.csv" --svg "$OUT/bench.svg" > "$OUT/bench.txt" 2> "$L/bench.err"
else
  timeout 240 build/h200/bin/gpuwrap bench --backend cuda --quick --json "$OUT/bench.json" --svg "$OUT/bench.svg" > "$OUT/bench.txt" 2> "$L/bench.err"
fi
log "bench ($mode) rc=$?"
tail -40 "$OUT/bench.txt"
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
log "done"
