#!/usr/bin/python3
"""The lease, the epoch and the term scope against a real ZooKeeper.

* A leader frozen (SIGSTOP) past its session timeout steps down with reason
  "lease" as the very first thing after SIGCONT: no timer of its term runs
  again, its child process is killed, and the successor's epoch is larger.
* A graceful hand-over ends the term first: the child that ignores SIGTERM is
  SIGKILLed, the timer stopped, then on_stepdown runs, then the node goes;
  the child saw ZKELECT_ID/EPOCH/ROLE; the epoch is in the published data.
* A connection blip (the client's socket aborted with `ss -K`) suspends the
  leader and resumes it (same epoch) under the default policy; under
  --on-disconnect stepdown it steps down with reason "disconnect" and the
  next term has a larger epoch.
* A leader hook that waited and then computes as its lease runs out is
  stopped at the lease's end, not a hook timeout later.
* Settings that cannot keep the promise are refused (exit 78), at start-up
  and after the server clamps the session timeout; a refused step-down
  budget names the server tick and where it came from, and the largest
  budget that fits.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/lease"
# every four-letter word the harness asks, but not conf: the servers do
# not tell their tick, and the agent infers it from a probe's grant
NO_CONF = "4lw.commands.whitelist=ruok,srvr,stat,cons,mntr,wchc,wchp,dump"
T = 2000
TERM = os.path.join(h.POLICIES, "term.lua")


def scripts(agent, prefix):
    """(mono_ns, msg) of the agent's zkelect.log lines starting with prefix."""
    return [(e["mono_ns"], e["msg"]) for e in agent.find("script")
            if e.get("msg", "").startswith(prefix)]


def field(msg, key):
    m = re.search(r"\b%s=(\S+)" % re.escape(key), msg)
    return m.group(1) if m else None


def child_pid(agent, since=0):
    ev = agent.wait_for(lambda e: e.get("event") == "script" and
                        e.get("msg", "").startswith("child pid="), timeout=5, since=since)
    return int(field(ev["msg"], "pid"))


