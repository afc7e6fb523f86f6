#!/usr/bin/python3
"""zkelect ctl over the control socket (run --control PATH): status on a
leader and a follower (one further back naming the new leader after a
failover: the census, on with the control socket), resign, resign --to (the next in line; one
behind a Curator node and an unknown id refused, leadership staying put; the switchover to any
candidate is in test_handover.py), withdraw and
rejoin, reload, the socket's mode, a stale socket replaced, clients
that connect and send nothing never delaying a failover or the lease, and
resign --force: a plain resign on a live leader; on a frozen one (SIGSTOP
of the agent alone) its keeper ends the term first (the duty and the agent
SIGKILLed, the session closed), then the next in line leads, long before
the frozen term's own hard end and with no overlap of the two duties; on
one whose loop is stuck in one C call, the same once it did not answer
within 1 s."""
import json
import os
import signal
import socket
import stat
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import test_failstop as failstop  # noqa: E402  (its stall's calibration)
from kazoo.client import KazooClient  # noqa: E402

PATH = "/app/ctl"


def agent(zk, id, **kw):
    d = h.mkdtemp("sock")
    sock = os.path.join(d, "c.sock")
    a = h.Agent(zk, id, path=PATH, extra=["--control", sock] + list(kw.pop("extra", ())), **kw)
    a.sock = sock
    return a


def ctl(a, *args, json_out=False, timeout=40):
    argv = [h.ZKELECT_BIN, "ctl", "--control", a.sock] + list(args) + (["--json"] if json_out else [])
    rc, out, err, _ = h.run(argv, timeout=timeout)
    assert not h.crash_markers(out + err), (argv, out, err)
    return rc, out, err


def status(a):
    rc, out, err = ctl(a, "status", json_out=True)
    assert rc == 0, (rc, out, err)
    return json.loads(out)


def three(zk):
    a = agent(zk, "ca")
    a.wait_for("leader", timeout=15)
    b = agent(zk, "cb")
    b.wait_for("follower", timeout=15)
    c = agent(zk, "cc")
    c.wait_for("follower", timeout=15)
    return a, b, c


def stop(*agents):
    for x in agents:
        x.term()
    for x in agents:
        assert x.wait_exit(15) == 0, x.describe()


def test_status_resign_and_mode():
    with h.ZooKeeper() as zk:
        a = agent(zk, "sa")
        lead = a.wait_for("leader", timeout=15)
        b = agent(zk, "sb")
        b.wait_for("follower", timeout=15)
        assert stat.S_IMODE(os.lstat(a.sock).st_mode) == 0o600, oct(os.lstat(a.sock).st_mode)
        assert stat.S_ISSOCK(os.lstat(a.sock).st_mode)
        sa = status(a)
        assert sa["ok"] and sa["role"] == "leader" and sa["id"] == "sa" and sa["path"] == PATH, sa
        assert sa["leader"] == "sa" and sa["epoch"] == lead["epoch"] and sa["lease_ms"] > 0, sa
        # the lifecycles by name (docs/operations.md "ctl")
        assert sa["lifecycle"] == {"session": "connected", "conn": "live", "member": "running"}, sa
        assert sa["hook_run"] is None, sa        # no script
        sb = status(b)
        assert sb["role"] == "follower" and sb["leader"] == "sa" and sb["lease_ms"] is None, sb
        assert sb["epoch"] == lead["epoch"], sb
        rc, out, err = ctl(b, "status")
        assert rc == 0 and "role       follower" in out and "leader     sa" in out, out
        # a follower cannot resign
        rc, out, err = ctl(b, "resign")
        assert rc == 75 and "does not lead" in err, (rc, err)
        # the leader resigns: the other leads, the old one follows
        ma, mb = a.mark(), b.mark()
        rc, out, err = ctl(a, "resign")
        assert rc == 0, (rc, out, err)
        sd = a.wait_for("stepdown", timeout=10, since=ma)
        assert sd["reason"] == "resign", sd
        b.wait_for("leader", timeout=10, since=mb)
        a.wait_for("follower", timeout=10, since=ma)
        assert status(a)["leader"] == "sb"
        stop(a, b)
        # removed at exit
        assert not os.path.exists(a.sock) and not os.path.exists(b.sock)


