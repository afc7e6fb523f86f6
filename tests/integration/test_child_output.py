#!/usr/bin/python3
"""What the agent's children write is log records, never raw bytes in the
agent's log (issue 35, item 2), against a real ZooKeeper:

- the issue's command line, `--log json --notify ./fail.sh -- sh -c 'echo
  hi; exec sleep 60'`: every line of the agent's stderr is a JSON object,
  and the command's `hi` is a `child_output` record naming the child, its
  pid, its term and the stream; the notify calls' lines too, with the call;
- `--log text`: the same record as a text line, and no bare `hi`;
- any bytes: invalid UTF-8 becomes U+FFFD, NUL and tabs are escaped, a long
  line is cut at 2048 bytes (said), before a UTF-8 character the cut
  would split, a last line without a newline is logged at the end;
- a flood (200,000 lines and a 100 kB line at once): the child is never
  blocked (it ends within seconds), its lines are logged at their rate
  (500 at once, 333 a second), the rest is counted in
  `child_output_dropped` records, the agent's memory stays flat and it
  keeps leading;
- 24 children of a policy flooding at once with a session timeout of
  2000 ms: the leader keeps its lease, its renewals at their pace; a
  flooding child with the agent's log a full pipe nobody reads: every line
  logged or counted (`log_full`); a command that floods on SIGTERM: the
  step-down does not wait for its lines; a run's drops are said once its
  output ended, not at the step-down;
- a policy's zkelect.spawn children: records with `child=spawn`, the
  child's pid and its term's epoch (0 outside a term);
- a daemon the command leaves holds the pipes until the step-down empties
  the term's cgroup: over several terms the agent's descriptors do not
  grow.
"""
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/childout"

FAIL_SH = """#!/bin/sh
echo "notify $1 $2 $3 $4"
echo "oops from $1" >&2
printf 'no newline'
exit 1
"""


def script(d, name, text, mode=0o755):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text)
    os.chmod(p, mode)
    return p


def json_lines(a):
    """Every line of the agent's stderr (and stdout) as a JSON object: any
    other line, or bytes that are not UTF-8, fail."""
    with open(a.logfile, "rb") as f:
        raw = f.read()
    out = []
    for i, line in enumerate(raw.split(b"\n")):
        if not line:
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except ValueError as e:
            raise AssertionError("line %d of %s's log is not a JSON object (%s): %r"
                                 % (i + 1, a.id, e, line[:300]))
        assert isinstance(obj, dict), line
        out.append(obj)
    assert raw.endswith(b"\n"), "the log ends in a partial line: %r" % raw[-200:]
    return out


def outputs(a, **match):
    return [e for e in a.find("child_output") if all(e.get(k) == v for k, v in match.items())]


def test_the_issue_command_line_logs_json_lines_only():
    d = h.mkdtemp("childout-issue")
    fail = script(d, "fail.sh", FAIL_SH)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "j1", path=PATH, log="json",
                    extra=["--notify", fail, "--", "sh", "-c", "echo hi; exec sleep 60"])
        lead = a.wait_for("leader", timeout=15)
        cs = a.wait_for("cmd_start", timeout=5)
        hi = a.wait_for("child_output", timeout=5, line="hi")
        assert hi["child"] == "cmd" and hi["pid"] == cs["pid"], (hi, cs)
        assert hi["stream"] == "stdout" and hi["epoch"] == lead["epoch"], hi
        assert "call" not in hi and "cut" not in hi, hi
        a.wait_for("notify_exit", timeout=5, call="leader")
        note = outputs(a, child="notify", call="leader")
        got = {(e["stream"], e["line"]) for e in note}
        want = {("stdout", "notify leader leader %d elected" % lead["epoch"]),
                ("stderr", "oops from leader"), ("stdout", "no newline")}
        assert got == want, (got, want)
        assert all(e["epoch"] == lead["epoch"] and e["pid"] > 0 for e in note), note
        # the notify call's last line came before its exit was logged
        ne = a.find("notify_exit")[0]
        assert max(e["_i"] for e in note) < ne["_i"], a.describe()
        a.term()
        assert a.wait_exit(10) == 0
        sd = outputs(a, child="notify", call="stepdown")
        assert {e["line"] for e in sd} == {"notify stepdown idle %d shutdown" % lead["epoch"],
                                            "oops from stepdown", "no newline"}, sd
        lines = json_lines(a)
        assert not a.other_lines(), a.other_lines()[:5]
        assert sum(1 for e in lines if e.get("line") == "hi") == 1, lines


