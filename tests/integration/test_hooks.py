#!/usr/bin/python3
"""Lua hooks get the documented ev fields (checked against the JSON events of
the same agent), zkelect.status() agrees, and zkelect.resign() from on_leader
hands leadership over."""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"
LOG_HOOKS = os.path.join(h.POLICIES, "log_hooks.lua")
RESIGN = os.path.join(h.POLICIES, "resign_once.lua")


def parse_kv(msg):
    out = {}
    for part in msg.split():
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


def hook_calls(agent, hook, since=0):
    """Parsed `script` log lines of the given hook, in order."""
    out = []
    for e in agent.events()[since:]:
        if e.get("event") == "script" and isinstance(e.get("msg"), str):
            kv = parse_kv(e["msg"])
            if kv.get("hook") == hook:
                kv["_i"] = e["_i"]
                kv["_level"] = e.get("level")
                out.append(kv)
    return out


def wait_hook(agent, hook, since=0, timeout=10):
    def got():
        calls = hook_calls(agent, hook, since)
        return calls[0] if calls else None
    try:
        return h.wait_until(got, timeout=timeout, desc="%s: hook %s" % (agent.id, hook))
    except h.Timeout:
        raise AssertionError("%s: no %s hook logged; last events:\n%s" % (agent.id, hook, agent.describe(15)))


def common(kv, agent, ev):
    """Fields every hook gets, compared with the agent's own JSON event."""
    assert kv.get("id") == agent.id, kv
    assert kv.get("path") == PATH, kv
    assert kv.get("node") == ev["node"], (kv, ev)
    assert kv.get("seq") == str(ev["seq"]), (kv, ev)
    assert "session" in kv and h.sid(kv["session"]) == agent.session(), (kv, agent.session())
    assert kv.get("reason") not in (None, "", "nil"), kv


def test_hook_fields_and_status():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "ha", path=PATH, script=LOG_HOOKS)
        la = a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "hb", path=PATH, script=LOG_HOOKS)
        fb = b.wait_for("follower", timeout=15)
        c = h.Agent(zk, "hc", path=PATH, script=LOG_HOOKS, data="data-of-hc")
        fc = c.wait_for("follower", timeout=15)

        # on_leader
        k = wait_hook(a, "on_leader")
        assert k["_level"] == "info", k
        common(k, a, la)
        assert k.get("epoch") == str(la["epoch"]), "epoch %r in Lua, %r in the log" % (k.get("epoch"), la["epoch"])
        assert k.get("candidates") == str(la["candidates"]), (k, la)
        assert k.get("status.role") == "leader", k
        assert k.get("status.node") == la["node"] and k.get("status.epoch") == str(la["epoch"]), k

        # on_follower (leader = the leader's id: it has no --data)
        k = wait_hook(b, "on_follower")
        common(k, b, fb)
        assert k.get("leader") == "ha", k
        assert k.get("leader_node") == la["node"] and k.get("predecessor") == la["node"], (k, la)
        assert k.get("position") == "1", k
        assert k.get("status.role") == "follower" and k.get("status.position") == "1", k
        assert k.get("status.leader") == "ha", k
        k = wait_hook(c, "on_follower")
        common(k, c, fc)
        assert k.get("position") == "2" and k.get("predecessor") == fb["node"], (k, fb)
        assert k.get("leader_node") == la["node"], k

        # on_predecessor_change: the middle candidate leaves
        marks = {x: x.mark() for x in (a, b, c)}
        b.term()
        assert b.wait_exit(10) == 0
        pc = c.wait_for("predecessor_change", timeout=5, since=marks[c])
        assert pc["old"] == fb["node"] and pc["new"] == la["node"] and pc["position"] == 1, pc
        k = wait_hook(c, "on_predecessor_change", since=marks[c])
        assert k.get("old") == fb["node"] and k.get("new") == la["node"] and k.get("position") == "1", k
        assert k.get("id") == "hc" and k.get("node") == fc["node"], k
        assert not c.find("leader", since=marks[c])
        h.assert_quiet([a], marks, 0.3)

        # on_stepdown: the leader is stopped
        ma = a.mark()
        ma_ns = time.monotonic_ns()
        a.term()
        assert a.wait_exit(10) == 0
        k = wait_hook(a, "on_stepdown", since=ma, timeout=1)
        assert k.get("reason") == "shutdown" and k.get("epoch") == str(la["epoch"]), (k, la)
        assert k["_level"] == "warn", k
        assert k.get("id") == "ha" and k.get("node") == la["node"], k
        assert "at_ns" not in k, "a SIGTERM step-down has no ZooKeeper message behind it: %r" % k
        # ... and it ran before the agent said it stopped
        st = a.wait_for("stopped", timeout=1, since=ma)
        assert k["_i"] < st["_i"], a.describe()

        # c leads; a new follower reads c's published data as its leader
        lc = c.wait_for("leader", timeout=5, since=marks[c])
        k = wait_hook(c, "on_leader", since=marks[c])
        common(k, c, lc)
        # ev.at: the deletion notification was read before the agent logged
        # the event, and zkelect.clock() is on the same clock as mono_ns
        assert "at_ns" in k and "age_us" in k, k
        assert int(k["at_ns"]) <= lc["mono_ns"] + 1000, (k, lc)
        assert 0 <= int(k["age_us"]) < 5000000, k
        assert int(k["at_ns"]) >= ma_ns, (k, ma_ns)
        assert k.get("epoch") == str(lc["epoch"]) and lc["epoch"] > la["epoch"], (k, lc, la)
        if "previous" in k:
            assert k["previous"] == "ha", k
        d = h.Agent(zk, "hd", path=PATH, script=LOG_HOOKS)
        fd = d.wait_for("follower", timeout=15)
        assert fd["leader"] == "hc" and fd["leader_data"] == "data-of-hc", fd
        assert fd["leader_epoch"] == lc["epoch"] or "leader_epoch" not in fd, (fd, lc)
        k = wait_hook(d, "on_follower")
        assert k.get("leader") == "hc" and k.get("leader_data") == "data-of-hc" and k.get("leader_node") == lc["node"], k
        assert k.get("position") == "1", k

        for x in (c, d):
            x.term()
        for x in (c, d):
            assert x.wait_exit(10) == 0
            hook_errors = x.events("hook_error")
            assert not hook_errors, hook_errors