def blip(agent, zk):
    """Aborts the agent's TCP connection to ZooKeeper (both ends see a reset)."""
    out = subprocess.run(["ss", "-tnpH", "dst", "127.0.0.1:%d" % zk.port], capture_output=True,
                         text=True, timeout=10).stdout
    ports = [l.split()[3].rsplit(":", 1)[1] for l in out.splitlines()
             if "pid=%d," % agent.pid in l]
    assert ports, "no connection of %s in:\n%s" % (agent, out)
    r = subprocess.run(["ss", "-K", "dst", "127.0.0.1:%d" % zk.port, "sport", "=", ":" + ports[0]],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr


def test_pause_past_the_lease():
    tmp = h.mkdtemp("lease")
    os.environ["ZKT_DIR"] = tmp
    with h.ZooKeeper() as zk:
        # the loop's own check after SIGCONT: without the fail-stop watcher,
        # which would have killed the frozen agent and its child
        # (integration.failstop)
        a, b = h.start_in_order(zk, ("pa", "pb"), path=PATH, script=TERM, session_timeout=T,
                                extra=["--fail-stop", "off"])
        la = a.wait_for("leader", timeout=5)
        cpid = child_pid(a)
        a.wait_for(lambda e: e.get("event") == "script" and e["msg"].startswith("action"), timeout=5)
        mb = b.mark()
        t_stop = time.monotonic_ns()
        a.sigstop()
        lb = b.wait_for("leader", timeout=3 * T / 1000, since=mb)
        assert lb["epoch"] > la["epoch"], (lb, la)
        assert h.pid_alive(cpid), "the frozen leader's child runs on (it is not frozen)"
        time.sleep(0.5)
        ma = a.mark()
        t_cont = time.monotonic_ns()
        a.sigcont()
        sd = a.wait_for("stepdown", timeout=5, since=ma)
        assert sd["reason"] == "lease" and sd["epoch"] == la["epoch"], sd
        lr = a.wait_for(lambda e: "lease ran out" in e.get("msg", ""), timeout=1, since=ma)
        late = (lr["mono_ns"] - t_cont) / 1e6
        print("  info: frozen %.1f s; lease check %.1f ms after SIGCONT, on_stepdown after %.1f ms "
              "(the child ignores SIGTERM)" % ((t_cont - t_stop) / 1e9, late,
                                               (sd["mono_ns"] - t_cont) / 1e6))
        assert late < (250 if h.under_asan(a.pid) else 100), "lease checked %.1f ms after SIGCONT" % late
        assert (sd["mono_ns"] - t_cont) / 1e6 < 1000, sd
        # nothing of the old term ran after the resume
        acts = [m for m in scripts(a, "action") if m[0] > t_cont]
        assert not acts, "actions after SIGCONT: %s" % acts[:3]
        od = a.wait_for(lambda e: e.get("event") == "script" and
                        e["msg"].startswith("on_stepdown"), timeout=5, since=ma)
        assert "child_running=false" in od["msg"] and "ticker_active=false" in od["msg"], od
        h.wait_until(lambda: not h.pid_alive(cpid), 5, "the old term's child to be gone")
        # the old leader rejoins as a follower; one leader
        a.wait_for("follower", timeout=10, since=ma)
        assert h.leaders_now([a, b]) == [b]
        h.stop_cleanly([a, b], 10)


def test_graceful_handover_ends_the_term_first():
    tmp = h.mkdtemp("term")
    os.environ["ZKT_DIR"] = tmp
    with h.ZooKeeper() as zk:
        a, b = h.start_in_order(zk, ("ga", "gb"), path=PATH, script=TERM, session_timeout=T)
        la = a.wait_for("leader", timeout=5)
        cpid = child_pid(a)
        envf = os.path.join(tmp, "env-ga-%d" % la["epoch"])
        h.wait_until(lambda: os.path.exists(envf), 5, "the child's environment file")
        with open(envf) as f:
            assert f.read().split() == ["ga", str(la["epoch"]), "leader"]
        # the published leader data carries the epoch; the follower reads it
        fb = b.wait_for("follower", timeout=5)
        assert fb["leader"] == "ga", fb
        a.wait_for(lambda e: e.get("event") == "script" and e["msg"].startswith("action"), timeout=5)
        mb = b.mark()
        ma = a.mark()
        a.term()
        lb = b.wait_for("leader", timeout=5, since=mb)
        assert lb["epoch"] > la["epoch"], (lb, la)
        assert a.wait_exit(10) == 0
        ex = [e for e in a.find("script", since=ma) if e["msg"].startswith("child_exit")]
        od = [e for e in a.find("script", since=ma) if e["msg"].startswith("on_stepdown")]
        assert ex and od, a.describe()
        assert ex[0]["msg"] == "child_exit code=nil sig=9", ex     # TERM ignored: killed
        assert ex[0]["mono_ns"] < od[0]["mono_ns"], (ex, od)
        assert "child_running=false" in od[0]["msg"] and "ticker_active=false" in od[0]["msg"], od
        # the old leader's step-down (and its duty's end) came before the
        # successor started: no overlap of duties in a graceful hand-over
        lbon = b.wait_for(lambda e: e.get("event") == "script" and
                          e["msg"].startswith("on_leader"), timeout=5, since=mb)
        assert od[0]["mono_ns"] < lbon["mono_ns"], (od, lbon)
        last_a = max(m for m, _ in scripts(a, "action"))
        assert last_a < lbon["mono_ns"], "old leader acted after the new one started"
        assert not h.pid_alive(cpid)
        b.term()
        assert b.wait_exit(10) == 0


STEPDOWN_WAIT = os.path.join(h.POLICIES, "stepdown_wait.lua")


def test_a_waiting_on_stepdown_holds_the_node():
    """on_stepdown that waits (a command undoing the duty, say) keeps our
    node until it ends: the successor leads after "undo_done", not at the
    hook's first wait. Longer than half the step-down budget, the node goes
    anyway (the lease arithmetic counts on that bound), with a warning."""
    os.environ["ZKT_UNDO_S"] = "0.3"
    # the servers' real tickTime: the default (half the session timeout)
    # leaves no lease with this step-down budget
    extra = ["--stepdown-budget", "1000", "--server-tick", "200"]
    with h.ZooKeeper() as zk:
        a, b = h.start_in_order(zk, ("ha", "hb"), path=PATH, script=STEPDOWN_WAIT,
                                session_timeout=T, extra=extra)
        a.wait_for("leader", timeout=5)
        mb = b.mark()
        a.term()
        lb = b.wait_for("leader", timeout=5, since=mb)
        assert a.wait_exit(10) == 0
        done = [e for e in a.find("script") if e["msg"].startswith("undo_done")]
        assert done, a.describe()
        assert done[0]["mono_ns"] < lb["mono_ns"], (done, lb)
        assert not [e for e in a.events() if "still holding our node" in str(e.get("msg"))], a.describe()
        # past the bound: 3 s of undo, half the budget is 500 ms
        os.environ["ZKT_UNDO_S"] = "3"
        c = h.Agent(zk, "hc", path=PATH, script=STEPDOWN_WAIT, session_timeout=T, extra=extra)
        c.wait_for("follower", timeout=5)
        d = h.Agent(zk, "hd", path=PATH, session_timeout=T, extra=extra)
        d.wait_for("follower", timeout=5)
        mc = c.mark()
        b.term()
        c.wait_for("leader", timeout=5, since=mc)
        assert b.wait_exit(10) == 0
        md = d.mark()
        c.term()
        ld = d.wait_for("leader", timeout=5, since=md)
        start = c.wait_for(lambda e: e.get("event") == "script" and
                           e["msg"].startswith("undo_start"), timeout=5, since=mc)
        gap = (ld["mono_ns"] - start["mono_ns"]) / 1e6
        print("  info: node released %.0f ms after on_stepdown began (bound 500 ms)" % gap, flush=True)
        assert c.wait_exit(10) == 0
        # whichever bound fired first: the agent's, or the hook's own budget
        # (on_stepdown gets half the step-down budget too)
        assert [e for e in c.events()[mc:] if "still holding our node" in str(e.get("msg")) or
                (e.get("event") == "hook_error" and e.get("hook") == "on_stepdown")], c.describe()
        assert not [e for e in c.find("script", since=mc) if e["msg"].startswith("undo_done")]
        d.term()
        assert d.wait_exit(10) == 0
    os.environ.pop("ZKT_UNDO_S", None)


def test_blip_suspends_and_resumes():
    tmp = h.mkdtemp("blip")
    os.environ["ZKT_DIR"] = tmp
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "sa", path=PATH, script=TERM, session_timeout=T)
        la = a.wait_for("leader", timeout=10)
        ma = a.mark()
        blip(a, zk)
        su = a.wait_for("suspend", timeout=5, since=ma)
        re_ = a.wait_for("resume", timeout=5, since=ma)
        assert su["epoch"] == re_["epoch"] == la["epoch"], (su, re_, la)
        assert 0 < re_["lease_ms"] <= 2000, re_
        for hook in ("on_suspend", "on_resume"):
            a.wait_for(lambda e, p=hook: e.get("event") == "script" and e.get("msg", "").startswith(p),
                       timeout=5, since=ma)
        time.sleep(0.3)             # and nothing else comes
        assert not a.find("stepdown", since=ma) and not a.find("leader", since=ma), a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def leader_behind(zk, px, ids):
    """Agent ids[0] leading through the proxy px, ids[1] following directly;
    with the leader's start event."""
    a = h.Agent(zk, ids[0], path=PATH, session_timeout=T, zkhosts=px.hostport)
    a.wait_for("leader", timeout=10)
    b = h.Agent(zk, ids[1], path=PATH, session_timeout=T)
    b.wait_for("follower", timeout=10)
    return a, b, a.wait_for("start", timeout=1)