def test_status_of_a_follower_further_back_names_the_new_leader():
    """ctl status reads the view (zke_agent_view): the census of a follower
    further back (positions 3 and 4, their predecessors unchanged by the
    failover) lists the election again, so its status names the new leader
    and the count within an interval (1 s here), with the control socket
    alone: e's from --control, d's the default one systemd's
    RuntimeDirectory gives. Their own views name the gone leader until
    their predecessors change."""
    with h.ZooKeeper() as zk:
        a, b, c = three(zk)
        rdir = h.mkdtemp("rundir")
        d = h.Agent(zk, "cd", path=PATH, env={"RUNTIME_DIRECTORY": rdir})
        d.sock = os.path.join(rdir, "zkelect.sock")
        d.wait_for("follower", timeout=15)
        e = agent(zk, "ce")
        e.wait_for("follower", timeout=15)
        for x, pos in ((d, 3), (e, 4)):
            h.wait_until(lambda: status(x)["candidates"] == 5, 10, "%s counts 5 candidates" % x.id)
            sx = status(x)
            assert sx["leader"] == "ca" and sx["position"] == pos, sx
        mb = b.mark()
        a.term()
        assert a.wait_exit(15) == 0, a.describe()
        lb = b.wait_for("leader", timeout=10, since=mb)
        for x, pos in ((d, 2), (e, 3)):
            # cb's node may be read before cb published its epoch: wait for both
            h.wait_until(lambda: (lambda s: s["leader"] == "cb" and s["epoch"] == lb["epoch"] and
                                  s["position"] == pos)(status(x)), 10,
                         "%s's status names cb, its epoch and position %d" % (x.id, pos))
            h.wait_until(lambda: status(x)["candidates"] == 4, 10, "%s counts 4 candidates" % x.id)
            # it learned it from the census: its own events name no new leader
            assert not x.find("leader_change") and not x.find("predecessor_change"), x.describe()
        stop(b, c, d, e)


def kazoo(zk):
    kz = KazooClient(hosts=zk.hostport, timeout=10)
    kz.start(timeout=10)
    return kz


def line(zk):
    """The ids in line, as `zkelect status --json` reads them."""
    code, out, err, _ = h.run([h.ZKELECT_BIN, "status", "--zk", zk.hostport, "--path", PATH,
                               "--json"])
    assert code == 0, (code, err)
    return [x.get("id") for x in json.loads(out)["candidates"]]


def test_resign_to():
    with h.ZooKeeper() as zk:
        a = agent(zk, "ca")
        a.wait_for("leader", timeout=15)
        b = agent(zk, "cb")
        b.wait_for("follower", timeout=15)
        # a Curator participant between cb and cc: it cannot be asked to step aside
        kz = kazoo(zk)
        kz.create(PATH + "/_c_0b5e7d2a-0c1f-4f41-9d4f-5a8e1e2b3c4d-latch-", b"curator-1",
                  ephemeral=True, sequence=True)
        c = agent(zk, "cc")
        c.wait_for("follower", timeout=15)
        # not next in line: refused at once, naming the ones ahead; a keeps leading
        ma = a.mark()
        rc, out, err = ctl(a, "resign", "--to", "cc")
        assert rc == 75 and "cc is not next in line" in err and "cb, curator-1" in err, (rc, err)
        assert "curator-1 cannot step aside" in err, err
        kz.stop()
        kz.close()
        rc, out, err = ctl(a, "resign", "--to", "nobody")
        assert rc == 65 and "no candidate nobody" in err, (rc, err)
        assert len(err.strip().splitlines()) == 1, err
        time.sleep(0.5)
        assert not a.find("stepdown", since=ma), a.describe()
        assert status(a)["role"] == "leader"
        # the next in line: it leads, and the answer says so
        mb = b.mark()
        rc, out, err = ctl(a, "resign", "--to", "cb", json_out=True)
        assert rc == 0, (rc, out, err)
        ans = json.loads(out)
        assert ans["ok"] and ans["leader"] == "cb", ans
        lb = b.wait_for("leader", timeout=5, since=mb)
        assert ans["epoch"] == lb["epoch"], (ans, lb)
        a.wait_for("follower", timeout=10, since=ma)
        # a follower is refused
        rc, out, err = ctl(c, "resign", "--to", "ca")
        assert rc == 75 and "does not lead" in err, (rc, err)
        stop(a, b, c)


