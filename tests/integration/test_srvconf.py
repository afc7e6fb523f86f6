#!/usr/bin/python3
"""The servers' tick is asked, not assumed (src/lib/srvask.c, srvconf.c): each
server of the connect string is asked `conf` (tickTime, minSessionTimeout)
and `srvr` (its mode) before the first lease plan. Servers configured each
way: tickTime 400 with minSessionTimeout 400 (below 2 x tick, where the probe's
inference would say 250) and conf answered: the plan pairs with the told 400;
conf not whitelisted anywhere: the inference stands, with one warning; one of
two servers below 2 x tick and the other not answering conf, two servers
disagreeing on tickTime, and a --server-tick shorter than the servers': the
agent exits 78 with one error line naming each server's values and the fix.
A server down at the first connect is asked when the session reconnects:
the lease plans again with what it tells, or the agent stops. A server slow
to answer conf is asked again while the session stays connected."""
import os
import re
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/srvconf"
T = 2000
LOW_MIN = ["minSessionTimeout=400"]
SRVR_ONLY = ["4lw.commands.whitelist=srvr,ruok"]     # (the harness asks ruok)


def lease_line(agent, since=0):
    """The plan once connected: (server tick, where it came from)."""
    ev = agent.wait_for(lambda e: e.get("event") == "log" and
                        e.get("msg", "").startswith("lease ") and
                        "renewal every" in e.get("msg", ""), timeout=10, since=since)
    m = re.search(r"server tick (\d+) ms, (.*)\)$", ev["msg"])
    assert m, ev
    return int(m.group(1)), m.group(2)


def refused(agent, roles=False):
    """Exit 78 with one error line (the refusal), no role taken (unless
    roles); returns the line."""
    assert agent.wait_exit(10) == 78, agent.describe()
    errs = [l for l in agent.other_lines() if "error" in l]
    errs += [e.get("msg", "") for e in agent.find(lambda e: e.get("level") == "error")]
    assert len(errs) == 1, (errs, agent.describe())
    assert roles or not (agent.find("leader") or agent.find("follower")), agent.describe()
    return errs[0]


