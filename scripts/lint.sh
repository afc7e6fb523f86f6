#!/usr/bin/env bash
# Static analysis: the layering rule of the include graph (scripts/layers.py),
# the length of functions (scripts/modstats.py --check),
# clang-tidy (checks in .clang-tidy) and cppcheck (checks and suppressions in
# .cppcheck-suppressions) over src/, examples/, bench/ and tests/tools/. Any
# finding fails the run (exit 1); exit 0 when clean.
#   scripts/lint.sh          needs $BUILD_DIR/compile_commands.json (default build/;
#                            scripts/setup.sh makes it)
# A file whose text, headers, compile command and .clang-tidy did not change
# since it last passed is not analysed again ($BUILD_DIR/lint-cache), so a
# second run takes seconds; the first takes about a minute on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
TIDY=${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy)}
CPPCHECK=${CPPCHECK:-cppcheck}
db=$BUILD_DIR/compile_commands.json
[ -n "$TIDY" ] || { echo "lint: clang-tidy not found (apt-get install clang-tidy)" >&2; exit 1; }
command -v "$CPPCHECK" >/dev/null || { echo "lint: cppcheck not found (apt-get install cppcheck)" >&2; exit 1; }
[ -f "$db" ] || { echo "lint: $db missing (run scripts/setup.sh)" >&2; exit 1; }

t0=$(date +%s)
rc=0

# --- the layering rule: cli -> lua -> lib, no module cycle (HACKING.md)
if ! python3 scripts/layers.py; then
  echo "lint: the include graph breaks the layering rule (above)" >&2
  rc=1
fi

# --- no function over 80 lines in src/ without a comment saying why it is one piece
if ! python3 scripts/modstats.py --check; then
  echo "lint: a long function says nothing of why it is one piece (above; scripts/modstats.py)" >&2
  rc=1
fi

# --- cppcheck: the whole tree at once (a few seconds)
if ! "$CPPCHECK" --std=c11 --enable=warning,style,performance,portability --inline-suppr --quiet \
        -j"$(nproc)" --error-exitcode=1 --suppressions-list=.cppcheck-suppressions \
        -D__GNUC__ -DZKELECT_LUA_DIR='""' -DZKELECT_LUA_RELDIR='""' -DZKELECT_BUILD_DIR='""' \
        -DZKELECT_SOURCE_LUA_DIR='""' -I include -I src/lib -I src/lua -I src/cli \
        --template='{file}:{line}:{column}: {severity}: {message} [{id}]' \
        src examples tests/tools bench; then
  echo "lint: cppcheck found something (above)" >&2
  rc=1
fi

# --- clang-tidy: one process per file, two at a time, cached by content
cache=$BUILD_DIR/lint-cache
mkdir -p "$cache"
headers_sum=$(cat .clang-tidy include/*.h src/*/*.h | sha256sum | cut -c1-16)
mapfile -t files < <(python3 -c '
import json, os, sys
root = os.getcwd() + "/"
for e in json.load(open(sys.argv[1])):
    f = e["file"]
    rel = f[len(root):] if f.startswith(root) else f
    if rel.startswith(("src/", "examples/", "tests/tools/", "bench/")):
        print(rel)' "$db" | sort -u)
todo=()
for f in "${files[@]}"; do
  key=$( { echo "$headers_sum"; grep -F "\"$PWD/$f\"" "$db"; cat "$f"; } | sha256sum | cut -c1-32)
  [ -f "$cache/$key" ] || todo+=("$f:$key")
done
echo "lint: clang-tidy on ${#todo[@]} of ${#files[@]} files (the rest unchanged since they passed)"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%s\n' "${todo[@]}" | grep . | xargs -r -P"$(nproc)" -I{} sh -c '
  f=${1%:*}; key=${1##*:}
  if "$2" -p "$3" --quiet "$f" > "$4/$key.log" 2>&1; then
    touch "$5/$key"
  else
    echo "$f" > "$4/$key.failed"
  fi' _ {} "$TIDY" "$BUILD_DIR" "$out" "$cache"
for failed in "$out"/*.failed; do
  [ -e "$failed" ] || continue
  # the findings only, without clang-tidy's "N warnings generated" chatter
  grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated|^Suppressed [0-9]+ warnings|^Use -header-filter|^Error while processing' \
    "${failed%.failed}.log" >&2
  rc=1
done
[ $rc -eq 0 ] && echo "lint: clean ($(( $(date +%s) - t0 )) s)" || echo "lint: findings above ($(( $(date +%s) - t0 )) s)" >&2
exit $rc