def test_text_log_gets_the_same_record():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "t1", path=PATH, log="text",
                    extra=["--", "sh", "-c", "echo hi; echo 'two words' >&2; exec sleep 60"])
        pat = re.compile(r"^\S+ info \[t1\] child_output mono_ns=\d+ child=cmd pid=(\d+) "
                         r"epoch=(\d+) stream=(stdout|stderr) line=(.*)$")

        def records():
            with open(a.logfile, errors="replace") as f:
                text = f.read()
            return text, [m.groups() for m in map(pat.match, text.splitlines()) if m]
        h.wait_until(lambda: len(records()[1]) >= 2, 15, "two child_output lines")
        text, recs = records()
        assert {(r[2], r[3]) for r in recs} == {("stdout", "hi"), ("stderr", '"two words"')}, recs
        assert "hi" not in text.splitlines() and "two words" not in text.splitlines(), text
        a.term()
        assert a.wait_exit(10) == 0


BYTES_PY = r'''
import sys, time
w = sys.stdout.buffer
w.write(b"bad \xff\xfe utf-8 \xe2\x82 cut, nul \x00 here, tab \t, quote \" end\n")
w.write(b"x" * 100000 + b"\n")
w.write(b"after the long line\n")
w.write("caf\u00e9 \u2603\n".encode())
w.write(b"y" * 2047 + "\u00e9 and on\n".encode())
w.flush()
time.sleep(60)
'''

FLOOD_PY = r'''
import sys
w = sys.stdout.buffer
for i in range(200000):
    w.write(b"flood %d\n" % i)
w.write(b"y" * 100000 + b"\n")
w.flush()
sys.stderr.write("flood done\n")
'''


def test_bytes_long_lines_and_a_flood_are_bounded():
    d = h.mkdtemp("childout-bytes")
    bpy = script(d, "bytes.py", BYTES_PY)
    fpy = script(d, "flood.py", FLOOD_PY)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "b1", path=PATH, extra=["--", "python3", bpy])
        lead = a.wait_for("leader", timeout=15)
        after = a.wait_for("child_output", timeout=10, line="after the long line")
        rs = outputs(a, child="cmd")
        assert rs[0]["line"] == ("bad \ufffd\ufffd utf-8 \ufffd\ufffd cut, nul \x00 here, tab \t, "
                                 "quote \" end"), rs[0]
        assert rs[1]["line"] == "x" * 2048 and rs[1].get("cut") == "yes", rs[1]["line"][:40]
        assert "cut" not in after and rs[2] is after, rs[:3]
        a.wait_for("child_output", timeout=5, line="caf\u00e9 \u2603")
        # the cut at 2048 bytes would split the 2-byte character: it ends before it
        ys = h.wait_until(lambda: [e for e in outputs(a, child="cmd") if e["line"].startswith("yyy")],
                          5, "the line cut before a character")
        assert ys[0]["line"] == "y" * 2047 and ys[0].get("cut") == "yes", ys[0]["line"][-5:]
        a.term()
        assert a.wait_exit(10) == 0
        json_lines(a)

        # the flood: a follower beside it for its memory
        f = h.Agent(zk, "f1", path=PATH + "-flood", extra=["--", "python3", fpy])
        lf = f.wait_for("leader", timeout=15)
        g = h.Agent(zk, "f2", path=PATH + "-flood")
        g.wait_for("follower", timeout=15)
        # the child is never held up by its output: it ends within seconds
        ex = f.wait_for("cmd_exit", timeout=20)
        assert ex["code"] == 0, ex
        drop = f.wait_for("child_output_dropped", timeout=5)

        def dropped():
            return sum(e["over_rate"] + e["log_full"] for e in f.find("child_output_dropped"))
        # 200,000 lines, the long one and the stderr line: each logged or
        # counted (the last ones read and said after the exit's record)
        h.wait_until(lambda: len(outputs(f, child="cmd")) + dropped() == 200002, 10,
                     "every line logged or counted")
        recs = outputs(f, child="cmd")
        # the rate: at most 500 at once and 333 a second, for a few seconds
        assert len(recs) <= 5000 and drop["over_rate"] > 0, (len(recs), drop)
        assert drop["child"] == "cmd" and drop["pid"] == ex["pid"], drop
        assert recs[0]["line"] == "flood 0", recs[0]
        # it still leads, and renews: alive well past a session timeout
        time.sleep(2.5)
        assert f.alive() and not f.find("stepdown"), f.describe()
        rss = [int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/%d/status" % x.pid).read()).group(1))
               for x in (f, g)]
        print("  info: peak RSS of the flooded leader %d kB, of its follower %d kB" % tuple(rss))
        assert rss[0] < rss[1] + 8192, rss
        f.term()
        assert f.wait_exit(10) == 0
        g.term()
        assert g.wait_exit(10) == 0
        json_lines(f)
        assert lf["epoch"] > 0 and lead["epoch"] > 0


