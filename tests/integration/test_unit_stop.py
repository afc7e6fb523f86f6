#!/usr/bin/python3
"""The units' stop as systemd 252 runs it, around a real ZooKeeper election
(root: a cgroup of its own under the cgroup2 mount, named like a service's,
standing for the unit's; the agent and its keeper run in it, the next in
line outside). No systemd runs here: `Stop` follows src/core/service.c
and unit.c (unit_kill_context) for the KillMode= of the rendered unit, and
runs its ExecStop=/ExecStopPost= lines in the cgroup's ".control", where
systemd starts the control processes of a Delegate=yes unit.

* The agent crashes (SIGKILL): systemd skips ExecStop= (the main process
  failed) and, under KillMode=mixed, SIGKILLs the whole cgroup at once, the
  keeper in the middle of its fence (0.2 s here) with it: the next in line
  waits for the expiry. Under the units' KillMode=process nothing is
  signalled; ExecStopPost= (`zkelect-guard --stop`) returns only after the
  keeper ran the fence, closed the session and exited, and the next in line
  led within T/4 of the crash; a stray process of the unit is SIGKILLed
  then, and the cgroup is empty.
* `systemctl stop`: SIGTERM to the agent only, which steps down and exits 0;
  ExecStopPost= returns once the keeper is gone, the stray SIGKILLed.
* --stop's bound: a keeper that does not end is SIGKILLed after MS; SIGTERM
  (systemd's TimeoutStopSec=) ends the wait at once.
"""
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import test_units as tu  # noqa: E402
from test_failstop import Duty  # noqa: E402

PATH = "/app/unit-stop"
T = 4000
FAST_S = T / 4 / 1000.0         # the takeover bound after the keeper's close
POLICY = os.path.join(h.POLICIES, "failstop.lua")
GUARD_BIN = os.path.join(os.path.dirname(h.ZKELECT_BIN), "zkelect-guard")


def require_root():
    assert os.geteuid() == 0, "test_unit_stop needs root (a cgroup of its own): run it as root"


def own_cgroup():
    """This process's cgroup v2 directory (where an agent makes its own)."""
    with open("/proc/self/mountinfo") as f:
        mounts = [l.partition(" - ")[0].split() for l in f if " - cgroup2 " in l]
    mnt = [m[4] for m in mounts if m[3] == "/"]
    assert mnt, "no cgroup2 hierarchy is mounted"
    with open("/proc/self/cgroup") as f:
        own = [l.strip()[3:] for l in f if l.startswith("0::/")]
    assert own, "no cgroup v2 path in /proc/self/cgroup"
    return mnt[0] + own[0].rstrip("/")


def live(pid):
    return h.pid_alive(pid)


class UnitCgroup:
    """zkelect-test-PID-N.service below our own cgroup: the unit's cgroup,
    and its .control."""

    def __init__(self):
        require_root()
        self.path = os.path.join(own_cgroup(), "zkelect-test-%d-%s.service"
                                 % (os.getpid(), uuid.uuid4().hex[:8]))
        os.mkdir(self.path)
        self.control = os.path.join(self.path, ".control")

    def enter(self, argv, sub=None):
        """argv, run with its process moved into the cgroup (or sub) first."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', sub or self.path] + list(argv)

    def pids(self, skip_control=False):
        """The live processes of the cgroup and those below it."""
        found = []
        for top, dirs, files in os.walk(self.path):
            if skip_control and top == self.control:
                dirs[:] = []
                continue
            try:
                with open(os.path.join(top, "cgroup.procs")) as f:
                    found += [int(x) for x in f.read().split() if live(int(x))]
            except OSError:
                pass
        return found

    def kill_all(self):
        """SIGKILL to every process (KillMode=mixed's SIGKILL, and the cleanup)."""
        for _ in range(100):
            pids = self.pids()
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.02)
        raise AssertionError("the test's cgroup did not empty: %s" % self.pids())

    def remove(self):
        self.kill_all()
        for top, dirs, files in sorted(os.walk(self.path), key=lambda t: -len(t[0])):
            try:
                os.rmdir(top)
            except OSError:
                pass


