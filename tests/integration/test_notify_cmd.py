#!/usr/bin/python3
"""--notify CMD (the keepalived way): CMD EVENT ROLE EPOCH REASON on every
transition, one call at a time, in event order, each within its budget; a
stepdown's call ends before the successor leads; a stepdown ends its term's
leader-side calls; a call past --notify-timeout is killed and the queue goes
on; what a call leaves in its process group is killed when it ends."""
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/notify"
SESSION_MS = 4000


def notify_script(d, name, body_by_event=None, sleep=0.4):
    """An executable sh script that appends 'start T PID ARGV... ENV' and 'end T PID EVENT'
    lines (wall clock, ns) to d/name.log, sleeping `sleep` s in between (or running
    body_by_event[EVENT] instead). Returns (script, log)."""
    log = os.path.join(d, name + ".log")
    script = os.path.join(d, name + ".sh")
    cases = ""
    for ev, body in (body_by_event or {}).items():
        cases += "  %s) %s ;;\n" % (ev, body)
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "echo \"start $(date +%%s.%%N) $$ $# $1 $2 $3 $4 id=$ZKELECT_ID ev=$ZKELECT_EVENT "
                "epoch=$ZKELECT_EPOCH leader=${ZKELECT_LEADER:-}\" >> %s\n"
                "case \"$1\" in\n%s  *) sleep %s ;;\nesac\n"
                "echo \"end $(date +%%s.%%N) $$ $1\" >> %s\n" % (log, cases, sleep, log))
    os.chmod(script, 0o755)
    return script, log


def calls(log):
    """[{event, role, epoch, reason, start, end, pid, argc, env...}] in start order."""
    out, by_pid = [], {}
    if not os.path.exists(log):
        return out
    with open(log) as f:
        for line in f:
            w = line.split()
            if w[0] == "start":
                c = {"start": float(w[1]), "pid": w[2], "argc": int(w[3]), "event": w[4],
                     "role": w[5], "epoch": int(w[6]), "reason": w[7], "end": None}
                for kv in w[8:]:
                    k, _, v = kv.partition("=")
                    c["env_" + k] = v
                out.append(c)
                by_pid[w[2]] = c
            elif w[0] == "end":
                by_pid[w[2]]["end"] = float(w[1])
    return out


def assert_one_at_a_time(cs, who):
    for a, b in zip(cs, cs[1:]):
        assert a["end"] is None or b["start"] >= a["end"], "%s: calls overlap: %s and %s" % (who, a, b)
        # a call killed before its end line: its successor still starts after it began
        assert b["start"] >= a["start"], (who, a, b)


