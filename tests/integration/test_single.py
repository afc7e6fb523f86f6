#!/usr/bin/python3
"""One candidate: it connects, joins, leads; its node is on the server; a
SIGTERM releases the node and exits 0."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"


def test_single_candidate_leads():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "solo", path=PATH)
        leader = a.wait_for("leader", timeout=15)
        joined = a.wait_for("joined", timeout=1)
        connected = a.wait_for("session", timeout=1, reason="connected")

        # order: connected -> joined -> leader
        assert connected["_i"] < joined["_i"] < leader["_i"], a.describe()
        for e in a.events():
            for k in ("ts", "level", "id", "event"):
                assert k in e, "event without %r: %r" % (k, e)
            assert e["id"] == "solo", e
            assert e["level"] in ("debug", "info", "warn", "error"), e

        # the node
        h.assert_node(joined["node"])
        assert joined["reason"] == "created", joined
        assert leader["node"] == joined["node"], (joined, leader)
        assert leader["seq"] == joined["seq"] == h.node_seq(joined["node"]), (joined, leader)
        assert isinstance(leader["epoch"], int) and leader["epoch"] > 0, leader
        assert leader["candidates"] == 1, leader
        session = h.sid(connected["session"])
        assert session != 0
        assert h.sid(joined["session"]) == session == h.sid(leader["session"]), (connected, joined, leader)
        assert not a.events("follower"), a.describe()

        # on the server: the ephemeral node belongs to the agent's session, and
        # the leader watches (only) its own node.
        eph = zk.ephemerals()
        assert eph.get(session) == {PATH + "/" + joined["node"]}, eph
        h.wait_watches(zk, {session: {PATH + "/" + joined["node"]}})

        # graceful stop: stepdown(shutdown), stopped, exit 0, node gone
        a.term()
        assert a.wait_exit(10) == 0
        sd = a.wait_for("stepdown", timeout=1)
        assert sd["reason"] == "shutdown" and sd["node"] == joined["node"], sd
        assert sd["epoch"] == leader["epoch"], (sd, leader)
        a.wait_for("stopped", timeout=1, since=sd["_i"])
        h.wait_until(lambda: session not in zk.ephemerals(), timeout=5, desc="node released")
        out = "\n".join(a.other_lines())
        assert not h.crash_markers(out), out


if __name__ == "__main__":
    h.run_tests(globals())