def test_a_told_tick_replaces_the_grant_s_inference():
    """tickTime 400, minSessionTimeout 400: the probe session asking T/4 =
    500 ms is granted 500, and half of it (250) would be taken for the tick,
    shorter than the real one (docs/design.md, (Z)). conf tells 400: the
    lease pairs with 400, and says so."""
    with h.ZooKeeper(tick=400, extra_cfg=LOW_MIN) as zk:
        a = h.Agent(zk, "a", path=PATH, session_timeout=T, server_tick=None)
        a.wait_for("leader", timeout=10)
        tick, how = lease_line(a)
        assert (tick, how) == (400, "told by every server (conf)"), (tick, how, a.describe())
        assert not a.find(lambda e: e.get("level") in ("warn", "error")), a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def test_conf_not_whitelisted_keeps_the_inference_with_a_warning():
    """The same servers with only srvr whitelisted (conf refused): the
    minimum cannot be seen, the probe's inference stands (250 ms here, wrong:
    what the operator is warned of), one warning says so and how to check."""
    with h.ZooKeeper(tick=400, extra_cfg=SRVR_ONLY) as zk:
        a = h.Agent(zk, "a", path=PATH, session_timeout=T, server_tick=None)
        a.wait_for("leader", timeout=10)
        # (half the session's grant where the probe's came too late: a loaded machine)
        assert lease_line(a) in ((T // 4 // 2, "at most half a probe session's grant"),
                                 (T // 2, "at most half the session timeout")), a.describe()
        warns = a.find(lambda e: e.get("level") == "warn" and "unchecked" in e.get("msg", ""))
        assert len(warns) == 1 and "--server-tick" in warns[0]["msg"] and \
            "4lw.commands.whitelist" in warns[0]["msg"], a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def test_a_minimum_below_two_ticks_with_a_server_silent_refuses():
    """Two servers: one says minSessionTimeout 400 < 2 x tickTime 400, the
    other does not answer conf: the tick cannot be told by all, and the
    inference is known broken: exit 78, one line naming both and the fix."""
    with h.ZooKeeper(tick=400, extra_cfg=LOW_MIN) as z1, \
            h.ZooKeeper(tick=400, extra_cfg=SRVR_ONLY) as z2:
        a = h.Agent(z1, "a", path=PATH, session_timeout=T, server_tick=None,
                    zkhosts="%s,%s" % (z1.hostport, z2.hostport))
        msg = refused(a)
        assert "minSessionTimeout is below 2 x tickTime" in msg and "--server-tick" in msg, msg
        assert "%s tickTime=400 minSessionTimeout=400" % z1.hostport in msg, msg
        assert "%s did not answer conf" % z2.hostport in msg, msg


def test_servers_that_disagree_on_the_tick_refuse():
    """Two servers with tickTime 400 and 200: exit 78, naming both and
    --server-tick 400 (the longest)."""
    with h.ZooKeeper(tick=400) as z1, h.ZooKeeper(tick=200) as z2:
        a = h.Agent(z1, "a", path=PATH, session_timeout=T, server_tick=None,
                    zkhosts="%s,%s" % (z1.hostport, z2.hostport))
        msg = refused(a)
        assert "disagree" in msg and "--server-tick 400" in msg, msg
        assert "%s tickTime=400" % z1.hostport in msg and "%s tickTime=200" % z2.hostport in msg, msg


def test_a_stated_tick_shorter_than_the_servers_refuses():
    """--server-tick 200 against a server whose tickTime is 400: the
    statement is wrong: exit 78, naming the server and --server-tick 400."""
    with h.ZooKeeper(tick=400) as zk:
        a = h.Agent(zk, "a", path=PATH, session_timeout=T, server_tick=200)
        msg = refused(a)
        assert "--server-tick 200 is shorter" in msg and "--server-tick 400" in msg, msg
        assert "%s tickTime=400" % zk.hostport in msg, msg


class CuttingProxy(h.StallProxy):
    """A StallProxy that can cut its connections (the client connects again)."""

    def _pump(self, a, b):
        with self.lock:
            self.__dict__.setdefault("socks", []).extend([a, b])
        super()._pump(a, b)

    def cut(self):
        import socket
        with self.lock:
            socks, self.socks = self.__dict__.get("socks", []), []
        for x in socks:
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def test_a_server_reached_later_plans_again_or_stops():
    """Two servers, the second down at the first connect: the first tells
    tickTime 200 (its minimum 400, 2 ticks), the second nothing, so the
    inference stands (250 ms from the probe's grant) with the warning. The
    second starts, the session's connection is cut, and the second is asked
    (again while connected, or at the reconnection): telling 200 too, the lease plans again with the
    told 200; telling 400 (the servers disagree), the agent stops, exit 78."""
    for tick in (200, 400):
        with h.ZooKeeper() as za, \
                h.ZooKeeper(start=False, tick=tick, extra_cfg=["minSessionTimeout=%d" % (2 * tick)]) as zb, \
                CuttingProxy(za.port) as px:
            # (the client may try the second server first after the cut,
            # which does not know the session: it expires, and the second
            # is asked at the new session's connection; a server that
            # closed without a reply while it started is asked again)
            t = T
            a = h.Agent(za, "a", path=PATH, session_timeout=t, server_tick=None,
                        zkhosts="%s,%s" % (px.hostport, zb.hostport))
            a.wait_for("leader", timeout=10)
            assert lease_line(a) in ((t // 4 // 2, "at most half a probe session's grant"),
                                     (t // 2, "at most half the session timeout")), a.describe()
            assert a.find(lambda e: e.get("level") == "warn" and "unchecked" in e.get("msg", "") and
                          "%s not reached" % zb.hostport in e["msg"]), a.describe()
            # asked again while connected (srvconf_retry) or at the
            # reconnection the cut makes, whichever comes first
            m = a.mark()
            zb.start()
            px.cut()
            if tick == 200:
                assert lease_line(a, since=m) == (200, "told by every server (conf)"), a.describe()
                assert a.alive(), a.describe()
                a.term()
                assert a.wait_exit(10) == 0
            else:
                msg = refused(a, roles=True)
                assert "disagree" in msg and "%s tickTime=400" % zb.hostport in msg, msg


class SlowConfProxy(h.StallProxy):
    """A StallProxy that holds every `conf` asked through it for a while
    (a server that answers conf, but late); the session's bytes pass."""

    DELAY = 1.0

    def _pump(self, a, b):
        a.settimeout(5)
        try:
            first = a.recv(4, __import__("socket").MSG_PEEK)
        except OSError:
            first = b""
        a.settimeout(None)
        if first == b"conf":
            time.sleep(self.DELAY)
        super()._pump(a, b)


def test_a_server_slow_to_answer_conf_is_asked_again_while_connected():
    """tickTime 400, minSessionTimeout 400 behind a proxy that answers conf
    1 s late, past the first asking's deadline (T/4 = 500 ms): the inference
    stands at first (250 ms, wrong), with the warning. Asked again 2 s into
    the session (a round that waits 2 s), the server tells 400 and the lease
    plans again with it, the session never cut."""
    with h.ZooKeeper(tick=400, extra_cfg=LOW_MIN) as zk, SlowConfProxy(zk.port) as px:
        a = h.Agent(zk, "a", path=PATH, session_timeout=T, server_tick=None, zkhosts=px.hostport)
        a.wait_for("leader", timeout=10)
        assert lease_line(a) in ((T // 4 // 2, "at most half a probe session's grant"),
                                 (T // 2, "at most half the session timeout")), a.describe()
        assert a.find(lambda e: e.get("level") == "warn" and "unchecked" in e.get("msg", "")), \
            a.describe()
        a.wait_for(lambda e: e.get("event") == "log" and e.get("msg", "").startswith("lease ") and
                   "server tick 400 ms, told by every server (conf)" in e.get("msg", ""), timeout=10)
        assert not a.find(lambda e: e.get("event") in ("disconnected", "reconnected")), a.describe()
        a.term()
        assert a.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