def test_a_silent_blip_of_a_quarter_of_t_is_ridden_out():
    """At the default renewal schedule (every T/4 with the server's tick
    stated), the leader's connection held silent for 0.25 T (500 ms: no
    byte either way, no disconnect seen) wherever the hold falls in the
    renewal cycle: no step-down, no other leader; held for a whole T it
    steps down (reason lease) before the server expires it. The lease in
    hand never drops below 0.35 T (two renewal gaps old): the 0.1 T
    (200 ms) past the hold is the margin docs/design.md states for the
    answer after the hold and a loop that runs late (a normal build beside
    the suite's other tests on 2 cores was seen 101 ms late, an ASan build
    more). Even T/3 gaps (0.18 T left) fail it."""
    with h.ZooKeeper() as zk:
        with h.StallProxy(zk.port) as px:
            a, b, start = leader_behind(zk, px, ("ba", "bb"))
            assert start["renew_ms"] == T // 4 and start["server_tick_ms"] == 200, start
            blip = 0.25 * T / 1000.0
            ma, mb = a.mark(), b.mark()
            import random
            for i in range(8):
                time.sleep(0.35 + random.random() * T / 4000.0)   # a random phase
                px.hold(blip)
                time.sleep(blip + 0.25)
            assert not a.find("stepdown", since=ma), a.describe()
            assert not b.find("leader", since=mb), b.describe()
            # a whole T held: the lease runs out first
            px.hold(T / 1000.0 * 1.5)
            sd = a.wait_for("stepdown", timeout=5, since=ma)
            assert sd["reason"] == "lease", sd
            b.wait_for("leader", timeout=10, since=mb)
            assert start["lease_ms"] > 0
            for x in (a, b):
                x.term()
                assert x.wait_exit(10) == 0


def test_a_hook_that_computes_stops_at_the_lease_end():
    """A leader hook that waits while its lease is fresh and computes once
    less than 400 ms is left (its connection held silent, so no renewal is
    answered): the loop, which would end the term, does not run while it
    computes, so the hook's stretch itself is cut at the lease's end, not a
    hook timeout (T/3, 666 ms) after it began (the fail-stop watcher
    killed the agent then), and as a preemption: its term is over, the hook
    did not fail (no hook_error, no resign). Its last clock read is within
    20 ms of the lease's end either way (a busy machine's scheduler can
    delay it; the cut itself comes at the next instruction); the successor
    leads."""
    with h.ZooKeeper() as zk:
        with h.StallProxy(zk.port) as px:
            a = h.Agent(zk, "ca", path=PATH, session_timeout=T, zkhosts=px.hostport,
                        script=os.path.join(h.POLICIES, "lease_end.lua"))
            a.wait_for("leader", timeout=10)
            b = h.Agent(zk, "cb", path=PATH, session_timeout=T)
            b.wait_for("follower", timeout=10)
            ma, mb = a.mark(), b.mark()
            px.hold(T / 1000.0 * 2)
            hp = a.wait_for("hook_preempted", timeout=5, since=ma)
            assert hp["hook"] == "on_leader" and "lease ran out" in hp["msg"], hp
            done = a.wait_for(lambda e: e.get("event") == "script" and
                              e.get("msg", "").startswith("computed "), timeout=5, since=ma)
            asked, began, left, last = (float(field(done["msg"], "asked")),
                                        float(field(done["msg"], "began")),
                                        int(field(done["msg"], "lease_ms")),
                                        float(field(done["msg"], "last")))
            # lease_ms is the lease left truncated, read between asked and
            # began: the lease's end is in [asked + lease_ms, began + lease_ms + 1 ms)
            latest = (last - asked) * 1000 - left          # the most it can be past the end
            earliest = (last - began) * 1000 - (left + 1)  # the least
            print("  info: computed %.1f ms with %d ms of lease left: %.2f to %.2f ms past its end"
                  % ((last - began) * 1000, left, earliest, latest))
            slack = 50 if h.under_asan(a.pid) else 20
            assert latest < slack, "the hook computed up to %.1f ms past its lease's end" % latest
            assert earliest > -slack, "the hook was cut %.1f ms before its lease's end" % -earliest
            assert not a.find("hook_error", since=ma), a.find("hook_error", since=ma)
            b.wait_for("leader", timeout=10, since=mb)
            for x in (a, b):
                x.term()
                assert x.wait_exit(10) == 0


class RecordingProxy(h.StallProxy):
    """A StallProxy that also notes when each of the client's requests came
    (time of the read that completed it, its type and path): frames after
    the connect request are length, xid, type, then (exists) the path."""

    def __init__(self, target_port):
        self.requests = []          # (monotonic time, op type, path or None)
        self._buf = {}
        super().__init__(target_port)

    def _pump(self, a, b):
        self._client = a
        super()._pump(a, b)

    def note(self, x, data):
        if x is not getattr(self, "_client", None):
            return
        import struct
        now = time.monotonic()
        buf = self._buf.get(x, b"") + data
        first = x not in self._buf
        while len(buf) >= 4:
            n = struct.unpack(">i", buf[:4])[0]
            if len(buf) < 4 + n:
                break
            body, buf = buf[4:4 + n], buf[4 + n:]
            if first:
                first = False       # the connect request
                continue
            op = struct.unpack(">i", body[4:8])[0] if len(body) >= 8 else None
            path = None
            if op == 3 and len(body) >= 12:
                k = struct.unpack(">i", body[8:12])[0]
                path = body[12:12 + k].decode(errors="replace")
            with self.lock:
                self.requests.append((now, op, path))
        self._buf[x] = buf


