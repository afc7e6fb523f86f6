#!/usr/bin/python3
"""A term holds every process it started, against a real ZooKeeper: the
leader's `-- CMD` starts a daemon that leaves its process group and session
(`setsid -f`) and a double-forked child, as nginx, `pg_ctl start` and
`sudo` under use_pty do. Each must be gone before the successor leads:

- after a graceful stop of the agent (SIGTERM: the step-down ends the
  term's cgroup, and only then is the node released);
- after the keeper's kill of a frozen agent (SIGSTOP: the watcher sends the
  cgroup SIGTERM at the soft end, whose trap runs, and kills it at the hard end);
- after a SIGKILL of the agent (the watcher kills the agent's folder of
  cgroups at once).

Also: the agent says at start where its terms' cgroups are; a daemon that a
command leaves when it exits (nginx with `daemon on` exits at once) runs on
until the step-down; no cgroup is left behind. The process-group fallback
(where no writable cgroup2 exists) is named at start: tested by running the
agent in a cgroup it may not write.

The same for what a policy's term starts (`zkelect.spawn`, and a daemon a
`zkelect.exec` command leaves), and for a `--notify` call: a call that
starts a daemon has ended only once its cgroup is empty.
"""
import calendar
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/contain"
T = 2000


def marker():
    """A number no other process's command line has: the daemons' tag."""
    return "%d%06d" % (os.getpid() % 1000, int(time.monotonic() * 1000) % 1000000)


def daemon_cmd(tag, leave=False):
    """The leader's command: a setsid daemon and a double-forked child, both
    `sleep <tag>N` (recognised by their command lines), then it waits (or,
    with leave, exits at once, as a daemonizing server does). The daemon's
    shell traps TERM: it writes daemon.termed (its undoing of its state)."""
    script = ("setsid -f sh -c 'trap \"echo t > daemon.termed; exit 0\" TERM; sleep %s1 & wait'; "
              "(sh -c 'sleep %s2 & exit 0' &); echo $ZKELECT_EPOCH > up; " % (tag, tag))
    script += "exit 0" if leave else "while :; do sleep 0.05; done"
    return ["--", "sh", "-c", script]


def parent(pid):
    """pid's parent pid, or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def tagged(tag):
    """The pids of the processes whose command line is `sleep <tag>N`."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1].startswith(tag.encode()):
            found.append(int(d))
    return found


def reap_tagged(tag):
    for pid in tagged(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def started(a, tag):
    h.wait_until(lambda: len(tagged(tag)) == 2, 10, "the command's two daemons")
    start = a.find("start")[0]
    folder = start.get("containment", "")
    assert folder.startswith("/") and os.path.isdir(folder), start
    return folder


def _ts_ns(ts):
    """An agent line's "ts" (UTC, microseconds) in ns since the epoch."""
    base, frac = ts.rstrip("Z").split(".")
    return (calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) * 10**9 +
            int(frac.ljust(9, "0")[:9]))


def leaders(zk, tag, extra_a=(), extra_b=()):
    a = h.Agent(zk, "ca", path=PATH, session_timeout=T, extra=list(extra_a) + daemon_cmd(tag))
    la = a.wait_for("leader", timeout=15)
    folder = started(a, tag)
    b = h.Agent(zk, "cb", path=PATH, session_timeout=T, extra=list(extra_b))
    b.wait_for("follower", timeout=15)
    return a, b, la, folder


def successor_after(a, b, stop, tag, what):
    """Stops a (stop(): a.term, a.sigstop) and waits for b to lead; no
    process tagged `tag` may run by then. b's leader line."""
    mb = b.mark()
    stop()
    lb = b.wait_for("leader", timeout=3 * T / 1000 + 5, since=mb)
    left = tagged(tag)
    assert not left, "%s run while the successor leads: %s" % (what, left)
    return lb


def test_a_graceful_stop_ends_the_daemons_before_the_successor_leads():
    tag = marker()
    with h.ZooKeeper() as zk:
        try:
            a, b, la, folder = leaders(zk, tag)
            lb = successor_after(a, b, a.term, tag, "daemons of the old term still")
            assert a.wait_exit(10) == 0, a.describe()
            stop = a.find("cmd_stop")
            assert stop and stop[-1]["cgroup_procs"] >= 2, stop
            assert a.find("cmd_stopped")[-1]["mono_ns"] < lb["mono_ns"]
            assert not os.path.exists(folder), "the cgroup folder %s was left" % folder
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            reap_tagged(tag)


