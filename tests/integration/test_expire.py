#!/usr/bin/python3
"""Session expiry (forced with tests/tools/zke_expire): the leader steps down
(reason expired), opens a new session, joins again with a new node and leads
again with a larger epoch; with a second candidate, the other one leads and
the expired one comes back as a follower.

To make "expired" (rather than "lost") deterministic, the agent is frozen
(SIGSTOP) while its session is closed from a twin handle: attaching the twin
makes the server drop the agent's connection, so the frozen agent cannot
reconnect, and cannot see its node's deletion; when thawed it reconnects and
is told EXPIRED. A last test expires the session of a running agent, where
it may see its node vanish first (reason lost) and then the expiry."""
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"


def _session_file(agent, session):
    """Waits until the agent's --session-file names `session`."""
    def ok():
        r = h.read_session_file(agent.session_file)
        return r if r and r[0] == session else None
    r = h.wait_until(ok, timeout=5, desc="%s to write %s" % (agent.id, agent.session_file))
    assert len(r[1]) == 32 and int(r[1], 16) >= 0, r
    return agent.session_file


# The agents these tests freeze while their session is expired: the keeper
# must not SIGKILL the frozen agent at its hard end (zke_expire under a
# sanitizer beside the suite can keep it frozen past its lease); their
# subject is the expiry, not the fail-stop watcher (integration.failstop).
FROZEN = ["--fail-stop", "groups"]


def _expire_frozen(zk, agent, session_file):
    agent.sigstop()
    try:
        h.expire_session(zk, session_file)
    finally:
        agent.sigcont()


def _check_expiry(x, m, old_node, old_session, timeout=15):
    """x logged session expired, and joined again with a new node in a new
    session. Returns the new joined event."""
    se = x.wait_for("session", timeout=timeout, since=m, reason="expired")
    assert h.sid(se["session"]) == old_session, (se, old_session)
    j = x.wait_for("joined", timeout=timeout, since=m)
    assert j["_i"] > se["_i"], "joined before the expiry was seen:\n" + x.describe()
    h.assert_node(j["node"])
    assert j["node"] != old_node, (j, old_node)
    assert h.sid(j["session"]) != old_session, (j, old_session)
    c = x.wait_for("session", timeout=1, since=se["_i"], reason="connected")
    assert h.sid(c["session"]) == h.sid(j["session"]) and c["_i"] < j["_i"], (c, j)
    return j


def _leader_again(zk, a, lead, m, reasons):
    s0 = h.sid(lead["session"])
    sd = a.wait_for("stepdown", timeout=10, since=m)
    assert sd["reason"] in reasons, "stepdown reason %r, expected %s" % (sd["reason"], reasons)
    assert sd["node"] == lead["node"] and sd["epoch"] == lead["epoch"], (sd, lead)
    j = _check_expiry(a, m, lead["node"], s0)
    nl = a.wait_for("leader", timeout=15, since=j["_i"])
    assert nl["node"] == j["node"] and h.sid(nl["session"]) == h.sid(j["session"]), (nl, j)
    assert nl["epoch"] > lead["epoch"], (nl, lead)
    assert sd["_i"] < nl["_i"]
    assert len(a.find("leader", since=m)) == 1, a.describe()
    # server: the old node is gone, the new one belongs to the new session
    eph = zk.ephemerals()
    assert s0 not in eph, eph
    assert eph.get(h.sid(j["session"])) == {PATH + "/" + j["node"]}, eph
    # the session file follows the new session
    _session_file(a, h.sid(j["session"]))
    a.term()
    assert a.wait_exit(10) == 0, a.describe()


def test_expire_single_leader_rejoins():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "e1", path=PATH, session_timeout=2000,
                    session_file=os.path.join(h.mkdtemp("sess"), "session"), session_password=True,
                    extra=FROZEN)
        lead = a.wait_for("leader", timeout=15)
        f = _session_file(a, h.sid(lead["session"]))
        m = a.mark()
        _expire_frozen(zk, a, f)
        _leader_again(zk, a, lead, m, ("expired",))


def test_expire_leader_of_two():
    with h.ZooKeeper() as zk:
        sdir = h.mkdtemp("sess")
        a = h.Agent(zk, "x1", path=PATH, session_timeout=2000, session_file=os.path.join(sdir, "x1"),
                    session_password=True, extra=FROZEN)
        lead = a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "x2", path=PATH, session_timeout=2000, session_file=os.path.join(sdir, "x2"))
        fol = b.wait_for("follower", timeout=15)
        assert fol["position"] == 1 and fol["leader"] == "x1", fol
        s0 = h.sid(lead["session"])
        f = _session_file(a, s0)
        marks = {a: a.mark(), b: b.mark()}

        _expire_frozen(zk, a, f)

        # the other one leads, promptly (the node was deleted with the session)
        nl = b.wait_for("leader", timeout=5, since=marks[b])
        assert nl["node"] == fol["node"] and nl["epoch"] > lead["epoch"], (nl, lead)
        # the expired one steps down and comes back as a follower of b
        sd = a.wait_for("stepdown", timeout=10, since=marks[a])
        assert sd["reason"] == "expired", sd
        j = _check_expiry(a, marks[a], lead["node"], s0)
        f2 = a.wait_for("follower", timeout=15, since=j["_i"])
        assert f2["node"] == j["node"] and f2["leader_node"] == nl["node"], (f2, nl)
        assert f2["leader"] == "x2" and f2["position"] == 1 and f2["predecessor"] == nl["node"], f2
        assert not a.find("leader", since=marks[a]), a.describe()
        assert not b.find("stepdown", since=marks[b]), b.describe()
        assert h.leaders_now([a, b]) == [b]

        for x in (a, b):
            x.term()
        for x in (a, b):
            assert x.wait_exit(10) == 0, x.describe()