def test_the_census_read_rides_the_renewal():
    """The election's size for /status (one exists() on the path every
    interval) goes in the same write as the renewal, right behind it, so
    the server answers both in one read: a leader wakes for its renewals
    only. Every census read reaches the server within a few ms after a
    renewal (a multi); sent on a timer of its own, its phase against the
    renewals' is random. The size still follows the election."""
    import http.client
    import json
    with h.ZooKeeper() as zk:
        with RecordingProxy(zk.port) as px:
            a = h.Agent(zk, "ca", path=PATH, session_timeout=T, zkhosts=px.hostport,
                        extra=["--status", "127.0.0.1:0"])
            a.wait_for("leader", timeout=10)
            ev = a.wait_for("status_listen", timeout=10)
            host, port = ev["addr"].rsplit(":", 1)

            def candidates():
                c = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=5)
                try:
                    c.request("GET", "/status")
                    return json.loads(c.getresponse().read())["candidates"]
                finally:
                    c.close()
            h.wait_until(lambda: candidates() == 1, 10, "candidates 1")
            b = h.Agent(zk, "cb", path=PATH, session_timeout=T)
            b.wait_for("follower", timeout=10)
            h.wait_until(lambda: candidates() == 2, 10, "candidates 2")
            with px.lock:
                px.requests.clear()
            def seen():
                with px.lock:
                    return sum(1 for r in px.requests if r[1] == 3 and r[2] == PATH) >= 5
            h.wait_until(seen, 10, "five census reads")    # one every T/2
            with px.lock:
                reqs = list(px.requests)
            census = [i for i, r in enumerate(reqs) if r[1] == 3 and r[2] == PATH]
            for i in census:
                before = [r for r in reqs[:i] if r[1] == 14]
                assert before and reqs[i][0] - before[-1][0] < 0.02, \
                    ("a census read went on its own", reqs[max(0, i - 3):i + 1])
            for x in (a, b):
                x.term()
                assert x.wait_exit(10) == 0


def test_a_leader_s_renewals_alternate_a_ping_gap_and_its_complement():
    """A crashed leader's session expires a timeout after the last request
    the server heard. Renewing every T/4 made that request younger than a
    plain client's last ping (every T/3): a later expiry, a slower failover.
    The leader's renewals alternate a gap just under the client's ping
    period and 2 x T/4 minus it: the same number of renewals, and two gaps
    in a row still T/2 at most (the lease's base is no older: the 0.25 T blip
    above is still ridden out), with no ping of the client in between. The
    first gaps after the follower came are left out (the stream settles
    into the alternation from whatever gap came before)."""
    with h.ZooKeeper() as zk:
        with RecordingProxy(zk.port) as px:
            a, b, start = leader_behind(zk, px, ("ra", "rb"))
            assert start["renew_ms"] == T // 4, start
            with px.lock:
                px.requests.clear()

            def renewals():
                with px.lock:
                    return [r for r in px.requests if r[1] == 14]
            h.wait_until(lambda: len(renewals()) >= 15, 15, "15 renewals")
            with px.lock:
                reqs = list(px.requests)
            ts = [r[0] for r in reqs if r[1] == 14]
            gaps = [y - x for x, y in zip(ts, ts[1:])][2:]
            third, quarter = T / 3000.0, T / 4000.0
            assert not [r for r in reqs if r[1] == 11], ("the client pinged", reqs)
            # a long gap and a short one in turn: never two of either in a row
            assert all((x > quarter) != (y > quarter) for x, y in zip(gaps, gaps[1:])), gaps
            longs = [g for g in gaps if g > quarter]
            shorts = [g for g in gaps if g <= quarter]
            # the schedule: the long gap just under the ping period, the two
            # together 2 x T/4 (medians: a loop that runs late under load, as
            # under ASan with other tests beside it, makes the one gap after
            # it longer by as much, 53 ms seen; each is counted from the
            # renewal before, so nothing catches it up)
            lm, sm = statistics.median(longs), statistics.median(shorts)
            assert 0.9 * third < lm < third, gaps
            assert lm + sm < T / 2000.0 + 0.03, gaps     # the proxy's thread adds a few ms
            assert max(gaps) < third + (0.3 if h.under_asan(a.pid) else 0.15), gaps
            for x in (a, b):
                x.term()
                assert x.wait_exit(10) == 0


def lease_line(agent, since=0):
    """The agent's plan once connected: lease, renewal period, confirmation
    step and server tick (ms) and where the tick came from."""
    ev = agent.wait_for(lambda e: e.get("event") == "log" and
                        e.get("msg", "").startswith("lease ") and
                        "renewal every" in e.get("msg", ""), timeout=10, since=since)
    m = re.match(r"lease (\d+) ms .* renewal every (\d+) ms, confirmed by a renewal (\d+) ms "
                 r"later; server tick (\d+) ms, (.*)\)$", ev["msg"])
    assert m, ev
    return [int(x) for x in m.groups()[:4]] + [m.group(5)]


