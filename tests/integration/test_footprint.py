#!/usr/bin/python3
"""What an idle `zkelect run --script examples/policy.lua` (no --status)
costs: the shared objects it maps (never libsystemd, libmicrohttpd or its TLS
stack), its resident memory (the benchmark target: VmRSS at most 3 MiB, and
little of it private) and its idle CPU (under 0.1 %), for a leader and a
follower with the default session timeout. The memory and CPU bounds are
skipped under a sanitizer or a wrapper (valgrind), whose own costs they
would measure, and the 3 MiB bound when Lua, libev or the ZooKeeper client
are shared objects (-DZKELECT_STATIC_DEPS=OFF)."""
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
SHARED_DEPS = ("liblua5.4.so", "libev.so", "libzookeeper_st.so")


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


def cpu_ns(pid):
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0])


def test_idle_memory_and_cpu():
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
        sanitized = h.WRAP or any("libasan" in f or "libubsan" in f for f in files)
        shared = [f for f in files if any(n in f for n in SHARED_DEPS)]
        c0 = {x.pid: cpu_ns(x.pid) for x in (a, b)}
        t0 = time.monotonic()
        time.sleep(10.0)
        dt = time.monotonic() - t0
        for x, role in ((a, "leader"), (b, "follower")):
            st = status(x.pid)
            cpu = 100.0 * (cpu_ns(x.pid) - c0[x.pid]) / 1e9 / dt
            print("  info: %s: VmRSS %d kB (anonymous %d kB, files %d kB), idle CPU %.4f %%"
                  % (role, st["VmRSS"] // KiB, st["RssAnon"] // KiB, st["RssFile"] // KiB, cpu),
                  flush=True)
            if sanitized:
                continue
            assert cpu < 0.1, "%s: idle CPU %.4f %% (target: under 0.1 %%)" % (role, cpu)
            assert st["RssAnon"] <= 512 * KiB, (role, st)
            if shared:
                print("  info: %s are shared objects: the 3 MiB bound is for the default build"
                      % [os.path.basename(f) for f in shared], flush=True)
                continue
            assert st["VmRSS"] <= 3 * 1024 * KiB, "%s: VmRSS %d kB (target: at most 3 MiB)" % (
                role, st["VmRSS"] // KiB)
        for x in (b, a):
            x.term()
            assert x.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