def test_withdraw_rejoin_reload():
    d = h.mkdtemp("ctl-script")
    script = os.path.join(d, "p.lua")
    with open(script, "w") as f:
        f.write('function on_leader(ev) zkelect.log("info", "leading") end\n')
    with h.ZooKeeper() as zk:
        a = agent(zk, "wa")
        a.wait_for("leader", timeout=15)
        b = agent(zk, "wb", script=script)
        jb = b.wait_for("joined", timeout=15)
        b.wait_for("follower", timeout=15)
        sess = h.sid(jb["session"])
        mb = b.mark()
        rc, out, err = ctl(b, "withdraw")
        assert rc == 0, (rc, out, err)
        h.wait_until(lambda: not zk.ephemerals().get(sess), timeout=5, desc="node removed")
        sb = status(b)
        assert sb["role"] == "withdrawn" and sb["withdrawn"] and sb["connected"], sb
        assert sb["hook_run"] is None, sb        # its script has only on_leader
        assert b.alive()
        rc, out, err = ctl(b, "withdraw")
        assert rc == 75, (rc, err)
        # the leader goes: the withdrawn one does not take over
        a.term()
        assert a.wait_exit(10) == 0
        time.sleep(1.0)
        assert not b.find("leader", since=mb), b.describe()
        rc, out, err = ctl(b, "rejoin")
        assert rc == 0, (rc, out, err)
        b.wait_for("leader", timeout=10, since=mb)
        assert status(b)["role"] == "leader"
        # the hook run: on_leader's, ended
        h.wait_until(lambda: status(b)["hook_run"] == {"hook": "on_leader", "state": "done"},
                     timeout=5, desc="on_leader's run done")
        rc, out, err = ctl(b, "rejoin")
        assert rc == 75, (rc, err)
        # reload: as SIGHUP
        m = b.mark()
        rc, out, err = ctl(b, "reload")
        assert rc == 0, (rc, out, err)
        b.wait_for("reload", timeout=5, since=m)
        stop(b)


def test_status_right_after_withdraw_names_no_withdrawn_leader():
    """A leader withdrawn by ctl no longer names itself as the leader in
    its own ctl status (it did, until its next census): right after the
    withdraw the leader is unknown or the successor, and the successor
    once it leads. (Whichever of the two leads is withdrawn: a loaded ASan
    build can see a term end early, reason guard.)"""
    with h.ZooKeeper() as zk:
        a = agent(zk, "wla")
        b = agent(zk, "wlb")
        h.wait_roles([a, b])

        def settled():
            roles = {x: status(x)["role"] for x in (a, b)}
            return sorted(roles.values()) == ["follower", "leader"] and roles
        roles = h.wait_until(settled, timeout=15, desc="one leader, one follower")
        lead = a if roles[a] == "leader" else b
        other = b if lead is a else a
        rc, out, err = ctl(lead, "withdraw")
        assert rc == 0, (rc, out, err)
        st = status(lead)
        assert st["role"] == "withdrawn" and st["leader"] != lead.id, st
        rc, out, err = ctl(lead, "status")
        assert rc == 0 and "leader     %s" % lead.id not in out, out

        def names_the_successor():
            so, sl = status(other), status(lead)
            assert sl["leader"] != lead.id, sl
            return so["role"] == "leader" and sl["leader"] == other.id and sl["epoch"] == so["epoch"]
        h.wait_until(names_the_successor, timeout=15, desc="the withdrawn one's view names its successor")
        assert status(lead)["role"] == "withdrawn"
        stop(a, b)


def test_reload_answers_with_its_outcome():
    """ctl reload waits for the reload and says how it ended: 0 when the
    script loaded, the loader's code (78) and reason when it was refused
    (it said "reload asked" and exited 0 either way), 64 for an agent
    without a script; the refused script leaves the old one running."""
    d = h.mkdtemp("ctl-reload")
    script = os.path.join(d, "p.lua")
    with open(script, "w") as f:
        f.write('function on_leader(ev) zkelect.log("info", "leading v1") end\n')
    with h.ZooKeeper() as zk:
        a = agent(zk, "ra", script=script)
        a.wait_for("leader", timeout=15)
        m = a.mark()
        rc, out, err = ctl(a, "reload")
        assert rc == 0 and "script reloaded" in out, (rc, out, err)
        assert a.find("reload", since=m), a.describe()
        with open(script, "w") as f:
            f.write('function on_leader(ev)\n  zkelect.log("info", "v2"\nend\n')  # no ')'
        m = a.mark()
        rc, out, err = ctl(a, "reload", json_out=True)
        assert rc == 78, (rc, out, err)
        ans = json.loads(out.splitlines()[0])
        assert not ans["ok"] and ans["reason"] == "refused", ans
        assert "old script runs on" in ans["error"] and "p.lua:3" in ans["error"], ans
        assert "p.lua:3" in err and len(err.strip().splitlines()) == 1, err
        assert a.alive() and status(a)["ok"]
        assert a.find(lambda e: e.get("event") == "reload" and e.get("level") == "error", since=m), \
            a.describe()
        b = agent(zk, "rb")
        h.wait_roles([b])
        rc, out, err = ctl(b, "reload")
        assert rc == 64 and "no script" in err, (rc, out, err)
        stop(a, b)