def test_the_servers_tick_is_learned_where_none_is_stated():
    """With no --server-tick, where the servers do not answer conf (not
    whitelisted: test_srvconf.py has the servers that do), the agent infers
    the tick: a throwaway session
    asking a quarter of T is granted at least minSessionTimeout, by default
    2 x tickTime, so half its grant bounds the tick (the same assumption as
    half the main session's grant, tighter). Here minSessionTimeout is 600
    (tick 200): a 2000 ms session's probe asks 500, is granted 600, and the
    lease assumes 300 instead of 1000: renewals every T/4, not T/10, and a
    confirmation step of 303 ms instead of 1010. A stated tick sends no
    probe; a probe that gets no handshake in time (the connection held
    silent at the start) leaves the default, half the session timeout."""
    with h.ZooKeeper(extra_cfg=["minSessionTimeout=600", NO_CONF]) as zk:
        a = h.Agent(zk, "ta", path=PATH, session_timeout=T, server_tick=None, script=TERM)
        a.wait_for("leader", timeout=10)
        lease, renew, confirm, tick, how = lease_line(a)
        assert (tick, renew, confirm) == (300, T // 4, 303) and "probe" in how, (lease, how)
        # the policy's hook timeout follows: a third of T, which now fits
        # (lease - confirmation - renewal = 897 ms; 490 with the tick at T/2)
        # the start line says its plan is the one assumed before the servers
        # told their tick; the budgets line gives the plan learned
        start = a.wait_for("start", timeout=1)
        assert (start["server_tick"], start["server_tick_ms"], start["renew_ms"],
                start["hook_timeout_ms"]) == ("asked", T // 2, T // 10, 490), start
        bud = a.wait_for("budgets", timeout=5)
        assert (bud["server_tick_ms"], bud["renew_ms"], bud["lease_ms"], bud["hook_timeout_ms"]) == \
            (300, T // 4, lease, T // 3), (bud, a.describe())
        assert [e for e in a.find("log") if "a session that asked for 500 ms was granted 600 ms"
                in e.get("msg", "")], a.describe()
        # the probe's session is gone: one session left (the agent's own)
        h.wait_until(lambda: len(zk.cons()) == 1, 10, "the probe's session closed")
        b = h.Agent(zk, "tb", path=PATH, session_timeout=T, server_tick=200)
        b.wait_for("follower", timeout=10)
        start = b.wait_for("start", timeout=1)
        assert (start["server_tick"], start["server_tick_ms"], start["renew_ms"]) == \
            ("stated", 200, T // 4), start
        assert not [e for e in b.find("log") if "a session that asked" in e.get("msg", "")]
        assert not b.find("budgets"), b.describe()      # the start line's plan stands
        for x in (a, b):
            x.term()
            assert x.wait_exit(10) == 0
        with h.StallProxy(zk.port) as px:
            # held until the probe gave up (its deadline, a quarter of T
            # after the connect began), whenever the agent got there
            px.hold(60.0)
            c = h.Agent(zk, "tc", path=PATH, session_timeout=T, server_tick=None,
                        zkhosts=px.hostport, extra=["--log-level", "debug"])
            h.wait_until(lambda: [e for e in c.find("log") if "no shorter server tick learned"
                                  in e.get("msg", "")], 20, "the probe gave up")
            px.hold(0)
            c.wait_for("leader", timeout=10)
            # the plan of the start stands: nothing learned, nothing changed
            start = c.wait_for("start", timeout=1)
            assert (start["server_tick"], start["server_tick_ms"], start["renew_ms"]) == \
                ("asked", T // 2, T // 10), start
            assert not [e for e in c.find("log") if "tick is at most" in e.get("msg", "") or
                        "renewal every" in e.get("msg", "")], c.describe()
            assert not c.find("budgets"), c.describe()
            c.term()
            assert c.wait_exit(10) == 0


class CuttingProxy(h.StallProxy):
    """A StallProxy that can also cut its connections (the client sees a
    reset and connects again, through the proxy)."""

    def _pump(self, a, b):
        with self.lock:
            self.__dict__.setdefault("socks", []).extend([a, b])
        super()._pump(a, b)

    def cut(self):
        import socket
        with self.lock:
            socks, self.socks = self.__dict__.get("socks", []), []
            self.held_until = 0.0
        for x in socks:
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _win_on_a_new_connection(zk, px, path, id_prefix="s", script=None, extra=()):
    """Candidate a leads; b, behind the proxy px, follows. b's connection is
    held silent, a stops, and the connection is cut (1.25 s held: under the
    client's 2/3 T): b connects again (the same session) and wins with a
    lease too old to start on. Returns b and its mark from before the hold
    (a has exited). extra: b's further options."""
    a = h.Agent(zk, id_prefix + "a", path=path, session_timeout=T)
    a.wait_for("leader", timeout=10)
    b = h.Agent(zk, id_prefix + "b", path=path, session_timeout=T, zkhosts=px.hostport,
                script=script, extra=["--log-level", "debug"] + list(extra))
    b.wait_for("follower", timeout=10)
    time.sleep(1.0)
    mark = b.mark()
    px.hold(5.0)
    time.sleep(0.5)
    a.term()
    assert a.wait_exit(10) == 0
    time.sleep(0.75)
    px.cut()
    return b, mark


def test_a_term_that_waits_for_its_lease_sends_no_storm_of_renewals():
    """The next in line's connection is held silent, then cut, while the
    leader stops: it connects again (the same session) and wins with a
    lease too old to start on, so its term waits for renewals. On a new
    connection the lease moves only with a renewal sent a confirmation
    step (a server tick and a bit) after the first one's answer; one sent
    sooner confirms nothing. The waiting term asked for a renewal at every
    pump, and each answer pumped it again: one write per round trip until
    a tick had passed (121-155 renewals before the term started). Now the
    next goes a step after the last."""
    with h.ZooKeeper() as zk:
        with CuttingProxy(zk.port) as px:
            b, mark = _win_on_a_new_connection(zk, px, PATH)
            b.wait_for("session", timeout=5, since=mark, reason="reconnected")
            b.wait_for("leader", timeout=10, since=mark)
            time.sleep(0.3)
            waited = [e for e in b.events()[mark:] if "waiting for the quorum leader" in e.get("msg", "")]
            answers = [e for e in b.events()[mark:]
                       if e.get("msg", "").startswith("renewal answered")]
            print("  info: %d renewal answers" % len(answers))
            assert waited, ("the term did not wait for its lease: nothing checked", b.describe(30))
            assert not b.find("stepdown", since=mark), b.describe()
            # two on the new connection to confirm a fresh base, another
            # if the first pair is too close, one at once after an answer
            # that came late, the periodic ones of the 0.3 s after the
            # start (a storm: one per round trip, 121-155)
            assert len(answers) <= 8, (len(answers), b.describe(12))
            b.term()
            assert b.wait_exit(10) == 0


def _metric(agent, name):
    """A sample of the agent's /metrics (--status), by its name and labels."""
    ev = agent.wait_for("status_listen", timeout=10)
    with urllib.request.urlopen("http://%s/metrics" % ev["addr"], timeout=5) as r:
        text = r.read().decode()
    m = re.search(r'^%s ([0-9.]+)$' % re.escape(name), text, re.M)
    assert m, text
    return float(m.group(1))


def _requests(agent, op):
    """Requests of kind op the agent's session has sent (/metrics)."""
    return int(_metric(agent, 'zkelect_zk_requests_total{op="%s"}' % op))


def test_a_waiting_term_starts_on_a_write_with_renewals_by_sync():
    """With --renew-by sync, a term that waits for its lease starts only on
    a write's answer (the leader data publish, or a renewal by write, which
    the stream sends while the term waits), never on a sync's: a quorum
    leader answers a sync even for a session it is expiring (its
    checkSession's error does not stop Leader.processSync, and the follower
    answers ZOK), while a write of that session fails. Here b wins on a new
    connection with a lease too old to start on: its publish confirms only
    the revalidation (the old connection's last request), and the next
    confirming answer, a step later, is the one that starts the term. That
    was a sync (no renewal write was ever sent: the term started on a
    sync's answer); now it is a write, and the agent says which."""
    with h.ZooKeeper() as zk:
        with CuttingProxy(zk.port) as px:
            b, mark = _win_on_a_new_connection(zk, px, PATH + "-bysync", id_prefix="y",
                                               extra=["--renew-by", "sync", "--status", "127.0.0.1:0"])
            b.wait_for("session", timeout=5, since=mark, reason="reconnected")
            led = b.wait_for("leader", timeout=10, since=mark)
            commits_at_start = _requests(b, "commit")
            waited = b.find(lambda e: "waiting for the quorum leader" in e.get("msg", ""), since=mark)
            assert waited, ("the term did not wait for its lease: nothing checked", b.describe(30))
            said = b.find(lambda e: e.get("msg", "").startswith("lease confirmed by"), since=mark)
            print("  info: %s; %d renewal writes at the term's start, %d syncs" % (
                said[-1]["msg"] if said else "no release line", commits_at_start, _requests(b, "sync")))
            assert said and "a write's answer" in said[-1]["msg"], ("the waiting term did not start "
                                                                    "on a write's answer", b.describe(30))
            assert said[-1]["_i"] < led["_i"], b.describe(30)
            if "multi" in said[-1]["msg"]:
                assert commits_at_start >= 1, (commits_at_start, b.describe(30))
            # the term runs: its renewals are syncs again
            syncs = _requests(b, "sync")
            h.wait_until(lambda: _requests(b, "sync") > syncs, 5, "a renewal by sync")
            assert not b.find("stepdown", since=mark), b.describe()
            b.term()
            assert b.wait_exit(10) == 0


def test_a_reload_while_a_term_waits_for_its_lease_keeps_its_on_stepdown():
    """A reload while a won term waits for its lease (here: reconnected,
    with a lease too old to start on): the new script's leader event
    (reason "reload") finds no term yet and is skipped, and the term's own
    on_leader runs once the lease is confirmed. Its on_stepdown must run
    as well. It did not: the skipped event marked the epoch's step-down to
    be skipped, and the on_leader that ran did not clear the mark (a policy
    that releases a VIP in on_stepdown kept it)."""
    pol = h.policy("reload-wait", 'function on_leader(ev)\n'
                   '  zkelect.log("info", "on_leader epoch=" .. ev.epoch)\n'
                   'end\n'
                   'function on_stepdown(ev)\n'
                   '  zkelect.log("info", "on_stepdown epoch=" .. ev.epoch)\n'
                   'end\n')
    with h.ZooKeeper() as zk:
        with CuttingProxy(zk.port) as px:
            b, mark = _win_on_a_new_connection(zk, px, PATH + "-reload", id_prefix="r",
                                               script=pol)
            b.wait_for(lambda e: "waiting for the quorum leader" in e.get("msg", ""), timeout=10,
                       since=mark)
            b.signal(signal.SIGHUP)
            led = b.wait_for("leader", timeout=10, since=mark)
            rl = b.wait_for("reload", timeout=5, since=mark)
            # the reload came inside the wait (at least a server tick: two
            # renewals a confirmation step apart), before the term started
            assert rl["_i"] < led["_i"], ("the reload came after the term started", b.describe(20))
            on = b.wait_for(lambda e: e.get("event") == "script" and
                            e.get("msg", "") == "on_leader epoch=%d" % led["epoch"], timeout=5,
                            since=mark)
            b.term()
            assert b.wait_exit(10) == 0
            downs = [e for e in b.events()[on["_i"]:] if e.get("event") == "script" and
                     e.get("msg", "") == "on_stepdown epoch=%d" % led["epoch"]]
            assert len(downs) == 1, ("on_stepdown of the term did not run once", b.describe(20))


class QuorumMember(h.ZooKeeper):
    """One server of a small ensemble on loopback: the harness server's
    zoo.cfg (its own extra lines, e.g. its own minSessionTimeout) plus the
    ensemble's server lines, run by QuorumPeerMain. peers: [(peer_port,
    election_port)] of every member, this one's at myid - 1."""

    def __init__(self, myid, peers, extra_cfg):
        h.ZooKeeper.__init__(self, start=False, extra_cfg=extra_cfg)
        with open(self.cfg, "a") as f:
            f.write("".join("server.%d=127.0.0.1:%d:%d\n" % (i + 1, p, e) for i, (p, e) in enumerate(peers)))
        with open(os.path.join(self.datadir, "myid"), "w") as f:
            f.write("%d\n" % myid)

    def _launch(self):
        self.starts += 1
        cp = h.ZK_JAR + (":" + h.SLF4J_SIMPLE if os.path.exists(h.SLF4J_SIMPLE) else "")
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                ["java", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                 "-XX:-UsePerfData", "-Dzookeeper.log.dir=" + self.dir, "-cp", cp,
                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", self.cfg],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, cwd=self.dir,
                env=h._child_env(), preexec_fn=h._pdeathsig)
        self.pid = self.proc.pid


class SwitchingProxy(CuttingProxy):
    """A CuttingProxy whose new connections go to another server once
    switched."""

    def switch(self, port):
        with self.lock:
            self.target = ("127.0.0.1", port)
        self.cut()


def test_the_lease_keeps_the_smallest_grant_of_the_session():
    """Each server clamps a session's timeout to its own minSessionTimeout
    and maxSessionTimeout at every handshake, and revalidates the session
    with that grant, but a newly elected quorum leader re-tracks every
    session with the timeout stored when it was created (SessionTrackerImpl
    from ZKDatabase's sessionsWithTimeouts). A session created at 2000 ms on
    a server whose minimum is 400 that reconnects to one whose minimum is
    3000 is granted 3000 ms there, yet a later leader counts 2000: the lease
    stays planned with 2000 ms (it followed the new grant: a lease a
    successor's countdown does not bound), and the agent says why. Two real
    servers in one ensemble, each with its own bounds; the candidate reaches
    them through a proxy that moves it from the first to the second."""
    peers = [(h.free_port(), h.free_port()) for _ in range(2)]
    zk1 = QuorumMember(1, peers, ["minSessionTimeout=400"])
    zk2 = QuorumMember(2, peers, ["minSessionTimeout=3000"])
    for z in (zk1, zk2):
        z._launch()
    for z in (zk1, zk2):
        z._await()
    try:
        with SwitchingProxy(zk1.port) as px:
            a = h.Agent(zk1, "g", path=PATH + "-grant", session_timeout=T, zkhosts=px.hostport,
                        extra=["--server-tick", "200", "--status", "127.0.0.1:0"])
            a.wait_for("leader", timeout=15)
            # granted what it asked: the plan of the start stands
            assert not a.find(lambda e: "granted" in e.get("msg", "")), a.describe()
            lease = a.last("start")["lease_ms"]
            assert _metric(a, "zkelect_lease_duration_seconds") == lease / 1000.0
            mark = a.mark()
            px.switch(zk2.port)
            a.wait_for("session", timeout=10, since=mark, reason="reconnected")
            # the plan follows a grant in the reconnect's own callback
            now = _metric(a, "zkelect_lease_duration_seconds")
            plans = [e["msg"] for e in a.events()[mark:] if e.get("msg", "").startswith("lease ")]
            print("  info: lease %d ms at the start, %.0f ms after the reconnect %s" % (
                lease, now * 1000, plans))
            assert now == lease / 1000.0 and not plans, ("the lease was planned again after the "
                                                         "reconnect", plans, a.describe(20))
            said = a.wait_for(lambda e: "this server granted 3000 ms" in e.get("msg", ""), timeout=5,
                              since=mark)
            print("  info: " + said["msg"])
            assert not a.find("stepdown", since=mark), a.describe()
            a.term()
            assert a.wait_exit(10) == 0
    finally:
        zk1.stop()
        zk2.stop()


def test_strict_policy_steps_down_on_disconnect():
    tmp = h.mkdtemp("strict")
    os.environ["ZKT_DIR"] = tmp
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "st", path=PATH, script=TERM, session_timeout=T,
                    extra=["--on-disconnect", "stepdown"])
        la = a.wait_for("leader", timeout=10)
        cpid = child_pid(a)
        ma = a.mark()
        blip(a, zk)
        sd = a.wait_for("stepdown", timeout=5, since=ma)
        assert sd["reason"] == "disconnect" and sd["epoch"] == la["epoch"], sd
        # the node is released and a new one leads a new term
        l2 = a.wait_for("leader", timeout=10, since=ma)
        assert l2["epoch"] > la["epoch"] and l2["node"] != la["node"], (l2, la)
        h.wait_until(lambda: not h.pid_alive(cpid), 5, "the old term's child to be gone")
        a.term()
        assert a.wait_exit(10) == 0


def test_settings_that_break_the_lease_are_refused():
    with h.ZooKeeper() as zk:
        # at start-up: the stepdown budget eats the lease
        code, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "x", "--session-timeout", "2000",
                                   "--stepdown-budget", "1500"], timeout=10)
        assert code == 78, (code, err)
        assert "stepdown budget 1500 ms" in err and "2000" in err, err
        code, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "x", "--session-timeout", "2000",
                                   "--hook-timeout", "1500"], timeout=10)
        assert code == 78 and "hook budget 1500 ms" in err, (code, err)
        # a renewal interval the lease cannot hold twice
        code, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "x", "--session-timeout", "2000",
                                   "--renew-interval", "900"], timeout=10)
        assert code == 78 and "twice the renewal interval (1800 ms)" in err, (code, err)
        # what is left once a sync a server tick (by default half the
        # session timeout, x 1.01) later confirms a renewal
        assert "--renew-interval" in err and "server tick 1000 ms" in err and "690 ms" in err, err
        code, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "x", "--session-timeout", "2000",
                                   "--renew-interval", "900", "--server-tick", "200"],
                                  timeout=10)
        assert code == 78 and "server tick 200 ms" in err and "1498 ms" in err, (code, err)
        code, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "x", "--session-timeout", "2000",
                                   "--server-tick", "0"], timeout=10)
        assert code == 64 and "--server-tick" in err, (code, err)
        # after negotiation: the server caps sessions at 20000 ms, which
        # leaves too short a lease with a 16000 ms stepdown budget
        code, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                   "--id", "x", "--session-timeout", "60000",
                                   "--stepdown-budget", "16000", "--server-tick", "200"],
                                  timeout=20)
        assert code == 78, (code, err)
        assert "granted a session timeout of 20000 ms (asked 60000 ms)" in err, err


