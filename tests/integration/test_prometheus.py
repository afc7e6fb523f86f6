#!/usr/bin/python3
"""Prometheus with promtool (Debian's `prometheus` package): the example
rules pass `promtool check rules` and their unit tests (`promtool test
rules`); a live /metrics scrape of a leader and of a follower passes
`promtool check metrics`; the process_* metrics agree with /proc; the
metrics that duplicated zkelect_hook_runs_total are gone; every metric the
rules and the Grafana dashboard name exists in a live scrape; the --notify
and -- CMD counters move on real failures, timeouts, restarts and kills."""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PROMTOOL = "/usr/bin/promtool"
RULES_DIR = os.path.join(h.REPO, "contrib", "prometheus")
RULES = os.path.join(RULES_DIR, "zkelect.rules.yml")
RULES_TEST = os.path.join(RULES_DIR, "zkelect.rules.test.yml")
DASHBOARD = os.path.join(h.REPO, "contrib", "grafana", "zkelect.json")
POLICY = os.path.join(h.POLICIES, "http.lua")
PATH = "/app/prom"


def promtool(*args, stdin=None):
    assert os.access(PROMTOOL, os.X_OK), "promtool missing: apt-get install prometheus " \
        "(scripts/setup.sh --dev installs it)"
    p = subprocess.run([PROMTOOL] + list(args), input=stdin, capture_output=True, timeout=60,
                       cwd=RULES_DIR)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def scrape(a):
    ev = a.wait_for("status_listen", timeout=10)
    with urllib.request.urlopen("http://%s/metrics" % ev["addr"], timeout=5) as r:
        return r.read()


def samples(text):
    """{name{labels}: value} and the set of metric family names (# TYPE)."""
    out, families = {}, set()
    for line in text.decode().splitlines():
        if line.startswith("# TYPE "):
            families.add(line.split(" ")[2])
        elif line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out, families


def test_promtool_checks_the_rules_and_runs_their_tests():
    code, out, err = promtool("check", "rules", RULES)
    assert code == 0 and "SUCCESS" in out, (code, out, err)
    code, out, err = promtool("test", "rules", RULES_TEST)
    assert code == 0 and "SUCCESS" in out, (code, out, err)


def names_in(expr):
    """The metric names an expression reads (recording rules, with ':', aside)."""
    return {re.sub(r"_(bucket|sum|count)$", "", n)
            for n in re.findall(r"\b((?:zkelect|process)_[a-z_]+)\b", expr)}


def test_a_live_scrape_passes_promtool_and_names_what_the_examples_use():
    d = h.mkdtemp("prom-live")
    notify = executable(os.path.join(d, "notify.sh"), "#!/bin/sh\nexit 0\n")
    with h.ZooKeeper() as zk:
        # --notify and -- CMD: their counters are in the scrapes too
        lead, foll = h.start_in_order(zk, ("p1", "p2"), path=PATH, script=POLICY,
                                      extra=["--status", "127.0.0.1:0", "--notify", notify,
                                             "--", "/bin/sleep", "3600"])
        lead.wait_for("leader", timeout=5)
        families = set()
        for a in (lead, foll):
            text = scrape(a)
            code, out, err = promtool("check", "metrics", stdin=text)
            assert code == 0 and out.strip() == "" and err.strip() == "", (a.id, code, out, err)
            m, fam = samples(text)
            families |= fam
            # the standard process metrics, as /proc sees the agent now
            pid = a.proc.pid
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read().rsplit(")", 1)[1].split()
            with open("/proc/stat") as f:
                btime = int(next(x for x in f if x.startswith("btime ")).split()[1])
            start = btime + int(stat[19]) / os.sysconf("SC_CLK_TCK")
            assert abs(m["process_start_time_seconds"] - start) < 0.05, (m, start)
            assert time.time() - 120 < start <= time.time()
            rss = int(stat[21]) * os.sysconf("SC_PAGE_SIZE")
            assert 0.5 * rss < m["process_resident_memory_bytes"] < 2 * rss, (m, rss)
            assert m["process_virtual_memory_bytes"] >= m["process_resident_memory_bytes"]
            fds = len(os.listdir("/proc/%d/fd" % pid))
            assert 3 <= m["process_open_fds"] and abs(m["process_open_fds"] - fds) <= 3, (m, fds)
            soft = int(open("/proc/%d/limits" % pid).read().split("Max open files")[1].split()[0])
            assert m["process_max_fds"] == soft, (m, soft)
            assert 0 <= m["process_cpu_seconds_total"] < 60
            assert 0 < m["zkelect_lease_duration_seconds"] <= 2.0, m
            # one way to count each thing
            gone = [k for k in m if k.startswith(("zkelect_hook_failures_total",
                                                  "zkelect_hook_timeouts_total",
                                                  "zkelect_start_time_seconds"))]
            assert not gone, gone
        # the leader's lease stays well above the ZkelectLeaseLow threshold
        m, _ = samples(scrape(lead))
        assert m["zkelect_lease_remaining_seconds"] > 0.25 * m["zkelect_lease_duration_seconds"], m
        with open(DASHBOARD) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        assert len(exprs) >= 10, exprs
        with open(RULES) as f:
            exprs += re.findall(r"^\s*expr: (.*)$", f.read(), re.M)
        used = set().union(*(names_in(e) for e in exprs))
        assert {"zkelect_is_leader", "process_resident_memory_bytes",
                "zkelect_hook_runs_total", "zkelect_lease_duration_seconds",
                "zkelect_notify_calls_total", "zkelect_command_exits_total",
                "zkelect_command_kills_total"} <= used, used
        missing = used - families
        assert not missing, "the dashboard or the rules name metrics /metrics lacks: %s" % missing
        for a in (lead, foll):
            a.term()
            assert a.wait_exit(10) == 0


