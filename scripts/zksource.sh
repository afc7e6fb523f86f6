#!/usr/bin/env bash
# Fetches Debian's source of the ZooKeeper package that libzookeeper-st comes
# from (the version pinned below, checked against the SHA-256 sums pinned
# below), for the build with TLS (cmake -DZKELECT_TLS=ON: the C client
# compiled with OpenSSL, cmake/zookeeper/ZooKeeperTLS.cmake). apt-get source
# with a private sources list, package lists and cache: the machine's apt
# configuration is not touched, and no root is needed.
#   scripts/zksource.sh [DIR]    DIR: where the files go (default: the cache
#                                below); prints DIR. Nothing is fetched when
#                                the files are there with the right sums.
#   cache: ${ZKELECT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkelect}/zookeeper-source
set -euo pipefail
cd "$(dirname "$0")/.."

# the same two numbers are in cmake/zookeeper/ZooKeeperTLS.cmake
VERSION=3.8.0-11+deb12u2
ORIG=zookeeper_3.8.0.orig.tar.gz
ORIG_SHA256=b0c5684640bea2d8bd6610b47ff41be2aefd6c910ba48fcad5949bd2bf2fa1ac
DEBIAN=zookeeper_${VERSION}.debian.tar.xz
DEBIAN_SHA256=c2fca81a9bf80b6bf93cdb78366a60e1d9e561fd664c85db7cddc21d200c9540

dir=${1:-${ZKELECT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/zkelect}/zookeeper-source}
mkdir -p "$dir"
sums_ok() {
  (cd "$dir" && printf '%s  %s\n%s  %s\n' "$ORIG_SHA256" "$ORIG" "$DEBIAN_SHA256" "$DEBIAN" |
     sha256sum --quiet -c - >/dev/null 2>&1)
}
if sums_ok; then
  echo "$dir"
  exit 0
fi
echo "zksource: fetching Debian's source of zookeeper $VERSION (3.6 MB) into $dir" >&2
apt=$(mktemp -d)
trap 'rm -rf "$apt"' EXIT
mkdir -p "$apt/etc/sources.list.d" "$apt/etc/preferences.d" "$apt/lists/partial" "$apt/cache/archives/partial"
cat >"$apt/etc/sources.list.d/src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
opts=(-q -o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/etc/sources.list.d"
      -o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o "APT::Sandbox::User=$(id -un)")
apt-get "${opts[@]}" update >&2
(cd "$dir" && apt-get "${opts[@]}" source --download-only "zookeeper=$VERSION" >&2) || {
  echo "zksource: apt-get source zookeeper=$VERSION failed (a newer Debian update replaced it?" \
       "then update VERSION and the sums here and in cmake/zookeeper/ZooKeeperTLS.cmake)" >&2
  exit 1
}
if ! sums_ok; then
  echo "zksource: the files in $dir do not have the pinned SHA-256 sums" >&2
  exit 1
fi
echo "$dir"