def test_a_refused_stepdown_budget_says_what_fits():
    """A --stepdown-budget the lease cannot hold is refused at start (no
    server needed) with the values it used: the session timeout, the server
    tick and where it came from (without --server-tick: assumed, half the
    session timeout), the budget asked and the largest that fits (also with
    ZooKeeper's default tickTime), and the flag for each. The largest is
    accepted, one more is not; an agent with a command says its stop grace
    (three eighths of the budget) at start."""
    base = [h.ZKELECT_BIN, "run", "--zk", "127.0.0.1:1", "--path", PATH, "--id", "x",
            "--session-timeout", "10000", "--log", "json"]
    code, out, err, _ = h.run(base + ["--stepdown-budget", "3000", "--", "true"], timeout=10)
    assert code == 78 and len(err.strip().splitlines()) == 1, (code, err)
    for want in ("session timeout 10000 ms", "stepdown budget 3000 ms", "server tick 5000 ms x",
                 "the server tick 5000 ms is assumed: half the session timeout, as no "
                 "--server-tick states the servers' tickTime",
                 "--stepdown-budget can be at most 2450 ms (asked 3000 ms)",
                 "with --server-tick 2000 (ZooKeeper's default tickTime) at most 5480 ms",
                 ": state the servers' tickTime with --server-tick, lower --stepdown-budget, or "
                 "raise --session-timeout"):
        assert want in err, (want, err)
    code, out, err, _ = h.run(base + ["--server-tick", "2000", "--stepdown-budget", "5481", "--",
                                      "true"], timeout=10)
    assert code == 78, (code, err)
    assert "the server tick 2000 ms is stated (--server-tick)" in err, err
    assert "--stepdown-budget can be at most 5480 ms (asked 5481 ms)" in err, err
    assert "ZooKeeper's default" not in err, err
    for budget, grace in ((None, 375), ("5480", 2055)):
        extra = ["--server-tick", "2000", "--stepdown-budget", budget] if budget else []
        code, out, err, _ = h.run(base + ["--connect-timeout", "500"] + extra + ["--", "true"],
                                  timeout=20)
        assert code == 69, (code, err)
        lines = [json.loads(l) for l in err.splitlines() if l.startswith("{")]
        g = [e for e in lines if e["event"] == "cmd_grace"]
        assert len(g) == 1 and g[0]["stop_grace_ms"] == grace, (budget, g)
        assert g[0]["stepdown_budget_ms"] == int(budget or 1000), g
        assert g[0]["session_timeout_ms"] == 10000 and "--stepdown-budget" in g[0]["msg"], g