def test_operator_and_health_withdrawals_hold_apart():
    """ctl withdraw and a failing health() are separate holds: a health
    check that passes again does not undo the operator's withdrawal (it did:
    both used one switch), and ctl rejoin does not put back a candidate
    whose checks fail; it is in line again only when neither holds."""
    d = h.mkdtemp("ctl-health")
    flag = os.path.join(d, "sick")
    script = h.policy("ctl-health", 'local FLAG = %r\n'
                      'function health()\n'
                      '  if zkelect.exec{"test", "-e", FLAG} then return false, "sick" end\n'
                      '  return true\n'
                      'end\n' % flag)
    hflags = ["--health-interval", "200", "--health-fails", "1", "--health-passes", "1"]
    with h.ZooKeeper() as zk:
        a = agent(zk, "ha")
        a.wait_for("leader", timeout=15)
        b = agent(zk, "hb", script=script, extra=hflags)
        jb = b.wait_for("joined", timeout=15)
        b.wait_for("follower", timeout=15)
        sess = h.sid(jb["session"])

        def in_line():
            return bool(zk.ephemerals().get(sess))

        # the operator withdraws; health fails, then passes: still out
        rc, out, err = ctl(b, "withdraw")
        assert rc == 0, (rc, out, err)
        h.wait_until(lambda: not in_line(), timeout=5, desc="node removed")
        open(flag, "w").close()
        h.wait_until(lambda: status(b).get("withdrawn_by") == "ctl,health", timeout=10,
                     desc="withdrawn by ctl and health")
        os.unlink(flag)
        h.wait_until(lambda: status(b).get("withdrawn_by") == "ctl", timeout=10,
                     desc="health no longer holds")
        time.sleep(1.0)                  # five passing checks: still out
        assert not in_line() and status(b)["role"] == "withdrawn", status(b)
        # health fails; the operator's rejoin leaves it out, and says why
        open(flag, "w").close()
        h.wait_until(lambda: status(b).get("withdrawn_by") == "ctl,health", timeout=10,
                     desc="health holds again")
        rc, out, err = ctl(b, "rejoin")
        assert rc == 0 and "still out of the election for: health" in out + err, (rc, out, err)
        rc, out, err = ctl(b, "rejoin")
        assert rc == 75 and "out of the election for: health" in out + err, (rc, out, err)
        time.sleep(1.0)
        assert not in_line() and status(b)["withdrawn_by"] == "health", status(b)
        # health passes: back in line, at the back
        os.unlink(flag)
        h.wait_until(in_line, timeout=10, desc="back in line")
        # the node is there once the create is answered; the agent is a
        # follower once it has listed the election after it ("idle" between)
        h.wait_until(lambda: status(b)["role"] != "idle", timeout=5, desc="the listing after the join")
        st = status(b)
        assert st["role"] == "follower" and not st["withdrawn"] and st["withdrawn_by"] is None, st
        stop(a, b)


