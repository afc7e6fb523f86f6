#!/usr/bin/env bash
# The integration suite with every zkelect process under valgrind memcheck
# (tests/integration/zkharness.py: ZKELECT_WRAP), in the normal build.
# An invalid access, a use of uninitialised memory, or a definite or indirect
# leak in any zkelect process fails its test. Takes 20-40 minutes on 2 cores.
#   scripts/valgrind.sh                      every integration.* test (build: $BUILD_DIR, default build)
#   scripts/valgrind.sh -R integration.http  a subset (any ctest arguments)
# The default suite (scripts/test.sh) runs the valgrind.* subset only.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/setup.sh --dev >/dev/null || exit 1
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind not found" >&2; exit 1; }
export ZKELECT_WRAP="valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --child-silent-after-fork=yes --track-fds=no -q"
# slower processes: more time per test function (never a weaker check)
export ZKH_TEST_TIMEOUT=${ZKH_TEST_TIMEOUT:-170}
# not here: embed_valgrind (valgrind already), install (runs a staged copy),
# example_vip (root, namespaces), the valgrind.* subset (the same tests)
args=("$@")
# integration.lease's blip case needs a suspend within a bound a 20-50x
# slowdown does not keep: its memory paths run under ASan and in the chaos suite
[ $# -gt 0 ] || args=(-R '^integration\.' -E '^integration\.(embed_valgrind|install|example_vip|lease)$')
cd "$BUILD_DIR" && exec ctest --output-on-failure -j2 --timeout 900 "${args[@]}"
