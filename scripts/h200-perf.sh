#!/usr/bin/env bash
# The performance run of issue 18 on a device machine (one H200), in one command of about
# seven minutes: build with CUDA, the CUDA suite, the PyTorch/CuPy DLPack tests, `gpuwrap
# bench --strict`, a staging A/B (settings in H200_AB, two rounds), tools/probes/fill_gap.cu
# (built by CMake, GW_PROBES=ON),
# `bench --only query,wrap` twice, a second `bench --strict` (H200_STRICT2=0 skips it).
# Build in build/h200-perf; logs under $OUT (default ./h200-perf-out): summary.txt,
# bench.txt, bench2.txt, logs.tgz.
# Usage: scripts/h200-perf.sh [--no-suite | --staging-suite] [--help]
#   --staging-suite: only the suite's staging, copy and fill tests, no PyTorch/CuPy
set -uo pipefail
suite=1
for a in "$@"; do
  case "$a" in
    --no-suite) suite=0 ;;
    --staging-suite) suite=2 ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "h200-perf: unknown argument '$a' (try --help)" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$PWD/h200-perf-out}
L=$OUT/logs; mkdir -p "$L"
export PATH=/usr/local/cuda/bin:$PATH
t0=$(date +%s)
log() { printf '[%4ds] %s\n' $(( $(date +%s) - t0 )) "$*" | tee -a "$OUT/summary.txt"; }

log "gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ';') $(date -u +%FT%TZ)"
B=build/h200-perf
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGW_WERROR=OFF -DGW_CUDA=ON -DGW_HIP=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DGW_PROBES=ON > "$L/configure.txt" 2>&1 || { log "configure FAILED"; tail -20 "$L/configure.txt"; exit 1; }
cmake --build $B -j"$(nproc)" > "$L/build.txt" 2>&1 || { log "build FAILED"; grep -E "error" "$L/build.txt" | head -20; exit 1; }
log "built"

if [ $suite != 0 ]; then
  only=(); [ $suite = 2 ] && only=(-R 'staging|copy|fill')
  timeout 300 ctest --test-dir $B -j12 --timeout 280 --output-on-failure "${only[@]}" > "$L/ctest.txt" 2>&1
  log "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.txt"); passed/skipped/failed $(grep -cE 'Test +#[0-9]+: .* +Passed' "$L/ctest.txt")/$(grep -cE 'Test +#[0-9]+: .*Skipped' "$L/ctest.txt")/$(grep -cE 'Test +#[0-9]+: .*(Failed|Exception|Timeout)' "$L/ctest.txt")"
  grep -E "\(Failed\)|Timeout" "$L/ctest.txt" | head -20 | tee -a "$OUT/summary.txt"
  if [ $suite = 1 ]; then
    GPUWRAP_LIB=$PWD/$B/lib/libgpuwrap.so PYTHONPATH=$PWD/python timeout 120 python3 tests/dlpack/test_torch_cupy.py > "$L/torch_cupy.txt" 2>&1
    log "dlpack torch/cupy rc=$? $(tail -1 "$L/torch_cupy.txt")"
  fi
fi

timeout 240 $B/bin/gpuwrap bench --backend cuda --strict --json "$OUT/bench.json" > "$OUT/bench.txt" 2> "$L/bench.err"
log "bench --strict rc=$? (1: a target missed)"
sed -n '/performance targets/,$p' "$OUT/bench.txt" >> "$OUT/summary.txt"
strict_again() { # a second strict run at the end: the issue's "two runs"
  timeout 240 $B/bin/gpuwrap bench --backend cuda --strict > "$OUT/bench2.txt" 2> "$L/bench2.err"
  log "bench --strict (second run) rc=$?"
  sed -n '/performance targets/,$p' "$OUT/bench2.txt" >> "$OUT/summary.txt"
}

# One setting of a list ("name VAR=v ..." or "name -"): sets $name and the array $envs
# (GPUWRAP_STAGING_VAR=v ...).
setting() { name=$1; shift; envs=(); for kv in "$@"; do [ "$kv" = - ] || envs+=("GPUWRAP_STAGING_$kv"); done; }
# GB/s (gpuwrap's median) of the pageable rows of direction $2 in file $1, 1-64 MiB
gbs() { grep -E "^ +$2 +(1|4|16|64) MiB" "$1" | awk '{printf "%s%s=%s ", $2,$3,$8}'; }
# Staging A/B: name, then the settings (GPUWRAP_STAGING_*; "-" for none). Override with
# H200_AB="name VAR=v ...;name2 ..." to measure other settings.
AB=${H200_AB:-"default -;plain EDGE_TAIL=0;t2 EDGE_TAIL=2;t4 EDGE_TAIL=4"}
for rep in 1 2; do
  IFS=';' read -ra cfgs <<< "$AB"
  for cfg in "${cfgs[@]}"; do
    setting $cfg
    env "${envs[@]}" timeout 90 $B/bin/gpuwrap bench --backend cuda --only copy --max-size 64M > "$L/ab_${name}_$rep.txt" 2>&1
    log "staging $name (${envs[*]}), round $rep: H2D $(gbs "$L/ab_${name}_$rep.txt" 'host->device')| D2H $(gbs "$L/ab_${name}_$rep.txt" 'device->host')"
  done
done
if [ -x $B/bin/fill_gap ]; then
  for rep in 1 2; do GPUWRAP_BACKEND=cuda timeout 60 $B/bin/fill_gap > "$L/fill_gap_$rep.txt" 2>&1; log "fill_gap run $rep rc=$?"; done
  cat "$L/fill_gap_1.txt" >> "$OUT/summary.txt"
fi
for rep in 1 2; do
  timeout 60 $B/bin/gpuwrap bench --backend cuda --only query,wrap > "$L/qw_$rep.txt" 2>&1
  log "query,wrap run $rep: $(awk '$3=="-" && $4==1 && ($2=="device"||$2=="pinned"||$2=="managed"||$2=="pageable") {printf "%s %s raw %s gpuwrap %s; ", $1,$2,$5,$8}' "$L/qw_$rep.txt")"
done
[ "${H200_STRICT2:-1}" = 1 ] && strict_again
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$L"
log "done"
