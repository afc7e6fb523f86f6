#!/usr/bin/python3
"""Many elections in one process on one session, through the C API (the
gateway case), with bench_many (bench/many.c): process A leads E elections,
B follows in all of them.

* Nothing churns while nothing changes: no role event after the join, no
  lease runs out, for a few renewal periods.
* A's SIGTERM: every agent steps down, and the session's close releases all
  E nodes at once (no delete each): B leads all E well before A's session
  could have expired (its nodes were not left to the server's expiry), and
  A exits 0.
* B's SIGKILL: a third process C leads all E once B's session expires.

E is 2000 here, 500 under ASan (ZKT_MANY_E; bench/run's many phase goes to 10,000, with the speed and
memory targets); the bounds below are not speed targets but tell a close
from an expiry."""
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

MANY_BIN = os.environ.get("ZKELECT_MANY_BIN") or os.path.join(
    os.path.dirname(h.ZKELECT_BIN), "bench", "bench_many")
E = int(os.environ.get("ZKT_MANY_E", "2000"))
T = 4000


class Many:
    """One bench_many process: its stdout lines ("<us> <i> leader|follower|
    stopped", "<us> - joined L F"), its stderr (the library's log) in a file.
    guard: every election guarded by one zke_guard, its watcher a forked
    child (BENCH_MANY_GUARD=1)."""

    def __init__(self, zk, prefix, e=None, t=None, guard=False, env=None, tag="many"):
        """env: more BENCH_MANY_* settings (a group member's); tag names
        its temporary folder."""
        self.dir = h.mkdtemp(tag)
        self.errfile = os.path.join(self.dir, "stderr.log")
        argv = [MANY_BIN, zk.hostport, prefix, str(e or E), str(t or T), "200"]
        if h.WRAP:
            argv = list(h.WRAP) + argv
        env = dict(os.environ, **(env or {}))
        env.pop("BENCH_MANY_GUARD", None)
        if guard:
            env["BENCH_MANY_GUARD"] = "1"
        self.err = open(self.errfile, "wb")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, preexec_fn=h._pdeathsig, env=env)
        os.set_blocking(self.p.stdout.fileno(), False)
        self.buf = b""
        self.lines = []

    def read(self):
        try:
            data = os.read(self.p.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return
        self.buf += data
        *ls, self.buf = self.buf.split(b"\n")
        self.lines += [l.decode(errors="replace").split() for l in ls]

    def count(self, what, since=0):
        return sum(1 for p in self.lines[since:] if len(p) >= 3 and p[2] == what and p[1] != "-")

    def stamps(self, what, since=0):
        """The mono_us of each agent's `what` line from line `since` on."""
        return [int(p[0]) for p in self.lines[since:] if len(p) >= 3 and p[2] == what and p[1] != "-"]

    def joined(self):
        return any(len(p) >= 3 and p[1] == "-" and p[2] == "joined" for p in self.lines)

    def watcher(self):
        """The pid of its fail-stop watcher ("guard watcher PID" on stderr)."""
        for line in self.stderr().splitlines():
            if line.startswith("guard watcher "):
                return int(line.split()[2])
        return None

    def guard_lines(self, text=""):
        """The watcher's log lines (after "guard LEVEL: ") that contain text."""
        out = []
        for line in self.stderr().splitlines():
            if line.startswith("bench_many: ") and " guard " in line and text in line:
                out.append(line.split(" guard ", 1)[1])
        return out

    def send(self, text):
        """A line on its stdin (bench_many's commands: leave, remove ...)."""
        self.p.stdin.write(text.encode() + b"\n")
        self.p.stdin.flush()

    def stderr(self):
        self.err.flush()
        with open(self.errfile, errors="replace") as f:
            return f.read()

    def exited(self, timeout):
        """Its exit code, its stdout read meanwhile: a stop writes a stepdown
        and a stopped line per election, more than a pipe holds at E = 2000,
        and a process blocked on a full pipe never exits."""
        h.wait_until(lambda: self.read() or self.p.poll() is not None, timeout, "its exit")
        self.read()
        return self.p.returncode

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        self.err.close()


def pump(*ms):
    for m in ms:
        m.read()


def wait(pred, timeout, desc, *ms):
    def f():
        pump(*ms)
        return pred()
    return h.wait_until(f, timeout, desc)


def zxid(zk):
    """The server's last transaction id (srvr), within one epoch."""
    for line in zk.four("srvr").splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16) & 0xffffffff
    raise AssertionError("no Zxid in srvr")


