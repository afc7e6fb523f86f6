#!/usr/bin/python3
"""What an idle `zkelect run --script examples/policy.lua` (no --status)
maps: never libsystemd, libmicrohttpd or its TLS stack, whose pages were
most of its resident memory. How much memory and CPU it uses is measured by
the benchmark (bench/run: memory phase, with its targets), never asserted
here; this test only prints what it saw."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/footprint"
POLICY = os.path.join(h.REPO, "examples", "policy.lua")
KiB = 1024
NEVER = ("libsystemd", "libmicrohttpd", "libgnutls", "libp11-kit", "libgcrypt")


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k = line.split(":")[0]
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(line.split()[1]) * KiB
    return out


def mapped(pid):
    with open("/proc/%d/maps" % pid) as f:
        return sorted({l.split()[-1] for l in f if len(l.split()) >= 6 and "/" in l.split()[-1]})


def test_idle_maps():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "f1", path=PATH, script=POLICY, session_timeout=None)
        a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "f2", path=PATH, script=POLICY, session_timeout=None)
        b.wait_for("follower", timeout=15)
        time.sleep(2.0)
        files = mapped(a.pid)
        print("  info: mapped: %s" % " ".join(os.path.basename(f) for f in files), flush=True)
        if h.WRAP:
            print("  info: under a wrapper: the maps, memory and CPU are its own; nothing checked",
                  flush=True)
        else:
            bad = [f for f in files if any(n in f for n in NEVER)]
            assert not bad, "an agent without --status maps %s" % bad
        for x, role in ((a, "leader"), (b, "follower")):
            st = status(x.pid)
            print("  info: %s: VmRSS %d kB (anonymous %d kB, files %d kB)"
                  % (role, st["VmRSS"] // KiB, st["RssAnon"] // KiB, st["RssFile"] // KiB),
                  flush=True)
        for x in (b, a):
            x.term()
            assert x.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
