#!/usr/bin/python3
"""Built-in priorities (--priority, --preempt-delay): a higher priority that
joins leads after the delay through graceful hand-overs; equal priorities
never hand over; a candidate whose priority flips faster than the delay
causes no hand-over; foreign nodes with junk priorities are ignored."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
import zkharness as h  # noqa: E402
from ensemble import MiniZK  # noqa: E402

PATH = "/app/prio"
DELAY_MS = 1500
CHECK_MS = 300
JUNK = [b'{"zkelect":1,"id":"j1","priority":1e300}', b'{"zkelect":1,"id":"j2","priority":"99"}',
        b'{"zkelect":1,"id":"j3","priority":-5}', b'{"zkelect":1,"id":"j4","priority":2.5}',
        b'{"zkelect":1,"id":"j5","priority":1000001}', b'{"zkelect":1,"priority":50}',
        b'{"zkelect":1,"id":"j7","priority":[50]}', b'\xff\xfe{"priority":50', b'']


def cand(zk, id, prio):
    return h.Agent(zk, id, path=PATH, extra=["--priority", str(prio), "--preempt-delay",
                                             str(DELAY_MS), "--preempt-check", str(CHECK_MS)])


def leads(agents, since):
    out = []
    for a in agents:
        out += [(e["mono_ns"], a.id) for e in a.events()[since.get(a, 0):]
                if e.get("event") == "leader"]
    return sorted(out)


def no_new_leader(agents, seconds):
    marks = {a: a.mark() for a in agents}
    time.sleep(seconds)
    assert not leads(agents, marks), "leadership moved: %s" % leads(agents, marks)


def test_priorities():
    with h.ZooKeeper() as zk:
        a = cand(zk, "a", 0)
        a.wait_event("leader", timeout=15)
        b = cand(zk, "b", 0)
        b.wait_event("follower", timeout=15)
        # junk in line behind a: read as priority 0 (a hint), never a crash
        cli = MiniZK("127.0.0.1", zk.port)
        for d in JUNK:
            assert cli.create_node(PATH + "/junk-", d, ephemeral=True, sequential=True)
        # a persistent node (no live session) claiming a high priority: no candidate, no hand-over
        evil = cli.create_node(PATH + "/n_persistent-", b'{"zkelect":1,"id":"evil","priority":1000}',
                               ephemeral=False, sequential=True)
        no_new_leader([a, b], 2 * DELAY_MS / 1000 + 1)     # equal priorities, junk: nobody moves
        assert a.alive() and b.alive()
        cli2 = MiniZK("127.0.0.1", zk.port)     # (cli's session, never pinged, is gone)
        assert cli2.delete(evil)
        cli2.close()

        # a higher priority joins last: the chain a -> b -> p, after the delay
        marks = {a: a.mark(), b: b.mark()}
        t0 = time.monotonic()
        p = cand(zk, "p", 10)
        p.wait_event("leader", timeout=DELAY_MS / 1000 + 15)
        took = time.monotonic() - t0
        print("  info: p leads %.2fs after it started" % took, flush=True)
        assert took >= DELAY_MS / 1000 * 0.9, "the delay was not honoured: %.2fs" % took
        assert [x for _, x in leads([a, b, p], marks)] == ["b", "p"], leads([a, b, p], marks)
        for x in (a, b):
            sds = [e for e in x.events()[marks[x]:] if e.get("event") == "stepdown"]
            assert [e["reason"] for e in sds] == ["resign"], sds
        no_new_leader([a, b, p], DELAY_MS / 1000 + 1)    # p stays: nobody above it

        # q's priority flips 20 <-> 0 (restarts) faster than the delay: no hand-over
        marks = {x: x.mark() for x in (a, b, p)}
        for i in range(6):
            q = cand(zk, "q%d" % i, 20 if i % 2 == 0 else 0)
            q.wait_event("follower", timeout=15)
            time.sleep(DELAY_MS / 1000 / 6)     # each lives well short of the delay
            q.term()
            assert q.wait_exit(10) == 0
        assert not leads([a, b, p], marks), leads([a, b, p], marks)
        # the same candidate kept at 20 for the delay does take over
        q = cand(zk, "qz", 20)
        q.wait_event("leader", timeout=DELAY_MS / 1000 + 15)
        no_new_leader([a, b, p, q], DELAY_MS / 1000 + 1)
        cli.close()
        for x in (a, b, p, q):
            assert x.alive(), x.describe()


if __name__ == "__main__":
    h.run_tests(globals())
