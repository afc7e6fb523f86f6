#!/usr/bin/python3
"""The history of terms (run --history), `zkelect history`, /history and
`zkelect audit`: two graceful terms are recorded with their ends (shutdown)
and no finding; a SIGKILLed leader's term is marked no_stepdown by its
successor and `audit --once` exits 1 naming it; a record forged by another
client (kazoo) that overlaps a term by its own stamps and goes back in epoch
is raised by a following audit (log lines, its /metrics counters, exit 1 at
SIGTERM), and not with --skew-ms above it; garbage records (names and data) are counted, never fatal.
`history`'s text output says the same. A restarted audit tells the old findings as past
(audit_past, the zkelect_audit_findings gauge) and raises nothing (exit 0, counters 0); `--once
--since` a time after them raises nothing. A backlog of old records (a writer that kept more) is
pruned down to the keep by one term, whose end is still recorded."""
import json
import os
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

PATH = "/app/hist"


def history(zk, extra=()):
    code, out, err, _ = h.run([h.ZKELECT_BIN, "history", "--zk", zk.hostport, "--path", PATH,
                               "--json"] + list(extra))
    assert code == 0, (code, out, err)
    return json.loads(out)


def audit_once(zk, extra=()):
    code, out, err, _ = h.run([h.ZKELECT_BIN, "audit", "--once", "--zk", zk.hostport, "--path",
                               PATH, "--log", "json"] + list(extra))
    return code, [json.loads(x) for x in err.splitlines() if x.startswith("{")]


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return r.read().decode()


class Auditor(h.Agent):
    """A following `zkelect audit` with its /metrics."""

    def argv(self):
        return [h.ZKELECT_BIN, "audit", "--zk", self.zk.hostport, "--path", self.path,
                "--log", "json"] + self.extra


