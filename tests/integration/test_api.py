"""The embedding C API under one host loop (tests/tools/api_host.c): two
elections on ONE shared zke_conn and two on their own conns at the same time;
events reach the right election with the right fields; leadership moves in
each election independently; expiry of the shared session makes both of its
elections step down and rejoin on one new session; resign, stop and free from
inside on_leader / on_follower / on_stepdown; every callback counted."""
import os
import re
import subprocess
import time

import zkharness as h

HOST = os.environ.get("ZKELECT_API_HOST_BIN") or os.path.join(h.REPO, "build", "tests", "tools", "api_host")
E1, E2, E3 = "/api/e1", "/api/e2", "/api/e3"
EV_RE = re.compile(r"^ev (\S+) (\S+) (.*)$")


class ApiHost:
    def __init__(self, zk):
        self.zk = zk
        self.dir = h.mkdtemp("api")
        self.out = os.path.join(self.dir, "out.log")
        self.sessfile = os.path.join(self.dir, "shared.session")
        self.outf = open(self.out, "wb")
        self.proc = subprocess.Popen([HOST, zk.hostport, self.sessfile], stdin=subprocess.PIPE,
                                     stdout=self.outf, stderr=subprocess.STDOUT, preexec_fn=h._pdeathsig)
        self.wait_line(lambda l: l == "ready")

    def lines(self):
        """The host's whole lines so far (one it is still writing is not
        one yet: a status line read half-written had no list= field)."""
        with open(self.out, errors="replace") as f:
            return [l.rstrip("\n") for l in f if l.endswith("\n")]

    def describe(self, n=40):
        return "\n".join(self.lines()[-n:])

    def send(self, cmd):
        self.proc.stdin.write((cmd + "\n").encode())
        self.proc.stdin.flush()

    def mark(self):
        return len(self.lines())

    def wait_line(self, pred, since=0, timeout=15, desc="line"):
        def f():
            for l in self.lines()[since:]:
                if pred(l):
                    return l
            return None
        try:
            return h.wait_until(f, timeout=timeout, desc=desc)
        except h.Timeout as e:
            raise h.Timeout("%s; host output:\n%s" % (e, self.describe())) from None

    def events(self, name=None, type=None, since=0):
        out = []
        for l in self.lines()[since:]:
            m = EV_RE.match(l)
            if not m or (name and m.group(1) != name) or (type and m.group(2) != type):
                continue
            ev = {"name": m.group(1), "type": m.group(2)}
            for kv in m.group(3).split(" "):
                k, _, v = kv.partition("=")
                ev[k] = v
            out.append(ev)
        return out

    def wait_ev(self, name, type, since=0, timeout=15, **fields):
        def f():
            for ev in self.events(name, type, since):
                if all(ev.get(k) == str(v) for k, v in fields.items()):
                    return ev
            return None
        try:
            return h.wait_until(f, timeout=timeout, desc="%s %s %r" % (name, type, fields))
        except h.Timeout as e:
            raise h.Timeout("%s; host output:\n%s" % (e, self.describe())) from None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.outf.close()


def no_violation(host):
    bad = [l for l in host.lines() if l.startswith("VIOLATION") or "AddressSanitizer" in l
           or "runtime error" in l]
    assert not bad, "\n".join(bad) + "\n" + host.describe()


def status_fields(line):
    """api_host's `status NAME ...` or `view NAME ...` line as a dict."""
    return dict(kv.split("=", 1) for kv in line.split()[2:] if "=" in kv)