SPAWN_POLICY = r"""
local top = assert(zkelect.spawn{ "sh", "-c", "echo top level" })
zkelect.log("info", "top pid " .. top:pid())
function on_leader(ev)
  local p = assert(zkelect.spawn{ "sh", "-c", "echo spawned $ZKELECT_EPOCH; echo to err >&2; exec sleep 60" })
  zkelect.log("info", "spawn pid " .. p:pid())
end
"""


def test_a_policy_s_spawned_children_are_records():
    d = h.mkdtemp("childout-spawn")
    pol = script(d, "spawn.lua", SPAWN_POLICY, 0o644)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "s1", path=PATH, script=pol)
        lead = a.wait_for("leader", timeout=15)
        top = a.wait_for("child_output", timeout=5, line="top level")
        tp = a.wait_for(lambda e: e.get("msg", "").startswith("top pid "), timeout=5)
        assert top["child"] == "spawn" and top["epoch"] == 0, top
        assert top["pid"] == int(tp["msg"].split()[-1]), (top, tp)
        sp = a.wait_for(lambda e: e.get("msg", "").startswith("spawn pid "), timeout=5)
        pid = int(sp["msg"].split()[-1])
        out = a.wait_for("child_output", timeout=5, line="spawned %d" % lead["epoch"])
        err = a.wait_for("child_output", timeout=5, line="to err")
        for e in (out, err):
            assert e["child"] == "spawn" and e["pid"] == pid and e["epoch"] == lead["epoch"], e
        assert out["stream"] == "stdout" and err["stream"] == "stderr", (out, err)
        a.term()
        assert a.wait_exit(10) == 0
        json_lines(a)


def fds(pid):
    return sorted(os.listdir("/proc/%d/fd" % pid), key=int)


def test_a_daemon_s_pipes_end_with_its_term():
    """The command starts a daemon (setsid -f, in the term's cgroup) that
    holds the pipes, and exits once the descriptors are counted:
    --on-exit resign ends the term, whose
    step-down empties the cgroup; the lone candidate leads again. Each
    term's lines are records of that term, and the agent's descriptors are
    the same in each."""
    tag = "%d%06d" % (os.getpid() % 1000, int(time.monotonic() * 1000) % 1000000)
    d = h.mkdtemp("childout-daemon")
    # the command exits once the test counted the descriptors (the file
    # go.EPOCH), or after 10 s
    cmd = ("setsid -f sh -c 'echo daemon $ZKELECT_EPOCH; exec sleep %s'; echo cmd $ZKELECT_EPOCH; "
           "i=0; while [ ! -e %s/go.$ZKELECT_EPOCH ] && [ $i -lt 200 ]; do sleep 0.05; "
           "i=$((i+1)); done; exit 0" % (tag, d))
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "d1", path=PATH, extra=["--on-exit", "resign", "--", "sh", "-c", cmd])
        counts = []
        since = 0
        for k in range(4):
            lead = a.wait_for("leader", timeout=15, since=since)
            e = lead["epoch"]
            a.wait_for("child_output", timeout=5, since=lead["_i"], line="daemon %d" % e)
            a.wait_for("child_output", timeout=5, since=lead["_i"], line="cmd %d" % e)
            counts.append(len(fds(a.pid)))
            open(os.path.join(d, "go.%d" % e), "w").close()
            sd = a.wait_for("stepdown", timeout=10, since=lead["_i"], reason="resign")
            a.wait_for("cmd_stopped", timeout=5, since=sd["_i"])
            since = sd["_i"]
        print("  info: the agent's descriptors in four terms: %s" % counts)
        assert len(set(counts)) == 1, counts
        for r in outputs(a, child="cmd"):
            assert r["line"].split()[-1] == str(r["epoch"]), r
        a.term()
        assert a.wait_exit(10) == 0
        json_lines(a)
        h.wait_until(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and
                                  _cmdline(p).endswith(tag)], 5, "no daemon left")


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


