#!/usr/bin/python3
"""zkelect run ... -- CMD: leadership as a supervised process, against a
real ZooKeeper.

The command (CMD below, a Python script) appends one JSON record per step
to a shared file: its start (with its pid, process group, ZKELECT_*
variables, CLOCK_MONOTONIC in ns, and which earlier commands it finds still
alive: the fence-like check, done by the command itself), its stop on
SIGTERM and its exit. Every candidate of a test writes to the same file, on
the same clock.

- only the leader's command runs; after SIGTERM of the leader its command
  is dead (its stop stamp, its pid gone) before the successor's starts, also
  when it ignores SIGTERM (SIGKILL after the grace);
- a crashing command is restarted with a doubling delay, in the same term;
  --restart on-failure leaves a clean exit alone, --restart always does not;
- --on-exit exit: the agent steps down, releases its node and exits with the
  command's code; --on-exit resign hands leadership over;
- with --script, on_leader runs first and the command starts once it is done;
- a frozen agent (SIGSTOP, --fail-stop groups): the guard kills the command's
  group (grandchild included) before a successor leads.
"""
import json
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/cmd"

CMD = r'''
import json, os, signal, subprocess, sys, time
log, mode = sys.argv[1], sys.argv[2]

def now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)

def rec(kind, **kw):
    kw.update(kind=kind, pid=os.getpid(), t=now(), epoch=os.environ.get("ZKELECT_EPOCH"),
              id=os.environ.get("ZKELECT_ID"))
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(kw) + "\n").encode())
    os.close(fd)

def dead(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True

def alive_others():
    pids = set()
    try:
        with open(log) as f:
            for line in f:
                r = json.loads(line)
                for k in ("pid", "gc"):
                    if r.get(k) and r[k] != os.getpid():
                        pids.add(r[k])
    except OSError:
        pass
    return sorted(p for p in pids if not dead(p))

# the handler first: a SIGTERM right after the start record is written
# must leave a stop record, not kill the process by default
def on_term(sig, frame):
    rec("stop")
    os._exit(0)

if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, on_term)

others = alive_others()
gc = None
if mode == "grandchild":
    gc = subprocess.Popen(["sleep", "1000"]).pid
rec("start", others=others, pgid=os.getpgid(0), sid=os.getsid(0), gc=gc,
    env={k: v for k, v in os.environ.items() if k.startswith("ZKELECT_")},
    argv=sys.argv[3:])
if mode.startswith("exit:"):
    _, after, code = mode.split(":")
    time.sleep(float(after))
    rec("exit", code=int(code))
    sys.exit(int(code))
while True:
    time.sleep(0.05)
'''


def setup(name):
    d = h.mkdtemp("cmd-" + name)
    script = os.path.join(d, "cmd.py")
    with open(script, "w") as f:
        f.write(CMD)
    return d, script, os.path.join(d, "records")


