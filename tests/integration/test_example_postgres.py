#!/usr/bin/python3
"""examples/postgres: three PostgreSQL 15 nodes in synchronous mode, one
zkelect each, HAProxy routing writes to the node whose agent answers
/primary, and a writer that carries the term's epoch. A graceful switchover
(SIGTERM to the primary's agent) and a crash (SIGKILL of the next primary's
agent and postgres together): no acknowledged row lost, no row of an older
epoch after a newer one, a stale writer's row rejected by the trigger, the
new primary writable within a bound, and each old primary (the switched
over one and the crashed one), its agent started again, back as a streaming
standby by itself (crash recovery, pg_rewind). In asynchronous
mode, a switchover whose next candidate in line is behind the other standby
(its WAL receiver frozen): the fence refuses it, the standby that is ahead
leads, and no acknowledged row is lost."""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import pg_cluster as pg  # noqa: E402

WRITABLE_S = 30.0   # a bound for correctness on a loaded machine, not a speed target


def test_switchover_and_crash_sync():
    with h.ZooKeeper() as zk:
        c = pg.Cluster(zk, n=3, mode="sync")
        try:
            c.setup()
            c.start_agents()
            c.start_haproxy()
            n1, le1 = c.leader()
            assert n1.name == "n1", n1.name
            c.start_writer()
            h.wait_until(lambda: len([r for r in c.acked() if r["epoch"] == le1["epoch"]]) >= 20,
                         30, "20 writes acknowledged under the first term")

            # a graceful switchover: SIGTERM to the primary's agent
            t0 = time.time()
            n1.agent.term()
            assert n1.agent.wait_exit(15) == 0
            assert n1.postmaster_pid() is None, "on_stepdown left the old primary running"
            n2, le2 = c.leader(exclude=("n1",))
            assert le2["epoch"] > le1["epoch"]
            dt = c.wait_writable(le2["epoch"], t0, timeout=WRITABLE_S)
            print("switchover: %s -> %s, writable after %.2f s" % (n1.name, n2.name, dt))
            # the old primary's agent comes back (as systemd would start it):
            # rewind, standby, then it rejoins the election
            n1.agent = None
            n1.start_agent(zk)
            c.wait_standby_of(n1, n2, timeout=60)
            h.wait_until(lambda: n1.agent.find("follower"), 30, "n1 a candidate again")

            # the stale writer: a row with the first term's epoch is rejected
            stale = pg.try_psql(c.hport, "INSERT INTO items (id, epoch) VALUES (-1, %d)" % le1["epoch"])
            assert stale is None, "a row of an old epoch was accepted"
            assert pg.psql(c.hport, "SELECT count(*) > 0 FROM items") == "t"

            # a crash: SIGKILL of the primary's agent and its postgres together
            h.wait_until(lambda: len([r for r in c.acked() if r["epoch"] == le2["epoch"]]) >= 20,
                         30, "20 writes under the second term")
            pm = n2.postmaster_pid()
            assert pm
            t1 = time.time()
            os.kill(pm, signal.SIGKILL)
            n2.agent.kill9()
            n3, le3 = c.leader(exclude=(n2.name,), timeout=40)
            assert le3["epoch"] > le2["epoch"]
            dt = c.wait_writable(le3["epoch"], t1, timeout=WRITABLE_S)
            print("crash: %s -> %s, writable after %.2f s" % (n2.name, n3.name, dt))
            h.wait_until(lambda: len([r for r in c.acked() if r["epoch"] == le3["epoch"]]) >= 20,
                         30, "20 writes under the third term")
            # the crashed primary's agent comes back: crash recovery, rewind,
            # standby of the new primary, a candidate again
            n2.agent = None
            n2.start_agent(zk)
            c.wait_standby_of(n2, n3, timeout=60)
            h.wait_until(lambda: n2.agent.find("follower"), 30, "n2 a candidate again")
            c.stop_writer()

            lost, stale_rows = c.check_rows(n3)
            acked = c.acked()
            print("%d rows acknowledged, %d lost, %d under an old epoch" % (len(acked), len(lost),
                                                                            stale_rows))
            assert not lost, "acknowledged rows lost (sync): %s" % lost[:20]
            assert stale_rows == 0
            assert {r["epoch"] for r in acked} == {le1["epoch"], le2["epoch"], le3["epoch"]}
        finally:
            c.close()


def next_in_line(c, leader):
    """The follower right behind the leader (position 1 in its latest role event)."""
    for nd in c.nodes:
        if nd is leader:
            continue
        roles = [e for e in nd.agent.events() if e.get("event") in ("leader", "follower")]
        if roles and roles[-1]["event"] == "follower" and roles[-1].get("position") == 1:
            return nd
    return None


def walreceiver_pid(nd):
    out = pg.psql(nd.port, "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'")
    assert out, "%s has no streaming WAL receiver" % nd.name
    return int(out)


def test_switchover_async_next_in_line_behind():
    with h.ZooKeeper() as zk:
        c = pg.Cluster(zk, n=3, mode="async")
        frozen = None
        try:
            c.setup()
            c.start_agents()
            c.start_haproxy()
            n1, le1 = c.leader()
            c.start_writer()
            h.wait_until(lambda: len([r for r in c.acked() if r["epoch"] == le1["epoch"]]) >= 20,
                         30, "20 writes acknowledged under the first term")
            # the candidate next in line stops receiving WAL; the other keeps up
            nxt = h.wait_until(lambda: next_in_line(c, n1), 10, "the candidate next in line")
            other = [nd for nd in c.nodes if nd not in (n1, nxt)][0]
            frozen = walreceiver_pid(nxt)
            os.kill(frozen, signal.SIGSTOP)
            n_frozen = len(c.acked())
            h.wait_until(lambda: len(c.acked()) >= n_frozen + 200, 30, "200 writes past the frozen standby")
            assert nxt.agent.alive() and not nxt.agent.find("stepdown")

            n1.agent.term()
            assert n1.agent.wait_exit(15) == 0
            rows = h.wait_until(lambda: [r for r in c.acked() if r["epoch"] > le1["epoch"]], WRITABLE_S,
                                "a write acknowledged under a newer term")
            port = pg.psql(c.hport, "SELECT inet_server_port()")
            new = [nd for nd in c.nodes if str(nd.port) == port][0]
            os.kill(frozen, signal.SIGCONT)
            frozen = None
            assert new is other, "%s leads, it was behind %s" % (new.name, other.name)
            assert nxt.agent.alive()
            with open(nxt.agent.logfile, errors="replace") as f:
                assert "bytes ahead: not promoting" in f.read(), "%s's fence did not refuse" % nxt.name
            h.wait_until(lambda: len([r for r in c.acked() if r["epoch"] == rows[0]["epoch"]]) >= 20,
                         30, "20 writes under the new term")
            c.stop_writer()
            lost, stale_rows = c.check_rows(new)
            print("%d rows acknowledged, %d lost, %d under an old epoch (%s frozen, %s led)"
                  % (len(c.acked()), len(lost), stale_rows, nxt.name, new.name))
            assert not lost, "acknowledged rows lost (async switchover): %s" % lost[:20]
            assert stale_rows == 0
        finally:
            if frozen:
                os.kill(frozen, signal.SIGCONT)
            c.close()


if __name__ == "__main__":
    h.run_tests(globals(), timeout=170)