class Stop:
    """systemd 252's stop of the rendered unit (KillMode= mixed or process):
    its ExecStop= and ExecStopPost= lines run in .control with the unit's
    Environment=, each bounded by TimeoutStopSec= (then SIGTERM, as
    FINAL_SIGTERM does, then SIGKILL)."""

    def __init__(self, template, cg, d):
        svc = tu.parse_unit(os.path.join(tu.UNITS, template))["Service"]
        self.svc, self.cg, self.dir = svc, cg, d
        keys = dict(svc)
        self.kill_mode = keys.get("KillMode", "control-group")
        assert self.kill_mode in ("mixed", "process"), "KillMode=%s is not emulated" % self.kill_mode
        assert keys.get("Delegate") == "yes", keys
        self.timeout = float(keys["TimeoutStopSec"].rstrip("s"))
        self.env = {}
        for k, v in svc:
            if k == "Environment":
                for a in shlex.split(tu.specifiers(v, "")):
                    name, _, val = a.partition("=")
                    self.env[name] = val
        self.runs = []

    def lines(self, key):
        out = []
        for k, v in self.svc:
            if k == key:
                argv = tu.exec_argv(v, "", self.env)
                name = os.path.basename(argv[0])
                assert name in ("zkelect", "zkelect-guard"), argv
                out.append([os.path.join(os.path.dirname(h.ZKELECT_BIN), name)] + argv[1:])
        return out

    def control(self, argv, extra_env):
        """A control process in .control: (exit code, monotonic end, log)."""
        os.makedirs(self.cg.control, exist_ok=True)
        log = os.path.join(self.dir, "control-%d.log" % len(self.runs))
        env = tu.clean_env(dict(self.env, **extra_env))
        with open(log, "wb") as out:
            p = subprocess.Popen(self.cg.enter(argv, sub=self.cg.control), stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=h._pdeathsig)
        code = h._wait_proc(p, self.timeout)
        if code is None:                        # FINAL_SIGTERM, then FINAL_SIGKILL
            p.send_signal(signal.SIGTERM)
            code = h._wait_proc(p, self.timeout)
            if code is None:
                p.kill()
                code = p.wait(10)
        run = {"argv": argv, "code": code, "end_ns": time.monotonic_ns(), "log": log}
        self.runs.append(run)
        return run

    def _post(self, result):
        """ExecStopPost=, then FINAL_SIGTERM (the main and control
        processes only) and FINAL_SIGKILL (mixed: the whole cgroup)."""
        for argv in self.lines("ExecStopPost"):
            self.control(argv, result)
        if self.kill_mode == "mixed":
            self.cg.kill_all()

    def after_crash(self):
        """The main process died of SIGKILL: service_sigchld_event ->
        service_enter_running(SERVICE_FAILURE_SIGNAL) ->
        service_enter_signal(SERVICE_STOP_SIGTERM): ExecStop= is skipped.
        STOP_SIGTERM reaches the main and control processes only (both
        gone); STOP_SIGKILL (unit_kill_context, KILL_KILL) SIGKILLs the whole
        cgroup under KillMode=mixed, nothing under process. Then
        service_enter_stop_post."""
        if self.kill_mode == "mixed":
            self.cg.kill_all()
        self._post({"SERVICE_RESULT": "signal", "EXIT_CODE": "killed", "EXIT_STATUS": "KILL"})

    def systemctl_stop(self, agent):
        """ExecStop= ($MAINPID set), SIGTERM to the main process (mixed and
        process: it alone), its exit awaited up to TimeoutStopSec (then
        SIGKILL: mixed to the whole cgroup, process to it alone), then
        ExecStopPost=. The agent's exit code."""
        for argv in self.lines("ExecStop"):
            self.control(argv, {"MAINPID": str(agent.pid)})
        if agent.alive():
            agent.term()
        code = h._wait_proc(agent.proc, self.timeout)
        if code is None:
            if self.kill_mode == "mixed":
                self.cg.kill_all()
            agent.stop()
        self._post({"SERVICE_RESULT": "success", "EXIT_CODE": "exited", "EXIT_STATUS": str(code)})
        return code


def unit_stop_line(run):
    with open(run["log"]) as f:
        lines = [json.loads(l) for l in f.read().splitlines() if l.startswith("{")]
    found = [l for l in lines if l.get("event") == "unit_stop"]
    assert len(found) == 1, open(run["log"]).read()
    return found[0]


