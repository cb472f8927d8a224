#!/usr/bin/env bash
# The performance run of issue 18 on a device machine (one H200), in one command of about
# five minutes: build with CUDA, the CUDA suite, `gpuwrap bench --strict`, the staging
# linger A/B (GPUWRAP_STAGING_LINGER_US), tools/probes/fill_gap.cu, `bench --only query,wrap`
# twice. Logs under $OUT (default ./h200-perf-out): summary.txt, bench.txt, logs.tgz.
# Usage: scripts/h200-perf.sh [--no-suite] [--help]
set -uo pipefail
suite=1
for a in "$@"; do
  case "$a" in
    --no-suite) suite=0 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "h200-perf: unknown argument '$a' (try --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/h200-perf-out}
L=$OUT/logs; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$OUT/summary.txt"; }
# the ratio column of bench rows matching $2 in file $1, as "row=ratio" words
ratios() { grep -E "$2" "$1" | awk '{r=$(NF-1); $0=substr($0,1,49); gsub(/ +/," "); print $0"="r}' | tr '\n' ' '; }

log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';') $(date -u +%FT%TZ)"
B=build-h200-perf
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON -DGW_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$L/configure.txt" 2>&1 || { log "configure FAILED"; tail -20 "$L/configure.txt"; exit 1; }
cmake --build $B -j"$(nproc)" > "$L/build.txt" 2>&1 || { log "build FAILED"; grep -E "error" "$L/build.txt" | head -20; exit 1; }
nvcc -O3 -arch=sm_90 -I include -o $B/fill_gap tools/probes/fill_gap.cu -L $B/lib -lgpuwrap -lcuda \
  -Xlinker -rpath,$PWD/$B/lib > "$L/fill_gap_build.txt" 2>&1 || log "fill_gap build FAILED"
log "built"

if [ $suite = 1 ]; then
  timeout 300 ctest --test-dir $B -j12 --timeout 280 --output-on-failure > "$L/ctest.txt" 2>&1
  log "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.txt"); passed/skipped/failed $(grep -cE 'Test +#[0-9]+: .* +Passed' "$L/ctest.txt")/$(grep -cE 'Test +#[0-9]+: .*Skipped' "$L/ctest.txt")/$(grep -cE 'Test +#[0-9]+: .*(Failed|Exception|Timeout)' "$L/ctest.txt")"
  grep -E "\(Failed\)|Timeout" "$L/ctest.txt" | head -20 | tee -a "$OUT/summary.txt"
fi

timeout 240 $B/bin/gpuwrap bench --backend cuda --strict --json "$OUT/bench.json" > "$OUT/bench.txt" 2> "$L/bench.err"
log "bench --strict rc=$? (1: a target missed)"
sed -n '/performance targets/,$p' "$OUT/bench.txt" >> "$OUT/summary.txt"

for rep in 1 2; do
  for us in 100 1000 5000; do
    GPUWRAP_STAGING_LINGER_US=$us timeout 90 $B/bin/gpuwrap bench --backend cuda --only copy --max-size 64M > "$L/linger_${us}_$rep.txt" 2>&1
    log "linger $us us, round $rep: $(ratios "$L/linger_${us}_$rep.txt" '^ +(host->device|device->host) +(16|64) MiB')"
  done
done

if [ -x $B/fill_gap ]; then
  for rep in 1 2; do GPUWRAP_BACKEND=cuda timeout 60 $B/fill_gap > "$L/fill_gap_$rep.txt" 2>&1; log "fill_gap run $rep rc=$?"; done
  cat "$L/fill_gap_1.txt" >> "$OUT/summary.txt"
fi
for rep in 1 2; do
  timeout 60 $B/bin/gpuwrap bench --backend cuda --only query,wrap > "$L/qw_$rep.txt" 2>&1
  log "query,wrap run $rep: $(awk '$3=="-" && $4==1 && ($2=="device"||$2=="pinned"||$2=="managed"||$2=="pageable") {printf "%s %s raw %s gpuwrap %s; ", $1,$2,$5,$8}' "$L/qw_$rep.txt")"
done
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
log "done"
