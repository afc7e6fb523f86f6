#!/usr/bin/python3
"""zkelect.candidates() and zkelect.resign{to = ID} in a policy, against a
real ZooKeeper: candidates() lists the line in order (as `zkelect status
--json` does), read on the agent's own session; resign{to=} refuses an
unknown id, and leadership stays put; to one that is not next in line, the
one ahead steps aside and that candidate leads next; called from health(),
outside the term, it returns the successor. And issue 39's switchover
through zkelect ctl: to the last of five, one that a candidate ahead
does not step aside for (the lead stays, and the answer says why), and one
scheduled with --at (shown in ctl status, made at its time) or cancelled."""
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import test_ctl as ctlt  # noqa: E402  (its agents with a control socket)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
from ensemble import MiniZK  # noqa: E402

PATH = "/app/handover"
POLICY = os.path.join(h.POLICIES, "handover.lua")


def said(agent, prefix, timeout=20, since=0):
    return agent.wait_for(lambda e: e.get("event") == "script" and e["msg"].startswith(prefix),
                          timeout=timeout, since=since)["msg"]


def test_candidates_and_resign_to():
    with h.ZooKeeper() as zk:
        a, b, c = h.start_in_order(zk, ("a", "b", "c"), path=PATH, script=POLICY,
                                   extra=["--health-interval", "200"])
        # the status command's view of the line, for comparison
        code, out, err, _ = h.run([h.ZKELECT_BIN, "status", "--zk", zk.hostport, "--path", PATH,
                                   "--json"])
        assert code == 0, (code, err)
        line = ",".join(x["id"] for x in json.loads(out)["candidates"])
        assert line == "a,b,c", line
        assert said(c, "candidates ") == "candidates " + line
        # the go-ahead: a foreign node at the back of the line, which a waits for
        cli = MiniZK("127.0.0.1", zk.port)
        cli.create_node(PATH + "/n_go-", b'{"zkelect":1,"id":"go"}', ephemeral=True,
                        sequential=True)
        assert said(a, "candidates ") == "candidates " + line + ",go"
        # refused: leadership stays with a, no stepdown in between
        assert said(a, "resign to nobody: ") == "resign to nobody: nil no_candidate"
        said(a, "resign to c")
        # not next in line: b steps aside (re-queues), c leads, a's term ended with reason resign
        c.wait_event("leader", timeout=20)
        sd = a.wait_event("stepdown", timeout=20)
        assert sd["reason"] == "resign", sd
        assert not b.find("leader"), "b led before c"
        assert len(stepped_aside(b, 0)) == 1, b.describe()
        # the stepdown came after the refusal: it kept the term
        msgs = [e for e in a.events() if e.get("event") in ("script", "stepdown")]
        kinds = [e.get("event") if e.get("event") == "stepdown" else e["msg"].split(":")[0]
                 for e in msgs]
        assert kinds.index("stepdown") > kinds.index("resign to nobody"), kinds
        # from health(), outside the term: c hands over to b (next in line once the go-ahead
        # node is gone: a rejoined behind it) and the call returns with the successor
        cli.close()
        assert said(c, "health resign to b: ") == "health resign to b: true b nil"
        b.wait_event("leader", timeout=20)
        assert c.find("stepdown")[-1]["reason"] == "resign"
        h.stop_cleanly([a, b, c], 15)
        # resign() ended the term that called it: the call never returned
        assert not [e for e in a.find("script") if e["msg"].startswith("resign to c returned")]


def stepped_aside(x, since):
    return [e for e in x.events()[since:] if "stepping aside for" in str(e.get("msg", ""))]


def test_resign_to_any_candidate():
    """Issue 39's switchover: to the last of five, db-2..db-4 step aside
    (each re-queues: its node deleted, a new one created at once), db-5
    leads next with a newer epoch, none of the three led in between, and
    the line is db-5, db-2, db-3, db-4, db-1 (db-1 rejoined at the back)."""
    with h.ZooKeeper() as zk:
        xs = []
        for i in range(1, 6):
            x = ctlt.agent(zk, "db-%d" % i)
            x.wait_for("leader" if i == 1 else "follower", timeout=15)
            xs.append(x)
        d1, d5 = xs[0], xs[4]
        l1 = d1.find("leader")[-1]
        marks = [x.mark() for x in xs]
        rc, out, err = ctlt.ctl(d1, "resign", "--to", "db-5", json_out=True)
        assert rc == 0, (rc, out, err)
        ans = json.loads(out)
        assert ans["ok"] and ans["leader"] == "db-5", ans
        assert ans["stepped_aside"] == "db-2, db-3, db-4", ans
        l5 = d5.wait_for("leader", timeout=5, since=marks[4])
        assert l5["epoch"] == ans["epoch"] and l5["epoch"] > l1["epoch"], (l1, l5)
        assert d1.find("stepdown", since=marks[0])[0]["reason"] == "resign"
        for x, m in zip(xs[1:4], marks[1:4]):
            assert not x.find("leader", since=m), x.describe()
            assert len(stepped_aside(x, m)) == 1, x.describe()
        assert not stepped_aside(d5, marks[4]) and not stepped_aside(d1, marks[0])
        h.wait_until(lambda: ctlt.line(zk) == ["db-5", "db-2", "db-3", "db-4", "db-1"], 10,
                     "the line db-5, db-2, db-3, db-4, db-1")
        for x, m in zip(xs[1:4], marks[1:4]):
            assert not x.find("leader", since=m), x.describe()
        ctlt.stop(*xs)


