#!/usr/bin/python3
"""A hook that raises never kills the agent: the error is logged as a
hook_error event with a traceback naming the script file and line, the agent
keeps running, and SIGTERM still stops it cleanly (exit 0)."""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/election"
SCRIPT = os.path.join(h.POLICIES, "hook_error.lua")


def marker_line(marker):
    with open(SCRIPT) as f:
        for n, line in enumerate(f, start=1):
            if marker in line:
                return n
    raise AssertionError("marker %s not in %s" % (marker, SCRIPT))


def check_hook_error(ev, hook, text, line):
    assert ev.get("hook") == hook, ev
    msg = ev.get("msg")
    assert isinstance(msg, str), ev
    where = "hook_error.lua:%d:" % line
    assert where in msg, "hook_error for %s does not name %s: %r" % (hook, where, msg)
    assert text in msg, "hook_error for %s lacks %r: %r" % (hook, text, msg)
    assert "traceback" in msg, "hook_error for %s has no traceback: %r" % (hook, msg)
    assert ev.get("level") in ("error", "warn"), ev


def test_failing_hooks_do_not_kill_the_agent():
    with h.ZooKeeper() as zk:
        plain = h.Agent(zk, "plain", path=PATH)
        plain.wait_for("leader", timeout=15)
        e = h.Agent(zk, "err", path=PATH, script=SCRIPT)

        # on_follower raises
        e.wait_for("follower", timeout=15)
        he = e.wait_for("hook_error", timeout=10)
        check_hook_error(he, "on_follower", "boom-follower", marker_line("MARK:follower"))
        assert e.alive()

        # the follower keeps its place: it takes over when the leader leaves
        m = e.mark()
        plain.term()
        assert plain.wait_exit(10) == 0
        le = e.wait_for("leader", timeout=5, since=m)

        # on_leader raises too
        he = e.wait_for("hook_error", timeout=10, since=le["_i"])
        check_hook_error(he, "on_leader", "boom", marker_line("MARK:leader"))

        # still running, still a candidate (whatever the failed-leader policy
        # does, it must not be dead): it rejoins the election with a new node.
        # (Its node lives only from a join to the next failed on_leader, a few
        # ms between back-offs, so polling the server for it would be a race.)
        j = e.wait_for("joined", timeout=15, since=he["_i"])
        assert j.get("node") and j["node"] != le.get("node"), (j, le)
        assert e.alive(), e.describe()

        e.term()
        assert e.wait_exit(10) == 0, e.describe()
        e.wait_for("stopped", timeout=1, since=le["_i"])
        out = "\n".join(e.other_lines())
        assert not h.crash_markers(out), out


if __name__ == "__main__":
    h.run_tests(globals())
