#!/usr/bin/python3
"""Ten candidates started at once form a chain: one leader, followers at
positions 1..9, each watching exactly its predecessor's node and its own
(no herd: nobody watches the folder or any other node). When the leader
leaves, only its successor reacts."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"
N = 10


def test_chain_of_ten_and_no_herd():
    with h.ZooKeeper() as zk:
        agents = [h.Agent(zk, "c%02d" % i, path=PATH) for i in range(N)]
        roles = h.wait_roles(agents, timeout=30)

        joined = {a: a.wait_for("joined", timeout=1) for a in agents}
        for a in agents:
            h.assert_node(joined[a]["node"])
        order = sorted(agents, key=lambda a: h.node_seq(joined[a]["node"]))
        node = {a: joined[a]["node"] for a in agents}
        sess = {a: h.sid(joined[a]["session"]) for a in agents}
        assert len(set(sess.values())) == N, sess
        assert len(set(node.values())) == N, node

        # exactly one leader: the smallest sequence
        leaders = [a for a in agents if roles[a]["event"] == "leader"]
        assert leaders == [order[0]], "leaders %s, smallest node is %s" % (leaders, order[0])
        leader = order[0]
        assert roles[leader]["node"] == node[leader]

        # followers: positions 1..9 by sequence order, predecessor = node below
        positions = []
        for pos, a in enumerate(order[1:], start=1):
            f = roles[a]
            assert f["event"] == "follower", f
            assert f["node"] == node[a], (f, node[a])
            assert f["position"] == pos, "%s: position %s, expected %d" % (a.id, f["position"], pos)
            assert f["predecessor"] == node[order[pos - 1]], \
                "%s: predecessor %s, expected %s" % (a.id, f["predecessor"], node[order[pos - 1]])
            assert f["leader_node"] == node[leader], (f, node[leader])
            assert f["leader"] == leader.id, "%s: leader %r, expected %r" % (a.id, f["leader"], leader.id)
            positions.append(f["position"])
        assert sorted(positions) == list(range(1, N)), positions

        # server side: each follower watches only its predecessor and its own
        # node (a deletion of its own node must reach it before its
        # predecessor's), the leader only its own node; nobody holds a child
        # watch (the total from mntr matches).
        expected = {sess[leader]: {PATH + "/" + node[leader]}}
        for pos, a in enumerate(order[1:], start=1):
            expected[sess[a]] = {PATH + "/" + node[order[pos - 1]], PATH + "/" + node[a]}
        h.wait_watches(zk, expected)
        by_path = zk.wchp()
        assert PATH not in by_path, by_path
        assert set(by_path.get(PATH + "/" + node[leader], ())) and \
            {h.sid(s) for s in by_path[PATH + "/" + node[leader]]} == {sess[leader], sess[order[1]]}, by_path

        # requests made so far by each session (pings do not count)
        t_before = time.monotonic()
        before_cons = zk.cons()
        marks = {a: a.mark() for a in agents}

        # the leader leaves gracefully
        leader.term()
        assert leader.wait_exit(10) == 0
        succ = order[1]
        nl = succ.wait_for("leader", timeout=5, since=marks[succ])
        assert nl["node"] == node[succ], nl
        assert nl["epoch"] > roles[leader]["epoch"], (nl, roles[leader])

        # the new picture on the server: succ watches its own node; the others
        # keep their watches; still no child watch anywhere.
        expected = {sess[succ]: {PATH + "/" + node[succ]}}
        for pos, a in enumerate(order[2:], start=2):
            expected[sess[a]] = {PATH + "/" + node[order[pos - 1]], PATH + "/" + node[a]}
        h.wait_watches(zk, expected)

        # no herd: an observation window after the handover, then nobody but the
        # successor logged anything, and (server side) the others sent no
        # request but their periodic read (lcxid counts requests, not pings: a
        # follower further back reads its own node every T/3 where a plain
        # client would ping, so that a promotion finds an answer to confirm).
        # The new next in line renews its lease so that it can lead without a
        # round trip.
        h.assert_quiet(order[2:], marks, 1.0)
        after_cons = zk.cons()
        # the periodic reads the window holds: one every T/3, and one more
        # for the phase (a slow build's window is longer: 3 in 2.1 s under
        # ASan in CI)
        window = time.monotonic() - t_before
        reads = int(window / (2.0 / 3)) + 1
        for a in order[2:]:
            b, c = before_cons.get(sess[a]), after_cons.get(sess[a])
            assert b and c, "no connection for %s: %s / %s" % (a.id, b, c)
            if a is order[2]:
                # renewals only: a handful in the window (at most one a
                # T/4, and a few to confirm its lease at the move), not a
                # storm; a slow build's window (its exits under ASan) is longer
                most = max(10, int(window / 0.5) + 4)
                assert 0 <= c["lcxid"] - b["lcxid"] <= most, "%s: %s -> %s (at most %d)" % (
                    a.id, b, c, most)
                continue
            assert c["lcxid"] - b["lcxid"] <= reads and \
                (c["lcxid"] == b["lcxid"] or c["lop"] == "EXIS"), \
                "%s sent requests after the leader left (lcxid %s -> %s, %d periodic reads at most)" % (
                    a.id, b, c, reads)
        assert all(a.alive() for a in order[1:])
        assert not succ.find("stepdown", since=marks[succ]), succ.describe()


if __name__ == "__main__":
    h.run_tests(globals())
