#!/usr/bin/python3
"""zkelect demo: the binary starts its own ZooKeeper (Debian's jar, java)
and four candidates of itself, shows three failovers and removes everything.

- a whole run exits 0 and prints the three failovers with their times: the
  graceful one (SIGTERM) under the session timeout T; the agent's crash
  (SIGKILL to the leader alone: its keeper closes the session, and says so)
  under T/2, before any expiry could have come (the server heard from the
  agent at most T/3 before the kill); the host's crash (the agent and its
  keeper stopped, then killed) not before T/2 after it, when the server
  could first expire the session; afterwards no process of its (java,
  candidates: any process whose command line names its temporary
  directory; the keepers it named) is left, nor the directory;
- SIGINT once the first leader is shown, and SIGTERM while ZooKeeper is
  still starting: exit 130 / 143, nothing left;
- --keep: `zkelect status` against the printed address finds the four
  candidates and a leader; Ctrl-C (SIGINT, the documented way) ends it,
  nothing left;
- ZooKeeper or java missing (--zk-jar, --java, ZKELECT_JAVA, JAVA_HOME at a
  nonexistent path): exit 69, one line naming the package to install.

No ZooKeeper from the harness: the demo starts its own.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

SESSION_MS = 2000   # the demo's default


class Demo:
    """zkelect demo ARGS as a child; its output (stdout and stderr) read by a thread."""

    def __init__(self, *args, env=None):
        self.proc = subprocess.Popen([h.ZKELECT_BIN, "demo"] + list(args), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=h._child_env(env), preexec_fn=h._pdeathsig)
        self.lines = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.lock:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def text(self):
        with self.lock:
            return "\n".join(self.lines)

    def wait_line(self, pattern, timeout):
        rx = re.compile(pattern, re.M)
        found = []

        def seen():
            m = rx.search(self.text())
            if m:
                found.append(m)
                return True
            if self.proc.poll() is not None:
                raise AssertionError("demo exited (%s) before /%s/:\n%s"
                                     % (self.proc.returncode, pattern, self.text()))
            return False
        h.wait_until(seen, timeout=timeout, desc="demo output /%s/" % pattern)
        return found[0]

    def wait_exit(self, timeout):
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError("demo did not exit within %.0f s:\n%s" % (timeout, self.text()))
        self.reader.join(5)
        return code

    def tmpdir(self):
        m = re.search(r"^Files: (/\S+)", self.text(), re.M)
        assert m, "no temporary directory printed:\n" + self.text()
        return m.group(1)


def processes_naming(path):
    """pids of the processes whose command line contains path."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if path.encode() in cmd:
            out.append(int(pid))
    return out


def assert_nothing_left(d, demo):
    """No process of the demo's and no temporary directory (bounded: a JVM
    reaped but its threads' last exits are accounted for at once)."""
    h.wait_until(lambda: not processes_naming(d), timeout=5,
                 desc="no process naming %s (left: %s)" % (d, processes_naming(d)))
    assert not os.path.exists(d), "%s is left:\n%s" % (d, demo.text())


def keepers_named(out):
    """The keepers' pids the demo named (the agent's crash, the host's)."""
    return [int(k2 or k3) for k2, k3 in
            re.findall(r"\(zkelect-guard, pid (\d+)\)|its keeper \(pid (\d+)\)", out)]


def test_three_failovers_then_nothing_left():
    demo = Demo()
    code = demo.wait_exit(150)
    out = demo.text()
    assert code == 0, "exit %s:\n%s" % (code, out)
    graceful = re.search(r"^  graceful failover \(SIGTERM to the leader\):\s+([0-9.]+) ms$", out, re.M)
    agent = re.search(r"^  agent crash \(SIGKILL to the leader, its keeper lives\):\s+([0-9.]+) ms "
                      r"\(its keeper closed the session\)$", out, re.M)
    host = re.search(r"^  host crash \(the leader and its keeper die together\):\s+([0-9.]+) ms "
                     r"\(the session expired\)$", out, re.M)
    assert graceful and agent and host, out
    g, a, c = float(graceful.group(1)), float(agent.group(1)), float(host.group(1))
    # correctness bounds: the graceful one waits for no session timeout; the
    # agent's crash neither (the keeper closed the session: its line says
    # so, and no expiry can come before T/2); the host's crash cannot end
    # before the server could expire the dead session
    assert 0 < g < SESSION_MS, out
    assert 0 < a < SESSION_MS * 0.5, out
    assert c >= SESSION_MS * 0.5, out
    assert re.search(r"^ +[0-9.]+ s  bravo +keeper: the agent's session 0x[0-9a-f]+ is closed "
                     r"\(at 127\.0\.0\.1:\d+, \d+ ms after the agent was gone", out, re.M), out
    assert "charlie  keeper:" not in out, out     # the host's crash: nobody closes
    for name in ("alpha", "bravo", "charlie", "delta"):
        assert re.search(r"\b%s\s+LEADS, epoch \d+" % name, out), out
    # the order of the leaders: one failover each
    leaders = re.findall(r"^ +[0-9.]+ s  (\w+) +LEADS, epoch", out, re.M)
    assert leaders == ["alpha", "bravo", "charlie", "delta"], (leaders, out)
    assert len(re.findall(r"killed by SIGKILL", out)) == 2, out
    assert "== Done." in out, out
    keepers = keepers_named(out)
    assert len(keepers) == 2 and all(k > 0 for k in keepers), (keepers, out)
    h.wait_until(lambda: not set(keepers) & set(h.watchers()), timeout=5,
                 desc="the keepers %s gone" % keepers)
    assert_nothing_left(demo.tmpdir(), demo)