def test_resign_from_on_leader():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "ra", path=PATH)
        la = a.wait_for("leader", timeout=15)
        b = h.Agent(zk, "rb", path=PATH, script=RESIGN)
        fb = b.wait_for("follower", timeout=15)
        c = h.Agent(zk, "rc", path=PATH)
        fc = c.wait_for("follower", timeout=15)
        assert fc["position"] == 2
        marks = {x: x.mark() for x in (a, b, c)}

        a.term()                      # b leads, and resigns at once
        assert a.wait_exit(10) == 0
        lb = b.wait_for("leader", timeout=5, since=marks[b])
        assert lb["node"] == fb["node"] and lb["epoch"] > la["epoch"], (lb, la)
        sd = b.wait_for("stepdown", timeout=5, since=lb["_i"])
        assert sd["reason"] == "resign" and sd["node"] == fb["node"] and sd["epoch"] == lb["epoch"], sd
        call = [e for e in b.find("script", since=marks[b]) if "resign_called" in e.get("msg", "")]
        assert call and "ok=true" in call[0]["msg"], b.describe()
        k = wait_hook(b, "on_stepdown", since=marks[b])
        assert k.get("reason") == "resign", k

        # c takes over; b comes back at the back of the line, as a follower of c
        lc = c.wait_for("leader", timeout=5, since=marks[c])
        assert lc["node"] == fc["node"] and lc["epoch"] > lb["epoch"], (lc, lb)
        assert lc["_t"] >= sd["_t"], "c led before b's step-down finished"
        j = b.wait_for("joined", timeout=10, since=sd["_i"])
        assert j["node"] != fb["node"] and h.node_seq(j["node"]) > h.node_seq(fc["node"]), (j, fc)
        f2 = b.wait_for("follower", timeout=10, since=j["_i"])
        assert f2["leader"] == "rc" and f2["leader_node"] == fc["node"] and f2["position"] == 1, f2
        assert len(b.find("leader", since=marks[b])) == 1, b.describe()
        assert h.leaders_now([b, c]) == [c]
        assert not b.events("hook_error"), b.describe()

        h.stop_cleanly([b, c], 10)


if __name__ == "__main__":
    h.run_tests(globals())