def records(log, kind=None):
    try:
        with open(log) as f:
            rs = [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []
    return [r for r in rs if kind is None or r["kind"] == kind]


def wait_records(log, kind, n=1, timeout=10.0, **match):
    def got():
        rs = [r for r in records(log, kind) if all(r.get(k) == v for k, v in match.items())]
        return rs if len(rs) >= n else None
    return h.wait_until(got, timeout=timeout, desc="%d %s record(s) %s in %s" % (n, kind, match, log))


def agent(zk, id, cmd, log, mode, extra=(), **kw):
    return h.Agent(zk, id, path=PATH, extra=list(extra) + ["--", sys.executable, cmd, log, mode, "arg with space"],
                   **kw)


def assert_no_overlap(log):
    """Every command found no earlier one alive at its start, and each one's
    start comes after the previous one's last record."""
    starts = records(log, "start")
    for r in starts:
        assert r["others"] == [], "command %d started while %s still ran:\n%s" % (
            r["pid"], r["others"], json.dumps(records(log), indent=1))
    rs = records(log)
    for i, r in enumerate(rs):
        if r["kind"] == "start":
            for p in rs[:i]:
                assert p["t"] <= r["t"], (p, r)


def test_only_the_leader_runs_it_and_terms_never_overlap():
    d, script, log = setup("handover")
    with h.ZooKeeper() as zk:
        a1 = agent(zk, "c1", script, log, "sleep")
        lead = a1.wait_for("leader", timeout=15)
        a2 = agent(zk, "c2", script, log, "stubborn")
        a2.wait_for("follower", timeout=15)
        st = wait_records(log, "start", id="c1")[0]
        # the leader's command: its own process group, the term's variables, argv as given
        assert st["pgid"] == st["pid"] and st["pgid"] != os.getpgid(a1.pid), st
        env = st["env"]
        assert env["ZKELECT_EPOCH"] == str(lead["epoch"]) and env["ZKELECT_ID"] == "c1", env
        assert env["ZKELECT_ROLE"] == "leader" and env["ZKELECT_PATH"] == PATH, env
        assert env["ZKELECT_NODE"] == lead["node"], (env, lead)
        assert st["argv"] == ["arg with space"], st
        cs = a1.wait_for("cmd_start", timeout=5)
        assert cs["pid"] == st["pid"] and cs["epoch"] == lead["epoch"], cs
        # only the leader's: nothing from the follower for a while
        time.sleep(1.0)
        assert [r["id"] for r in records(log, "start")] == ["c1"], records(log)
        assert not a2.find("cmd_start")
        # SIGTERM: the command stops before the node goes, the successor's starts after
        m2 = a2.mark()
        a1.term()
        assert a1.wait_exit(10) == 0
        nl = a2.wait_for("leader", timeout=10, since=m2)
        st2 = wait_records(log, "start", id="c2")[0]
        stop1 = wait_records(log, "stop", id="c1")[0]
        assert stop1["t"] < st2["t"], (stop1, st2)
        assert st2["env"]["ZKELECT_EPOCH"] == str(nl["epoch"]) and nl["epoch"] > lead["epoch"]
        sd = a1.find("stepdown")[0]
        stopped = a1.wait_for("cmd_stopped", timeout=1)
        assert sd["_i"] < stopped["_i"], a1.describe()
        assert not h.pid_alive(st["pid"])
        # the successor's command ignores SIGTERM: SIGKILL after the grace, still
        # dead before the agent exits and releases its node
        a3 = agent(zk, "c3", script, log, "sleep")
        a3.wait_for("follower", timeout=15)
        m3 = a3.mark()
        a2.term()
        assert a2.wait_exit(10) == 0
        kill = a2.wait_for("cmd_kill", timeout=1)
        assert kill["pid"] == st2["pid"], kill
        a3.wait_for("leader", timeout=10, since=m3)
        wait_records(log, "start", id="c3")
        assert not h.pid_alive(st2["pid"])
        assert_no_overlap(log)
        a3.term()
        assert a3.wait_exit(10) == 0
        wait_records(log, "stop", id="c3")


def test_a_crashing_command_is_restarted_with_backoff():
    d, script, log = setup("restart")
    with h.ZooKeeper() as zk:
        a = agent(zk, "r1", script, log, "exit:0:3", extra=["--restart", "on-failure"])
        lead = a.wait_for("leader", timeout=15)
        rs = wait_records(log, "start", n=5, timeout=40)
        # same term, one at a time, each delay at least the doubling backoff's
        # (200, 400, 800, 1600 ms; lower bounds only)
        assert {r["epoch"] for r in rs} == {str(lead["epoch"])}, rs
        for i in range(1, 5):
            gap = (rs[i]["t"] - rs[i - 1]["t"]) / 1e9
            assert gap >= 0.2 * 2 ** (i - 1) * 0.95, "restart %d after %.3f s" % (i, gap)
        exits = a.events("cmd_exit")
        assert exits and all(e["code"] == 3 and e["action"] == "restart" for e in exits), exits
        assert not a.find("stepdown"), a.describe()
        assert_no_overlap(log)
        a.term()
        assert a.wait_exit(10) == 0

    # on-failure: a clean exit is the end of the command's work for this term
    d, script, log = setup("clean")
    with h.ZooKeeper() as zk:
        a = agent(zk, "r2", script, log, "exit:0:0")
        a.wait_for("leader", timeout=15)
        e = a.wait_for("cmd_exit", timeout=10)
        assert e["code"] == 0 and e["action"] == "none", e
        time.sleep(1.0)
        assert len(records(log, "start")) == 1, records(log)
        assert not a.find("stepdown") and a.alive()
        a.term()
        assert a.wait_exit(10) == 0
        # --restart always restarts it
        b = agent(zk, "r3", script, log, "exit:0:0", extra=["--restart", "always"])
        b.wait_for("leader", timeout=15)
        wait_records(log, "start", n=3, timeout=10, id="r3")
        b.term()
        assert b.wait_exit(10) == 0


def test_on_exit_exit_ends_the_agent_with_the_code():
    d, script, log = setup("exit")
    with h.ZooKeeper() as zk:
        a1 = agent(zk, "e1", script, log, "exit:0.5:7", extra=["--on-exit", "exit"])
        lead = a1.wait_for("leader", timeout=15)
        a2 = agent(zk, "e2", script, log, "sleep")
        a2.wait_for("follower", timeout=15)
        m2 = a2.mark()
        assert a1.wait_exit(15) == 7, a1.describe()
        sd = a1.find("stepdown")
        assert sd and sd[0]["reason"] == "shutdown", a1.describe()
        a2.wait_for("leader", timeout=10, since=m2)
        st2 = wait_records(log, "start", id="e2")[0]
        ex1 = records(log, "exit")[0]
        assert ex1["t"] < st2["t"]
        h.wait_until(lambda: h.sid(lead["session"]) not in zk.ephemerals(), timeout=5,
                     desc="the old leader's node released")
        assert_no_overlap(log)
        # killed by a signal: 128 + its number
        m2 = a2.mark()
        a3 = agent(zk, "e3", script, log, "sleep", extra=["--on-exit", "exit"])
        a3.wait_for("follower", timeout=15)
        a2.term()
        assert a2.wait_exit(10) == 0
        a3.wait_for("leader", timeout=10)
        st3 = wait_records(log, "start", id="e3")[0]
        os.kill(st3["pid"], signal.SIGKILL)
        assert a3.wait_exit(10) == 128 + signal.SIGKILL, a3.describe()


def test_on_exit_resign_hands_leadership_over():
    d, script, log = setup("resign")
    with h.ZooKeeper() as zk:
        a1 = agent(zk, "s1", script, log, "exit:0.5:1", extra=["--on-exit", "resign"])
        a1.wait_for("leader", timeout=15)
        a2 = agent(zk, "s2", script, log, "sleep")
        a2.wait_for("follower", timeout=15)
        m2 = a2.mark()
        sd = a1.wait_for("stepdown", timeout=10)
        assert sd["reason"] == "resign", sd
        a2.wait_for("leader", timeout=10, since=m2)
        a1.wait_for("follower", timeout=10, since=sd["_i"])
        st2 = wait_records(log, "start", id="s2")[0]
        assert records(log, "exit")[0]["t"] < st2["t"]
        assert len([r for r in records(log, "start") if r["id"] == "s1"]) == 1
        assert a1.alive()
        assert_no_overlap(log)
        h.stop_cleanly([a1, a2], 10)


def test_with_a_script_on_leader_runs_first():
    d, script, log = setup("script")
    policy = os.path.join(d, "policy.lua")
    with open(policy, "w") as f:
        f.write('function on_leader(ev)\n  zkelect.log("info", "on_leader begins")\n'
                '  zkelect.sleep(0.5)\n  zkelect.log("info", "on_leader ends")\nend\n'
                'function on_stepdown(ev) zkelect.log("info", "on_stepdown " .. ev.reason) end\n')
    with h.ZooKeeper() as zk:
        a = agent(zk, "p1", script, log, "sleep", script=policy)
        a.wait_for("leader", timeout=15)
        ends = a.wait_for(lambda e: "on_leader ends" in str(e.get("msg")), timeout=10)
        cs = a.wait_for("cmd_start", timeout=5)
        assert ends["_i"] < cs["_i"], a.describe()
        st = wait_records(log, "start")[0]
        a.term()
        assert a.wait_exit(10) == 0
        a.wait_for(lambda e: "on_stepdown shutdown" in str(e.get("msg")), timeout=1)
        assert records(log, "stop")[0]["pid"] == st["pid"]


def test_frozen_agent_the_guard_kills_the_command():
    d, script, log = setup("frozen")
    with h.ZooKeeper() as zk:
        a1 = agent(zk, "f1", script, log, "grandchild", extra=["--fail-stop", "groups"])
        a1.wait_for("leader", timeout=15)
        st = wait_records(log, "start", id="f1")[0]
        a2 = agent(zk, "f2", script, log, "sleep")
        a2.wait_for("follower", timeout=15)
        m2 = a2.mark()
        a1.sigstop()
        try:
            h.wait_until(lambda: not h.pid_alive(st["pid"]) and not h.pid_alive(st["gc"]),
                         timeout=10, desc="the frozen leader's command and its grandchild killed")
            a2.wait_for("leader", timeout=15, since=m2)
            wait_records(log, "start", id="f2")
            assert_no_overlap(log)
        finally:
            a1.sigcont()
        a1.wait_for("stepdown", timeout=10)
        h.stop_cleanly([a1, a2], 10)


if __name__ == "__main__":
    h.run_tests(globals())
