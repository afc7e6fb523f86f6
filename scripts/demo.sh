#!/usr/bin/env bash
# The demo: installs what is missing, builds, starts a local ZooKeeper on a
# free loopback port, runs three candidates with examples/policy.lua, stops
# the leader (graceful hand-over), kills the next one (hand-over after the
# session timeout), and cleans up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec /usr/bin/python3 scripts/demo.py "$@"
