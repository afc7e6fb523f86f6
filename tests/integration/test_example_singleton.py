#!/usr/bin/python3
"""examples/singleton.lua: exactly one copy of the job runs, on the leader,
with the leader's epoch; a hand-over stops the old copy before the new one
starts."""
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

EXAMPLE = os.path.join(h.REPO, "examples", "singleton.lua")
PATH = "/app/singleton"


def copies(job):
    out = subprocess.run(["pgrep", "-f", job], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def stamp(job):
    try:
        return open(job).read().split()
    except OSError:
        return None


def test_singleton_job_follows_the_leader():
    d = h.mkdtemp("singleton")
    job = os.path.join(d, "job-stamp")
    os.environ["JOB_FILE"] = job
    with h.ZooKeeper() as zk:
        a, b = h.start_in_order(zk, ("sa", "sb"), path=PATH, script=EXAMPLE)
        la = a.wait_for("leader", timeout=5)
        h.wait_until(lambda: stamp(job) == ["sa", str(la["epoch"])], 5, "the job on sa")
        assert len(copies(job)) == 1, copies(job)
        old = copies(job)[0]
        mb = b.mark()
        a.term()
        lb = b.wait_for("leader", timeout=5, since=mb)
        assert a.wait_exit(10) == 0
        assert old not in copies(job), "the old leader's job survived its term"
        h.wait_until(lambda: stamp(job) == ["sb", str(lb["epoch"])], 5, "the job on sb")
        time.sleep(1.2)
        assert len(copies(job)) == 1 and stamp(job) == ["sb", str(lb["epoch"])], copies(job)
        b.term()
        assert b.wait_exit(10) == 0
        h.wait_until(lambda: not copies(job), 5, "no job after the last leader left")


if __name__ == "__main__":
    h.run_tests(globals())
