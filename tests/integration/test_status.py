#!/usr/bin/python3
"""`zkelect status`: the candidates in order with id, session, age and kind
(zkelect, Curator, kazoo), the leader, its epoch and whether it published its
leader data; --json; exit codes for a missing election and an unreachable
server."""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import zkharness as h  # noqa: E402
from ensemble import MiniZK  # noqa: E402  (a stdlib ZooKeeper client)

PATH = "/app/status"


def status(zk, *extra, path=PATH):
    return h.run([h.ZKELECT_BIN, "status", "--zk", zk if isinstance(zk, str) else zk.hostport,
                  "--path", path] + list(extra), timeout=30)


def status_when_published(zk, leader_id):
    """status --json, once the leader's publish write (not awaited by the
    agent) is visible."""
    got = {}

    def ready():
        code, out, err, _ = status(zk, "--json")
        got.update(code=code, out=out, err=err)
        if code != 0:
            return False
        st = json.loads(out)
        return st["leader"] is not None and st["leader"]["id"] == leader_id and \
            st["leader"]["published"]
    h.wait_until(ready, 10, "%s's leader data in status" % leader_id, interval=0.1)
    return json.loads(got["out"])


def test_status_of_a_mixed_election():
    with h.ZooKeeper() as zk:
        agents = h.start_in_order(zk, ("st1", "st2", "st3"), path=PATH)
        lead = agents[0].wait_for("leader", timeout=5)
        cli = MiniZK("127.0.0.1", zk.port)
        # foreign candidates behind ours (explicit names, as Curator and kazoo write them)
        assert cli.create(PATH + "/_c_3f2b8c1e-8b6d-4d1e-9a51-0d3c1b2a4f00-latch-0000000098",
                          b"curator-host", ephemeral=True)
        assert cli.create(PATH + "/8d2c1b0a9e8f__lock__0000000099", b"kazoo-host", ephemeral=True)
        assert cli.create(PATH + "/not-a-candidate", b"x")      # ignored: no sequence
        st = status_when_published(zk, "st1")
        c = st["candidates"]
        assert [x["kind"] for x in c] == ["zkelect"] * 3 + ["curator", "kazoo"], c
        assert [x.get("id") for x in c] == ["st1", "st2", "st3", "curator-host", "kazoo-host"], c
        assert [x["position"] for x in c] == list(range(5))
        assert c[0]["node"] == lead["node"] and c[0]["epoch"] == lead["epoch"], (c[0], lead)
        assert all("epoch" not in x for x in c[1:]), c
        assert all(x["session"].startswith("0x") and 0 <= x["age_ms"] < 60000 for x in c), c
        assert st["leader"] == {"id": "st1", "node": lead["node"], "kind": "zkelect",
                                "epoch": lead["epoch"], "published": True}, st["leader"]
        code, out, err, _ = status(zk)
        assert code == 0 and "leader: st1" in out and "epoch %d" % lead["epoch"] in out, out
        assert "curator" in out and "kazoo" in out and "not-a-candidate" not in out, out
        # after a hand-over the new leader shows with its own epoch
        m = agents[1].mark()
        agents[0].term()
        l2 = agents[1].wait_for("leader", timeout=5, since=m)
        st = status_when_published(zk, "st2")
        assert st["leader"]["id"] == "st2" and st["leader"]["epoch"] == l2["epoch"], st
        cli.close()
        for a in agents:
            a.term()
        for a in agents:
            assert a.wait_exit(10) == 0


def test_exit_codes_of_an_empty_election_and_of_a_folder_that_is_none():
    """0 with a leader; 3 without one, the same whether the empty election's folder
    is still there or gone (ZooKeeper removes an empty container node); 66 for a
    path whose children are no candidates (the election's parent)."""
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "e1", path=PATH)
        a.wait_for("leader", timeout=10)
        code, out, err, _ = status(zk)
        assert code == 0 and "leader: e1" in out, (code, out, err)
        # the parent of the election: no candidate, one child: 66, naming the child
        code, out, err, _ = status(zk, path="/app")
        assert code == 66 and out == "", (code, out, err)
        assert "/app is not an election" in err and "/app/status" in err, err
        code, out, err, _ = status(zk, "--json", path="/app")
        assert code == 66 and out == "", (code, out, err)
        a.term()
        assert a.wait_exit(10) == 0
        # empty: no leader (3), text and JSON
        code, out, err, _ = status(zk)
        assert code == 3 and "0 candidates" in out and "leader: none" in out and err == "", (code, out, err)
        code, out, err, _ = status(zk, "--json")
        st = json.loads(out)
        assert code == 3 and st["candidates"] == [] and st["leader"] is None, (code, out, err)
        assert st["exists"] is True, st
        # the folder removed, as ZooKeeper removes an empty container: still 3
        cli = MiniZK("127.0.0.1", zk.port)
        cli.delete(PATH)
        cli.close()
        code, out, err, _ = status(zk)
        assert code == 3 and "no such path" in out and "leader: none" in out and err == "", (code, out, err)
        code, out, err, _ = status(zk, "--json")
        st = json.loads(out)
        assert code == 3 and st["exists"] is False and st["leader"] is None, (code, out, err)


def test_status_json_of_a_node_whose_data_is_not_utf8():
    """A foreign candidate (written by another client) whose data is not
    UTF-8: --json stays JSON (valid UTF-8, the bad bytes as U+FFFD), where
    it printed the raw bytes; the text output escapes them."""
    with h.ZooKeeper() as zk:
        cli = MiniZK("127.0.0.1", zk.port)
        assert cli.create("/app") and cli.create(PATH)
        raw = b"host-\xff\xfe-\xc3(-\xed\xa0\x80-" + "é".encode()
        assert cli.create(PATH + "/8d2c1b0a9e8f__lock__0000000001", raw)
        p = subprocess.run(h.wrap([h.ZKELECT_BIN, "status", "--zk", zk.hostport, "--path", PATH,
                                   "--json"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30, preexec_fn=h._pdeathsig)
        assert p.returncode == 0, (p.returncode, p.stderr)
        text = p.stdout.decode("utf-8")         # strict: raises on invalid UTF-8
        st = json.loads(text)
        c = st["candidates"]
        assert len(c) == 1 and c[0]["kind"] == "kazoo", c
        assert c[0]["id"].startswith("host-\ufffd") and c[0]["id"].endswith("-é"), c[0]
        assert "\ufffd" in c[0]["data"] and c[0]["data"].endswith("-é"), c[0]
        assert st["leader"]["id"] == c[0]["id"], st["leader"]
        code, out, err, _ = status(zk)
        assert code == 0 and "host-\\xff\\xfe" in out, (code, out, err)
        cli.close()


def test_status_errors():
    with h.ZooKeeper() as zk:
        code, out, err, _ = status(zk, path="/no/such/election")
        assert code == 3 and "no such path" in out and err == "", (code, out, err)
        code, out, err, _ = status(zk, "--json", path="/")
        assert code == 64, (code, err)
    port = h.free_port()
    code, out, err, t = status("127.0.0.1:%d" % port, "--connect-timeout", "1000")
    assert code == 69 and t < 10, (code, err, t)


if __name__ == "__main__":
    h.run_tests(globals())