FLOODERS = 24
# started at the script's load (a spawn waits for its exec: many in on_leader
# would hold the loop themselves), they wait for a shared lock on LOCK, which
# the test holds, and flood together once it lets go
FLOOD_POLICY = r'''
for i = 1, %d do
  assert(zkelect.spawn{ "sh", "-c", "flock -s \"$0\" sh -c 'yes x | head -n 40000'; exec sleep 60",
                        "%s" })
end
'''


def test_many_children_flooding_at_once_leave_the_lease_alone():
    """24 children of the policy print 40,000 lines each at once, with a
    session timeout of 2000 ms: the leader keeps its lease (no step-down,
    no `lease ran out`) for three session timeouts, its renewals come at
    their usual pace, and the children's lines are logged at their rate
    and the rest counted."""
    d = h.mkdtemp("childout-many")
    lock = os.path.join(d, "lock")
    pol = script(d, "many.lua", FLOOD_POLICY % (FLOODERS, lock), 0o644)
    held = open(lock, "w")
    fcntl.flock(held, fcntl.LOCK_EX)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "m1", path=PATH + "-many", script=pol, session_timeout=2000,
                    extra=["--log-level", "debug"])
        lead = a.wait_for("leader", timeout=15)
        ino = os.stat(lock).st_ino
        h.wait_until(lambda: _lock_waiters(ino) == FLOODERS, 20, "every child waiting for the lock")
        held.close()                        # all at once
        end = time.monotonic() + 6.0        # three session timeouts
        while time.monotonic() < end and a.alive() and not a.find("stepdown"):
            time.sleep(0.2)
        assert a.alive() and not a.find("stepdown"), a.describe()
        assert not [e for e in a.find("log") if "lease ran out" in e.get("msg", "")], a.describe()
        assert len({e["pid"] for e in outputs(a, child="spawn")}) == FLOODERS, a.describe()
        ren = [e["mono_ns"] for e in a.find("log") if "renewal answered" in e.get("msg", "")
               and e["_i"] > lead["_i"]]
        gaps = [(y - x) / 1e6 for x, y in zip(ren, ren[1:])]
        print("  info: %d renewals in the flood, the longest gap %.0f ms; %d lines logged"
              % (len(ren), max(gaps), len(outputs(a, child="spawn"))))
        # a lease of 1700 ms renewed about every 500 ms; the old reader's
        # iterations of 300-700 ms had it run out
        assert len(ren) >= 6 and max(gaps) < 1200, gaps
        a.term()
        assert a.wait_exit(15) == 0
        json_lines(a)


# 40,000 lines in 4 s at least: more than the log's half buffer at the rate
LOGSTALL_PY = r'''
import os, sys, time
w = sys.stdout.buffer
for k in range(40):
    w.write(b"".join(b"line %d\n" % (k * 1000 + i) for i in range(1000)))
    w.flush()
    time.sleep(0.1)
open(sys.argv[1], "w").close()
'''


def test_a_flooding_child_and_a_log_pipe_nobody_reads():
    """The agent's stderr is a full pipe nobody reads (integration.bad_input's
    stopped `cat`) and its command prints 40,000 lines: the child is never
    blocked (it ends), the agent leads on, and once the pipe is read again
    every line of the child is either a record or counted (`log_full`,
    `over_rate`)."""
    with h.ZooKeeper() as zk:
        d = h.mkdtemp("childout-logstall")
        child = script(d, "flood.py", LOGSTALL_PY)
        done = os.path.join(d, "done")
        out = os.path.join(d, "stderr")
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:                        # full before the agent writes anything
            while True:
                os.write(w, b"#" * 4096)
        except BlockingIOError:
            pass
        os.set_blocking(w, True)
        with open(out, "wb") as o:
            reader = subprocess.Popen(["cat"], stdin=r, stdout=o, preexec_fn=h._pdeathsig)
        os.close(r)
        reader.send_signal(signal.SIGSTOP)
        p = subprocess.Popen(h.wrap([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path",
                                     PATH + "-logstall", "--id", "ls1", "--session-timeout", "4000",
                                     "--log", "json", "--", "python3", child, done]),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=w,
                             preexec_fn=h._pdeathsig)
        os.close(w)
        try:
            h.wait_until(lambda: os.path.exists(done), 30, "the child printed its lines")
            b = h.Agent(zk, "ls2", path=PATH + "-logstall", session_timeout=4000)
            b.wait_for("follower", timeout=15)
            assert p.poll() is None and not b.find("leader"), b.describe()
            reader.send_signal(signal.SIGCONT)
            p.send_signal(signal.SIGTERM)
            assert p.wait(15) == 0, p.returncode
            assert reader.wait(15) == 0
            with open(out, "rb") as f:
                recs = [json.loads(l) for l in f.read().replace(b"#", b"").decode().splitlines() if l]
            lines = [x for x in recs if x["event"] == "child_output"]
            drops = [x for x in recs if x["event"] == "child_output_dropped"]
            full = sum(x["log_full"] for x in drops)
            assert full > 0, drops
            assert len(lines) + full + sum(x["over_rate"] for x in drops) == 40000, \
                (len(lines), drops)
            print("  info: %d lines logged, %d dropped for the full log" % (len(lines), full))
            b.term()
            assert b.wait_exit(10) == 0
        finally:
            for x in (p, reader):
                if x.poll() is None:
                    x.send_signal(signal.SIGCONT)
                    x.kill()
                    x.wait(10)


