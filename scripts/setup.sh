#!/usr/bin/env bash
# Installs what zkelect needs on Debian 12 (as root, only when something is
# missing) and builds it.
#   scripts/setup.sh [extra cmake -D options]     build dir: $BUILD_DIR (default build)
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake pkg-config libzookeeper-st-dev liblua5.4-dev libev-dev
      zookeeper python3 libcjson-dev libmicrohttpd-dev nftables iproute2 lowdown
      libcurator-recipes-java python3-kazoo default-jdk-headless    # mixed-election tests
      haproxy iputils-arping                                        # example-policy tests
      valgrind                                                      # the embedding example, scripts/valgrind.sh
      clang libclang-rt-14-dev                                      # fuzz targets (libFuzzer: scripts/fuzz.sh)
      clang-tidy cppcheck                                           # scripts/lint.sh
      gnuplot-nox)                                                  # bench/run plots (bench.tiny)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # libzookeeper-st-dev conflicts with libzookeeper-mt-dev: apt replaces it.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v java >/dev/null || { echo "setup: java not found after installing zookeeper" >&2; exit 1; }

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
