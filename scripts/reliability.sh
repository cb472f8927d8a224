#!/usr/bin/env bash
# Reliability runs (docs/RELIABILITY.md): each in its own build directory under build/
# (covered by .gitignore), its logs beside it (build/rel-*.{configure,build,ctest}.log), -j2.
#
#   asan      whole suite under AddressSanitizer + UndefinedBehaviorSanitizer  (build/rel-asan)
#   tsan      whole suite under ThreadSanitizer                                 (build/rel-tsan)
#   valgrind  CPU suite under valgrind memcheck (every test through valgrind)   (build/rel-valgrind)
#   fuzz      libFuzzer targets for a bounded time, clang + ASan + UBSan        (build/rel-fuzz)
#
# usage: scripts/reliability.sh [asan] [tsan] [valgrind] [fuzz]     (default: all four)
# environment: FUZZ_SECONDS (default 60 per target), JOBS (default 2),
#              GW_STRESS_OPS (operations per stress thread; default 2000, 500 under valgrind)
# Exit status: non-zero if any step reported anything (a failed test, a sanitizer report,
# a valgrind error, a fuzzer crash/leak/timeout). A summary is printed at the end.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(asan tsan valgrind fuzz)
COMMON=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_CUDA=OFF -DGW_HIP=OFF -DGW_MPI=OFF -DBUILD_TESTING=ON)
SUMMARY=()
FAILED=0
mkdir -p "$ROOT/build"

log() { printf '\n=== %s\n' "$*"; }
result() { # step rc detail
  if [ "$2" -eq 0 ]; then SUMMARY+=("PASS  $1  $3"); else SUMMARY+=("FAIL  $1  $3"); FAILED=1; fi
}

configure_build() { # dir, cmake args... (BUILD_TARGETS="a b": build only those)
  local dir=$1; shift
  cmake -S "$ROOT" -B "$ROOT/$dir" "${COMMON[@]}" "$@" >"$ROOT/$dir.configure.log" 2>&1 ||
    { tail -20 "$ROOT/$dir.configure.log"; return 1; }
  local targets=()
  for t in ${BUILD_TARGETS:-}; do targets+=(--target "$t"); done
  cmake --build "$ROOT/$dir" -j"$JOBS" "${targets[@]}" >"$ROOT/$dir.build.log" 2>&1 ||
    { grep -E 'error|Error' "$ROOT/$dir.build.log" | head -20; return 1; }
}

# How many of a ctest run's tests were skipped, and why (ctest counts a skip as a pass):
# into the summary.
skips() { # dir, label
  local f="$ROOT/$1/ctest-junit.xml" line
  [ -f "$f" ] || return 0
  while IFS= read -r line; do SUMMARY+=("      $line"); done < <(python3 "$ROOT/scripts/ctest-skips.py" "$f" "$2")
}

# Figures printed by the reliability tests, from ctest's log.
figures() { # dir
  grep -ahE '^(FAILURES INJECTED|STRESS|RACE|FORK|scenario )' "$ROOT/$1/Testing/Temporary/LastTest.log" 2>/dev/null |
    sort -u | sed 's/^/    /' | tail -40
}

run_ctest() { # dir, label, extra ctest args...
  local dir=$1 what=$2; shift 2
  local t0=$SECONDS
  (cd "$ROOT/$dir" && ctest -j"$JOBS" --output-on-failure --timeout 900 --output-junit "$ROOT/$dir/ctest-junit.xml" "$@") >"$ROOT/$dir.ctest.log" 2>&1
  local rc=$?
  grep -E 'tests passed|tests failed|The following tests FAILED|^\s+[0-9]+ - ' "$ROOT/$dir.ctest.log" | tail -25
  figures "$dir"
  result "$what" $rc "($((SECONDS - t0)) s; log $dir.ctest.log)"
  skips "$dir" "$what"
}

step_asan() {
  log "ASan + UBSan: whole suite (build/rel-asan)"
  if ! configure_build build/rel-asan -DGW_SANITIZE="address;undefined"; then result asan 1 "build failed"; return; fi
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_ctest build/rel-asan asan
}

