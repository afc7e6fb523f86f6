#!/usr/bin/env bash
# lib.exports: libzkelect.a defines no global symbol outside zke_*, and
# neither does libzkelect.so's dynamic symbol table, so a host's own
# functions cannot clash with the library's internals. The .so has its
# SONAME and needs the shared Lua, libev, ZooKeeper client and cJSON.
#   tests/exports.sh LIBZKELECT_A [LIBZKELECT_SO SONAME]
set -uo pipefail
lib=$1
so=${2:-}
soname=${3:-}

# check_names WHAT NAMES: at least 20 zke_* names, none other
check_names() {
  local what=$1 all=$2 n bad
  n=$(printf '%s\n' "$all" | grep -c '^zke_')
  bad=$(printf '%s\n' "$all" | grep -v '^zke_' | grep -v '^$')
  if [ "$n" -lt 20 ]; then
    echo "exports: only $n zke_* symbols in $what (the public API is missing?)"; exit 1
  fi
  if [ -n "$bad" ]; then
    echo "exports: global symbols outside zke_* in $what:"; printf '  %s\n' $bad; exit 1
  fi
  echo "exports: $what: $n global symbols, all zke_*"
}

[ -f "$lib" ] || { echo "exports: $lib missing"; exit 1; }
check_names "$lib" "$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }')"
[ -n "$so" ] || exit 0

[ -f "$so" ] || { echo "exports: $so missing"; exit 1; }
# nm -D: the dynamic symbols, without their version (zke_x@@ZKELECT_0);
# the version node itself is an absolute symbol (A), not code or data
check_names "$so" "$(nm -D --defined-only "$so" | awk 'NF == 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }')"
# the static library and the shared one export the same API
a_names=$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort)
so_names=$(nm -D --defined-only "$so" | awk 'NF == 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort)
if [ "$a_names" != "$so_names" ]; then
  echo "exports: $lib and $so export different symbols:"
  diff <(printf '%s\n' "$a_names") <(printf '%s\n' "$so_names"); exit 1
fi
dyn=$(objdump -p "$so")
got=$(printf '%s\n' "$dyn" | awk '$1 == "SONAME" { print $2 }')
if [ "$got" != "$soname" ]; then
  echo "exports: $so has SONAME '$got', not '$soname'"; exit 1
fi
needed=$(printf '%s\n' "$dyn" | awk '$1 == "NEEDED" { print $2 }')
for want in liblua5.4.so libev.so libzookeeper_st.so libcjson.so; do
  if ! printf '%s\n' "$needed" | grep -q "^$want\."; then
    echo "exports: $so does not need $want (NEEDED: $(echo $needed))"; exit 1
  fi
done
echo "exports: $so: SONAME $got, NEEDED $(echo $needed)"
