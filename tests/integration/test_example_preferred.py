#!/usr/bin/python3
"""examples/preferred.lua: when a preferred candidate (higher prio= in its
--data) joins, leadership moves to it through graceful hand-overs within a
bound, then stays; when it leaves, leadership stays with whoever leads."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import examples_util as u  # noqa: E402

EXAMPLE = os.path.join(h.REPO, "examples", "preferred.lua")
PATH = "/app/preferred"
POLL_MS = 300


def cand(zk, id, prio):
    return u.EnvAgent(zk, id, path=PATH, script=EXAMPLE, data="prio=%d" % prio,
                      extra=["--health-interval", str(POLL_MS)],
                      env={"PREFERRED_ZK": zk.hostport, "PREFERRED_BIN": h.ZKELECT_BIN})


def leads(agents, since):
    """(mono_ns, id) of every `leader` event after the marks, in time order."""
    out = []
    for a in agents:
        out += [(e["mono_ns"], a.id) for e in a.events()[since[a]:] if e.get("event") == "leader"]
    return sorted(out)


def no_new_leader(agents, seconds):
    marks = {a: a.mark() for a in agents}
    time.sleep(seconds)
    assert not leads(agents, marks), "leadership moved again: %s" % leads(agents, marks)


def test_preferred_candidate_takes_over_once():
    with h.ZooKeeper() as zk:
        a = cand(zk, "a", 0)
        a.wait_for("leader", timeout=15)
        b = cand(zk, "b", 0)
        assert u.wait_role(b)["event"] == "follower"
        no_new_leader([a, b], 2 * POLL_MS / 1000 + 1)    # equal priorities: nobody hands over
        h.wait_until(lambda: u.script_lines(a, "staying leader"), 5, "a to stay")

        marks = {a: a.mark(), b: b.mark()}
        t0 = time.monotonic()
        p = cand(zk, "p", 10)
        marks[p] = 0
        p.wait_for("leader", timeout=10)
        took = time.monotonic() - t0
        # the chain: a hands over to b (next in line), b at once to p
        assert [x for _, x in leads([a, b, p], marks)] == ["b", "p"], leads([a, b, p], marks)
        sds = [e for e in a.events()[marks[a]:] if e.get("event") == "stepdown"]
        assert [e["reason"] for e in sds] == ["resign"], sds
        h.wait_until(lambda: u.script_lines(b, "handing over (elected)", since=marks[b]), 5,
                     "b's hand-over in its on_leader")
        assert not u.script_lines(b, "staying leader", since=marks[b]), "b's term did real work"
        print("  info: p leads %.2fs after it started" % took, flush=True)
        assert took < 5 + 2 * POLL_MS / 1000
        h.wait_until(lambda: u.script_lines(p, "staying leader"), 5, "p to stay")
        no_new_leader([a, b, p], 3)                       # no flapping afterwards

        # the preferred one leaves: whoever is next leads and stays
        # the line is p, then a and b in the order they rejoined after their
        # resignations (each after its own random backoff)
        seq = {x: [e for e in x.events() if e.get("event") == "joined"][-1]["seq"] for x in (a, b)}
        nxt = min((a, b), key=lambda x: seq[x])
        mn = nxt.mark()
        p.term()
        assert p.wait_exit(10) == 0
        assert nxt.wait_for("leader", timeout=5, since=mn)
        no_new_leader([a, b], 3)
        for x in (a, b, p):
            errs = [e for e in x.events() if e.get("event") == "hook_error"]
            assert not errs, "%s: %s" % (x.id, errs)
            bad = [e for e in x.events() if e.get("event") == "script" and "cannot read" in e["msg"]]
            assert not bad, bad


if __name__ == "__main__":
    h.run_tests(globals())