def test_the_lease_counts_from_a_confirmed_renewal():
    """A renewal counts only once a later one, sent a server tick (x 1.01)
    after its answer, came back through the quorum leader: the lease a leader
    has left is never more than lease - that gap. Stating the server's real
    200 ms tick gives up to 1700 - 202 = 1498 ms (as the servers' conf tells
    it); with no tick stated and conf not answered, what the servers' grants
    tell: a probe session asking 500 ms is granted 500
    (minSessionTimeout 400), a tick of at most 250 ms, 1700 - 253 = 1447 ms;
    where they tell nothing shorter (minSessionTimeout 2000: the probe is
    granted the whole session timeout), half the 2000 ms session, 1700 -
    1010 = 690 ms. A graceful hand-over still takes the fast path in each."""
    for cfg, tick, most in (([NO_CONF], None, 1447), ([], 200, 1498),
                            (["minSessionTimeout=2000", NO_CONF], None, 690)):
        with h.ZooKeeper(extra_cfg=cfg) as zk:
            path = PATH + "-tick%s" % (tick or "default")
            a, b = h.start_in_order(zk, ("ta", "tb"), path=path, session_timeout=T,
                                    server_tick=tick)
            time.sleep(1.0)                 # renewals under way
            mb = b.mark()
            a.term()
            lb = b.wait_for("leader", timeout=5, since=mb)
            assert 0 < lb["lease_ms"] <= most, (tick, lb)
            assert a.wait_exit(10) == 0
            # b renews as leader: its lease stays positive and under the bound
            time.sleep(1.0)
            assert b.alive() and not b.events("stepdown"), b.describe()
            b.term()
            assert b.wait_exit(10) == 0