def test_expire_while_running():
    # The agent keeps running: depending on timing it first sees its node
    # deleted (stepdown reason lost) or its session expired (or, on a loaded
    # machine, its lease runs out first: the expiry took its connection
    # away); either way it must learn the expiry, rejoin in a new session
    # and lead again.
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "r1", path=PATH, session_timeout=2000,
                    session_file=os.path.join(h.mkdtemp("sess"), "session"), session_password=True)
        lead = a.wait_for("leader", timeout=15)
        f = _session_file(a, h.sid(lead["session"]))
        m = a.mark()
        h.expire_session(zk, f)
        _leader_again(zk, a, lead, m, ("expired", "lost", "lease"))


def test_the_session_file_holds_the_password_only_when_asked():
    """Without --session-file-password (or with ZKELECT_SESSION_FILE_PASSWORD=0)
    the session file holds the session id alone, "0x<id>\n", and zke_expire
    refuses it (exit 1, one line saying that the password is missing and how
    to have it written) without touching the session; with the flag or
    ZKELECT_SESSION_FILE_PASSWORD=1 it holds the password's 32 hex digits
    too, which open the session (zke_expire closes it). The file held the
    password always."""
    with h.ZooKeeper() as zk:
        d = h.mkdtemp("sess")
        def agent(name, **kw):
            return h.Agent(zk, name, path=PATH, session_timeout=2000,
                           session_file=os.path.join(d, name), **kw)
        plain = agent("p0")
        lead = plain.wait_for("leader", timeout=15)
        off = agent("p1", env={"ZKELECT_SESSION_FILE_PASSWORD": "0"})
        flag = agent("w0", session_password=True)
        env1 = agent("w1", env={"ZKELECT_SESSION_FILE_PASSWORD": "1"})
        for x in (off, flag, env1):
            x.wait_for("follower", timeout=15)

        def content(x):
            s = x.session()
            r = h.wait_until(lambda: (h.read_session_file(x.session_file) or (None,))[0] == s,
                             timeout=5, desc="%s to write %s" % (x.id, x.session_file))
            assert r
            with open(x.session_file) as f:
                return s, f.read()
        for x in (plain, off):
            s, text = content(x)
            assert text == "0x%x\n" % s, (x.id, text, s)
            assert h.read_session_file(x.session_file) == (s, None)
        for x in (flag, env1):
            s, text = content(x)
            assert re.match(r"^0x%x [0-9a-f]{32}\n$" % s, text), (x.id, text, s)
            assert h.read_session_file(x.session_file)[1] == text.split()[1]

        # no password: zke_expire says so, and the session is untouched
        s0 = h.sid(lead["session"])
        rc, out, err, _ = h.run([h.ZKE_EXPIRE_BIN, zk.hostport, plain.session_file], timeout=30)
        lines = err.strip().splitlines()
        assert rc == 1 and len(lines) == 1 and "holds session 0x%x but no password" % s0 in lines[0] \
            and "--session-file-password" in lines[0], (rc, out, err)
        assert s0 in zk.ephemerals(), zk.ephemerals()
        assert not plain.find("stepdown") and not plain.find("session", reason="expired"), \
            plain.describe()

        # the password ZKELECT_SESSION_FILE_PASSWORD=1 wrote opens the session
        s1 = env1.session()
        m = env1.mark()
        h.expire_session(zk, env1.session_file)
        se = env1.wait_for("session", timeout=15, since=m, reason="expired")
        assert h.sid(se["session"]) == s1, (se, s1)
        j = env1.wait_for("joined", timeout=15, since=m)
        s2 = h.sid(j["session"])
        h.wait_until(lambda: (h.read_session_file(env1.session_file) or (None, None))[0] == s2
                     and h.read_session_file(env1.session_file)[1] is not None,
                     timeout=5, desc="w1's session file to name its new session, with the password")

        for x in (plain, off, flag, env1):
            x.term()
        for x in (plain, off, flag, env1):
            assert x.wait_exit(10) == 0, x.describe()


if __name__ == "__main__":
    h.run_tests(globals())
