#!/usr/bin/python3
"""Crashes (SIGKILL) against a real ZooKeeper, T = 2 s.

* The agent's process alone (its keeper, the fail-stop watcher, lives): the
  keeper kills the term's processes, runs the fence, then closes the
  session with its id and password, so the next in line leads at once:
  within T/4 (docs/design.md states the bound), and after the old duty's
  last stamp, its grandchild's end and the fence's end. A follower's
  death moves the line up at once too.
* The agent and its keeper together (the host, the VM, the container):
  nobody closes; the next in line leads only once the server expired the
  session, as the bare recipe does (>= T/2 after the kill: the last touch
  the server heard is at most T/3 old).
* The keeper cannot close (no server answers: the agent's connection goes
  through a proxy that holds every byte) or must not (its fence failed):
  the session expires as usual, and the keeper's line says which.
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
from test_failstop import Duty  # noqa: E402

PATH = "/app/kill9"
T = 2000
FAST_S = T / 4 / 1000.0        # the takeover bound after a closed session
POLICY = os.path.join(h.POLICIES, "failstop.lua")


def script(d, name, body):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\n%s\n" % body)
    os.chmod(p, 0o755)
    return p


def keeper_of(agent):
    pids = h.wait_until(lambda: h.watchers(ppid=agent.pid), 10, "the keeper of %s" % agent.id)
    assert len(pids) == 1, pids
    return pids[0]


def keeper_lines(agent, text, since=0):
    return [e for e in agent.find("fail_stop", since=since) if text in e.get("msg", "")]


def line_up(zk, names, extra=(), script=POLICY):
    os.environ["ZKT_DIR"] = h.mkdtemp("kill9")
    os.environ["ZKT_STALL_ID"] = ""
    os.environ["ZKT_STALL_N"] = "0"
    agents = []
    for n in names:
        a = h.Agent(zk, n, path=PATH, script=script, session_timeout=T, extra=list(extra))
        a.wait_for("leader" if not agents else "follower", timeout=15)
        agents.append(a)
    return agents


def test_kill9_leader_keeper_closes_the_session():
    with h.ZooKeeper() as zk:
        d = h.mkdtemp("fence")
        fence_out = os.path.join(d, "fenced")
        fence = ["--fence", script(d, "fence", 'echo "$1 $2" >> %s' % fence_out)]
        old, nxt, third = line_up(zk, ("k1", "k2", "k3"), extra=fence)
        lead = old.last("leader")
        duty = Duty(old)
        keeper_of(old)
        old_session = h.sid(lead["session"])
        marks = {a: a.mark() for a in (old, nxt, third)}
        try:
            t_kill = time.monotonic_ns()
            old.kill9()
            nl = nxt.wait_for("leader", timeout=3 * T / 1000, since=marks[nxt])
            dt = (nl["mono_ns"] - t_kill) / 1e9
            print("  info: the successor led %.1f ms after the SIGKILL" % (dt * 1000), flush=True)
            closed = h.wait_until(lambda: keeper_lines(old, "is closed"), 5, "the keeper's close")
            assert "0x%x" % old_session in closed[0]["msg"], closed
            assert dt <= FAST_S, "took over %.3f s after the SIGKILL: the keeper did not close " \
                "the session (%s)" % (dt, old.find("fail_stop"))
            assert nl["epoch"] > lead["epoch"], (nl, lead)
            # order: the duty's last stamp, its grandchild's end and the fence,
            # then the close (logged once answered: the successor may be
            # first), then the successor
            assert duty.last() < nl["mono_ns"], (duty.last(), nl)
            assert duty.gone()
            fenced = keeper_lines(old, "the fence for term %d (agent_gone) succeeded" % lead["epoch"])
            assert fenced and fenced[0]["mono_ns"] < nl["mono_ns"], (fenced, nl)
            assert fenced[0]["_i"] < closed[0]["_i"], (fenced, closed)
            with open(fence_out) as f:
                assert f.read().split() == [str(lead["epoch"]), "agent_gone"]
            assert old_session not in zk.ephemerals()
            assert not zk.session_expired(old_session)
            # the third (behind the successor) was not disturbed
            h.assert_quiet([third], marks, 0.2)
            h.stop_cleanly([nxt, third], 10)
        finally:
            duty.kill()


def test_kill9_follower_moves_the_line_up_at_once():
    with h.ZooKeeper() as zk:
        lead, mid, last = line_up(zk, ("f1", "f2", "f3"), script=None)
        keeper_of(mid)
        marks = {a: a.mark() for a in (lead, mid, last)}
        t_kill = time.monotonic_ns()
        mid.kill9()
        f3 = last.wait_for("predecessor_change", timeout=3 * T / 1000, since=marks[last])
        dt = (f3["mono_ns"] - t_kill) / 1e9
        print("  info: the next in line moved up %.1f ms after the SIGKILL" % (dt * 1000),
              flush=True)
        assert f3["position"] == 1 and f3["new"] == lead.last("leader")["node"], f3
        assert dt <= FAST_S, (dt, mid.find("fail_stop"))
        assert h.wait_until(lambda: keeper_lines(mid, "is closed"), 5, "the keeper's close")
        h.assert_quiet([lead], marks, 0.2)
        h.stop_cleanly([lead, last], 10)


def test_kill9_agent_and_keeper_together_waits_for_the_expiry():
    with h.ZooKeeper() as zk:
        old, nxt = line_up(zk, ("h1", "h2"), script=None)
        lead = old.last("leader")
        keeper_of(old)
        mark = nxt.mark()
        t_kill = time.monotonic_ns()
        old.kill9_with_keeper()     # (the agent stopped first: see there)
        nl = nxt.wait_for("leader", timeout=3 * T / 1000 + 5, since=mark)
        dt = (nl["mono_ns"] - t_kill) / 1e9
        print("  info: the successor led %.3f s after the crash (T = %d ms)" % (dt, T), flush=True)
        assert dt >= T / 2 / 1000.0, "led %.3f s after the crash: before the expiry" % dt
        assert not keeper_lines(old, "session"), old.find("fail_stop")
        assert h.sid(lead["session"]) not in zk.ephemerals()
        h.wait_until(lambda: zk.session_expired(h.sid(lead["session"])), 5, "the server's expiry")
        h.stop_cleanly([nxt], 10)


def test_kill9_after_a_new_session_closes_that_one():
    """The agent's first session expired (closed by a tool with its
    password) and it joined again on a new one: the keeper closes the new
    session, never the old one."""
    with h.ZooKeeper() as zk:
        sf = os.path.join(h.mkdtemp("sess"), "session")
        a = h.Agent(zk, "s1", path=PATH, session_timeout=T, session_file=sf, session_password=True)
        a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "s2", path=PATH, session_timeout=T)
        b.wait_for("follower", timeout=15)
        s1 = h.sid(a.last("leader")["session"])
        h.wait_until(lambda: (h.read_session_file(sf) or (0,))[0] == s1, 5, "the session file")
        mark = a.mark()
        h.expire_session(zk, sf)
        a.wait_for("follower", timeout=3 * T / 1000 + 5, since=mark)
        s2 = h.sid(a.last("follower")["session"]) if "session" in a.last("follower") else \
            h.sid(a.find("session", since=mark)[-1]["session"])
        assert s2 != s1, (s1, s2)
        keeper_of(a)
        t_kill = time.monotonic_ns()
        a.kill9()
        closed = h.wait_until(lambda: keeper_lines(a, "is closed"), 5, "the keeper's close")
        assert "0x%x" % s2 in closed[0]["msg"] and "0x%x" % s1 not in closed[0]["msg"], closed
        h.wait_until(lambda: s2 not in zk.ephemerals(), 5, "the new session's node to go")
        print("  info: the new session's node was gone %.0f ms after the SIGKILL"
              % ((time.monotonic_ns() - t_kill) / 1e6), flush=True)
        assert not zk.session_expired(s2)
        h.stop_cleanly([b], 10)


def test_keeper_that_cannot_close_leaves_the_session_to_expire():
    with h.ZooKeeper() as zk:
        with h.StallProxy(zk.port) as px:
            old = h.Agent(zk, "p1", path=PATH, session_timeout=T, zkhosts=px.hostport)
            old.wait_for("leader", timeout=15)
            nxt = h.Agent(zk, "p2", path=PATH, session_timeout=T)
            nxt.wait_for("follower", timeout=15)
            keeper_of(old)
            mark = nxt.mark()
            px.hold(3 * T / 1000)       # nothing passes either way: no server answers
            t_kill = time.monotonic_ns()
            old.kill9()
            nl = nxt.wait_for("leader", timeout=3 * T / 1000 + 5, since=mark)
            dt = (nl["mono_ns"] - t_kill) / 1e9
            assert dt >= T / 2 / 1000.0, "led %.3f s after the kill" % dt
            line = h.wait_until(lambda: keeper_lines(old, "is not closed"), T / 1000 + 5,
                                "the keeper's reason")[0]
            print("  info: %s" % line["msg"], flush=True)
            assert "no server took the close" in line["msg"] and px.hostport in line["msg"], line
            assert line["level"] == "warn", line
            h.wait_until(lambda: zk.session_expired(h.sid(old.last("leader")["session"])), 5,
                         "the server's expiry")
            h.stop_cleanly([nxt], 10)


def test_keeper_whose_fence_fails_leaves_the_session_to_expire():
    with h.ZooKeeper() as zk:
        failing = script(h.mkdtemp("fence"), "fence", "exit 3")
        old, nxt = line_up(zk, ("x1", "x2"), extra=["--fence", failing], script=None)
        keeper_of(old)
        mark = nxt.mark()
        t_kill = time.monotonic_ns()
        old.kill9()
        nl = nxt.wait_for("leader", timeout=3 * T / 1000 + 5, since=mark)
        dt = (nl["mono_ns"] - t_kill) / 1e9
        assert dt >= T / 2 / 1000.0, "led %.3f s after the kill" % dt
        line = h.wait_until(lambda: keeper_lines(old, "is not closed"), 5, "the reason")[0]
        assert "a fence failed" in line["msg"], line
        assert keeper_lines(old, "failed: exit 3"), old.find("fail_stop")
        h.wait_until(lambda: zk.session_expired(h.sid(old.last("leader")["session"])), 5,
                     "the server's expiry")
        h.stop_cleanly([nxt], 10)


if __name__ == "__main__":
    h.run_tests(globals())
