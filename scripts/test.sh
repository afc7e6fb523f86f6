#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh --dev: the test tools too),
# builds, and runs the whole suite: a normal build and an ASan+UBSan build.
# Every integration test runs once: in the ASan build (label asan_run), but
# for the ones that build has not or leaves out (asan_excluded: the
# schedule checks, measured where users run them; the tests of what
# surrounds the agent; valgrind; the packages; the benchmark's smoke run;
# the chaos suite), which run in the normal build; the unit tests and the
# fuzz reproducers run in both. The lint and the fuzz targets run beside the
# tests (after the ASan build). Every integration test starts its own
# ZooKeeper server on a free loopback port.
#   scripts/test.sh [ctest args, e.g. -R integration.chain]   (in both builds)
#   ZKELECT_TWICE=1 scripts/test.sh     (the asan_run tests in the normal build too)
#   ZKELECT_ASAN_ALL=1 scripts/test.sh  (the asan_excluded tests under ASan too)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash scripts/setup.sh --dev || exit 1
# The idle priority for the work beside a timed run (SCHED_IDLE: the CPU
# time the run leaves idle; its processes take the CPU at once when they
# wake), nice 19 where chrt cannot set it.
idle=(chrt --idle 0)
"${idle[@]}" true 2>/dev/null || idle=(nice -n 19)
# The ASan build goes on beside the normal build's tests, in the CPU time
# they leave idle (they wait on session timeouts far more than they
# compute: about 1.5 of the 2 cores), and is waited for before its tests;
# the fuzz targets (one test each) follow it. In the whole run only, the
# static analysis (scripts/lint.sh: one test, on the normal build's compile
# commands) starts at once beside it, in the same idle time: the normal
# build's tests, the chaos suite (it waits on session timeouts and
# partitions) and the ASan tests, so that they add little to the run (the
# lint after the ASan build took 415 s of it and the run waited 80 s for
# it). Their output is printed when they are done.
side=$(mktemp -d)
asan_log=$side/asan.log
trap 'rm -rf "$side"' EXIT
lint_pid=
if [ $# -eq 0 ]; then
  (
    t0=$SECONDS
    "${idle[@]}" bash scripts/lint.sh >"$side/lint.log" 2>&1; echo $? >"$side/lint.rc"
    echo "lint $((SECONDS - t0)) s" >"$side/lint.time"
  ) &
  lint_pid=$!
fi
(
  BUILD_DIR=build-asan "${idle[@]}" bash scripts/setup.sh --dev -DZKELECT_SANITIZE=ON \
    -DCMAKE_BUILD_TYPE=Debug >"$asan_log" 2>&1
  r=$?
  echo $r >"$side/asan.rc"
  [ $# -eq 0 ] && [ $r -eq 0 ] || exit 0
  t1=$SECONDS
  "${idle[@]}" bash scripts/fuzz.sh "${FUZZ_SECONDS:-4}" >"$side/fuzz.log" 2>&1
  echo "fuzz $((SECONDS - t1)) s" >"$side/fuzz.time"
) &
side_pid=$!
asan_built() {
  local n=0
  while [ ! -s "$side/asan.rc" ] && [ $n -lt 7200 ]; do sleep 0.5; n=$((n + 1)); done
  local r; r=$(cat "$side/asan.rc" 2>/dev/null || echo 1)
  cat "$asan_log"
  [ -s "$side/asan.rc" ] || echo "the ASan build did not end within an hour"
  # (the lint beside is waited for: nothing is left running after the exit)
  [ "$r" -eq 0 ] || { echo "the ASan build failed (exit $r)"; wait; exit 1; }
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
passed=0 failed=0 rc=0
# One ctest run; adds its counts to passed/failed; says its time and the CPU
# its tests used (user + sys of the processes they waited for, by bash's
# times in ctest's subshell: not the builds going on beside).
cpu_file=$side/cpu
run_ctest() {
  local b=$1; shift
  local t0=$SECONDS
  : >"$cpu_file"
  out=$( cd "$b" && { ctest --output-on-failure --timeout 300 "$@" 2>&1; r=$?; times >"$cpu_file"; exit $r; } )
  r=$?
  printf '%s\n' "$out"
  awk -v b="$b" -v t=$((SECONDS - t0)) 'NR == 2 { split($1, u, "m"); split($2, s, "m")
    c = u[1] * 60 + u[2] + s[1] * 60 + s[2]
    printf "ctest in %s: %d s, %.0f s of CPU (%.2f cores)\n", b, t, c, t ? c / t : 0 }' "$cpu_file"
  line=$(printf '%s\n' "$out" | grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' | tail -n1)
  if [ -n "$line" ]; then
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    f=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    passed=$((passed + total - f)); failed=$((failed + f))
  elif ! printf '%s\n' "$out" | grep -q 'No tests were found'; then
    failed=$((failed + 1))
  fi
  [ $r -eq 0 ] || printf '%s\n' "$out" | grep -q 'No tests were found' || rc=1
}
for b in build build-asan; do
  [ "$b" = build ] || asan_built
  echo "=== ctest in $b"
  if [ $# -gt 0 ]; then
    run_ctest "$b" "$@"
  else
    # every test starts its own ZooKeeper on free ports: four slots at a
    # time (they wait on session timeouts and leases far more than they
    # compute: about 1.5 of the 2 cores in either build); the schedule
    # checks (integration.*_once) and the package build take two slots each
    # (PROCESSORS 2), so no more than two tests run beside them; the chaos
    # suite (its own ensembles, namespaces, timing; two runs at once) runs
    # alone, in the normal build (under ASan: scripts/test.sh -R chaos, or
    # chaos.py with the ASan binary)
    if [ "$b" = build ]; then
      if [ -n "${ZKELECT_TWICE:-}" ]; then
        run_ctest "$b" -j4 -E '^chaos\.suite$'
      else
        run_ctest "$b" -j4 -E '^chaos\.suite$' -LE asan_run
      fi
      run_ctest "$b" -R '^chaos\.suite$'
    elif [ -n "${ZKELECT_ASAN_ALL:-}" ]; then
      run_ctest "$b" -j4 -E '^chaos\.suite$'
    else
      # under ASan, all but the tests labelled asan_excluded (the install,
      # the demo, PostgreSQL, HAProxy, Curator, the every-flag sweeps, the
      # schedule checks, and the tests that run no line of C the others do
      # not): their C paths are run by the tests that stay, and fuzz_flags
      # sweeps the flag parser under ASan+UBSan. ZKELECT_ASAN_ALL=1 runs
      # them too.
      run_ctest "$b" -j4 -E '^chaos\.suite$' -LE asan_excluded
    fi
  fi
done
if [ $# -eq 0 ]; then
  t_wait=$SECONDS
  wait "$side_pid" "$lint_pid"
  echo "=== $(cat "$side/lint.time" 2>/dev/null), $(cat "$side/fuzz.time" 2>/dev/null) (beside the" \
       "tests); waited $((SECONDS - t_wait)) s for them after the tests"
  echo "=== lint"
  cat "$side/lint.log"
  if [ "$(cat "$side/lint.rc" 2>/dev/null)" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); rc=1; fi
  # the fuzz targets, a few seconds each (scripts/fuzz.sh 600 for a longer
  # run): one test per target
  echo "=== fuzz (${FUZZ_SECONDS:-4} s per target)"
  fout=$(cat "$side/fuzz.log"); printf '%s\n' "$fout"
  fline=$(printf '%s\n' "$fout" | grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed' | tail -n1)
  if [ -n "$fline" ]; then
    passed=$((passed + $(sed -E 's/^fuzz: ([0-9]+) passed.*/\1/' <<<"$fline")))
    failed=$((failed + $(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$fline")))
    [ "$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$fline")" -eq 0 ] || rc=1
  else
    failed=$((failed + 1)); rc=1          # the fuzz build failed
  fi
fi
echo "$passed passed, $failed failed"
exit $rc