def test_calls_in_order_one_at_a_time_across_failovers():
    d = h.mkdtemp("notify")
    with h.ZooKeeper() as zk:
        agents, logs = [], {}
        for name in ("n1", "n2", "n3"):
            script, log = notify_script(d, name)
            logs[name] = log
            a = h.Agent(zk, name, path=PATH, session_timeout=SESSION_MS,
                        extra=["--notify", script, "--stepdown-budget", "2000"])
            a.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=15)
            agents.append(a)
        n1, n2, n3 = agents
        lead1 = n1.wait_for("leader", timeout=1)
        # n2's follower call (0.4 s) is still running when n1 stops: n2's leader
        # call waits behind it
        h.wait_until(lambda: calls(logs["n2"]), timeout=5, desc="n2's follower call started")
        m2 = n2.mark()
        n1.term()
        assert n1.wait_exit(10) == 0
        lead2 = n2.wait_for("leader", timeout=5, since=m2)
        assert lead2["epoch"] > lead1["epoch"]

        # n1: leader then stepdown, in order, one at a time; the stepdown call ended
        # before n2 led (the node was held for it) and before n1 exited
        c1 = calls(logs["n1"])
        assert [(c["event"], c["role"], c["epoch"], c["reason"]) for c in c1] == [
            ("leader", "leader", lead1["epoch"], lead1["reason"]),
            ("stepdown", "idle", lead1["epoch"], "shutdown")], c1
        assert all(c["argc"] == 4 and c["env_id"] == "n1" and c["env_ev"] == c["event"] for c in c1), c1
        assert_one_at_a_time(c1, "n1")
        assert c1[1]["end"] is not None, c1
        assert c1[1]["end"] <= lead2["_t"], "n2 led at %.3f, before n1's stepdown call ended at %.3f" % (
            lead2["_t"], c1[1]["end"])

        # n2: follower (behind n1), then leader, one after the other
        h.wait_until(lambda: len(calls(logs["n2"])) == 2 and calls(logs["n2"])[1]["end"], timeout=5,
                     desc="n2's leader call ended")
        c2 = calls(logs["n2"])
        assert [(c["event"], c["role"]) for c in c2] == [("follower", "follower"), ("leader", "leader")], c2
        assert c2[0]["env_leader"] == "n1" and c2[0]["epoch"] in (0, lead1["epoch"]), c2
        assert c2[1]["epoch"] == lead2["epoch"] and c2[1]["reason"] == lead2["reason"], (c2, lead2)
        assert_one_at_a_time(c2, "n2")
        assert c2[1]["start"] >= c2[0]["end"], c2

        # a crash: n2 SIGKILLed, n3 leads once the session expires
        m3 = n3.mark()
        n2.kill9()
        lead3 = n3.wait_for("leader", timeout=20, since=m3)
        assert lead3["epoch"] > lead2["epoch"]
        h.wait_until(lambda: len(calls(logs["n3"])) == 2 and calls(logs["n3"])[1]["end"], timeout=5,
                     desc="n3's leader call ended")
        c3 = calls(logs["n3"])
        assert [(c["event"], c["epoch"], c["reason"]) for c in c3] == [
            ("follower", c3[0]["epoch"], c3[0]["reason"]), ("leader", lead3["epoch"], lead3["reason"])], c3
        assert_one_at_a_time(c3, "n3")
        # the call's own log ends before its process does: the agent logs
        # notify_exit once it has reaped it
        h.wait_until(lambda: len([e for e in n3.events() if e.get("event") == "notify_exit"]) >= 2,
                     timeout=5, desc="n3's notify_exit of the leader call")
        done = [e for e in n3.events() if e.get("event") == "notify_exit"]
        assert [e["call"] for e in done] == ["follower", "leader"] and all(e["code"] == 0 for e in done), done
        n3.term()
        assert n3.wait_exit(10) == 0
        c3 = calls(logs["n3"])
        assert [c["event"] for c in c3] == ["follower", "leader", "stepdown"], c3
        assert_one_at_a_time(c3, "n3")


def test_stepdown_ends_the_terms_calls_and_the_budget_kills():
    d = h.mkdtemp("notify-budget")
    with h.ZooKeeper() as zk:
        # the leader call hangs: the stepdown ends it (SIGTERM to its group) and
        # its own call runs; the agent exits well within the default 10 s budget
        script, log = notify_script(d, "hang", {"leader": "sleep 30"}, sleep=0.05)
        a = h.Agent(zk, "hang", path=PATH, session_timeout=SESSION_MS,
                    extra=["--notify", script, "--stepdown-budget", "2000"])
        a.wait_for("leader", timeout=10)
        h.wait_until(lambda: calls(log), timeout=5, desc="the leader call started")
        t0 = time.time()
        a.term()
        assert a.wait_exit(10) == 0
        assert time.time() - t0 < 5, "exit took %.1fs" % (time.time() - t0)
        cs = calls(log)
        assert [c["event"] for c in cs] == ["leader", "stepdown"], cs
        assert cs[0]["end"] is None and cs[1]["end"] is not None, cs
        ex = [e for e in a.events() if e.get("event") == "notify_exit"]
        assert ex and ex[0].get("ended_by") == "stepdown" and ex[0].get("signal"), a.describe()

        # --notify-timeout: a follower call that hangs (and leaves a process in its
        # group) is killed after 500 ms, its leftover too, and the queue goes on
        pidfile = os.path.join(d, "leftover.pid")
        script2, log2 = notify_script(
            d, "slow", {"follower": "sleep 300 & echo $! > %s; sleep 30" % pidfile}, sleep=0.05)
        lead = h.Agent(zk, "lead", path=PATH, session_timeout=SESSION_MS)
        lead.wait_for("leader", timeout=10)
        f = h.Agent(zk, "slow", path=PATH, session_timeout=SESSION_MS,
                    extra=["--notify", script2, "--notify-timeout", "500"])
        f.wait_for("follower", timeout=10)
        h.wait_until(lambda: os.path.exists(pidfile) and open(pidfile).read().strip(), timeout=5,
                     desc="the leftover's pid")
        leftover = int(open(pidfile).read())
        lm = f.mark()
        lead.term()
        assert lead.wait_exit(10) == 0
        nl = f.wait_for("leader", timeout=5, since=lm)
        to = f.wait_for("notify_timeout", timeout=5)
        assert to["timeout_ms"] == 500, to
        h.wait_until(lambda: len(calls(log2)) == 2 and calls(log2)[1]["end"], timeout=5,
                     desc="the leader call after the killed one")
        cs = calls(log2)
        assert [c["event"] for c in cs] == ["follower", "leader"] and cs[0]["end"] is None, cs
        assert cs[1]["epoch"] == nl["epoch"], (cs, nl)
        # the next call starts only once the hanging one was killed (its
        # 500 ms is to["timeout_ms"]; the calls' own stamps are late by
        # their start-up, so no duration is read from them)
        assert cs[1]["start"] >= h.parse_ts(to["ts"]) - 0.001, (cs, to)
        ex = [e for e in f.events() if e.get("event") == "notify_exit"]
        assert ex[0].get("ended_by") == "timeout", f.describe()
        h.wait_until(lambda: not h.pid_alive(leftover), timeout=3, desc="the call's leftover killed")
        f.term()
        assert f.wait_exit(10) == 0