def test_a_follower_lists_the_election_for_a_reader_only():
    """The census (census_interval_ms) of a follower further back reads the
    election's size every interval; it lists the election again after a
    change of membership only while a reader looks at the view
    (zke_agent_view): without one, a failover would make every follower
    list the election within an interval (a herd, N listings a failover).
    a leads, b to f follow on sessions of their own; a steps down, b leads,
    c is next in line (its own watch tells it). d, whose view nobody reads,
    lists nothing more over five intervals (its size still follows); e, read
    all along, lists it and names b. d's first reader gets d's own view at
    once (no stale census), and b within two intervals. f's census interval
    is 60 s: its first reader's census goes at once, not at its time."""
    iv = 500
    with h.ZooKeeper() as zk:
        host = ApiHost(zk)
        try:
            for name in ("a", "b", "c", "d", "e", "f"):
                host.send("census %d" % (60000 if name == "f" else iv))
                m = host.mark()
                host.send("add %s own /census" % name)
                host.wait_ev(name, "leader" if name == "a" else "follower", since=m)

            def look(how, name):
                k = host.mark()
                host.send("%s %s" % (how, name))
                return status_fields(host.wait_line(
                    lambda l: l.startswith("%s %s " % (how, name)), since=k))
            # e's reader from the start: its census lists the election
            h.wait_until(lambda: look("view", "e")["leader"] == "a" and
                         int(look("status", "e")["list"]) >= 2, timeout=10, interval=0.1,
                         desc="e's census listed the election")
            h.wait_until(lambda: look("status", "d")["size"] == "6", timeout=10, interval=0.1,
                         desc="d's census read the size")
            d0 = look("status", "d")
            # e's listings before the change: its census may list the new
            # line-up before b's leader event reaches us (CI run 57)
            e_list = int(look("status", "e")["list"])
            m = host.mark()
            host.send("stop a")
            host.wait_ev("b", "leader", since=m)
            t_end = time.monotonic() + 5 * iv / 1000.0
            for _ in range(1000):
                if time.monotonic() >= t_end:
                    break
                look("view", "e")            # e's reader goes on looking
                time.sleep(0.1)
            d1, e1 = look("status", "d"), look("status", "e")
            # d: no listing, no read of a leader's data, its size followed
            assert d1["list"] == d0["list"] and d1["get"] == d0["get"], (d0, d1, host.describe())
            assert d1["size"] == "5" and int(d1["exists"]) > int(d0["exists"]), (d0, d1)
            # e: listed again and names the new leader
            assert int(e1["list"]) > e_list and e1["leader"] == "b", (e_list, e1)
            # d's first reader: d's own view now, the census's within two intervals
            first = look("view", "d")
            assert first["leader"] == "a" and first["position"] == "3", first   # its join's
            h.wait_until(lambda: look("view", "d")["leader"] == "b", timeout=2 * iv / 1000.0 + 1,
                         interval=0.05, desc="d's view names b")
            assert int(look("status", "d")["list"]) == int(d1["list"]) + 1, host.describe()
            # f: a census sent at its first reader's look, not at its time (up to 60 s)
            f0 = look("status", "f")
            assert f0["leader"] == "a" and f0["list"] == "1", f0       # its join's listing
            look("view", "f")
            h.wait_until(lambda: look("view", "f")["leader"] == "b", timeout=3, interval=0.05,
                         desc="f's view names b")
            f1 = look("status", "f")
            assert f1["list"] == "2" and f1["size"] == "5", f1
            host.send("quit")
            assert host.proc.wait(30) == 0, host.describe()
            no_violation(host)
        finally:
            host.kill()


def test_two_elections_shared_and_own():
    with h.ZooKeeper() as zk:
        host = ApiHost(zk)
        try:
            run_scenario(zk, host)
        finally:
            host.kill()