SIGTERM_FLOOD_PY = r'''
import os, signal, sys, time
def bye(*a):
    sys.stdout.buffer.write(b"bye\n" * 120000)
    sys.stdout.buffer.flush()
    os._exit(0)
signal.signal(signal.SIGTERM, bye)
print("up", flush=True)
time.sleep(60)
'''


def test_a_step_down_does_not_wait_for_the_output():
    """The command prints 120,000 lines on SIGTERM: the step-down's end
    (`cmd_stopped`, the node released) waits for the command's exit, not
    for its lines to be logged: within 500 ms of the `stepdown` (the bound
    docs/operations.md states; about 20 ms here), the lines logged after it
    still naming the command."""
    d = h.mkdtemp("childout-sdflood")
    child = script(d, "bye.py", SIGTERM_FLOOD_PY)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "q1", path=PATH + "-sd", extra=["--", "python3", child])
        a.wait_for("child_output", timeout=15, line="up")
        a.term()
        assert a.wait_exit(15) == 0
        sd = a.find("stepdown")[0]
        st = a.find("cmd_stopped")[0]
        ms = (st["mono_ns"] - sd["mono_ns"]) / 1e6
        byes = outputs(a, line="bye")
        print("  info: stepdown -> cmd_stopped %.1f ms, %d lines logged" % (ms, len(byes)))
        assert ms < 500, ms
        assert byes and all(e["child"] == "cmd" and e["pid"] == st["pid"] for e in byes), byes[:2]
        json_lines(a)


EOF_DROP_PY = r'''
import os, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
os.write(1, b"x\n" * 32768)
os._exit(0)
'''


def test_drops_are_said_at_the_end_of_the_output():
    """The command writes 32,768 lines and exits 0 (no restart: the run
    is over, the reader stays its owner's until the step-down) while the
    agent is stopped, so that its exit and its last bytes come in the same
    loop iteration: the `child_output_dropped` record comes once the output
    ended, not at the step-down."""
    d = h.mkdtemp("childout-eofdrop")
    go = os.path.join(d, "go")
    child = script(d, "burst.py", EOF_DROP_PY)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "e1", path=PATH + "-eof", session_timeout=10000,
                    extra=["--", "python3", child, go])
        cs = a.wait_for("cmd_start", timeout=15)
        os.kill(a.pid, signal.SIGSTOP)
        try:
            open(go, "w").close()
            h.wait_until(lambda: _state(cs["pid"]) in ("Z", None), 10, "the child's exit")
        finally:
            os.kill(a.pid, signal.SIGCONT)
        ex = a.wait_for("cmd_exit", timeout=10)
        assert ex["code"] == 0 and ex["action"] == "none", ex
        # each line a record or counted, while the run's reader is still
        # its owner's (until the step-down)
        h.wait_until(lambda: len(outputs(a, child="cmd")) + sum(
            d["over_rate"] + d["log_full"] for d in a.find("child_output_dropped")) == 32768,
            10, "every line logged or counted")
        assert all(d["pid"] == cs["pid"] for d in a.find("child_output_dropped"))
        assert not a.find("stepdown"), a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def _lock_waiters(ino):
    """The processes blocked on a lock of the file with inode ino."""
    with open("/proc/locks") as f:
        return sum(1 for line in f if "->" in line and line.split()[-3].endswith(":%d" % ino))


def _state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


if __name__ == "__main__":
    h.run_tests(globals())