def test_the_keeper_ends_a_frozen_agent_s_daemons():
    tag = marker()
    with h.ZooKeeper() as zk:
        stopped = False
        try:
            a, b, la, folder = leaders(zk, tag)
            t_stop = time.monotonic_ns()
            stopped = True
            lb = successor_after(a, b, a.sigstop, tag, "a frozen leader's daemons")
            termed = os.path.join(a.dir, "daemon.termed")
            assert os.path.exists(termed), "the daemon was never sent SIGTERM (its trap did not run)"
            assert os.stat(termed).st_mtime_ns < _ts_ns(lb["ts"]), "the daemon's trap ran late"
            g = a.find("fail_stop")
            assert g and "SIGTERM to" in g[0]["msg"] and g[0]["mono_ns"] < lb["mono_ns"], g
            print("  info: frozen: the successor led %.0f ms after SIGSTOP; the keeper's SIGTERM "
                  "came %.0f ms before" % ((lb["mono_ns"] - t_stop) / 1e6,
                                           (lb["mono_ns"] - g[0]["mono_ns"]) / 1e6), flush=True)
            assert a.wait_exit(10) == -signal.SIGKILL
            stopped = False
            h.wait_until(lambda: not os.path.exists(folder), 5, "the keeper to remove %s" % folder)
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            if stopped:
                a.sigcont()
            reap_tagged(tag)


def test_a_killed_agent_s_daemons_are_gone_at_once():
    tag = marker()
    with h.ZooKeeper() as zk:
        try:
            a, b, la, folder = leaders(zk, tag)
            t0 = time.monotonic()
            a.kill9()
            h.wait_until(lambda: not tagged(tag), 5, "the killed agent's daemons to be gone")
            print("  info: the daemons were gone %.0f ms after the agent's SIGKILL"
                  % ((time.monotonic() - t0) * 1000), flush=True)
            h.wait_until(lambda: not os.path.exists(folder), 5, "the keeper to remove %s" % folder)
            b.wait_for("leader", timeout=3 * T / 1000 + 5)
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            reap_tagged(tag)


def test_a_daemon_the_command_leaves_runs_until_the_step_down():
    """A command that daemonizes and exits (nginx's `daemon on`): the term
    goes on with its daemon, which ends at the step-down."""
    tag = marker()
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "cl", path=PATH, session_timeout=T, extra=daemon_cmd(tag, leave=True))
        try:
            a.wait_for("leader", timeout=15)
            a.wait_for("cmd_exit", timeout=10)
            h.wait_until(lambda: len(tagged(tag)) == 2, 10, "the daemons the command left")
            time.sleep(2 * T / 1000)        # (renewals go on: nothing ends the term)
            assert len(tagged(tag)) == 2 and not a.find("stepdown"), a.describe()
            a.term()
            assert a.wait_exit(10) == 0, a.describe()
            assert not tagged(tag), "the daemons outlived the term"
        finally:
            reap_tagged(tag)


def test_a_child_that_ignores_sigterm_is_killed_before_the_node_goes():
    """The command dies of the step-down's SIGTERM, a child it started in the
    term's cgroup ignores it: the SIGKILL stays due and ends the child, and
    only then is the node released (it was cancelled with the command's
    exit: the child ran on while the successor led)."""
    tag = marker()
    cmd = ["--", "sh", "-c", "(trap '' TERM; exec sleep %s1) & exec sleep %s2" % (tag, tag)]
    with h.ZooKeeper() as zk:
        try:
            # a step-down budget of 400 ms: the SIGKILL at three eighths of
            # it, the node released at half of it at the latest; with 200 ms
            # the child's reaping under ASan beside other load came after
            # the 25 ms between the two (CI run 59)
            a = h.Agent(zk, "ia", path=PATH, session_timeout=T,
                        extra=["--stepdown-budget", "400"] + cmd)
            a.wait_for("leader", timeout=15)
            h.wait_until(lambda: len(tagged(tag)) == 2, 10, "the command and its child")
            b = h.Agent(zk, "ib", path=PATH, session_timeout=T)
            b.wait_for("follower", timeout=15)
            lb = successor_after(a, b, a.term, tag, "the child that ignores SIGTERM")
            kills = a.find("cmd_kill")
            assert kills and kills[-1]["cgroup_left"] >= 1, a.describe()
            stopped = a.find("cmd_stopped")
            assert stopped and stopped[-1]["mono_ns"] < lb["mono_ns"], a.describe()
            assert a.wait_exit(10) == 0, a.describe()
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            reap_tagged(tag)


def test_no_writable_cgroup_is_said_at_start():
    """An agent that cannot make cgroups (run as nobody, it may not write
    below its own cgroup) says so at start, once, and why; it is then the
    subreaper of its descendants: a daemon the command started (setsid -f:
    its parent exits at once, so the agent adopts it) is killed at the
    step-down, before the agent exits. (A daemon whose parent lives on is
    not: the cgroup tests above.)"""
    tag = marker()
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "cn", path=PATH, session_timeout=T,
                    extra=["--", "sh", "-c", "setsid -f sleep %s1; while :; do sleep 0.05; done"
                           % tag], env={}, start=False)
        a.proc = None
        orig = a.argv
        a.argv = lambda: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + orig()
        os.chmod(a.dir, 0o777)
        a.start()
        try:
            a.wait_for("leader", timeout=15)
            start = a.find("start")[0]
            assert start["containment"] == "process groups, subreaper", start
            w = a.find("containment_groups_only")
            assert len(w) == 1 and "setsid" in w[0]["why"] and "Delegate=yes" in w[0]["why"], w
            # adopted: its parent (setsid -f) gone, the agent its parent now
            # (the step-down came while setsid still lived once: CI run 60)
            h.wait_until(lambda: [parent(p) for p in tagged(tag)] == [a.proc.pid], 10,
                         "the command's daemon, adopted by the agent")
            a.term()
            assert a.wait_exit(10) == 0, a.describe()
            assert not tagged(tag), "the adopted daemon outlived the term"
            k = a.find("orphans_killed")
            assert k and k[0]["killed"] == 1, a.describe()
        finally:
            if a.proc is not None and a.proc.poll() is None:
                a.kill9()
            reap_tagged(tag)