step_tsan() {
  log "TSan: whole suite (build/rel-tsan)"
  if ! configure_build build/rel-tsan -DGW_SANITIZE=thread; then result tsan 1 "build failed"; return; fi
  # Some kernels (high vm.mmap_rnd_bits) make TSan die with "unexpected memory mapping";
  # then every test runs with address randomisation off (setarch -R).
  local probe
  probe=$(ls "$ROOT"/build/rel-tsan/tests/reliability/stress 2>/dev/null || true)
  local wrap=()
  if [ -n "$probe" ] && "$probe" 2>&1 | grep -q 'unexpected memory mapping'; then
    echo "TSan needs setarch -R on this kernel"
    wrap=(setarch "$(uname -m)" -R)
  fi
  local t0=$SECONDS
  if [ ${#wrap[@]} -gt 0 ]; then
    # setarch is inherited by the children ctest starts
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "${wrap[@]}" \
      bash -c "cd '$ROOT/build/rel-tsan' && ctest -j$JOBS --output-on-failure --timeout 900 --output-junit '$ROOT/build/rel-tsan/ctest-junit.xml'" \
      >"$ROOT/build/rel-tsan.ctest.log" 2>&1
    local rc=$?
    grep -E 'tests passed|tests failed|^\s+[0-9]+ - ' "$ROOT/build/rel-tsan.ctest.log" | tail -25
    figures build/rel-tsan
    result tsan $rc "(setarch -R; $((SECONDS - t0)) s; log build/rel-tsan.ctest.log)"
    skips build/rel-tsan tsan
  else
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest build/rel-tsan tsan
  fi
}

step_valgrind() {
  log "valgrind memcheck: CPU suite (build/rel-valgrind)"
  if ! command -v valgrind >/dev/null; then result valgrind 1 "valgrind not installed"; return; fi
  # Every add_test() of a target runs through the emulator: valgrind.
  if ! configure_build build/rel-valgrind \
      "-DCMAKE_CROSSCOMPILING_EMULATOR=valgrind;--error-exitcode=99;--leak-check=full;--errors-for-leak-kinds=definite;--track-fds=no;--quiet"; then
    result valgrind 1 "build failed"; return
  fi
  # fork.busy detects hangs by a deadline, meaningless at valgrind's speed: ASan/TSan run it.
  # The command-line tool's tests (cpu.tool.*: the bench's loops) stay out as before they
  # carried the cpu label.
  GW_STRESS_OPS=${GW_STRESS_OPS:-500} run_ctest build/rel-valgrind valgrind -L cpu -E 'fork\.busy|^cpu\.tool\.'
}

step_fuzz() {
  log "libFuzzer: ${FUZZ_SECONDS} s per target (build/rel-fuzz, clang + ASan + UBSan)"
  if ! command -v clang >/dev/null; then result fuzz 1 "clang not installed"; return; fi
  # only the fuzz targets: they compile the library sources in, with coverage
  if ! CC=clang BUILD_TARGETS="fuzz_wrap fuzz_dlpack" configure_build build/rel-fuzz \
      -DGW_FUZZ=ON -DGW_SANITIZE="address;undefined"; then
    result fuzz 1 "build failed"; return
  fi
  local targets=()
  for t in fuzz_wrap fuzz_dlpack; do
    [ -x "$ROOT/build/rel-fuzz/fuzz/$t" ] && targets+=("$t")
  done
  for t in "${targets[@]}"; do
    local work="$ROOT/build/rel-fuzz/fuzz-work/$t"
    rm -rf "$work" && mkdir -p "$work/corpus" "$work/artifacts"
    (cd "$work" && ASAN_OPTIONS=detect_leaks=1 "$ROOT/build/rel-fuzz/fuzz/$t" \
      -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/" corpus "$ROOT/tests/reliability/corpus/$t" \
      >"$work/log" 2>&1)
    local rc=$?
    local execs cov
    execs=$(grep -a 'stat::number_of_executed_units' "$work/log" | awk '{print $2}')
    cov=$(grep -aoE 'cov: [0-9]+' "$work/log" | tail -1)
    echo "  $t: executions ${execs:-?}, ${cov:-cov: ?}, exit $rc"
    if [ $rc -ne 0 ]; then
      grep -aE 'runtime error|ERROR: |invariant broken|SUMMARY' "$work/log" | head -5 | sed 's/^/    /'
      ls "$work/artifacts" | sed 's/^/    artifact: /'
    fi
    result "fuzz:$t" $rc "(executions ${execs:-?}, ${cov:-?}; log build/rel-fuzz/fuzz-work/$t/log)"
  done
  [ ${#targets[@]} -eq 0 ] && result fuzz 1 "no fuzz target built"
}

T0=$SECONDS
TIMES=()
for s in "${STEPS[@]}"; do
  s0=$SECONDS
  case $s in
    asan) step_asan ;;
    tsan) step_tsan ;;
    valgrind) step_valgrind ;;
    fuzz) step_fuzz ;;
    *) echo "unknown step $s (asan tsan valgrind fuzz)"; exit 2 ;;
  esac
  TIMES+=("$s $((SECONDS - s0)) s")
done
# The time of these steps only (builds included): a caller (scripts/run-tests) has its own.
log "reliability summary: ${STEPS[*]} in $((SECONDS - T0)) s ($(IFS=,; echo "${TIMES[*]}" | sed 's/,/, /g'); $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores)"
printf '  %s\n' "${SUMMARY[@]}"
exit $FAILED
