#!/usr/bin/python3
"""Crash of the leader (SIGKILL): nobody deletes its node, so the next
candidate must wait for the server to expire the dead session (2 s), and must
then take over without further delay."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"
TIMEOUT_MS = 2000


def test_kill9_leader_handover_after_session_timeout():
    with h.ZooKeeper() as zk:
        # started one by one: sequence order = start order
        agents = h.start_in_order(zk, ("k1", "k2", "k3"), path=PATH, session_timeout=TIMEOUT_MS)
        old, nxt, third = agents
        lead = old.wait_for("leader", timeout=1)
        assert nxt.wait_for("follower", timeout=1)["position"] == 1
        marks = {a: a.mark() for a in agents}
        old_session = h.sid(lead["session"])
        assert old_session in zk.ephemerals()

        t_kill = time.time()
        old.kill9()
        assert old.proc.returncode == -9

        nl = nxt.wait_for("leader", timeout=TIMEOUT_MS * 3 / 1000.0, since=marks[nxt])
        dt = nl["_t"] - t_kill
        print("  info: takeover %.3fs after SIGKILL (session timeout %d ms)" % (dt, TIMEOUT_MS))
        assert dt <= TIMEOUT_MS * 3 / 1000.0, "took over after %.3fs" % dt
        assert dt >= 1.0, "took over after only %.3fs: did not wait for the session to expire" % dt
        assert old_session not in zk.ephemerals(), "new leader while the old node still exists"
        assert nl["node"] == nxt.wait_for("joined", timeout=1)["node"]
        assert nl["epoch"] > lead["epoch"], (nl, lead)
        assert not nxt.find("stepdown", since=marks[nxt])

        # the third candidate was not disturbed (its predecessor is still there)
        h.assert_quiet([third], marks, 0.3)
        assert nxt.alive() and third.alive()
        h.stop_cleanly([nxt, third], 10)


if __name__ == "__main__":
    h.run_tests(globals())
