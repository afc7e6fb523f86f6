#!/usr/bin/env bash
# Installs what zkelect needs on Debian 12 (as root, only when something is
# missing) and builds it.
#   scripts/setup.sh [--dev] [--dry-run] [extra cmake -D options]
#                              build dir: $BUILD_DIR (default build)
#   (default)   what building and the demo need: a compiler, cmake, pkg-config,
#               the -dev libraries, zookeeper (with its JRE), python3
#   --dev       also the test, lint, fuzz, package and benchmark tools, and
#               zkelect-tls (Debian's zookeeper source, fetched once: scripts/zksource.sh)
#               (scripts/test.sh uses it)
#   --dry-run   only say what is missing and how big it is; install and build nothing
# Before installing it names the missing packages and prints how many
# packages (dependencies included) apt will install, the download and the
# installed size; apt's own progress follows.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '4,10s/^# \{0,1\}//p' "$0"; }
dev=0 dry=0
while (($#)); do
  case $1 in
    --dev) dev=1 ;;
    --dry-run) dry=1 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    -*) [[ $1 == -D* || $1 == -G* || $1 == -W* ]] && break
        echo "setup: unknown option $1 (options go before the cmake -D arguments)" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done

# One array per purpose. A package that a test, a script or the benchmark
# uses goes into one of the DEV_* arrays (and `DEV_PKGS` below).
BUILD_PKGS=(build-essential cmake pkg-config
            libzookeeper-st-dev liblua5.4-dev libev-dev libcjson-dev)
DEMO_PKGS=(zookeeper                                 # the server, with its JRE
           python3)                                  # bench/run, ctest -R docs (the demo itself is C)
DEV_TEST=(python3-kazoo iproute2 nftables)           # the test harness, chaos suite (ip, ss, nft)
DEV_MIXED=(libcurator-recipes-java default-jdk-headless)   # mixed-election tests (Curator; kazoo above)
DEV_EXAMPLES=(haproxy iputils-arping)                # example-policy tests
DEV_POSTGRES=(postgresql-15 patroni python3-psycopg2)  # examples/postgres (integration.example_postgres, bench/postgres/run)
DEV_PROMETHEUS=(prometheus)                          # promtool (integration.prometheus; the server, its unit)
DEV_VALGRIND=(valgrind)                              # the embedding example, scripts/valgrind.sh
DEV_FUZZ=(clang libclang-rt-14-dev)                  # fuzz targets (libFuzzer: scripts/fuzz.sh)
DEV_LINT=(clang-tidy cppcheck)                       # scripts/lint.sh
DEV_MAN=(lowdown)                                    # renders the man page (docs.manpage)
DEV_PACKAGE=(systemd dpkg-dev debhelper lintian dpkg-repack)  # the Debian package test, systemd-analyze verify (integration.units too)
DEV_BENCH=(gnuplot-nox)                              # bench/run plots (bench.tiny)
DEV_TLS=(libssl-dev libnetty-java)                   # zkelect-tls (cmake -DZKELECT_TLS=ON: OpenSSL; the
                                                     # TLS server's Netty, integration.tls)
DEV_PKGS=("${DEV_TEST[@]}" "${DEV_MIXED[@]}" "${DEV_EXAMPLES[@]}" "${DEV_POSTGRES[@]}"
          "${DEV_PROMETHEUS[@]}"
          "${DEV_VALGRIND[@]}" "${DEV_FUZZ[@]}" "${DEV_LINT[@]}" "${DEV_MAN[@]}"
          "${DEV_PACKAGE[@]}" "${DEV_BENCH[@]}" "${DEV_TLS[@]}")

PKGS=("${BUILD_PKGS[@]}" "${DEMO_PKGS[@]}")
what="build and demo"
if ((dev)); then PKGS+=("${DEV_PKGS[@]}"); what="build, demo and --dev"; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# What apt would install for "$@" (dependencies included, no recommends):
# "N packages, N MB to download, N MB installed", from apt's simulation and the
# sizes in the package lists; empty when the lists do not know the packages.
plan_size() {
  local inst
  inst=$(LC_ALL=C apt-get install -s --no-install-recommends "$@" 2>/dev/null |
         sed -nE 's/^Inst ([^ ]+) (\[[^]]*\] )?\(([^ ]+) .*/\1=\3/p') || return 0
  [ -n "$inst" ] || return 0
  # shellcheck disable=SC2086  # one word per package=version
  LC_ALL=C apt-cache show --no-all-versions $inst 2>/dev/null | awk -v n="$(wc -l <<<"$inst")" '
    /^Size: /           { dl += $2 }
    /^Installed-Size: / { inst += $2 }
    function mb(b) { return sprintf(b < 1e7 ? "%.1f MB" : "%.0f MB", b / 1e6) }
    END { printf "%d packages, %s to download, %s installed\n", n, mb(dl), mb(inst * 1024) }'
}

if ((${#missing[@]} == 0)); then
  echo "setup: nothing to install: the ${#PKGS[@]} packages for $what are installed"
elif ((dry)) || [ "$(id -u)" != 0 ]; then
  size=$(plan_size "${missing[@]}")
  echo "setup: ${#missing[@]} of the ${#PKGS[@]} packages for $what are missing: ${missing[*]}"
  [ -z "$size" ] || echo "setup: with their dependencies: ${size} (from the current package lists)"
  if ! ((dry)); then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
else
  echo "setup: ${#missing[@]} of the ${#PKGS[@]} packages for $what are missing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  echo "setup: apt-get update"
  apt-get update -q -o DPkg::Lock::Timeout=300
  size=$(plan_size "${missing[@]}")
  echo "setup: installing ${missing[*]}: ${size:-size unknown} (with their dependencies)"
  # libzookeeper-st-dev conflicts with libzookeeper-mt-dev: apt replaces it.
  apt-get install -y -q --no-install-recommends -o Dpkg::Progress-Fancy=0 \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
fi
((dry)) && exit 0
command -v java >/dev/null || { echo "setup: java not found after installing zookeeper" >&2; exit 1; }

BUILD_DIR=${BUILD_DIR:-build}
# --dev: zkelect-tls too (integration.tls), from Debian's zookeeper source,
# fetched once into a cache (scripts/zksource.sh: checksum-verified)
tls=()
if ((dev)); then
  bash scripts/zksource.sh >/dev/null
  tls=(-DZKELECT_TLS=ON)
fi
# the configure output only on failure; its warning lines always (lowdown)
if ! conf=$(cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${tls[@]}" "$@"); then
  printf '%s\n' "$conf"
  exit 1
fi
grep '^-- warning:' <<<"$conf" || true
cmake --build "$BUILD_DIR" -j"$(nproc)"
