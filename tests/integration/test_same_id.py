#!/usr/bin/python3
"""Two candidates with one id (cloned hosts, where the units' --id %H names
both the same): the leader says so as soon as another with its id joins
(its census sees the election grow), a newcomer once the older node with its
id outlived three session timeouts (it could have been its own node of
before a restart).
A restarted agent whose old session has not expired yet finds its own old
node with its id: no warning (with --session-file it says whose node it is
at once). A node's data is another client's bytes: a hint, never proof, and
junk in it changes nothing."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import zkharness as h  # noqa: E402
from ensemble import MiniZK  # noqa: E402  (a stdlib ZooKeeper client)

PATH = "/app/same"
T = 2000        # the harness's session timeout
# a census (the election's stat every half T, at least 1 s): with --status,
# --control or --script; a leader with one lists the election when it grew
CENSUS = ["--status", "127.0.0.1:0"]


def dupe_warnings(a, since=0):
    return [e for e in a.events()[since:] if e.get("level") == "warn" and
            "another candidate has our id" in str(e.get("msg", ""))]


def wait_dupe(a, node, timeout, since=0):
    return h.wait_until(lambda: [e for e in dupe_warnings(a, since) if node in e["msg"]], timeout,
                        "%s's warning about %s" % (a.id, node))


def test_two_agents_with_one_id_both_say_so():
    """a leads as db (with a census); b joins as db too: a warns at once
    (b's node is younger than its own), b after three session timeouts (a's node is older: it
    waits to see that it is no node of its own past). A third one, c, joins
    as db right after b (the two wait out their three session timeouts
    together): a warns at once, c later about a and b both. Nobody warns
    about d, whose id is its own."""
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "db", path=PATH, session_timeout=T, extra=CENSUS)
        la = a.wait_for("leader", timeout=10)
        d = h.Agent(zk, "other", path=PATH, session_timeout=T, extra=CENSUS)
        d.wait_for("follower", timeout=10)
        b = h.Agent(zk, "db", path=PATH, session_timeout=T, extra=CENSUS)
        jb = b.wait_for("joined", timeout=10)
        t0 = time.monotonic()
        jc = h.Agent(zk, "db", path=PATH, session_timeout=T)       # no census: its listing
        w = wait_dupe(a, jb["node"], 10)[0]
        print("  info: the leader warned %.2f s after the newcomer joined" % (time.monotonic() - t0))
        assert "joined after us" in w["msg"] and "'db'" in w["msg"], w
        nc = jc.wait_for("joined", timeout=10)["node"]
        wait_dupe(a, nc, 10)
        w = wait_dupe(b, la["node"], 3 * T / 1000 + 10)[0]
        assert "joined before us" in w["msg"], w
        assert time.monotonic() - t0 >= 3 * T / 1000 - 0.5, "b warned before it could know"
        wait_dupe(jc, la["node"], 3 * T / 1000 + 10)
        wait_dupe(jc, jb["node"], 5)
        assert not dupe_warnings(d), d.describe()
        # one warning per node: a said each newcomer once
        assert len([e for e in dupe_warnings(a) if jb["node"] in e["msg"]]) == 1, a.describe()
        for x in (a, b, jc, d):
            x.term()
        for x in (a, b, jc, d):
            assert x.wait_exit(10) == 0


def test_a_restarted_agent_is_not_its_own_duplicate():
    """An agent killed with its keeper (a host's crash: nobody closes its
    session) and started again at once with its id finds its old node (its
    session lives on until it expires): no warning, then or when it looks
    again. With --session-file it says at once that the node is its
    previous session's. The two cases run side by side, in elections of
    their own, waiting out the old sessions together."""
    with h.ZooKeeper() as zk:
        runs = []
        for with_file in (False, True):
            path = PATH + ("/file" if with_file else "/nofile")
            sf = os.path.join(h.mkdtemp("same-id"), "session") if with_file else None
            a = h.Agent(zk, "db", path=path, session_timeout=T, session_file=sf)
            runs.append({"with_file": with_file, "path": path, "sf": sf, "a": a})
        for r in runs:
            r["la"] = r["a"].wait_for("leader", timeout=10)
            r["b"] = h.Agent(zk, "peer", path=r["path"], session_timeout=T)
        for r in runs:
            r["b"].wait_for("follower", timeout=10)
            if r["with_file"]:
                h.wait_until(lambda: os.path.exists(r["sf"]), 5, "the session file")
        for r in runs:
            r["a"].kill9_with_keeper()
            r["a2"] = h.Agent(zk, "db", path=r["path"], session_timeout=T, session_file=r["sf"],
                              extra=["--log-level", "debug"])
        for r in runs:
            a2, b, la = r["a2"], r["b"], r["la"]
            j2 = a2.wait_for("joined", timeout=10)
            assert j2["node"] != la["node"], (j2, la)

            def said(text):
                return a2.wait_for(lambda e: text in str(e.get("msg", "")) and
                                   la["node"] in str(e.get("msg", "")), timeout=4 * T / 1000 + 10)
            if r["with_file"]:
                said("is our previous session's")       # at once, from the file
            else:
                said("has our id and is older than ours")
                said("is gone: it was our previous session's")     # looked at again: gone
            b.wait_for("leader", timeout=3 * T / 1000 + 5)      # its session expired
        for r in runs:
            a2, b = r["a2"], r["b"]
            assert not dupe_warnings(a2), a2.describe(30)
            assert not dupe_warnings(b), b.describe(30)
            for x in (a2, b):
                x.term()
            for x in (a2, b):
                assert x.wait_exit(10) == 0


def test_junk_in_other_nodes_changes_nothing():
    """Other clients' nodes in the election with any bytes: not JSON, a
    zkelect object whose id is a number, missing or another, 100 KiB of
    brackets or words, invalid UTF-8; then a foreign node whose whole data
    is our id (taken as its id: a hint, said as such). The agent leads on,
    and warns about that one only."""
    with h.ZooKeeper() as zk:
        cli = MiniZK("127.0.0.1", zk.port)
        assert cli.create("/app") and cli.create(PATH)
        junk = [b"", b"\xff\xfe\x00db", b'{"zkelect":1,"id":7}', b'{"zkelect":1}', b"{" * 100000,
                b'{"zkelect":1,"id":"db2"}', b"db " * 30000]
        for i, data in enumerate(junk):
            assert cli.create(PATH + "/8d2c1b0a9e8f%02d__lock__00000000%02d" % (i, 90 + i), data)
        a = h.Agent(zk, "db", path=PATH, session_timeout=T, extra=CENSUS)
        a.wait_for("leader", timeout=10)      # its sequence is below theirs
        # our id as a kazoo candidate's whole data, behind us
        assert cli.create(PATH + "/aaaaaaaaaaaa__lock__0000009999", b"db")
        wait_dupe(a, "aaaaaaaaaaaa__lock__0000009999", 10)
        time.sleep(0.5)
        assert len(dupe_warnings(a)) == 1, a.describe(30)
        assert a.alive() and h.leaders_now([a]) == [a]
        cli.close()
        a.term()
        assert a.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
