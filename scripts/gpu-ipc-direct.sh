#!/usr/bin/env bash
# Issue 46 item 2's A/B on one GPU under MPS, the IPC path's three designs: receive
# buffers (GPUWRAP_HALO_IPC_DIRECT=0), the neighbours' ghost cells signalled by events and
# tokens (DIRECT=1, GPUWRAP_HALO_IPC_SIGNAL=0) or on the device (DIRECT=1 SIGNAL=1). Run as
# root on a
# one-GPU machine from the repository root:
#   OUT=/some/dir scripts/gpu-ipc-direct.sh [BUILD_DIR] [trace]
#   (default build/ipc-direct; logs under $OUT, default ./ipc-direct-out)
# 1. build the library, the CUDA plugin and diffusion3d (sm_90, Release), start MPS;
#    tools/probes/halo_signal.cu, the same question outside the library (nvcc, mpicxx);
# 2. 3 rounds of `diffusion3d -n 256 -s 200 --halo-bench --mem device --path ipc` at 2
#    ranks (one 512 KiB face each way), the designs in turn, each printing its
#    "IPC / host update" line (the target: <= 0.25x); one round --periodic (two faces
#    each way); 2 rounds of the overlapped periodic step, each design and the host path;
# 3. `--path ipc --check` at 2 and 4 ranks, blocking, periodic and overlapped, each design
#    (bit for bit with the one-rank reference, or exit 1);
# 4. compute-sanitizer memcheck and racecheck of `--check --periodic` at 2 ranks into the
#    ghost cells signalled on the device, blocking and overlapped;
# 5. with `trace`: a trace build (GW_TRACE=ON, BUILD_DIR-trace) of the blocking update's
#    host steps (`--halo-only`: the IPC plan alone), medians per span on stderr
#    (logs/trace_*.txt);
#    (CHECK_V: the designs of step 3, default all; SANITIZE_TOOLS: step 4's tools)
# 6. stop MPS. The summary is $OUT/summary.txt; each run's output in $OUT/logs/.
set -uo pipefail
B=${1:-build/ipc-direct}
OUT=${OUT:-$PWD/ipc-direct-out}
L=$OUT/logs
mkdir -p "$L"
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(($(date +%s) - t0)) "$*" | tee -a "$OUT/summary.txt"; }

log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';')"
log "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
export PATH=/usr/local/cuda/bin:$PATH
# only what the runs need: the library, the CUDA plugin, diffusion3d (no tests)
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON \
  -DGW_HIP=OFF -DBUILD_TESTING=OFF -DCMAKE_CUDA_ARCHITECTURES=90 > "$L/configure.txt" 2>&1
cmake --build "$B" -j"$(nproc)" --target gpuwrap gpuwrap-cuda diffusion3d > "$L/build.txt" 2>&1 || {
  log "configure or build FAILED"
  tail -30 "$L/configure.txt"
  grep -E "error" "$L/build.txt" | head -30
  exit 1
}
log "built"
D=$B/bin/diffusion3d
[ -x $D ] || { log "no $D (MPI missing at configure?)"; exit 1; }

# two processes on one GPU: under MPS (without it the contexts are time-sliced)
nvidia-cuda-mps-control -d && log "MPS started"
R="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x GPUWRAP_BACKEND=cuda"
fail=0

nvcc -O2 -arch=sm_90 $(mpicxx --showme:compile) -o "$B/halo_signal" tools/probes/halo_signal.cu \
  $(mpicxx --showme:link) -lcuda > "$L/probe_build.txt" 2>&1 &&
  timeout 120 $R -np 2 "$B/halo_signal" 2000 > "$L/probe.txt" 2>&1
log "probe halo_signal rc=$?"
cat "$L/probe.txt" | tee -a "$OUT/summary.txt"

# one run: $1 the design (settings joined by commas, GPUWRAP_HALO_ left out), $2 log
# name, the rest diffusion3d's arguments
xs() { local x; for x in ${1//,/ }; do printf -- '-x GPUWRAP_HALO_%s ' "$x"; done; }
bench() {
  local v=$1 name=$2
  shift 2
  timeout 300 $R -np 2 $(xs "$v") $D "$@" > "$L/$name.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || fail=1
  log "$v $* rc=$rc: $(grep -oE 'holds [0-9]+ bytes of buffers' "$L/$name.txt"); $(grep -E 'IPC / host update|time/step' "$L/$name.txt" | head -1 | sed 's/^ *//')"
}
# the A/B's designs
V="IPC_DIRECT=0 IPC_DIRECT=1,IPC_SIGNAL=0 IPC_DIRECT=1,IPC_SIGNAL=1"
i=0
for round in 1 2 3; do
  for v in $V; do
    bench $v "bench_r${round}_$((i++))" -n 256 -s 200 --halo-bench --mem device --path ipc
  done
done
for v in $V; do
  bench $v "bench_periodic_$((i++))" -n 256 -s 200 --periodic --halo-bench --mem device --path ipc
done
# the overlapped (stream-ordered) step: each design, and the host path
for round in 1 2; do
  for v in $V; do
    bench $v "overlap_r${round}_$((i++))" -n 256 -s 300 --periodic --overlap --path ipc
  done
  bench IPC_DIRECT=0 "overlap_host_r${round}_$((i++))" -n 256 -s 300 --periodic --overlap --path host
done

for np in 2 4; do
  for opt in "" "--periodic" "--overlap" "--periodic --overlap"; do
    name="check_np${np}_$(echo "x$opt" | tr -d ' -')"
    for v in ${CHECK_V:-$V}; do
      timeout 300 $R -np $np $(xs "$v") $D -n 32 -s 20 --path ipc --check $opt > "$L/$name-$v.txt" 2>&1
      rc=$?
      [ $rc -eq 0 ] || fail=1
      log "$v --check np=$np $opt rc=$rc: $(grep -E 'check:' "$L/$name-$v.txt" | tr '\n' ' ')"
    done
  done
done

if command -v compute-sanitizer >/dev/null; then
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    for opt in "" "--overlap"; do
      name="sanitize_${tool}$(echo "$opt" | tr -d ' -')"
      timeout 300 $R -np 2 $(xs IPC_DIRECT=1,IPC_SIGNAL=1) compute-sanitizer --tool $tool --error-exitcode 99 \
        $D -n 32 -s 10 --path ipc --check --periodic $opt > "$L/$name.txt" 2>&1
      rc=$?
      [ $rc -eq 0 ] || fail=1
      log "compute-sanitizer $tool IPC_DIRECT=1,IPC_SIGNAL=1 --periodic $opt rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$L/$name.txt" | sort | uniq -c | tr '\n' ' ')"
    done
  done
fi

if [ "${2:-}" = trace ]; then
  T=$B-trace
  [ -f "$T/CMakeCache.txt" ] || cmake -S . -B "$T" -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON \
    -DGW_HIP=OFF -DBUILD_TESTING=OFF -DGW_TRACE=ON -DCMAKE_CUDA_ARCHITECTURES=90 > "$L/configure-trace.txt" 2>&1
  if cmake --build "$T" -j"$(nproc)" --target gpuwrap gpuwrap-cuda diffusion3d > "$L/build-trace.txt" 2>&1; then
    for v in $V; do
      timeout 120 $R -np 2 $(xs "$v") $T/bin/diffusion3d -n 256 -s 2000 --halo-only \
        --mem device --path ipc > "$L/trace_${v//[=,]/_}.txt" 2>&1
      log "trace $v rc=$?"
    done
  else
    log "trace build FAILED"
  fi
fi

echo quit | nvidia-cuda-mps-control
log "done (fail=$fail)"
exit $fail