def test_switchover_that_cannot_finish_keeps_the_lead():
    """One ahead of the target does not step aside (a zkelect of a version
    before the switchover: here its node, written as such a candidate
    writes it): cb steps aside, the ask is taken back at the budget's end
    (max(5 s, 2 x the session timeout)), ca keeps leading and says why."""
    with h.ZooKeeper() as zk:
        a = ctlt.agent(zk, "ca")
        a.wait_for("leader", timeout=15)
        b = ctlt.agent(zk, "cb")
        b.wait_for("follower", timeout=15)
        kz = ctlt.kazoo(zk)
        kz.create(ctlt.PATH + "/n_00000000000000ff-", b'{"zkelect":1,"id":"old","data":"old"}',
                  ephemeral=True, sequence=True)
        c = ctlt.agent(zk, "cc")
        c.wait_for("follower", timeout=15)
        ma, mb, mc = a.mark(), b.mark(), c.mark()
        t0 = time.monotonic()
        rc, out, err = ctlt.ctl(a, "resign", "--to", "cc", json_out=True)
        took = time.monotonic() - t0
        ans = json.loads(out)
        assert rc == 75 and ans["reason"] == "not_aside", (rc, out, err)
        assert "old did not step aside for cc within 5000 ms; leadership stays" in ans["error"], ans
        assert 4.5 < took < 12, took
        assert not a.find("stepdown", since=ma) and ctlt.status(a)["role"] == "leader", a.describe()
        assert not b.find("leader", since=mb) and not c.find("leader", since=mc)
        assert len(stepped_aside(b, mb)) == 1, b.describe()
        assert ctlt.line(zk) == ["ca", "old", "cc", "cb"]
        # the ask was taken back: the leader's data names nobody
        data, _ = kz.get(ctlt.PATH + "/" + ctlt.status(a)["node"])
        assert json.loads(data).get("aside") is None and json.loads(data)["epoch"] > 0, data
        kz.stop()
        kz.close()
        ctlt.stop(a, b, c)


def test_scheduled_switchover_and_cancel():
    """ctl resign --to ID --at TIME: the agent holds it (ctl status shows
    it) and makes it at TIME; one at a time; resign --cancel drops it."""
    with h.ZooKeeper() as zk:
        a = ctlt.agent(zk, "ca")
        a.wait_for("leader", timeout=15)
        b = ctlt.agent(zk, "cb")
        b.wait_for("follower", timeout=15)
        c = ctlt.agent(zk, "cc")
        c.wait_for("follower", timeout=15)
        rc, out, err = ctlt.ctl(a, "resign", "--to", "cb", "--at", "+1h")
        assert rc == 0 and "switchover to cb scheduled at " in out, (rc, out, err)
        assert ctlt.status(a)["scheduled"].startswith("cb at "), ctlt.status(a)
        rc, out, err = ctlt.ctl(a, "resign", "--to", "cc", "--at", "+1h")
        assert rc == 75 and "scheduled already" in err, (rc, err)
        rc, out, err = ctlt.ctl(a, "resign", "--cancel")
        assert rc == 0 and "cancelled" in out, (rc, out, err)
        assert ctlt.status(a)["scheduled"] is None
        rc, out, err = ctlt.ctl(a, "resign", "--cancel")
        assert rc == 75 and "no switchover is scheduled" in err, (rc, err)
        # made at its time, to one not next in line: cb steps aside, cc leads
        mc = c.mark()
        t0 = time.time()
        rc, out, err = ctlt.ctl(a, "resign", "--to", "cc", "--at", "+2s")
        assert rc == 0 and time.time() - t0 < 1, (rc, out, err)
        lc = c.wait_for("leader", timeout=15, since=mc)
        assert lc["_t"] >= t0 + 1.0, (lc, t0)
        assert not b.find("leader") and len(stepped_aside(b, 0)) == 1, b.describe()
        assert ctlt.status(a)["scheduled"] is None
        ctlt.stop(a, b, c)


if __name__ == "__main__":
    h.run_tests(globals())
