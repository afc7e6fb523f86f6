"""Helpers shared by the example-policy tests (tests/integration/test_example_*.py)."""
import os
import subprocess
import time

import zkharness as h


class EnvAgent(h.Agent):
    """An Agent with its own environment additions (each candidate of an
    example gets its own configuration: its namespace, its proxy...)."""

    def __init__(self, zk, id, env=None, **kw):
        self.env_extra = dict(env or {})
        h.Agent.__init__(self, zk, id, **kw)

    def start(self):
        assert self.proc is None, "agent %s started twice" % self.id
        out = open(self.logfile, "wb")
        self.t_start = time.time()
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, cwd=self.dir,
                                     env=h._child_env(self.env_extra), preexec_fn=h._pdeathsig)
        out.close()
        self.pid = self.proc.pid
        return self


def wait_role(a, timeout=15):
    return a.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=timeout)


def script_lines(a, needle, since=0):
    """The agent's `script` log lines (zkelect.log) whose msg contains needle."""
    return [e for e in a.events()[since:]
            if e.get("event") == "script" and needle in str(e.get("msg", ""))]


def assert_root(what):
    # like chaos.suite: without root this is a failure, never a silent skip
    assert os.geteuid() == 0, "%s needs root (run the tests as root)" % what


def sh(args, timeout=10.0, check=True):
    p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (rc %d): %s" % (" ".join(args), p.returncode,
                                                         p.stderr.strip()))
    return p.stdout
