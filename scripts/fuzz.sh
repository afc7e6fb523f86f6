#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan; build dir $FUZZ_BUILD_DIR,
# default build-fuzz) and runs each for a bounded time on a copy of its
# committed corpus (tests/fuzz/corpus/<target>; new inputs go to
# $FUZZ_BUILD_DIR/corpus/<target>, crashes to $FUZZ_BUILD_DIR/findings/).
#   scripts/fuzz.sh [seconds-per-target] [target ...]     (default 10 s, all)
#   scripts/fuzz.sh build                                  (build the targets only)
# Prints one line per target, then "fuzz: N passed, N failed"; exits 1 if a
# target found something (a crash, a leak, a UBSan report, a timeout).
# A finding: fix it, and commit the reproducer into the target's corpus:
# the fuzz.replay.<target> ctest entry then replays it in every build.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
shift || true
B=${FUZZ_BUILD_DIR:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(children nodedata hosts_path_id flags status_addr http_head lua_api utf8 srvconf memberdata histrecord)

command -v clang >/dev/null || { echo "fuzz: clang not found (scripts/setup.sh --dev installs it)" >&2; exit 1; }
cmake -S . -B "$B" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DZKELECT_FUZZ=ON \
      -DZKELECT_BUILD_EXAMPLES=OFF >/dev/null || exit 1
cmake --build "$B" -j"$(nproc)" --target fuzz_all >/dev/null || { cmake --build "$B" --target fuzz_all; exit 1; }
[ "$secs" != build ] || { echo "fuzz: built"; exit 0; }      # scripts/fuzz.sh build: no run

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
passed=0 failed=0
mkdir -p "$B/findings"
for t in "${targets[@]}"; do
  mkdir -p "$B/corpus/$t"
  cp -n tests/fuzz/corpus/"$t"/* "$B/corpus/$t/" 2>/dev/null
  log="$B/findings/$t.log"
  if "$B/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
        -max_len=4096 -print_final_stats=1 -artifact_prefix="$B/findings/$t-" \
        "$B/corpus/$t" >"$log" 2>&1; then
    echo "fuzz: $t ok ($(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$') runs in ${secs} s)"
    passed=$((passed + 1))
  else
    echo "fuzz: $t FAILED (log $log, reproducer $B/findings/$t-*)"
    grep -E 'ERROR|SUMMARY|assertion|runtime error' "$log" | head -5
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
