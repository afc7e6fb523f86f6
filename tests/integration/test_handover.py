#!/usr/bin/python3
"""zkelect.candidates() and zkelect.resign{to = ID} in a policy, against a
real ZooKeeper: candidates() lists the line in order (as `zkelect status
--json` does), read on the agent's own session; resign{to=} refuses an
unknown id and a candidate that is not next in line, and leadership stays
put; to the next in line it hands over, and that candidate leads next;
called from health(), outside the term, it returns the successor."""
import json
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

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
        assert said(a, "resign to c: ") == "resign to c: nil not_next"
        said(a, "resign to b")
        # to the next in line: b leads, a's term ended with reason resign
        b.wait_event("leader", timeout=20)
        sd = a.wait_event("stepdown", timeout=20)
        assert sd["reason"] == "resign", sd
        assert all(e["mono_ns"] > sd["mono_ns"] for e in c.find("leader")), "c led before b"
        # the stepdown came after the two refusals: they kept the term
        msgs = [e for e in a.events() if e.get("event") in ("script", "stepdown")]
        kinds = [e.get("event") if e.get("event") == "stepdown" else e["msg"].split(":")[0]
                 for e in msgs]
        assert kinds.index("stepdown") > kinds.index("resign to c"), kinds
        # from health(), outside the term: b hands over to c (next in line: a rejoined behind it)
        # and the call returns with the successor
        assert said(b, "health resign to c: ") == "health resign to c: true c nil"
        c.wait_event("leader", timeout=20)
        assert b.find("stepdown")[-1]["reason"] == "resign"
        cli.close()
        h.stop_cleanly([a, b, c], 15)
        # resign() ended the term that called it: the call never returned
        assert not [e for e in a.find("script") if e["msg"].startswith("resign to b returned")]


if __name__ == "__main__":
    h.run_tests(globals())