def run_scenario(zk, host):
    # 1. s1, s2 on the shared conn lead e1 and e2; p1, p2 (own conns) follow
    host.send("add s1 shared " + E1)
    host.send("add s2 shared " + E2)
    l1 = host.wait_ev("s1", "leader", path=E1, id="s1", reason="elected")
    l2 = host.wait_ev("s2", "leader", path=E2, id="s2")
    assert l1["session"] == l2["session"], (l1, l2)
    shared = h.sid(l1["session"])
    host.send("add p1 own " + E1)
    host.send("add p2 own " + E2)
    f1 = host.wait_ev("p1", "follower", path=E1, leader="s1", position=1)
    f2 = host.wait_ev("p2", "follower", path=E2, leader="s2", position=1)
    sessions = {h.sid(f1["session"]), h.sid(f2["session"]), shared}
    assert len(sessions) == 3, sessions
    # the server sees three sessions (one per conn), and the shared one carries both
    # elections' nodes
    cons = zk.cons()
    assert sessions <= set(cons), (sessions, cons)
    assert len([s for s in cons if s in sessions]) == 3, cons
    assert int(zk.mntr().get("zk_num_alive_connections", "0")) >= 3
    eph = zk.ephemerals()
    assert {p.rsplit("/", 1)[0] for p in eph.get(shared, ())} == {E1, E2}, eph
    assert h.read_session_file(host.sessfile)[0] == shared
    # zke_conn_free refuses while agents are on the conn
    m = host.mark()
    host.send("conn_free")
    assert "rc=-1" in host.wait_line(lambda l: l.startswith("conn_free"), since=m)

    # 2. leadership moves in e1 only: s1 resigns (from the host), p1 leads
    m = host.mark()
    host.send("resign s1")
    host.wait_ev("s1", "stepdown", since=m, reason="resign", epoch=l1["epoch"])
    p1l = host.wait_ev("p1", "leader", since=m, previous="s1", path=E1)
    assert int(p1l["epoch"]) > int(l1["epoch"])
    host.wait_ev("s1", "follower", since=m, leader="p1", position=1)
    assert not host.events("s2", "stepdown", since=m) and not host.events("p2", "leader", since=m)

    # 3. resign from inside on_leader: s1 (next in line) leads when p1 resigns, and
    #    resigns in its callback; then whoever rejoined first leads e1
    m = host.mark()
    host.send("arm s1 leader resign")
    host.send("resign p1")
    host.wait_ev("p1", "stepdown", since=m, reason="resign")
    host.wait_ev("s1", "leader", since=m, previous="p1")
    host.wait_line(lambda l: l == "action s1 resign rc=0 in=leader", since=m)
    host.wait_ev("s1", "stepdown", since=m, reason="resign")
    m3 = host.mark()
    h.wait_until(lambda: host.events("s1", "leader", since=m3) or host.events("p1", "leader", since=m3),
                 desc="a leader in e1 again")
    h.wait_until(lambda: host.events("s1", "follower", since=m3) or host.events("p1", "follower", since=m3),
                 desc="a follower in e1 again")
    assert not host.events("s2", since=m) and not host.events("p2", since=m), host.describe()

    # 4. the shared session expires: s2 (leader of e2) and s1 both lose it, s2 steps
    #    down, both come back on ONE new session and rejoin
    m = host.mark()
    h.expire_session(zk, host.sessfile)
    host.wait_ev("s1", "session", since=m, reason="expired")
    host.wait_ev("s2", "session", since=m, reason="expired")
    # (its client may first see its node vanish on a reconnect: reason lost, as in test_expire;
    # and the expiry takes the session's connection away first: on a loaded machine the
    # lease may run out before the reconnect hears of the expiry, reason lease, the safe side)
    sd = h.wait_until(lambda: host.events("s2", "stepdown", since=m), desc="s2 stepdown")[0]
    assert sd["reason"] in ("expired", "lost", "lease"), sd
    host.wait_ev("p2", "leader", since=m, previous="s2", timeout=20)
    c1 = host.wait_ev("s1", "session", since=m, reason="connected", timeout=20)
    c2 = host.wait_ev("s2", "session", since=m, reason="connected", timeout=20)
    assert c1["session"] == c2["session"] and h.sid(c1["session"]) != shared, (c1, c2)
    host.wait_ev("s2", "follower", since=m, leader="p2")
    h.wait_until(lambda: host.events("s1", "follower", since=m) or host.events("s1", "leader", since=m),
                 desc="s1 rejoined")
    # the session events reached the host's callbacks in creation order: s1, then s2
    sess = [(e["name"], e["reason"]) for e in host.events(type="session", since=m)
            if e["name"] in ("s1", "s2")]
    assert sess.index(("s1", "expired")) < sess.index(("s2", "expired")), sess
    assert sess.index(("s1", "connected")) < sess.index(("s2", "connected")), sess
    # the own sessions were not touched
    assert not host.events("p1", "session", since=m) and not host.events("p2", "session", since=m)
    new_shared = h.sid(c1["session"])
    h.wait_until(lambda: {p.rsplit("/", 1)[0] for p in zk.ephemerals().get(new_shared, ())} == {E1, E2},
                 desc="both shared nodes on the new session")

    # 5. stop from inside on_stepdown: p2 resigns and stops in its on_stepdown; s2 leads e2
    m = host.mark()
    host.send("arm p2 stepdown stop")
    host.send("resign p2")
    host.wait_line(lambda l: l == "action p2 stop in=stepdown", since=m)
    host.wait_ev("p2", "stopped", since=m, reason="stop")
    host.wait_ev("s2", "leader", since=m, previous="p2")

    # 6. free from inside on_follower: p6 joins e2 behind s2 and is freed in on_follower
    m = host.mark()
    host.send("arm p6 follower free")
    host.send("add p6 own " + E2)
    host.wait_ev("p6", "follower", since=m, leader="s2")
    host.wait_line(lambda l: l == "action p6 free in=follower", since=m)
    host.wait_ev("p6", "stopped", since=m, reason="free")

    # 7. stop from inside on_follower, on the shared conn: s4 joins e4 behind p4
    m = host.mark()
    host.send("add p4 own /api/e4")
    host.wait_ev("p4", "leader", since=m)
    host.send("arm s4 follower stop")
    host.send("add s4 shared /api/e4")
    host.wait_ev("s4", "follower", since=m, leader="p4")
    host.wait_line(lambda l: l == "action s4 stop in=follower", since=m)
    host.wait_ev("s4", "stopped", since=m, reason="stop")
    # one running agent per election path on a conn: a second one on e1 is refused
    host.send("add s5 shared " + E1)
    host.wait_line(lambda l: l.startswith("error add s5") and "one candidate per election path" in l,
                   since=m)

    # 8. free from inside on_leader on the shared conn: its node is deleted at once
    m = host.mark()
    host.send("arm s3 leader free")
    host.send("add s3 shared " + E3)
    host.wait_line(lambda l: l == "action s3 free in=leader", since=m)
    host.wait_ev("s3", "stepdown", since=m, reason="shutdown")
    host.wait_ev("s3", "stopped", since=m, reason="free")
    h.wait_until(lambda: not any(p.startswith(E3 + "/") for p in zk.ephemerals().get(new_shared, ())),
                 desc="s3's node deleted although the shared session lives on")
    # the other elections on the shared conn went on undisturbed
    assert not host.events("s1", "session", since=m) and not host.events("s2", "stepdown", since=m)

    # 9. quit: every agent stops (s1, s2 leaders step down), each freed in its on_stopped
    m = host.mark()
    host.send("quit")
    assert host.proc.wait(30) == 0, host.describe()
    lines = host.lines()
    assert "conn_free rc=0" in lines, host.describe()
    no_violation(host)
    counts = {}
    for l in lines:
        if l.startswith("count "):
            _, name, typ, n = l.split()
            counts[(name, typ)] = int(n)
    names = ("s1", "s2", "p1", "p2", "p4", "s3", "s4", "p6")
    for name in names:
        evs = host.events(name)
        # the host's own counts match the lines it printed: one callback per event
        for typ in {e["type"] for e in evs}:
            assert counts.get((name, typ)) == len([e for e in evs if e["type"] == typ]), (name, typ)
        assert counts.get((name, "stopped")) == 1, (name, counts)
        assert counts.get((name, "leader"), 0) == counts.get((name, "stepdown"), 0), (name, counts)
    assert host.events("s2", "stepdown")[-1]["reason"] == "shutdown"     # it led e2 to the end
    # nothing of ours is left in ZooKeeper
    h.wait_until(lambda: not any(p.startswith("/api/") for ps in zk.ephemerals().values() for p in ps),
                 desc="no node left")


