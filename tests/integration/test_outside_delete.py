#!/usr/bin/python3
"""Candidate nodes deleted from outside (an operator, a cleanup script):
a follower whose node vanished must never lead on it, and a leader whose node
vanished steps down (reason lost); both rejoin with a new node, and at every
moment at most one candidate leads."""
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"


def zk_delete(zk, path):
    """Deletes a node with ZooKeeper's own command-line client."""
    out = subprocess.run(["java", "-cp", h.ZK_JAR, "org.apache.zookeeper.ZooKeeperMain",
                          "-server", zk.hostport, "delete", path],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "Exception" not in out.stderr + out.stdout, (out.stdout, out.stderr)


def node_of(agent, since=0):
    return agent.wait_for("joined", timeout=10, since=since)["node"]


def test_deleted_follower_node_never_leads():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "a", path=PATH, session_timeout=8000)
        a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "b", path=PATH, session_timeout=8000)
        b.wait_for("follower", timeout=15)
        c = h.Agent(zk, "c", path=PATH, session_timeout=8000)
        c.wait_for("follower", timeout=15)
        nb = node_of(b)
        mb = b.mark()
        zk_delete(zk, PATH + "/" + nb)
        # b sees its own node go, rejoins with a new node behind c
        j = b.wait_for("joined", timeout=10, since=mb)
        assert j["node"] != nb, j
        b.wait_for("follower", timeout=10, since=mb)
        # the leader leaves: c (now directly behind a) leads, b does not
        ma, mc = b.mark(), c.mark()
        a.term()
        assert a.wait_exit(10) == 0
        c.wait_for("leader", timeout=10, since=mc)
        h.assert_quiet([b], {b: ma}, 1.0,
                       allow=lambda ag, e: e.get("event") in ("log", "predecessor_change", "follower"))
        assert not b.find("leader", since=mb), b.describe()
        assert h.leaders_now([b, c]) == [c]


def test_deleted_leader_node_steps_down():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "a", path=PATH, session_timeout=8000)
        lead = a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "b", path=PATH, session_timeout=8000)
        b.wait_for("follower", timeout=15)
        ma, mb = a.mark(), b.mark()
        zk_delete(zk, PATH + "/" + lead["node"])
        sd = a.wait_for("stepdown", timeout=10, since=ma)
        assert sd["reason"] == "lost" and sd["epoch"] == lead["epoch"], sd
        nl = b.wait_for("leader", timeout=10, since=mb)
        assert nl["epoch"] > lead["epoch"], (nl, lead)
        a.wait_for("follower", timeout=10, since=ma)     # rejoined behind b
        assert h.leaders_now([a, b]) == [b]


if __name__ == "__main__":
    h.run_tests(globals())
