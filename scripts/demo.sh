#!/usr/bin/env bash
# The demo: installs what is missing and builds (scripts/setup.sh), then runs
# `zkelect demo` from the build: a throwaway ZooKeeper on a free loopback
# port, three candidates with the bundled policy, a graceful and a crash
# failover, everything removed at the end or on Ctrl-C. Arguments go to
# zkelect demo (--keep, --session-timeout MS, --zk-jar JAR, --java JAVA).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${BUILD_DIR:-build}/zkelect" demo "$@"