def test_a_guard_given_during_a_term_follows_its_renewals():
    """zke_agent_set_guard on a leader whose term runs arms the guard's hard
    end at once (lease end + step-down budget + half the margin) and, from
    then on, each renewal moves it on: the watcher (ZKE_GUARD_KILL_AGENT)
    never fires while the lease is renewed. Over three leases (session
    4000 ms) the host lives and the term goes on; a hard end left where it
    was set would SIGKILL the host about one lease after the guard came."""
    with h.ZooKeeper() as zk:
        host = ApiHost(zk)
        try:
            m = host.mark()
            host.send("add g1 shared /api/guard")
            host.wait_ev("g1", "leader", since=m)
            time.sleep(1.0)             # renewals under way, the term's end armed
            host.send("guard g1")
            line = host.wait_line(lambda l: l.startswith("guard g1 ") or l.startswith("error guard"),
                                  since=m)
            assert line.startswith("guard g1 watcher="), host.describe()
            watcher = int(line.split("=")[1])
            time.sleep(3 * 3.4)         # three leases of a 4000 ms session
            assert host.proc.poll() is None, "the guard killed a renewed term:\n" + host.describe()
            assert not host.events("g1", "stepdown", since=m), host.describe()
            assert h.pid_alive(watcher), host.describe()
            host.send("quit")
            assert host.proc.wait(30) == 0, host.describe()
            no_violation(host)
            h.wait_until(lambda: not h.pid_alive(watcher), timeout=10,
                         desc="the guard's watcher gone with its host")
        finally:
            host.kill()