def keeper_of(agent):
    pids = h.wait_until(lambda: h.watchers(ppid=agent.pid), 10, "the keeper of %s" % agent.id)
    assert len(pids) == 1, pids
    return pids[0]


def closed_lines(agent):
    return [e for e in agent.find("fail_stop") if "is closed" in e.get("msg", "")]


def line_up(zk, cg, d, extra=()):
    """The leader in the unit's cgroup (its duty, its keeper), the next in
    line outside it, a stray process of the unit that no term holds."""
    os.environ["ZKT_DIR"] = d
    os.environ["ZKT_STALL_ID"] = ""
    os.environ["ZKT_STALL_N"] = "0"
    old = h.Agent(zk, "u1", path=PATH, script=POLICY, session_timeout=T, extra=list(extra), start=False)
    argv = old.argv
    old.argv = lambda: cg.enter(argv())
    old.start()
    lead = old.wait_for("leader", timeout=15)
    duty = Duty(old)
    nxt = h.Agent(zk, "u2", path=PATH, script=POLICY, session_timeout=T)
    nxt.wait_for("follower", timeout=15)
    keeper = keeper_of(old)
    assert old.pid in cg.pids() and keeper in cg.pids(), (old.pid, keeper, cg.pids())
    folder = old.find("start")[0].get("containment", "")
    assert folder.startswith(cg.path + "/zkelect-"), (folder, cg.path)
    stray = h.spawn_logged(cg.enter(["setsid", "sleep", "600"]), os.path.join(d, "stray.log"))
    h.wait_until(lambda: stray.pid in cg.pids(), 10, "the stray in the unit's cgroup")
    return old, nxt, lead, duty, keeper, stray


def test_a_crash_the_keeper_closes_the_session_before_the_rest_is_killed():
    with h.ZooKeeper() as zk:
        cg = UnitCgroup()
        d = h.mkdtemp("unit-stop")
        fence_out = os.path.join(d, "fenced")
        fence = os.path.join(d, "fence")
        with open(fence, "w") as f:
            f.write('#!/bin/sh\nsleep 0.2\necho "$1 $2" >> %s\n' % fence_out)
        os.chmod(fence, 0o755)
        duty = None
        try:
            old, nxt, lead, duty, keeper, stray = line_up(zk, cg, d, ["--fence", fence])
            stop = Stop("zkelect.service", cg, d)
            mark = nxt.mark()
            t_kill = time.monotonic_ns()
            old.kill9()
            stop.after_crash()
            nl = nxt.wait_for("leader", timeout=3 * T / 1000 + 5, since=mark)
            dt = (nl["mono_ns"] - t_kill) / 1e9
            print("  info: the successor led %.1f ms after the crash" % (dt * 1000), flush=True)
            assert dt <= FAST_S, "led %.3f s after the crash: the keeper did not close the session " \
                "(its lines: %s)" % (dt, [e["msg"] for e in old.find("fail_stop")])
            posts = [r for r in stop.runs if "--stop" in r["argv"]]
            assert posts, "no ExecStopPost= runs zkelect-guard --stop: %s" % stop.runs
            post = posts[0]
            print("  info: ExecStopPost= returned %.1f ms after the crash"
                  % ((post["end_ns"] - t_kill) / 1e6), flush=True)
            # it returned only after the keeper closed the session and exited
            assert post["code"] == 0, post
            assert not live(keeper), "the keeper outlived ExecStopPost="
            closed = closed_lines(old)
            assert closed and closed[0]["mono_ns"] < post["end_ns"], (closed, old.find("fail_stop"))
            line = unit_stop_line(post)
            print("  info: %s" % line["msg"], flush=True)
            # (the keeper, in its fence when --stop started, unless that
            # start took longer than the fence; and, where --stop looked
            # between the fence's fork and its exec, that child too: it
            # still bears the keeper's name, as under ASan beside the suite)
            assert line["keepers"] <= 2 and line["killed"] == 1 and line["level"] == "info", line
            assert line["id"] == tu.HOST and line["cgroup"] == cg.path, line
            # nothing lost: the duty, its grandchild and the fence ended
            # first, the session was closed (not expired), the stray and
            # the agent's cgroups are gone
            assert duty.gone() and duty.last() < nl["mono_ns"], (duty.last(), nl)
            with open(fence_out) as f:
                assert f.read().split() == [str(lead["epoch"]), "agent_gone"]
            assert nl["epoch"] > lead["epoch"], (nl, lead)
            old_session = h.sid(lead["session"])
            assert old_session not in zk.ephemerals() and not zk.session_expired(old_session)
            assert not live(stray.pid) and cg.pids(skip_control=True) == [], cg.pids()
            assert not os.path.exists(old.find("start")[0]["containment"])
            h.stop_cleanly([nxt], 10)
        finally:
            if duty is not None:
                duty.kill()
            cg.remove()


