#!/usr/bin/python3
"""check_foreign: smoke test of the foreign candidates (bench/java/BenchCandidate.java,
bench/kazoo_candidate.py) against a real ZooKeeper server (tests/integration/zkharness.py).

    /usr/bin/python3 bench/check_foreign.py [MODE...] [--pool N] [--pool-only] [--session MS]

MODE: latch selector les kazoo (default: all four). For each mode, in one
election: single-slot processes A and B, a pool process P of 5, single C
(queue A B P0..P4 C); checks one leader (A); SIGTERM A -> B leads; SIGTERM B
-> a slot of P leads; "stop <slot>" to it -> another slot of P leads; "add" to
P (a 6th slot, its node appears); SIGKILL P -> C leads after the session
timeout; "quit" to C -> "stopped", exit 0. Prints the failover times
(successor's leader stamp minus the moment the signal/command was sent), the
VmRSS of single-slot processes after 5 s idle, then the start of a pool of N
(default 200): time until all N nodes exist, its RSS and threads, its quit time.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import zkharness as h  # noqa: E402

from kazoo.client import KazooClient  # noqa: E402

MODES = ["latch", "selector", "les", "kazoo"]
CP = open(os.path.join(HERE, "java", "classpath.txt")).read().strip()
LINE_RE = re.compile(r"^(\d+) (-?\d+) (\w+)(?: (.*))?$")


def mono_us():
    return time.monotonic_ns() // 1000


class Proc:
    """One candidate process; its stdout lines parsed into (us, slot, event, detail)."""

    def __init__(self, name, mode, zk, path, session_ms, count, outdir):
        self.name = name
        if mode == "kazoo":
            argv = ["/usr/bin/python3", os.path.join(HERE, "kazoo_candidate.py")]
        else:
            argv = ["java", "-cp", outdir + ":" + CP, "BenchCandidate", mode]
        argv += [zk.hostport, path, str(session_ms), str(count)]
        self.errf = tempfile.TemporaryFile()
        self.t_spawn = mono_us()
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.errf, preexec_fn=h._pdeathsig)
        self.pid = self.p.pid
        self.events = []
        self.cond = threading.Condition()
        self.bad = []
        threading.Thread(target=self._read, daemon=True).start()

    def __repr__(self):
        return "%s(pid %d)" % (self.name, self.pid)

    def _read(self):
        for raw in self.p.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            m = LINE_RE.match(line)
            with self.cond:
                if not m:
                    self.bad.append(line)
                else:
                    us, slot, ev, detail = m.groups()
                    self.events.append((int(us), int(slot), ev, detail))
                    if ev == "error":
                        self.bad.append(line)
                self.cond.notify_all()

    def wait_for(self, pred, timeout, desc):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.events:
                    if pred(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%s: no %s in %.1f s; events %s; stderr %s" % (
                        self, desc, timeout, self.events[-10:], self.stderr()[-800:]))
                self.cond.wait(left)

    def wait_event(self, ev, timeout=30, slot=None, after=0):
        return self.wait_for(lambda e: e[2] == ev and (slot is None or e[1] == slot) and e[0] >= after,
                             timeout, "%s (slot %s)" % (ev, slot))

    def count(self, ev, slot=None):
        with self.cond:
            return sum(1 for e in self.events if e[2] == ev and (slot is None or e[1] == slot))

    def send(self, cmd):
        t = mono_us()
        self.p.stdin.write((cmd + "\n").encode())
        self.p.stdin.flush()
        return t

    def signal(self, sig):
        t = mono_us()
        os.kill(self.pid, sig)
        return t

    def rss_kb(self):
        with open("/proc/%d/status" % self.pid) as f:
            st = f.read()
        return int(re.search(r"VmRSS:\s+(\d+)", st).group(1)), int(re.search(r"Threads:\s+(\d+)", st).group(1))

    def stderr(self):
        self.errf.seek(0)
        return self.errf.read().decode(errors="replace")

    def wait_exit(self, timeout=20):
        rc = self.p.wait(timeout)
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def leaders(procs):
    """(us, proc, slot) of every leader line so far, in time order."""
    out = []
    for p in procs:
        with p.cond:
            out += [(e[0], p, e[1]) for e in p.events if e[2] == "leader"]
    return sorted(out, key=lambda x: x[0])


def wait_new_leader(procs, n_before, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ls = leaders(procs)
        if len(ls) > n_before:
            time.sleep(0.3)      # a second one would be a bug
            ls = leaders(procs)
            assert len(ls) == n_before + 1, "more than one new leader: %s" % ls[n_before:]
            return ls[-1]
        time.sleep(0.005)
    raise AssertionError("no new leader in %.1f s (had %d)" % (timeout, n_before))


def count_children(kz, path):
    try:
        return len(kz.get_children(path))
    except Exception:  # noqa: BLE001 - NoNode before the first create
        return 0


def check_mode(mode, zk, kz, outdir, session_ms, results):
    path = "/bench-check/%s-%d" % (mode, os.getpid())
    procs = []
    res = results.setdefault(mode, {})

    def start(name, count):
        p = Proc(name, mode, zk, path, session_ms, count, outdir)
        procs.append(p)
        p.wait_event("ready", 60)
        # queue order: all of this process's nodes exist before the next one starts
        expected[0] += count
        h.wait_until(lambda: count_children(kz, path) >= expected[0], timeout=30, interval=0.01,
                     desc="%d children of %s" % (expected[0], path))
        return p

    expected = [0]
    try:
        a = start("A", 1)
        b = start("B", 1)
        pool = start("P", 5)
        c = start("C", 1)
        time.sleep(0.3)
        ls = leaders(procs)
        assert len(ls) == 1 and ls[0][1] is a, "first leader should be A alone: %s" % ls
        # RSS of the single-slot processes after 5 s idle
        time.sleep(max(0.0, 5.0 - (mono_us() - c.t_spawn) / 1e6))
        res["rss_single_kb"] = [p.rss_kb()[0] for p in (a, b, c)]
        res["threads_single"] = [p.rss_kb()[1] for p in (a, b, c)]

        # 1. SIGTERM the leader A -> B
        n = len(leaders(procs))
        t = a.signal(signal.SIGTERM)
        us, who, slot = wait_new_leader(procs, n, 10)
        assert who is b, "after A, B should lead, not %s" % who
        res.setdefault("failover_sigterm_ms", []).append((us - t) / 1000.0)
        rc = a.wait_exit()
        assert rc == 0, "A exited %s" % rc
        assert a.count("stopped") == 1, "A: no stopped line"
        res.setdefault("exit_after_sigterm_ms", []).append((mono_us() - t) / 1000.0)

        # 2. SIGTERM B -> a slot of the pool
        n = len(leaders(procs))
        t = b.signal(signal.SIGTERM)
        us, who, slot = wait_new_leader(procs, n, 10)
        assert who is pool, "after B, the pool should lead, not %s" % who
        res.setdefault("failover_sigterm_ms", []).append((us - t) / 1000.0)
        assert b.wait_exit() == 0

        # 3. stop the pooled leader -> another pooled slot
        n = len(leaders(procs))
        t = pool.send("stop %d" % slot)
        us2, who2, slot2 = wait_new_leader(procs, n, 10)
        assert who2 is pool and slot2 != slot, "after pool slot %d: %s %s" % (slot, who2, slot2)
        res.setdefault("failover_stop_ms", []).append((us2 - t) / 1000.0)
        pool.wait_event("stopped", 10, slot=slot)

        # 4. add a 6th slot to the pool: its node appears (at the back, after C)
        before = count_children(kz, path)
        pool.send("add")
        h.wait_until(lambda: count_children(kz, path) == before + 1, timeout=10, desc="added node")
        if mode != "selector":
            pool.wait_event("node", 10, slot=5)

        # 5. SIGKILL the pool (holds the leader) -> C after the session timeout
        #    (the 6th slot dies with it)
        n = len(leaders(procs))
        t = pool.signal(signal.SIGKILL)
        us, who, slot = wait_new_leader(procs, n, session_ms / 1000.0 * 3 + 5)
        assert who is c, "after the pool was killed, C should lead, not %s" % who
        res["failover_sigkill_ms"] = (us - t) / 1000.0
        pool.wait_exit()

        # 6. quit C
        t = c.send("quit")
        assert c.wait_exit() == 0
        assert c.count("stopped") == 1
        res["quit_single_ms"] = (mono_us() - t) / 1000.0
        h.wait_until(lambda: count_children(kz, path) == 0, timeout=10, desc="no node left")

        for p in procs:
            bad = [x for x in p.bad if not (p is pool and "connection" in x)]
            assert not bad, "%s printed errors/bad lines: %s" % (p, bad)
        if mode == "les":
            assert c.count("follower") >= 1, "C (les) never said follower"
    finally:
        for p in procs:
            p.kill()


def check_pool(mode, zk, kz, outdir, session_ms, n, results):
    path = "/bench-pool/%s-%d" % (mode, os.getpid())
    res = results.setdefault(mode, {})
    p = Proc("pool%d" % n, mode, zk, path, session_ms, n, outdir)
    try:
        p.wait_event("ready", 120)
        res["pool_ready_s"] = (p.wait_event("ready", 1)[0] - p.t_spawn) / 1e6
        h.wait_until(lambda: count_children(kz, path) >= n, timeout=120, interval=0.01,
                     desc="%d nodes" % n)
        res["pool_nodes_s"] = (mono_us() - p.t_spawn) / 1e6
        assert p.count("leader") == 1, "pool: %d leaders" % p.count("leader")
        time.sleep(5)
        res["pool_rss_kb"], res["pool_threads"] = p.rss_kb()
        # stop the leader: the successor is in the same process
        slot = p.wait_event("leader", 1)[1]
        t = p.send("stop %d" % slot)
        us = p.wait_for(lambda e: e[2] == "leader" and e[1] != slot, 10, "successor")[0]
        res["pool_failover_stop_ms"] = (us - t) / 1000.0
        t = p.send("quit")
        assert p.wait_exit(120) == 0
        res["pool_quit_s"] = (mono_us() - t) / 1e6
        assert p.count("stopped") == n, "pool: %d stopped lines" % p.count("stopped")
        assert not p.bad, "pool printed errors/bad lines: %s" % p.bad[:5]
    finally:
        p.kill()


def main():
    args = sys.argv[1:]
    pool_n, session_ms = 200, 2000
    pool_only = "--pool-only" in args
    if pool_only:
        args.remove("--pool-only")
    if "--pool" in args:
        i = args.index("--pool")
        pool_n = int(args[i + 1])
        del args[i:i + 2]
    if "--session" in args:
        i = args.index("--session")
        session_ms = int(args[i + 1])
        del args[i:i + 2]
    modes = args or MODES
    outdir = tempfile.mkdtemp(prefix="benchcand")
    if any(m != "kazoo" for m in modes):
        subprocess.check_call(["javac", "-nowarn", "-d", outdir, "-cp", CP,
                               os.path.join(HERE, "java", "BenchCandidate.java")],
                              stderr=subprocess.DEVNULL)
    results = {}
    zk = h.ZooKeeper()
    kz = KazooClient(hosts=zk.hostport)
    kz.start()
    failed = False
    try:
        for mode in modes:
            try:
                if not pool_only:
                    check_mode(mode, zk, kz, outdir, session_ms, results)
                if pool_n:
                    check_pool(mode, zk, kz, outdir, session_ms, pool_n, results)
                print("%-8s ok   %s" % (mode, results[mode]), flush=True)
            except Exception as e:  # noqa: BLE001
                failed = True
                print("%-8s FAIL %s: %s (so far: %s)" % (mode, type(e).__name__, e, results.get(mode)),
                      flush=True)
    finally:
        kz.stop()
        kz.close()
        zk.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