def test_a_silent_watcher_fails_closed_without_the_host_telling():
    """The host never calls zke_agent_guard_down: its watcher SIGSTOPped,
    the guard's heartbeat (every 100 ms) is 1 s old within about 1.1 s, and
    at its next loop iteration the leader has no lease: it steps down with
    reason guard (its term does not act unguarded), and, the only
    candidate, wins again but does not lead while the watcher is silent.
    SIGCONT: the heartbeat is back, it leads again."""
    import signal
    with h.ZooKeeper() as zk:
        host = ApiHost(zk)
        try:
            m = host.mark()
            host.send("add g1 shared /api/silent")
            l1 = host.wait_ev("g1", "leader", since=m)
            host.send("guard g1")
            line = host.wait_line(lambda l: l.startswith("guard g1 ") or l.startswith("error guard"),
                                  since=m)
            assert line.startswith("guard g1 watcher="), host.describe()
            watcher = int(line.split("=")[1])
            time.sleep(0.5)             # (a few beats)
            m2 = host.mark()
            os.kill(watcher, signal.SIGSTOP)
            t0 = time.monotonic()
            host.wait_ev("g1", "stepdown", since=m2, reason="guard", epoch=l1["epoch"], timeout=15)
            took = time.monotonic() - t0
            # not before its last beat was 1 s old (it beat at most 100 ms
            # before the stop)
            assert took >= 0.5, took
            print("  info: the leader stepped down %.0f ms after its watcher's SIGSTOP" % (took * 1000))
            time.sleep(1.5)             # silent: no term starts meanwhile
            assert not host.events("g1", "leader", since=m2), host.describe()
            os.kill(watcher, signal.SIGCONT)
            again = host.wait_ev("g1", "leader", since=m2, timeout=20)
            assert int(again["epoch"]) > int(l1["epoch"]), again
            assert host.proc.poll() is None, host.describe()
            host.send("quit")
            assert host.proc.wait(30) == 0, host.describe()
            no_violation(host)
        finally:
            host.kill()