NOTIFY_SH = """#!/bin/sh
# the follower call fails, the leader call hangs past --notify-timeout
case "$1" in
  follower) exit 3 ;;
  leader) exec sleep 30 ;;
esac
exit 0
"""

# -- CMD: the first run fails (restarted), the second ignores SIGTERM (the
# step-down kills it), the third exits 0
CMD_SH = """#!/bin/sh
n=$(cat "%(count)s" 2>/dev/null || echo 0)
n=$((n + 1))
echo $n > "%(count)s"
case $n in
  1) exit 3 ;;
  2) trap '' TERM; exec sleep 30 ;;
esac
exit 0
"""


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def test_notify_and_command_counters_move():
    """The no-Lua modes have counters: a --notify call that exits 3 and one
    that runs past --notify-timeout move zkelect_notify_calls_total's
    failed and timed_out; a -- CMD that fails, is restarted, ignores the
    step-down's SIGTERM (a resign) and, in the next term, exits 0, moves
    zkelect_command_starts_total, _restarts_total, _exits_total and
    _kills_total. Both scrapes pass promtool check metrics."""
    d = h.mkdtemp("prom-counters")
    with h.ZooKeeper() as zk:
        # --notify
        notify = executable(os.path.join(d, "notify.sh"), NOTIFY_SH)
        lead = h.Agent(zk, "n0", path=PATH)
        lead.wait_for("leader", timeout=10)
        n1 = h.Agent(zk, "n1", path=PATH, extra=["--status", "127.0.0.1:0", "--notify", notify,
                                                 "--notify-timeout", "500"])
        n1.wait_for("follower", timeout=10)
        n1.wait_for(lambda e: e.get("event") == "notify_exit" and e.get("code") == 3, timeout=10)
        m, _ = samples(scrape(n1))
        assert m['zkelect_notify_calls_total{event="follower",outcome="failed"}'] == 1, m
        mark = n1.mark()
        lead.term()
        assert lead.wait_exit(10) == 0
        n1.wait_for("leader", timeout=10, since=mark)
        n1.wait_for(lambda e: e.get("event") == "notify_exit" and e.get("ended_by") == "timeout",
                    timeout=10, since=mark)
        text = scrape(n1)
        code, out, err = promtool("check", "metrics", stdin=text)
        assert code == 0 and out.strip() == "" and err.strip() == "", (code, out, err)
        m, _ = samples(text)
        calls = {k: v for k, v in m.items() if k.startswith("zkelect_notify_calls_total")}
        assert len(calls) == 5 * 6, calls
        moved = {k: v for k, v in calls.items() if v}
        assert moved == {'zkelect_notify_calls_total{event="follower",outcome="failed"}': 1,
                         'zkelect_notify_calls_total{event="leader",outcome="timed_out"}': 1}, moved
        assert not any(k.startswith("zkelect_command_") for k in m), m
        n1.term()
        assert n1.wait_exit(10) == 0

        # -- CMD
        cmd = executable(os.path.join(d, "cmd.sh"), CMD_SH % {"count": os.path.join(d, "count")})
        sock = os.path.join(d, "c1.sock")
        c1 = h.Agent(zk, "c1", path=PATH + "-cmd", extra=["--status", "127.0.0.1:0",
                                                          "--control", sock, "--", cmd])
        c1.wait_for("leader", timeout=10)
        c1.wait_for(lambda e: e.get("event") == "cmd_exit" and e.get("code") == 3, timeout=10)
        h.wait_until(lambda: len(c1.events("cmd_start")) == 2, 10, "the restart")
        mark = c1.mark()
        code, out, err, _ = h.run([h.ZKELECT_BIN, "ctl", "--control", sock, "resign"], timeout=40)
        assert code == 0, (code, out, err)
        c1.wait_for("cmd_kill", timeout=10, since=mark)
        # alone, it leads again: the third run exits 0
        c1.wait_for("leader", timeout=10, since=mark)
        c1.wait_for(lambda e: e.get("event") == "cmd_exit" and e.get("code") == 0, timeout=10,
                    since=mark)
        text = scrape(c1)
        code, out, err = promtool("check", "metrics", stdin=text)
        assert code == 0 and out.strip() == "" and err.strip() == "", (code, out, err)
        m, _ = samples(text)
        got = {k: v for k, v in m.items() if k.startswith("zkelect_command_")}
        assert got == {"zkelect_command_starts_total": 3, "zkelect_command_restarts_total": 1,
                       'zkelect_command_exits_total{outcome="ok"}': 1,
                       'zkelect_command_exits_total{outcome="failed"}': 1,
                       'zkelect_command_exits_total{outcome="not_started"}': 0,
                       "zkelect_command_kills_total": 1}, got
        assert not any(k.startswith("zkelect_notify_") for k in m), m
        c1.term()
        assert c1.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
