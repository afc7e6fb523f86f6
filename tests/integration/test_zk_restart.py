#!/usr/bin/python3
"""A short ZooKeeper outage (server stopped and started again on the same port
and dataDir, well within the 8 s session timeout) must not change anything:
same leader, same nodes, same sessions, no step-down, no re-join; the agents
see disconnected then reconnected, and the election still works afterwards."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"
# The leader keeps leading through the outage only if the server is back
# within its lease: 12000 x 0.99 - 1500 (stepdown budget) - 600 (margin) =
# 9780 ms from the last answered request, renewed every 1200 ms, so at least
# 8580 ms from the disconnect; the outage is asserted below 6 s.
TIMEOUT_MS = 12000


def test_server_restart_keeps_leadership():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "r1", path=PATH, session_timeout=TIMEOUT_MS)
        lead = a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "r2", path=PATH, session_timeout=TIMEOUT_MS)
        fol = b.wait_for("follower", timeout=15)
        assert fol["leader_node"] == lead["node"], (fol, lead)
        sa, sb = h.sid(lead["session"]), h.sid(b.wait_for("joined", timeout=1)["session"])
        na, nb = PATH + "/" + lead["node"], PATH + "/" + fol["node"]
        h.wait_watches(zk, {sa: {na}, sb: {na, nb}})
        marks = {a: a.mark(), b: b.mark()}

        t0 = time.monotonic()
        zk.stop()
        for x in (a, b):
            x.wait_for("session", timeout=5, since=marks[x], reason="disconnected")
        zk.start()                       # same port, same dataDir
        outage = time.monotonic() - t0
        print("  info: server down and up again in %.2fs" % outage, flush=True)
        assert outage < 6.0, "server restart took %.1fs, too long for this test" % outage

        for x in (a, b):
            d = x.wait_for("session", timeout=5, since=marks[x], reason="disconnected")
            r = x.wait_for("session", timeout=TIMEOUT_MS / 1000.0, since=d["_i"], reason="reconnected")
            print("  info: %s reconnected %.2fs after it saw the disconnect" % (x.id, r["_t"] - d["_t"]))
            assert h.sid(r["session"]) == (sa if x is a else sb), r
        # the leader was suspended, then resumed in the same term
        su = a.wait_for("suspend", timeout=1, since=marks[a])
        rs = a.wait_for("resume", timeout=5, since=marks[a])
        assert su["epoch"] == rs["epoch"] == lead["epoch"], (su, rs, lead)

        # nothing else happened: same roles, no stepdown, no new node, no expiry
        for x in (a, b):
            for e in x.events()[marks[x]:]:
                assert e.get("event") not in ("stepdown", "joined", "stopped"), \
                    "%s: unexpected %s after a short outage:\n%s" % (x.id, e.get("event"), x.describe(10))
                if e.get("event") == "session":
                    assert e.get("reason") in ("disconnected", "reconnected", "connected"), e
                if e.get("event") in ("suspend", "resume"):
                    assert x is a and e["epoch"] == lead["epoch"], e
                if e.get("event") == "leader":
                    assert x is a and e["node"] == lead["node"], e
                if e.get("event") == "follower":
                    assert x is b and e["leader_node"] == lead["node"], e
        assert h.leaders_now([a, b]) == [a]

        # server side: same sessions own the same nodes; watches are restored
        eph = zk.ephemerals()
        assert eph.get(sa) == {na} and eph.get(sb) == {nb}, eph
        h.wait_watches(zk, {sa: {na}, sb: {na, nb}})

        # and the election still works: the follower takes over at once on SIGTERM
        mb = b.mark()
        a.term()
        assert a.wait_exit(10) == 0
        t_exit = time.time()
        nl = b.wait_for("leader", timeout=5, since=mb)
        assert nl["node"] == fol["node"] and nl["_t"] - t_exit < 1.0, nl
        assert nl["epoch"] > lead["epoch"], (nl, lead)
        b.term()
        assert b.wait_exit(10) == 0



def test_a_command_started_after_a_reconnect_inherits_no_socket():
    """The client library's sockets are not close-on-exec: the agent marks
    each new one before anything can fork. After a server restart the
    follower's session goes on over a new socket; when it then leads, its
    command (forked after the reconnect) holds no socket of the agent's."""
    with h.ZooKeeper() as zk:
        listing = os.path.join(h.mkdtemp("fds"), "fds")
        a = h.Agent(zk, "f1", path=PATH, session_timeout=TIMEOUT_MS)
        a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "f2", path=PATH, session_timeout=TIMEOUT_MS,
                    extra=["--", "/bin/sh", "-c",
                           "ls -l /proc/$$/fd > %s.tmp && mv %s.tmp %s; exec sleep 60"
                           % (listing, listing, listing)])
        b.wait_for("follower", timeout=15)
        mark = b.mark()
        zk.stop()
        b.wait_for("session", timeout=5, since=mark, reason="disconnected")
        zk.start()
        b.wait_for("session", timeout=TIMEOUT_MS / 1000.0, since=mark, reason="reconnected")
        socks = [x for x in os.listdir("/proc/%d/fd" % b.pid)
                 if os.readlink("/proc/%d/fd/%s" % (b.pid, x)).startswith("socket:")]
        assert socks, "the agent holds no socket: nothing to check"
        a.term()
        assert a.wait_exit(10) == 0
        b.wait_for("leader", timeout=15, since=mark)
        h.wait_until(lambda: os.path.exists(listing), 10, "the command's listing")
        with open(listing) as f:
            fds = f.read()
        assert "socket:" not in fds, fds
        b.term()
        assert b.wait_exit(15) == 0

if __name__ == "__main__":
    h.run_tests(globals())
