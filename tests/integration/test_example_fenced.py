#!/usr/bin/python3
"""examples/fenced.lua: the leader's writer carries its epoch, and the
fenced resource (tests/chaos/fence.py) rejects the writes of an old leader
whose host was paused across a failover, while the new leader's pass; the
resource's accepted epochs never go down."""
import json
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import examples_util as u  # noqa: E402

EXAMPLE = os.path.join(h.REPO, "examples", "fenced.lua")
FENCE = os.path.join(h.REPO, "tests", "chaos", "fence.py")
WRITER = os.environ.get("FENCE_WRITER_BIN") or os.path.join(
    h.REPO, "build", "tests", "tools", "fence_writer")
PATH = "/app/fenced"


def fence_log(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    except OSError:
        pass
    return out


def writes(path, ev, cand=None):
    return [r for r in fence_log(path) if r["ev"] == ev and (cand is None or r["cand"] == cand)]


def test_stale_leader_writes_are_rejected():
    assert os.access(WRITER, os.X_OK), "fence_writer not built: %s (set FENCE_WRITER_BIN)" % WRITER
    d = h.mkdtemp("fenced")
    sock, log = os.path.join(d, "fence.sock"), os.path.join(d, "fence.log")
    fence = subprocess.Popen(["/usr/bin/python3", FENCE, sock, log], stdin=subprocess.DEVNULL,
                             preexec_fn=h._pdeathsig)
    paused = []
    try:
        h.wait_until(lambda: os.path.exists(sock), 10, "the fence's socket")
        # a whole host pauses, the fail-stop watcher with it: the epoch alone
        # protects the resource (a watcher left running would kill the
        # writer and the agent: integration.failstop)
        env = {"FENCE_SOCKET": sock, "FENCE_WRITER": WRITER, "FENCE_INTERVAL_MS": "50",
               "ZKELECT_FAIL_STOP": "off"}
        with h.ZooKeeper() as zk:
            a = u.EnvAgent(zk, "a", path=PATH, script=EXAMPLE, env=env)
            la = a.wait_for("leader", timeout=15)
            b = u.EnvAgent(zk, "b", path=PATH, script=EXAMPLE, env=env)
            assert u.wait_role(b)["event"] == "follower"
            h.wait_until(lambda: len(writes(log, "accept", "a")) >= 3, 5, "a's writes accepted")
            assert {r["epoch"] for r in writes(log, "accept", "a")} == {la["epoch"]}
            writer_a = writes(log, "accept", "a")[-1]["peer_pid"]

            # a's whole host pauses (the agent and its writer) past the session timeout
            mb = b.mark()
            a.sigstop()
            os.kill(writer_a, signal.SIGSTOP)
            paused[:] = [a.pid, writer_a]
            lb = b.wait_for("leader", timeout=15, since=mb)
            assert lb["epoch"] > la["epoch"], (la, lb)
            h.wait_until(lambda: writes(log, "accept", "b"), 5, "b's writes accepted")

            # the host resumes: the old writer runs first and sends a stale write
            os.kill(writer_a, signal.SIGCONT)
            rej = h.wait_until(lambda: writes(log, "reject", "a"), 5, "a's stale write rejected")
            assert rej[0]["epoch"] == la["epoch"] and rej[0]["max_epoch"] == lb["epoch"], rej[0]
            ma = a.mark()
            a.sigcont()
            paused[:] = []
            sd = a.wait_for("stepdown", timeout=5, since=ma)
            assert sd["reason"] in ("lease", "expired", "lost"), sd
            h.wait_until(lambda: not h.pid_alive(writer_a), 5, "the old writer stopped by its agent")
            assert u.wait_role(a)["event"] in ("leader", "follower")
            h.wait_until(lambda: [e for e in a.events()[ma:] if e.get("event") == "follower"], 10,
                         "a back as a follower")
            n_b = len(writes(log, "accept", "b"))
            h.wait_until(lambda: len(writes(log, "accept", "b")) >= n_b + 3, 5, "b still writing")

            # no accepted write of the old epoch after the new one's first; accepted
            # epochs never go down
            acc = writes(log, "accept")
            epochs = [r["epoch"] for r in acc]
            assert epochs == sorted(epochs), epochs
            first_b = min(i for i, r in enumerate(acc) if r["cand"] == "b")
            assert all(r["cand"] == "b" for r in acc[first_b:]), acc[first_b:]
            assert all(r["epoch"] == la["epoch"] for r in writes(log, "reject")), writes(log, "reject")

            # graceful hand-over back to a: b's writer ends before a's starts
            ma = a.mark()
            b.term()
            la2 = a.wait_for("leader", timeout=5, since=ma)
            assert b.wait_exit(10) == 0
            h.wait_until(lambda: writes(log, "accept", "a")[-1]["epoch"] == la2["epoch"], 5,
                         "a writing with its new epoch")
            acc = writes(log, "accept")
            epochs = [r["epoch"] for r in acc]
            assert epochs == sorted(epochs), epochs
            assert la2["epoch"] > lb["epoch"]
            assert len(writes(log, "reject")) == len(rej) or \
                all(r["cand"] == "a" and r["epoch"] == la["epoch"] for r in writes(log, "reject"))
    finally:
        for pid in paused:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        fence.terminate()
        try:
            fence.wait(10)
        except subprocess.TimeoutExpired:
            fence.kill()
            fence.wait(10)


if __name__ == "__main__":
    h.run_tests(globals())