def test_stale_socket_replaced_and_live_one_refused():
    with h.ZooKeeper() as zk:
        d = h.mkdtemp("stale")
        sock = os.path.join(d, "c.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(sock)
        s.close()                        # a dead agent's socket
        a = h.Agent(zk, "st", path=PATH, extra=["--control", sock])
        a.wait_for("leader", timeout=15)
        a.sock = sock
        assert status(a)["role"] == "leader"
        rc, out, err, _ = h.run([h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH, "--id", "st2",
                                 "--control", sock, "--fail-stop", "off"], timeout=20)
        assert rc == 75 and "another agent serves it" in err, (rc, err)
        assert a.alive() and status(a)["role"] == "leader"
        stop(a)


def test_silent_clients_do_not_delay_failover():
    with h.ZooKeeper() as zk:
        a = agent(zk, "fa")
        la = a.wait_for("leader", timeout=15)
        b = agent(zk, "fb")
        b.wait_for("follower", timeout=15)
        held = []
        for x in (a, b):
            for i in range(12):          # more than the server's slots (the rest: "busy")
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(x.sock)
                if i == 0:
                    s.sendall(b"stat")   # half a request, never finished
                held.append(s)
        ma = a.mark()
        time.sleep(3.0)                  # the leader renews its lease meanwhile
        assert not a.find("stepdown", since=ma), a.describe()
        assert not a.find("suspend", since=ma), a.describe()
        # the held ones are closed after their deadline; then ctl answers again
        h.wait_until(lambda: ctl(a, "status", timeout=10)[0] == 0, timeout=15, interval=0.5,
                     desc="ctl answers after the deadline")
        # a crash of the leader while clients hold the follower's socket
        for _ in range(10):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(b.sock)
            held.append(s)
        mb = b.mark()
        t0 = time.monotonic()
        a.kill9()
        lb = b.wait_for("leader", timeout=15, since=mb)
        assert lb["epoch"] > la["epoch"], lb
        assert time.monotonic() - t0 < 12, "failover took %.1f s" % (time.monotonic() - t0)
        for s in held:
            s.close()
        stop(b)


def test_a_frozen_agent_is_reported_not_waited_for():
    """ctl against an agent that is stopped (SIGSTOP: its socket still
    accepts) ends with exit 69 and one line after its answer wait, instead
    of hanging; resign --force against it, with no keeper to end it
    (--fail-stop off), exits 69 at once and ends nothing."""
    with h.ZooKeeper() as zk:
        a = agent(zk, "fr", extra=["--fail-stop", "off"])    # (the watcher would kill it)
        a.wait_event("leader", timeout=15)
        a.sigstop()
        try:
            t0 = time.monotonic()
            rc, out, err = ctl(a, "status")
            took = time.monotonic() - t0
            rc2, out2, err2 = ctl(a, "resign", "--force")
            alive = a.alive()
        finally:
            a.sigcont()
        assert rc == 69 and "no answer within 10000 ms" in err, (rc, err)
        assert len(err.strip().splitlines()) == 1, err
        assert took < 30, took
        assert rc2 == 69 and "is stopped" in err2 and "has no keeper" in err2 and \
            "nothing ended" in err2, (rc2, out2, err2)
        assert alive
        stop(a)


FORCE_T = 10000     # the frozen term's own hard end is T x 0.99 - m/2 (9.7 s) after its lease
                    # base, at least 4.7 s after the freeze: the forced end comes well before


def _duty(a, since=0):
    """The failstop.lua duty's pid and stamp file (its on_leader's line)."""
    ev = a.wait_for(lambda e: e.get("event") == "script" and
                    e.get("msg", "").startswith("duty pid="), timeout=10, since=since)
    f = dict(w.split("=", 1) for w in ev["msg"].split()[1:])
    return int(f["pid"]), f["file"]


def _stamps(path):
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def test_resign_force_has_the_keeper_end_a_frozen_leader():
    """resign --force: against a live leader, a plain resign (answered at
    once). Against a leader frozen alone (SIGSTOP; its duty and keeper run
    on), no answer within 2 s: ctl asks the agent's keeper, which SIGKILLs
    the duty and the agent, then closes the session; the next in line leads
    only then (the duty's last stamp and its death before the successor's
    leader line), within 4 s of the freeze, where the frozen term's own hard
    end is at least 4.7 s away (T = 10 s): no `outlived its lease` line."""
    tmp = h.mkdtemp("force")
    env = {"ZKT_DIR": tmp, "ZKT_STALL_ID": "", "ZKT_STALL_N": "0"}
    policy = os.path.join(h.POLICIES, "failstop.lua")
    cfg = ["maxSessionTimeout=%d" % FORCE_T]
    with h.ZooKeeper(extra_cfg=cfg) as zk:
        a = agent(zk, "fa", script=policy, session_timeout=FORCE_T, env=env)
        la = a.wait_for("leader", timeout=15)
        b = agent(zk, "fb", script=policy, session_timeout=FORCE_T, env=env)
        b.wait_for("follower", timeout=15)
        # a live leader: a plain resign
        mb, ma0 = b.mark(), a.mark()
        rc, out, err = ctl(a, "resign", "--force")
        assert rc == 0 and "resigned" in out, (rc, out, err)
        lb = b.wait_for("leader", timeout=10, since=mb)
        pid, stamps = _duty(b, since=mb)
        h.wait_until(lambda: len(_stamps(stamps)) >= 3, 10, "the duty of fb writing")
        a.wait_for("follower", timeout=10, since=ma0)
        # b frozen: its keeper ends it
        ma = a.mark()
        t_stop = time.monotonic_ns()
        b.sigstop()
        try:
            rc, out, err = ctl(b, "resign", "--force")
        except BaseException:
            b.sigcont()
            raise
        took = (time.monotonic_ns() - t_stop) / 1e6
        assert rc == 0 and "its keeper (pid" in out and "closed its session" in out, \
            (rc, out, err)
        assert b.wait_exit(5) == -signal.SIGKILL, b.describe()
        la2 = a.wait_for("leader", timeout=10, since=ma)
        assert la2["epoch"] > lb["epoch"] > la["epoch"], (la, lb, la2)
        assert not h.pid_alive(pid), "the frozen term's duty outlived it"
        last = _stamps(stamps)[-1]
        ahead = (la2["mono_ns"] - t_stop) / 1e6
        print("  info: resign --force of a frozen leader: ctl took %.0f ms, the successor led "
              "%.0f ms after the freeze, %.0f ms after the frozen duty's last stamp"
              % (took, ahead, (la2["mono_ns"] - last) / 1e6), flush=True)
        assert t_stop < last < la2["mono_ns"], (t_stop, last, la2)
        assert ahead < 4000, ahead
        lines = [e.get("msg", "") for e in b.find("fail_stop")]
        assert any("end of the agent's terms was asked" in m for m in lines), lines
        assert not any("outlived its lease" in m for m in lines), lines
        h.wait_until(lambda: [m for m in (e.get("msg", "") for e in b.find("fail_stop"))
                              if "is closed" in m], 10, "the keeper's close line")
        assert h.sid(lb["session"]) not in zk.ephemerals()
        stop(a)



def test_resign_force_ends_a_stuck_loop_after_its_answer_wait():
    """resign --force against a leader whose loop is stuck in one C call
    (failstop.lua's calibrated string.find, about 8 s; the process runs, so
    ctl cannot see it stopped): no answer within 1 s, then the keeper ends
    the term, and the next in line leads about a second after the request,
    before the stuck term's own hard end (at least 4.7 s away at T = 10 s)."""
    tmp = h.mkdtemp("force")
    env = {"ZKT_DIR": tmp, "ZKT_STALL_ID": "sa",
           "ZKT_STALL_N": str(failstop.calibrate(8.0))}
    policy = os.path.join(h.POLICIES, "failstop.lua")
    with h.ZooKeeper(extra_cfg=["maxSessionTimeout=%d" % FORCE_T]) as zk:
        a = agent(zk, "sa", script=policy, session_timeout=FORCE_T, env=env)
        la = a.wait_for("leader", timeout=15)
        pid, stamps = _duty(a)
        b = agent(zk, "sb", script=policy, session_timeout=FORCE_T, env=env)
        b.wait_for("follower", timeout=15)
        a.wait_for(lambda e: e.get("event") == "script" and
                   e.get("msg", "").startswith("stall_begin"), timeout=10)
        mb = b.mark()
        t0 = time.monotonic_ns()
        rc, out, err = ctl(a, "resign", "--force")
        assert rc == 0 and "did not answer within 1000 ms" in out and \
            "closed its session" in out, (rc, out, err)
        assert a.wait_exit(5) == -signal.SIGKILL, a.describe()
        lb = b.wait_for("leader", timeout=10, since=mb)
        assert lb["epoch"] > la["epoch"], (la, lb)
        assert not h.pid_alive(pid), "the stuck term's duty outlived it"
        assert _stamps(stamps)[-1] < lb["mono_ns"]
        ahead = (lb["mono_ns"] - t0) / 1e6
        print("  info: resign --force of a stuck loop: the successor led %.0f ms after the "
              "request" % ahead, flush=True)
        assert 1000 <= ahead < 4000, ahead
        lines = [e.get("msg", "") for e in a.find("fail_stop")]
        assert any("end of the agent's terms was asked" in m for m in lines), lines
        assert not any("outlived its lease" in m for m in lines), lines
        stop(b)


if __name__ == "__main__":
    h.run_tests(globals())
