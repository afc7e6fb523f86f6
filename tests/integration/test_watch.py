#!/usr/bin/python3
"""`zkelect watch`: an observer that is not a candidate follows three
failovers (graceful, SIGKILL, resign-free restart) and reports each new
leader with its id, node and published epoch, without polling: it holds one
watch, on the leader's node."""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/watch"
OBSERVER = os.path.join(h.POLICIES, "observer.lua")


class Watcher(h.Agent):
    """A `zkelect watch` process, logging JSON lines like an agent."""

    def argv(self):
        return [h.ZKELECT_BIN, "watch", "--zk", self.zk.hostport, "--path", self.path,
                "--script", OBSERVER, "--log", "json"]


def wait_change(w, leader, epoch, since=0, timeout=10):
    return w.wait_for(lambda e: e.get("event") == "leader_change" and e.get("leader") == leader
                      and e.get("leader_epoch") == epoch, timeout=timeout, since=since)


def test_observer_follows_three_failovers():
    with h.ZooKeeper() as zk:
        agents = h.start_in_order(zk, ("w1", "w2", "w3", "w4"), path=PATH)
        w = Watcher(zk, "obs", path=PATH)
        l1 = agents[0].wait_for("leader", timeout=5)
        wait_change(w, "w1", l1["epoch"])
        # the observer's cost: one data watch, on the leader's node
        mine = {h.sid(a.wait_for("joined", timeout=1)["session"]) for a in agents}

        def observer_watches():
            others = {s: p for s, p in zk.wchc().items() if h.sid(s) not in mine}
            return list(others.values())
        h.wait_until(lambda: observer_watches() == [{PATH + "/" + l1["node"]}], 5,
                     "the observer's single watch, on the leader's node")
        epochs = [l1["epoch"]]
        # 1: graceful
        m = w.mark()
        agents[0].term()
        l2 = agents[1].wait_for("leader", timeout=5)
        c = wait_change(w, "w2", l2["epoch"], since=m)
        assert c["leader_node"] == l2["node"]
        epochs.append(l2["epoch"])
        # 2: crash (the session has to expire)
        m = w.mark()
        agents[1].kill9()
        l3 = agents[2].wait_for("leader", timeout=10)
        wait_change(w, "w3", l3["epoch"], since=m)
        epochs.append(l3["epoch"])
        # 3: graceful again
        m = w.mark()
        agents[2].term()
        l4 = agents[3].wait_for("leader", timeout=5)
        wait_change(w, "w4", l4["epoch"], since=m)
        epochs.append(l4["epoch"])
        assert epochs == sorted(epochs) and len(set(epochs)) == 4, epochs
        # the script saw the same changes (its hook runs after the change's
        # line is written: wait for each, do not just look)
        for name, ep in zip(("w1", "w2", "w3", "w4"), epochs):
            w.wait_for(lambda e, s="leader=%s epoch=%d " % (name, ep):
                       e.get("event") == "script" and s in e.get("msg", ""), timeout=5)
        # no leader at all, then a new one
        m = w.mark()
        agents[3].term()
        w.wait_for(lambda e: e.get("event") == "leader_change" and e.get("leader") is None,
                   timeout=5, since=m)
        n = h.Agent(zk, "w5", path=PATH)
        l5 = n.wait_for("leader", timeout=10)
        wait_change(w, "w5", l5["epoch"], since=m)
        w.term()
        assert w.wait_exit(10) == 0
        n.term()
        assert n.wait_exit(10) == 0


def test_stdout_is_one_json_object_per_report():
    """stdout: one JSON object per report (the documented keys); the first one says
    "initial", later ones "changed" or why there is no leader; the log stays on
    stderr; a closed stdout ends the watch (exit 0)."""
    import json
    import select
    with h.ZooKeeper() as zk:
        a1 = h.Agent(zk, "j1", path=PATH)
        l1 = a1.wait_for("leader", timeout=10)
        errf = open(os.path.join(h.mkdtemp("watch-json"), "stderr"), "wb")
        p = subprocess.Popen([h.ZKELECT_BIN, "watch", "--zk", zk.hostport, "--path", PATH],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errf)
        buf = b""

        def next_report(timeout=10):
            nonlocal buf
            deadline = time.monotonic() + timeout
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                assert left > 0, "no report within %ss (got %r)" % (timeout, buf)
                r, _, _ = select.select([p.stdout], [], [], left)
                if r:
                    chunk = os.read(p.stdout.fileno(), 65536)
                    assert chunk, "watch closed its stdout (exit %s)" % p.poll()
                    buf += chunk
            line, _, buf = buf.partition(b"\n")
            return json.loads(line)
        try:
            keys = {"ts", "path", "reason", "leader", "leader_node", "leader_data", "leader_epoch",
                    "candidates"}
            r = next_report()
            assert set(r) == keys and r["reason"] == "initial" and r["path"] == PATH, r
            assert r["leader"] == "j1" and r["leader_node"] == l1["node"] and r["candidates"] == 1, r
            if r["leader_epoch"] == 0:      # seen before it published its epoch
                r = next_report()
                assert r["reason"] == "changed", r
            assert r["leader_epoch"] == l1["epoch"] and r["leader_data"] == "j1", r
            a1.term()
            assert a1.wait_exit(10) == 0
            r = next_report()
            assert r["reason"] == "no_candidates" and r["leader"] is None and r["leader_node"] is None, r
            assert r["leader_epoch"] == 0 and r["candidates"] == 0, r
            a2 = h.Agent(zk, "j2", path=PATH)
            l2 = a2.wait_for("leader", timeout=10)
            r = next_report()
            assert r["reason"] == "changed" and r["leader"] == "j2" and r["leader_node"] == l2["node"], r
            # the reader goes away: the next report ends the watch, exit 0
            p.stdout.close()
            a2.term()
            assert a2.wait_exit(10) == 0
            assert p.wait(10) == 0
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            errf.close()
        with open(errf.name) as f:
            err = f.read()
        assert "leader_change" in err and "stdout was closed" in err, err


if __name__ == "__main__":
    h.run_tests(globals())