def test_renewals_never_walk_the_leasers_guard_or_not():
    """A renewal moves the session's lease base forward, which only
    lengthens leases: the conn moves the earliest lease end with the base
    and checks its leaders only when one comes (or the base moves back, or a
    term waits for it). So an idle leader makes no check of all its leasers
    at its renewals (with 10,000 elections on one session each such check
    cost 10,000 calls), with a fail-stop guard too: its ends are offsets
    from the session's lease base, which the guard holds once and the conn
    moves with one store. The guarded leader outlives several leases (its
    hard end, the lease end + the step-down budget + half the margin, about
    1.9 s after the base here) without a word from its watcher: its ends do
    follow the base. Both over the same window, counted from their debug
    lines; a lease that does come to its end is still caught:
    test_pause_past_the_lease."""
    with h.ZooKeeper() as zk:
        agents = {}
        for fs in ("off", "agent"):
            agents[fs] = h.Agent(zk, "walk-" + fs, path=PATH + "-walk-" + fs, session_timeout=T,
                                 server_tick=200, extra=["--fail-stop", fs, "--log-level", "debug"])
        for a in agents.values():
            a.wait_for("leader", timeout=15)
        time.sleep(0.5)
        marks = {fs: a.mark() for fs, a in agents.items()}
        time.sleep(3.0)             # about six renewals each (every T/4), past 1.5 hard ends
        walks = {fs: len(a.find(lambda e: "lease check of all" in e.get("msg", ""), since=marks[fs]))
                 for fs, a in agents.items()}
        print("  info: checks of all leasers over 3 s: %s" % walks, flush=True)
        # a renewal answered too late to keep the lease fresh may bring a
        # lease end on a loaded machine: at most one such
        for fs in walks:
            assert walks[fs] <= 1, (walks, agents[fs].describe())
        said = agents["agent"].find(lambda e: e.get("event") == "fail_stop" and
                                    e.get("level") in ("warn", "error"), since=marks["agent"])
        assert not said, agents["agent"].describe()
        for a in agents.values():
            assert not a.events("stepdown"), a.describe()
        # and the guard is armed: frozen, the guarded leader is SIGKILLed
        # by its watcher at its hard end
        g = agents["agent"]
        t0 = time.monotonic()
        g.sigstop()
        assert g.wait_exit(10) == -signal.SIGKILL, g.describe()
        print("  info: the frozen guarded leader was killed %.2f s after SIGSTOP"
              % (time.monotonic() - t0), flush=True)
        agents["off"].term()
        assert agents["off"].wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
