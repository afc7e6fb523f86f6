"""The C API under a host's own libev loop (examples/embed/embed_libev.c):
start, resign from a host timer, graceful stop, and on_stopped exactly once."""
import os
import signal
import subprocess
import time

import zkharness as h

EMBED = os.environ.get("ZKELECT_EMBED_BIN") or os.path.join(h.REPO, "build", "examples", "embed_libev")
EMBED_POLICY = os.path.join(os.path.dirname(EMBED), "embed_policy")


class Host:
    def __init__(self, zk, id, resign_after=None, policy=None):
        self.dir = h.mkdtemp("embed-" + id)
        self.out = os.path.join(self.dir, "out.log")
        argv = [EMBED, zk.hostport, "/embed/election", id]
        if resign_after is not None:
            argv.append(str(resign_after))
        if policy is not None:
            argv = [EMBED_POLICY, zk.hostport, "/embed/policy", id, policy]
        with open(self.out, "wb") as f:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                                         preexec_fn=h._pdeathsig)

    def lines(self):
        with open(self.out, errors="replace") as f:
            return [l.rstrip("\n") for l in f]

    def events(self, name):
        return [l for l in self.lines() if l.startswith("event %s " % name)]

    def wait(self, name, count=1, timeout=10):
        return h.wait_until(lambda: len(self.events(name)) >= count, timeout=timeout,
                            desc="%s x%d in %s:\n%s" % (name, count, self.out, "\n".join(self.lines()[-20:])))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def test_host_loop_resign_and_stop():
    with h.ZooKeeper() as zk:
        # long enough for e2 to join first on a loaded machine (ASan)
        a = Host(zk, "e1", resign_after=3.0)
        try:
            a.wait("leader")
            b = Host(zk, "e2")
            try:
                b.wait("follower")
                # the host's timer calls zke_agent_resign(): e1 steps down, e2 leads
                a.wait("stepdown")
                assert "reason=resign" in a.events("stepdown")[0], a.lines()
                b.wait("leader")
                a.wait("follower")         # e1 rejoined at the back
                assert "leader=e2" in a.events("follower")[-1], a.lines()
                # the host's own timer kept running beside the election
                h.wait_until(lambda: any(l.startswith("host heartbeat") for l in b.lines()), timeout=5,
                             desc="host heartbeat")
                for x in (a, b):
                    x.proc.send_signal(signal.SIGINT)
                for x in (a, b):
                    assert x.proc.wait(10) == 0, x.lines()
                    assert len(x.events("stopped")) == 1, x.lines()
                # every leader term was closed by exactly one stepdown
                for x in (a, b):
                    assert len(x.events("leader")) == len(x.events("stepdown")), x.lines()
                assert "reason=shutdown" in b.events("stepdown")[-1], b.lines()
            finally:
                b.stop()
        finally:
            a.stop()


def t_of(line):
    return int(line.split(" t=", 1)[1].split()[0])


def test_host_with_a_lua_policy():
    """zke_policy: the Lua hooks on the host's loop, a process from a hook
    (the host allows them), zkelect.status(), and a waiting on_stepdown
    that keeps the node until it ended (the successor leads after)."""
    pol = os.path.join(h.POLICIES, "embed_policy.lua")
    with h.ZooKeeper() as zk:
        a = Host(zk, "p1", policy=pol)
        try:
            a.wait("leader")
            h.wait_until(lambda: [l for l in a.lines() if "leading epoch=" in l], 10,
                         "the policy's on_leader line")
            lead = [l for l in a.lines() if "leading epoch=" in l][0]
            epoch = a.events("leader")[0].split("epoch=")[1].split()[0]
            assert "exec=duty-%s role=leader" % epoch in lead, lead
            b = Host(zk, "p2", policy=pol)
            try:
                b.wait("follower")
                h.wait_until(lambda: [l for l in b.lines() if "following leader=p1" in l], 10,
                             "the follower's policy line")
                a.proc.send_signal(signal.SIGTERM)
                b.wait("leader")
                assert a.proc.wait(10) == 0, a.lines()
                done = [l for l in a.lines() if "undo_done" in l]
                assert done, a.lines()
                assert t_of(done[0]) < t_of(b.events("leader")[0]), (done, b.events("leader"))
                assert len(a.events("stopped")) == 1
                b.proc.send_signal(signal.SIGTERM)
                assert b.proc.wait(10) == 0, b.lines()
            finally:
                b.stop()
        finally:
            a.stop()


if __name__ == "__main__":
    h.run_tests(globals())