def test_sigint_after_the_first_leader():
    demo = Demo()
    demo.wait_line(r"LEADS, epoch", timeout=90)
    d = demo.tmpdir()
    assert processes_naming(d), "nothing of the demo's runs under %s" % d
    demo.proc.send_signal(signal.SIGINT)
    code = demo.wait_exit(30)
    assert code == 130, "exit %s:\n%s" % (code, demo.text())
    assert "SIGINT: stopping everything" in demo.text(), demo.text()
    assert_nothing_left(d, demo)


def test_a_candidate_that_refuses_to_start_ends_the_demo_at_once():
    """--session-timeout 10 leaves no lease: each candidate refuses to start
    (exit 78, the configuration). The demo says so, with the candidate's own
    error, and exits with its code at once: it had waited out its 20 s step
    bound and blamed a loaded machine (exit 75)."""
    demo = Demo("--session-timeout", "10")
    code = demo.wait_exit(60)
    out = demo.text()
    assert code == 78, "exit %s:\n%s" % (code, out)
    assert "must be at least" in out, out
    assert re.search(r"candidate alpha exited with code 78 while the demo waited for", out), out
    assert "loaded machine" not in out, out
    assert_nothing_left(demo.tmpdir(), demo)


def test_sigterm_while_zookeeper_starts():
    demo = Demo()
    demo.wait_line(r"^Files: /\S+", timeout=30)
    d = demo.tmpdir()
    h.wait_until(lambda: processes_naming(d), timeout=30, desc="java started in %s" % d)
    assert "serves on" not in demo.text(), "ZooKeeper was up already; the test shows nothing"
    demo.proc.send_signal(signal.SIGTERM)
    code = demo.wait_exit(30)
    assert code == 143, "exit %s:\n%s" % (code, demo.text())
    assert_nothing_left(d, demo)


def test_keep_runs_until_ctrl_c():
    demo = Demo("--keep")
    demo.wait_line(r"Press Ctrl-C here", timeout=150)
    out = demo.text()
    d = demo.tmpdir()
    m = re.search(r"zkelect status --zk (127\.0\.0\.1:\d+) --path (\S+)", out)
    assert m, out
    # the failovers are over and the election still runs
    time.sleep(1.0)
    assert demo.proc.poll() is None, out
    st = subprocess.run([h.ZKELECT_BIN, "status", "--zk", m.group(1), "--path", m.group(2), "--json"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, env=h._child_env())
    assert st.returncode == 0, (st.returncode, st.stderr, out)
    doc = json.loads(st.stdout)
    ids = sorted(c["id"] for c in doc["candidates"] if not c.get("gone"))
    assert ids == ["alpha", "bravo", "charlie", "delta"], (doc, out)
    assert doc["leader"] and doc["leader"]["id"] in ids, doc
    # the control socket it printed answers too
    c = re.search(r"zkelect ctl --control (\S+) resign", out)
    assert c, out
    ctl = subprocess.run([h.ZKELECT_BIN, "ctl", "--control", c.group(1), "status", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30, env=h._child_env())
    assert ctl.returncode == 0 and json.loads(ctl.stdout)["role"] == "leader", (ctl, out)
    demo.proc.send_signal(signal.SIGINT)
    code = demo.wait_exit(30)
    assert code == 130, "exit %s:\n%s" % (code, demo.text())
    assert_nothing_left(d, demo)


def missing(args, env, package):
    demo = Demo(*args, env=env)
    code = demo.wait_exit(30)
    lines = [l for l in demo.text().split("\n") if l]
    assert code == 69, "exit %s:\n%s" % (code, demo.text())
    assert len(lines) == 1, lines
    assert lines[0].startswith("zkelect: error: ") and "apt-get install " + package in lines[0], lines


def test_missing_zookeeper_or_java():
    nowhere = "/nonexistent/zkelect-test"
    missing(["--zk-jar", nowhere + "/zookeeper.jar"], None, "zookeeper")
    missing([], {"ZKELECT_ZK_JAR": nowhere + "/zookeeper.jar"}, "zookeeper")
    missing(["--java", nowhere + "/java"], None, "default-jre-headless")
    missing([], {"ZKELECT_JAVA": nowhere + "/java"}, "default-jre-headless")
    missing([], {"JAVA_HOME": nowhere}, "default-jre-headless")
    # both missing: the server's package, which brings a Java runtime along
    missing(["--zk-jar", nowhere + "/z.jar", "--java", nowhere + "/java"], None, "zookeeper")


if __name__ == "__main__":
    h.run_tests(globals(), timeout=180)