def test_systemctl_stop_steps_down_then_the_rest_is_killed():
    with h.ZooKeeper() as zk:
        cg = UnitCgroup()
        d = h.mkdtemp("unit-stop")
        duty = None
        try:
            old, nxt, lead, duty, keeper, stray = line_up(zk, cg, d)
            stop = Stop("zkelect.service", cg, d)
            mark = nxt.mark()
            code = stop.systemctl_stop(old)
            assert code == 0 and old.find("stepdown"), old.describe()
            nl = nxt.wait_for("leader", timeout=10, since=mark)
            assert nl["epoch"] > lead["epoch"], (nl, lead)
            posts = [r for r in stop.runs if "--stop" in r["argv"]]
            assert posts and posts[0]["code"] == 0, stop.runs
            assert not live(old.pid) and not live(keeper), "the agent or its keeper outlived ExecStopPost="
            line = unit_stop_line(posts[0])
            assert line["killed"] == 1 and line["level"] == "info", line
            assert not live(stray.pid) and cg.pids(skip_control=True) == [], cg.pids()
            assert duty.gone()
            assert not closed_lines(old), old.find("fail_stop")     # the agent closed it itself
            h.stop_cleanly([nxt], 10)
        finally:
            if duty is not None:
                duty.kill()
            cg.remove()


def test_stop_waits_for_a_keeper_at_most_its_bound_or_until_sigterm():
    """A keeper that does not end (a process named zkelect-guard that
    sleeps): --stop 500 SIGKILLs it after 0.5 s and says so; SIGTERM ends a
    long wait at once."""
    cg = UnitCgroup()
    d = h.mkdtemp("unit-stop")
    fake = os.path.join(d, "zkelect-guard")
    with open("/bin/sleep", "rb") as src, open(fake, "wb") as dst:
        dst.write(src.read())
    os.chmod(fake, 0o755)
    try:
        env = tu.clean_env({"ZKELECT_LOG": "json", "ZKELECT_ID": "u9"})
        for ms, term in ((500, False), (60000, True)):
            k = h.spawn_logged(cg.enter([fake, "600"]), os.path.join(d, "fake.log"))
            h.wait_until(lambda: k.pid in cg.pids(), 10, "the fake keeper in the cgroup")
            os.makedirs(cg.control, exist_ok=True)
            log = os.path.join(d, "stop-%d.log" % ms)
            t0 = time.monotonic()
            with open(log, "wb") as out:
                p = subprocess.Popen(cg.enter([GUARD_BIN, "--stop", str(ms)], sub=cg.control),
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     env=env, preexec_fn=h._pdeathsig)
            if term:
                def waiting():
                    try:
                        with open("/proc/%d/comm" % p.pid) as f:
                            return f.read().strip() == "zkelect-stop"
                    except OSError:
                        return False
                h.wait_until(waiting, 10, "--stop waiting")
                p.send_signal(signal.SIGTERM)
            assert h._wait_proc(p, 20) == 0, open(log).read()
            took = time.monotonic() - t0
            line = unit_stop_line({"log": log})
            print("  info: --stop %d%s returned after %.0f ms" % (ms, " (SIGTERM)" if term else "",
                                                               took * 1000), flush=True)
            assert line["level"] == "warn" and line["keepers"] == 1 and line["killed"] == 1, line
            assert "had not ended" in line["msg"] and ("(stop signal)" in line["msg"]) == term, line
            assert line["id"] == "u9", line
            if term:
                assert took < 10, took
            else:
                assert line["waited_ms"] >= 500 and took < 10, (line, took)
            code = h._wait_proc(k, 10)
            assert code == -signal.SIGKILL, (code, open(log).read())
            assert cg.pids(skip_control=True) == [], (cg.pids(), open(log).read())
    finally:
        cg.remove()


if __name__ == "__main__":
    h.run_tests(globals())