def test_a_log_level_drops_lines_where_they_arise():
    """zke_agent_set_log_level and zke_conn_set_log_level: under the level a
    line never reaches the host's log callback. Two agents on their own conns
    and two on the shared one, each set to a level just after it is added:
    over two seconds of their terms (a renewal answer is a debug line of the
    conn, twice a second) the ones left at debug get debug lines (the
    controls), the ones at info none, and the shared conn none once it is at
    info too. A level out of range is refused."""
    with h.ZooKeeper() as zk:
        host = ApiHost(zk)
        try:
            m = host.mark()
            for name, kind, path in (("loud", "own", "/api/l1"), ("quiet", "own", "/api/l2"),
                                     ("sloud", "shared", "/api/l3"), ("squiet", "shared", "/api/l4")):
                host.send("add %s %s %s" % (name, kind, path))
                host.send("loglevel %s %s" % (name, "info" if "quiet" in name else "debug"))
            for name in ("loud", "quiet", "sloud", "squiet"):
                host.wait_ev(name, "leader", since=m)
            # an unknown name is level -1 here: refused, and the reason names it
            for who in ("loud", "conn"):
                host.send("loglevel %s verbose" % who)
                line = host.wait_line(lambda l, w=who: l.startswith("loglevel %s verbose " % w), since=m)
                assert line.startswith("loglevel %s verbose rc=-1 log level -1 is none of" % who), line
            for name in ("loud", "quiet", "sloud", "squiet"):
                host.wait_line(lambda l, n=name: l.startswith("loglevel %s " % n) and l.endswith("rc=0"),
                               since=m)

            def counts(name):
                k = host.mark()
                host.send("logcount " + name)
                line = host.wait_line(lambda l: l.startswith("logcount %s " % name), since=k)
                return dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in line.split()[2:])

            def control_renewed(name, n=4):
                """Until the control got n debug lines since its counts were
                reset: n renewals answered on every conn meanwhile."""
                h.wait_until(lambda: counts(name)["debug"] >= n, timeout=15, interval=0.25,
                             desc="%d debug lines of %s" % (n, name))

            control_renewed("loud")
            assert counts("quiet")["debug"] == 0, host.describe()
            control_renewed("conn", 1)          # the shared conn's own control
            k = host.mark()
            host.send("loglevel conn info")
            host.wait_line(lambda l: l == "loglevel conn info rc=0", since=k)
            host.send("loglevel loud debug")    # the control's counts from here
            control_renewed("loud")
            assert counts("conn")["debug"] == 0, host.describe()
            assert counts("squiet")["debug"] == 0, host.describe()
            host.send("quit")
            assert host.proc.wait(30) == 0, host.describe()
            no_violation(host)
        finally:
            host.kill()


def test_agents_on_one_session_plan_with_the_tick_it_pairs_with():
    """One session pairs every renewal with the longest server tick any of
    its agents assumes, so each agent plans its lease with that tick. x
    states none: the shared session (4000 ms) asked the servers, whose conf
    told their tickTime, 200. y, started later on the same session, states 900:
    the session pairs with 900 from then on, and x plans again with it (a
    lease planned with 200 counts on a base fresher than the renewals can
    confirm). An agent on a session of its own keeps what its servers told."""
    with h.ZooKeeper() as zk:
        host = ApiHost(zk)
        try:
            m = host.mark()

            def plan(name):
                k = host.mark()
                host.send("plan " + name)
                line = host.wait_line(lambda l: l.startswith("plan %s " % name), since=k)
                return dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in line.split()[2:])
            host.send("add x shared /api/tick-x")
            host.send("add o own /api/tick-o")
            host.wait_ev("x", "leader", since=m)
            host.wait_ev("o", "leader", since=m)
            px = plan("x")
            assert (px["tick"], px["session"]) == (200, 4000), (px, host.describe())
            assert plan("o")["tick"] == 200, host.describe()
            host.send("add y shared /api/tick-y 900")
            host.wait_ev("y", "leader", since=m)
            assert plan("y")["tick"] == 900, host.describe()
            h.wait_until(lambda: plan("x")["tick"] == 900, timeout=10, interval=0.2,
                         desc="x plans with the session's 900")
            px = plan("x")
            assert px["confirm"] == 909 and px["renew"] == 1000, px
            assert plan("o")["tick"] == 200, host.describe()
            # x and y renew on with the new plan: each one's lease is renewed
            # (the lease left grows) twice, and never runs out
            def lease(name):
                k = host.mark()
                host.send("status " + name)
                line = host.wait_line(lambda l: l.startswith("status %s " % name), since=k)
                return int(status_fields(line)["lease"])
            last, grew = {"x": lease("x"), "y": lease("y")}, {"x": 0, "y": 0}

            def renewed_twice():
                for name in last:
                    now = lease(name)
                    assert now > 0, (name, now, host.describe())
                    grew[name] += now > last[name]
                    last[name] = now
                return min(grew.values()) >= 2
            h.wait_until(renewed_twice, timeout=10, interval=0.05, desc="two renewals of x and y")
            assert not host.events("x", "stepdown") and not host.events("y", "stepdown"), \
                host.describe()
            host.send("quit")
            assert host.proc.wait(30) == 0, host.describe()
            no_violation(host)
        finally:
            host.kill()


if __name__ == "__main__":
    h.run_tests(globals(), timeout=150)