def test_history_and_audit():
    with h.ZooKeeper() as zk:
        port = h.free_port()
        agents = h.start_in_order(zk, ("a1", "a2", "a3", "a4"), path=PATH, extra=["--history"])
        agents[2].stop()
        a3 = h.Agent(zk, "a3", path=PATH, extra=["--history", "--status", "127.0.0.1:%d" % port])
        a3.wait_for("follower", timeout=5)
        l1 = agents[0].wait_for("leader", timeout=5)
        # the start line and check say that the terms are recorded
        assert agents[0].wait_for("start", timeout=1)["history_keep"] == 64
        code, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "c", "--history"])
        assert code == 0 and "history: its terms recorded in %s.history" % PATH in out, (out, err)
        agents[0].term()
        l2 = agents[1].wait_for("leader", timeout=5)
        agents[1].term()
        # in line now: a4, a3 (a3 rejoined at the back)
        l4 = agents[3].wait_for("leader", timeout=5)
        agents[3].term()
        l3 = a3.wait_for("leader", timeout=5)
        # 1: graceful terms, recorded with their ends, in order, nothing raised
        h.wait_until(lambda: [t["reason"] for t in history(zk)["terms"]]
                     == ["shutdown", "shutdown", "shutdown", None], 5, "three ends recorded")
        doc = history(zk)
        terms = doc["terms"]
        assert [t["epoch"] for t in terms] == [l1["epoch"], l2["epoch"], l4["epoch"], l3["epoch"]]
        assert [t["id"] for t in terms] == ["a1", "a2", "a4", "a3"]
        for a, b in zip(terms, terms[1:]):
            assert a["end_ms"] <= b["start_ms"], (a, b)
        assert doc["findings"] == [] and doc["garbage"] == 0, doc
        assert audit_once(zk)[0] == 0
        served = json.loads(get(port, "/history"))
        assert [t["epoch"] for t in served["terms"]][:3] == [t["epoch"] for t in terms][:3]
        assert "leader_election_master_status{name=\"%s\"} 1" % PATH in get(port, "/metrics")
        # a following audit, before the faults
        aport = h.free_port()
        aud = Auditor(zk, "audit", path=PATH, extra=["--status", "127.0.0.1:%d" % aport])
        aud.wait_for("audit_reading", timeout=5)
        # 2: the leader SIGKILLed: its successor marks the term no_stepdown
        n = h.Agent(zk, "a5", path=PATH, extra=["--history"])
        n.wait_for("follower", timeout=5)
        a3.kill9()
        l5 = n.wait_for("leader", timeout=10)
        h.wait_until(lambda: any(t["epoch"] == l3["epoch"] and t["reason"] == "no_stepdown"
                                 and t["closed_by"] == "a5" for t in history(zk)["terms"]),
                     5, "a3's term marked no_stepdown by a5")
        code, lines = audit_once(zk)
        assert code == 1, lines
        raised = [e for e in lines if e.get("event") == "audit"]
        assert [(e["kind"], e["epoch"]) for e in raised] == [("no_stepdown", l3["epoch"])], raised
        aud.wait_for(lambda e: e.get("event") == "audit" and e.get("kind") == "no_stepdown",
                     timeout=5)
        # 3: another client forges a record after a1's (epoch l1 + 1 is no
        # node's: a1's publish took that zxid) that began before a1's end
        # and ended then too (not after a2's start: a2 may lead within
        # milliseconds of a1's end, and that would be a second overlap)
        kz = KazooClient(hosts=zk.hostport, timeout=10)
        kz.start(timeout=10)
        try:
            a1 = terms[0]
            forged = {"zkelect_term": 1, "epoch": l1["epoch"] + 1, "id": "forger", "node": "x",
                      "start_ms": a1["end_ms"] - 500, "end_ms": a1["end_ms"] - 499,
                      "reason": "resign"}
            kz.create("%s.history/term-%019d" % (PATH, l1["epoch"] + 1),
                      json.dumps(forged).encode())
            # garbage: a name that is no record, data that is no record
            kz.create(PATH + ".history/term-abc", b"{}")
            kz.create(PATH + ".history/term-%019d" % 7, b"\xff{\"zkelect_term\":1,[[[")
            kz.create(PATH + ".history/term-%019d" % 8, b"[" * 100000)
        finally:
            kz.stop()
            kz.close()
        for kind, epoch in (("overlap", l1["epoch"] + 1), ("epoch_backwards", l1["epoch"] + 1)):
            aud.wait_for(lambda e, k=kind, ep=epoch: e.get("event") == "audit"
                         and e.get("kind") == k and e.get("epoch") == ep, timeout=5)
        doc = history(zk)
        assert doc["garbage"] == 3, doc
        # the text form: the header, one line per term, the findings
        code, out, err, _ = h.run([h.ZKELECT_BIN, "history", "--zk", zk.hostport, "--path", PATH])
        lines = out.splitlines()
        assert code == 0 and lines[0] == "history of %s: %d terms recorded, 3 garbage records " \
            "ignored" % (PATH, len(doc["terms"])), (code, out, err)
        assert lines[1].split() == ["epoch", "id", "start", "end", "reason"], out
        rows = [ln.split() for ln in lines[2:2 + len(doc["terms"])]]
        assert [(int(r[0]), r[1], r[-1]) for r in rows] == \
            [(t["epoch"], t["id"], t["reason"] or "(open)") for t in doc["terms"]], out
        assert "findings: %d" % len(doc["findings"]) in lines, out
        assert all("  " + f["msg"] in lines for f in doc["findings"]), out
        # the forged overlap is 500 ms: --skew-ms 1000 (clocks that differ
        # by up to a second) does not raise it, the other findings stay
        kinds = sorted(f["kind"] for f in doc["findings"])
        assert kinds == ["epoch_backwards", "no_stepdown", "overlap"], doc["findings"]
        skewed = history(zk, ["--skew-ms", "1000"])["findings"]
        assert sorted(f["kind"] for f in skewed) == ["epoch_backwards", "no_stepdown"], skewed
        code, lines = audit_once(zk, ["--skew-ms", "1000"])
        assert code == 1 and sorted(e["kind"] for e in lines if e.get("event") == "audit") \
            == ["epoch_backwards", "no_stepdown"], lines
        metrics = get(aport, "/metrics")
        for kind in ("overlap", "epoch_backwards", "no_stepdown"):
            assert "zkelect_audit_findings_total{kind=\"%s\"} 1" % kind in metrics, metrics
        assert "leader_election_master_status{name=\"%s\",id=\"a5\"} 1" % PATH in metrics, metrics
        assert aud.alive()
        aud.term()
        assert aud.wait_exit(timeout=5) == 1
        assert l5["epoch"] > l3["epoch"]
        # 4: a restarted audit: the history's findings are past, nothing raised
        aud2 = Auditor(zk, "audit2", path=PATH, extra=["--status", "127.0.0.1:%d" % aport])
        aud2.wait_for("audit_reading", timeout=5)
        assert sorted(e["kind"] for e in aud2.events("audit_past")) == kinds, aud2.events()
        assert aud2.events("audit") == []
        metrics = get(aport, "/metrics")
        for kind in ("overlap", "epoch_backwards", "no_stepdown"):
            assert "zkelect_audit_findings_total{kind=\"%s\"} 0" % kind in metrics, metrics
            assert "zkelect_audit_findings{kind=\"%s\"} 1" % kind in metrics, metrics
        aud2.term()
        assert aud2.wait_exit(timeout=5) == 0
        # --once --since: a recent window raises them, one after them nothing
        assert audit_once(zk, ["--since", "1h"])[0] == 1
        after = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
        code, lines = audit_once(zk, ["--since", after])
        assert code == 0 and [e["findings"] for e in lines if e.get("event") ==
                              "audit_reading"] == [0], lines
        # 5: a backlog beyond the keep (64): one term prunes all of it, and
        # its end (the budget kept for it) is recorded
        kz = KazooClient(hosts=zk.hostport, timeout=10)
        kz.start(timeout=10)
        try:
            # epochs above l5's and below the next leader's: each create
            # takes a zxid, and the next leader's node comes after them
            for e in range(l5["epoch"] + 1, l5["epoch"] + 101):
                kz.create(PATH + ".history/term-%019d" % e, json.dumps(
                    {"zkelect_term": 1, "epoch": e, "id": "old", "node": "x",
                     "start_ms": 10 ** 12 + 10 * e, "end_ms": 10 ** 12 + 10 * e + 5,
                     "reason": "resign"}).encode())
            a6 = h.Agent(zk, "a6", path=PATH, extra=["--history"])
            a6.wait_for("follower", timeout=5)
            n.term()
            l6 = a6.wait_for("leader", timeout=5)
            names = lambda: kz.get_children(PATH + ".history")  # noqa: E731
            h.wait_until(lambda: len(names()) == 64 + 1, 5, "the backlog pruned to 64 (+ term-abc)")
            assert "term-%019d" % l6["epoch"] in names()
            a6.term()
            h.wait_until(lambda: [t["reason"] for t in history(zk)["terms"]
                                  if t["epoch"] == l6["epoch"]] == ["shutdown"], 5, "a6's end")
        finally:
            kz.stop()
            kz.close()


if __name__ == "__main__":
    h.run_tests(globals())