def ephemeral_owners(zk):
    """{session: how many ephemeral nodes} by the server's dump (whether a
    killed process's session is still there)."""
    try:
        return {"0x%x" % sid: len(paths) for sid, paths in zk.ephemerals().items()}
    except OSError as e:
        return "dump failed: %s" % e


def test_many_elections_on_one_session():
    assert os.access(MANY_BIN, os.X_OK), "bench_many not built: %s" % MANY_BIN
    with h.ZooKeeper() as zk:
        a = Many(zk, "/many")
        b = c = None
        try:
            wait(a.joined, 60, "A joins %d elections" % E, a)
            assert a.count("leader") == E, a.count("leader")
            b = Many(zk, "/many")
            wait(b.joined, 60, "B joins behind A", a, b)
            assert b.count("follower") == E and b.count("leader") == 0, (
                "B: %d follower, %d leader lines of %d; A's lease lines: %s" % (
                    b.count("follower"), b.count("leader"), E,
                    [l for l in a.stderr().splitlines() if "lease" in l][-5:]))
            # quiet: a few renewal periods (T/4) without a role event
            ma, mb = len(a.lines), len(b.lines)
            t_end = time.monotonic() + 2.5 * T / 1000.0
            while time.monotonic() < t_end:
                pump(a, b)
                time.sleep(0.05)
            assert len(a.lines) == ma and len(b.lines) == mb, (a.lines[ma:ma + 5], b.lines[mb:mb + 5])
            for m in (a, b):
                assert "lease ran out" not in m.stderr(), m.stderr()[-2000:]
            assert len(zk.ephemerals()) == 2, "one session each"
            # A's SIGTERM: B leads all, released by A's close, not its expiry
            mb = len(b.lines)
            z0 = zxid(zk)
            t0 = time.monotonic()
            a.p.send_signal(signal.SIGTERM)
            wait(lambda: b.count("leader", mb) == E, T / 1000.0, "B leads all %d" % E, a, b)
            dt = time.monotonic() - t0
            print("  info: B led all %d elections %.2f s after A's SIGTERM" % (E, dt), flush=True)
            assert dt < T / 2000.0, "%.2f s: the nodes went with A's session expiry" % dt
            assert a.exited(30) == 0
            # what it cost the server: A's closeSession, B's E publishes and
            # a few renewals; a delete of each node (an agent freed after its
            # stop deleted the node its stop had left to the close) is E more
            tx = zxid(zk) - z0
            print("  info: %d transactions from A's SIGTERM to its exit" % tx, flush=True)
            assert tx < E + E // 4, "%d transactions: A's nodes were deleted one by one" % tx
            a.read()                # its last lines can follow B's takeovers
            assert a.count("stopped") == E
            # B's SIGKILL: C leads all once B's session expires
            c = Many(zk, "/many")
            wait(c.joined, 60, "C joins behind B", b, c)
            mc = len(c.lines)
            t0 = time.monotonic()
            b.p.kill()
            # bounded past the expiry: C's 2000 takeovers come after it, and under
            # ASan at -j4 they took longer than 2T once (CI run 54)
            try:
                wait(lambda: c.count("leader", mc) >= E, T / 1000.0 * 3 + 10, "C leads all %d" % E, c)
            except h.Timeout:
                raise AssertionError("C wrote %d leader lines of %d after B's SIGKILL (%.1f s, B %s); "
                                     "the server's sessions with ephemerals: %s; C's last lines: %s; "
                                     "its stderr:\n%s"
                                     % (c.count("leader", mc), E, time.monotonic() - t0,
                                        "exited %s" % b.p.poll(), ephemeral_owners(zk),
                                        c.lines[-3:], c.stderr()[-2000:]))
            assert c.count("leader", mc) == E, (c.count("leader", mc), c.stderr()[-2000:])
            print("  info: C led all %d elections %.2f s after B's SIGKILL (T = %d ms)"
                  % (E, time.monotonic() - t0, T), flush=True)
            assert "lease ran out" not in c.stderr()
            c.p.send_signal(signal.SIGTERM)
            assert c.exited(30) == 0
            h.wait_until(lambda: not zk.ephemerals(), 10, "every node released")
        finally:
            for m in (a, b, c):
                if m is not None:
                    m.close()


if __name__ == "__main__":
    h.run_tests(globals())
