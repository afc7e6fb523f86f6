#!/usr/bin/env bash
# Installs what is missing (scripts/setup.sh --dev: the test tools too),
# builds, and runs the whole suite twice: a normal build and an ASan+UBSan
# build. Every integration test starts its own ZooKeeper server on a free
# loopback port.
#   scripts/test.sh [ctest args, e.g. -R integration.chain]
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

bash scripts/setup.sh --dev || exit 1
BUILD_DIR=build-asan bash scripts/setup.sh --dev -DZKELECT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug || exit 1

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
passed=0 failed=0 rc=0
# One ctest run; adds its counts to passed/failed.
run_ctest() {
  local b=$1; shift
  out=$( cd "$b" && ctest --output-on-failure --timeout 300 "$@" 2>&1 ); r=$?
  printf '%s\n' "$out"
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
# static analysis (scripts/lint.sh): one test, in the whole run only
if [ $# -eq 0 ]; then
  echo "=== lint"
  if bash scripts/lint.sh; then passed=$((passed + 1)); else failed=$((failed + 1)); rc=1; fi
fi
for b in build build-asan; do
  echo "=== ctest in $b"
  if [ $# -gt 0 ]; then
    run_ctest "$b" "$@"
  else
    # every test starts its own ZooKeeper on free ports: three at a time
    # (they wait on session timeouts and leases far more than they compute:
    # hardening, ctl and auth used 20 s of CPU in 99 s, about a fifth of a
    # core each); the chaos suite (its own ensemble, namespaces, timing) runs alone, in
    # the normal build (under ASan: scripts/test.sh -R chaos, or chaos.py
    # with the ASan binary), to keep the whole run well inside 15 minutes
    run_ctest "$b" -j3 -E '^chaos\.suite$'
    [ "$b" = build-asan ] || run_ctest "$b" -R '^chaos\.suite$'
  fi
done
# the fuzz targets, a few seconds each (scripts/fuzz.sh 600 for a longer run):
# one test per target
if [ $# -eq 0 ]; then
  echo "=== fuzz (${FUZZ_SECONDS:-4} s per target)"
  fout=$(bash scripts/fuzz.sh "${FUZZ_SECONDS:-4}" 2>&1); printf '%s\n' "$fout"
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