# on_leader starts the daemons (a spawn that waits, as `-- CMD` above) and
# runs a command that leaves a daemon of its own (`pg_ctl start`'s shape)
SPAWN_POLICY = r"""
local tag = os.getenv("ZKT_TAG")
function on_leader(ev)
  assert(zkelect.spawn{ "sh", "-c", os.getenv("ZKT_DAEMONS") })
  local ok, code = zkelect.exec{ "sh", "-c", "setsid -f sleep " .. tag .. "3; exit 0", timeout = 5 }
  assert(ok, "exec: " .. tostring(code))
end
"""


def policy_leaders(zk, tag):
    d = h.mkdtemp("contain-policy")
    script = os.path.join(d, "daemons.lua")
    with open(script, "w") as f:
        f.write(SPAWN_POLICY)
    env = {"ZKT_TAG": tag, "ZKT_DAEMONS": daemon_cmd(tag)[-1]}
    a = h.Agent(zk, "pa", path=PATH, session_timeout=T, script=script, env=env)
    la = a.wait_for("leader", timeout=15)
    h.wait_until(lambda: len(tagged(tag)) == 3, 10, "the term's three daemons")
    folder = a.find("start")[0].get("containment", "")     # (checked after the daemons)
    b = h.Agent(zk, "pb", path=PATH, session_timeout=T)
    b.wait_for("follower", timeout=15)
    return a, b, la, folder


def test_a_policy_s_daemons_end_with_its_term():
    """zkelect.spawn's setsid daemon, its double fork and the daemon a
    zkelect.exec command left are gone before the successor leads, after a
    graceful stop."""
    tag = marker()
    with h.ZooKeeper() as zk:
        try:
            a, b, la, folder = policy_leaders(zk, tag)
            successor_after(a, b, a.term, tag, "a policy's daemons")
            # the term's end sent the daemon SIGTERM (its trap ran), not only the SIGKILL
            assert os.path.exists(os.path.join(a.dir, "daemon.termed")), a.describe()
            assert a.wait_exit(10) == 0, a.describe()
            assert folder.startswith("/"), a.find("start")
            assert not os.path.exists(folder), "the cgroup folder %s was left" % folder
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            reap_tagged(tag)


def test_the_keeper_ends_a_frozen_policy_s_daemons():
    tag = marker()
    with h.ZooKeeper() as zk:
        stopped = False
        try:
            a, b, la, folder = policy_leaders(zk, tag)
            stopped = True
            successor_after(a, b, a.sigstop, tag, "a frozen policy's daemons")
            assert a.wait_exit(10) == -signal.SIGKILL
            stopped = False
            assert folder.startswith("/"), a.find("start")
            h.wait_until(lambda: not os.path.exists(folder), 5, "the keeper to remove %s" % folder)
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            if stopped:
                a.sigcont()
            reap_tagged(tag)


def test_a_notify_call_s_daemon_ends_with_the_call():
    """A leader call that starts a daemon and exits: the call has ended
    only when its cgroup is empty (calls never overlap), so the daemon is
    gone right after notify_exit is logged, and its cgroup removed."""
    tag = marker()
    d = h.mkdtemp("contain-notify")
    notify = os.path.join(d, "notify.sh")
    with open(notify, "w") as f:
        f.write("#!/bin/sh\n[ \"$1\" = leader ] || exit 0\n"
                "setsid -f sleep %s1\nsleep 0.2\necho $(date +%%s%%N) > %s/called\nexit 0\n"
                % (tag, d))
    os.chmod(notify, 0o755)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "na", path=PATH, session_timeout=T, extra=["--notify", notify])
        try:
            a.wait_for("leader", timeout=15)
            ex = a.wait_for("notify_exit", timeout=10)
            assert ex["code"] == 0, ex
            h.wait_until(lambda: not tagged(tag), 2, "the call's daemon to be gone")
            assert os.path.exists(os.path.join(d, "called")), "the call did not run"
            folder = a.find("start")[0].get("containment", "")
            assert folder.startswith("/") and os.path.isdir(folder), a.find("start")
            h.wait_until(lambda: not [e for e in os.listdir(folder) if e.startswith("term-")], 2,
                         "the call's cgroup to be removed")
            a.term()
            assert a.wait_exit(10) == 0, a.describe()
        finally:
            reap_tagged(tag)


if __name__ == "__main__":
    h.run_tests(globals())