def test_a_stepdown_call_past_the_hold_is_named():
    """A stepdown call that runs past half the step-down budget: the node is
    released then, and the warning names the --notify call that held it
    (it named on_stepdown, which this agent does not have)."""
    d = h.mkdtemp("notify-hold")
    script, log = notify_script(d, "hold", {"stepdown": "sleep 1"}, sleep=0.05)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "hold", path=PATH, session_timeout=SESSION_MS, extra=["--notify", script])
        a.wait_for("leader", timeout=10)
        a.wait_for("notify_exit", timeout=5, call="leader")
        m = a.mark()
        a.term()
        w = a.wait_for(lambda e: "still holding our node" in e.get("msg", ""), timeout=5, since=m)
        half = SESSION_MS // 10 // 2
        assert w["level"] == "warn", w
        assert ("after half the step-down budget (%d ms): the --notify stepdown call; releasing it "
                "now" % half) in w["msg"], w
        assert "on_stepdown" not in w["msg"], w
        assert a.wait_exit(10) == 0
        ex = a.find("notify_exit", call="stepdown")
        assert ex and ex[0]["code"] == 0 and w["_i"] < ex[0]["_i"], a.describe()


def test_frozen_agent_the_guard_kills_the_leader_call():
    """A leader-side call is a duty of the term: when the agent is frozen
    (SIGSTOP), the fail-stop watcher kills it, and what it started, before
    a successor leads (with --fail-stop groups, the agent itself is spared)."""
    d = h.mkdtemp("notify-frozen")
    with h.ZooKeeper() as zk:
        pidfile = os.path.join(d, "duty.pid")
        script, log = notify_script(
            d, "frozen", {"leader": "sleep 300 & echo \"$$ $!\" > %s; wait" % pidfile}, sleep=0.05)
        a1 = h.Agent(zk, "fz1", path=PATH, session_timeout=SESSION_MS,
                     extra=["--notify", script, "--fail-stop", "groups"])
        a1.wait_for("leader", timeout=10)
        h.wait_until(lambda: os.path.exists(pidfile) and len(open(pidfile).read().split()) == 2,
                     timeout=5, desc="the leader call and its child started")
        call_pid, child_pid = (int(x) for x in open(pidfile).read().split())
        a2 = h.Agent(zk, "fz2", path=PATH, session_timeout=SESSION_MS)
        a2.wait_for("follower", timeout=10)
        m2 = a2.mark()
        a1.sigstop()
        try:
            h.wait_until(lambda: not h.pid_alive(call_pid) and not h.pid_alive(child_pid),
                         timeout=SESSION_MS / 1000 + 5, desc="the frozen leader's call killed")
            # the watcher logs its kills right after them (the same log)
            fs = a1.wait_for("fail_stop", timeout=5)
            l2 = a2.wait_for("leader", timeout=15, since=m2)
            assert l2["mono_ns"] > fs["mono_ns"], ("the successor led before the call was killed",
                                                   fs, l2)
        finally:
            a1.sigcont()
        a1.wait_for("stepdown", timeout=10)
        h.stop_cleanly([a1, a2], 10)


if __name__ == "__main__":
    h.run_tests(globals())
