#!/usr/bin/python3
"""The Lua runtime for leader duties (issue 4), against a real ZooKeeper:
hooks run in coroutines and wait on commands and timers without blocking
the loop; a timeout kills the command's whole process group; losing
leadership preempts a waiting on_leader; a hook past its budget fails and a
failed on_leader resigns; a hook that never waits is stopped even through
pcall; blocking calls point to the asynchronous API; hooks run one at a
time, in event order."""
import json
import os
import re
import signal
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/runtime"
POLICY = os.path.join(h.POLICIES, "runtime.lua")


def msgs(agent, since=0):
    return [e["msg"] for e in agent.find("script", since=since)]


def wait_msg(agent, prefix, timeout=10, since=0):
    return agent.wait_for(lambda e: e.get("event") == "script" and e["msg"].startswith(prefix),
                          timeout=timeout, since=since)


def setenv(mode, budget="20"):
    d = h.mkdtemp("rt")
    os.environ.update(ZKT_MODE=mode, ZKT_DIR=d, ZKT_BUDGET=budget)
    return d


def test_exec_sleep_timers():
    d = setenv("exec")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "ra", path=PATH, script=POLICY)
        la = a.wait_for("leader", timeout=10)
        wait_msg(a, "exec done", timeout=20)
        m = msgs(a)
        get = lambda p: next(x for x in m if x.startswith(p))  # noqa: E731
        assert get("exec1") == "exec1 ok=false code=3 out=out ra %d leader x1| err=err|" % la["epoch"], m
        assert get("exec2") == "exec2 ok=true code=0 out=a-b|", m
        assert get("exec3") == "exec3 ok=false code=SEGV", m
        assert get("exec4").startswith("exec4 ok=nil code=ESPAWN msg=cannot start"), m
        assert get("exec5") == "exec5 ok=true len=1000", m
        assert get("exec6") == "exec6 ok=false code=timeout", m
        gpid = int(open(os.path.join(d, "grandchild")).read())
        h.wait_until(lambda: not h.pid_alive(gpid), 5, "the timed-out command's grandchild to be gone")
        ticks = int(re.search(r"ticks=(\d+)", get("slept")).group(1))
        assert 3 <= ticks <= 7, m
        assert "after fired" in m
        sc = wait_msg(a, "sleep_in_callback", timeout=5)["msg"]
        assert "ok=false" in sc and "can only be called from a hook" in sc, sc
        assert any(x.startswith("os.execute ok=false") and "zkelect.exec" in x for x in m), m
        assert not a.find("hook_error"), a.find("hook_error")
        # the loop kept the session alive all along (no disconnect)
        assert not [e for e in a.find("session") if e["reason"] != "connected"], a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def test_stepdown_preempts_a_waiting_on_leader():
    d = setenv("hang")
    with h.ZooKeeper() as zk:
        a, b = h.start_in_order(zk, ("pa", "pb"), path=PATH, script=POLICY)
        wait_msg(a, "hang start", timeout=10)
        h.wait_until(lambda: os.path.exists(os.path.join(d, "hang-child")), 5, "the child pid")
        cpid = int(open(os.path.join(d, "hang-child")).read())
        assert h.pid_alive(cpid)
        ma, mb = a.mark(), b.mark()
        a.term()
        pre = a.wait_for("hook_preempted", timeout=5, since=ma)
        assert pre["hook"] == "on_leader", pre
        sd = wait_msg(a, "on_stepdown reason=shutdown", timeout=5, since=ma)
        assert pre["mono_ns"] < sd["mono_ns"]
        assert a.wait_exit(10) == 0
        assert not h.pid_alive(cpid), "the preempted hook's command survived"
        assert "never" not in msgs(a)
        b.wait_for("leader", timeout=5, since=mb)
        b.term()
        assert b.wait_exit(10) == 0


def test_a_hook_that_resigns_and_computes_is_preempted_once():
    """on_leader resigns (its term ends at once, the loop not running) and
    computes on: it is stopped at its next check and logged once, as
    hook_preempted; closing its dead coroutine is no hook_error (it was)."""
    script = h.policy("resign-compute",
                      'function on_leader(ev)\n'
                      '  zkelect.resign()\n'
                      '  local n = 0\n'
                      '  for i = 1, 100000000 do n = n + i end\n'
                      '  zkelect.log("info", "never " .. n)\n'
                      'end\n')
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "rc", path=PATH, script=script)
        pre = a.wait_for("hook_preempted", timeout=10)
        assert pre["hook"] == "on_leader" and "the term ended" in pre["msg"], pre
        sd = a.wait_for(lambda e: e.get("event") == "stepdown" and e.get("reason") == "resign", timeout=5)
        # the rejoin (alone, it leads again, and resigns again): the
        # preemption was handled whole
        a.wait_for(lambda e: e.get("event") == "joined" and e["mono_ns"] > sd["mono_ns"], timeout=10)
        a.term()
        assert a.wait_exit(10) == 0
        assert not a.find("hook_error"), a.find("hook_error")
        assert "never" not in msgs(a)


def test_budget_overrun_resigns():
    setenv("overrun", budget="0.5")
    with h.ZooKeeper() as zk:
        a, b = h.start_in_order(zk, ("oa", "ob"), path=PATH, script=POLICY)
        la = a.wait_for("leader", timeout=10)
        mb = b.mark()
        he = a.wait_for("hook_error", timeout=5)
        assert he["hook"] == "on_leader" and "exceeded its budget of 500 ms" in he["msg"], he
        sd = a.wait_for("stepdown", timeout=5)
        assert sd["reason"] == "resign" and sd["epoch"] == la["epoch"], sd
        lb = b.wait_for("leader", timeout=5, since=mb)
        assert lb["epoch"] > la["epoch"]
        h.stop_cleanly([a, b], 10)


def test_hook_that_never_waits_is_stopped():
    setenv("spin")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "sa", path=PATH, script=POLICY, extra=["--hook-timeout", "300"])
        a.wait_for("leader", timeout=10)
        he = a.wait_for("hook_error", timeout=5)
        assert "exceeded its budget of 300 ms" in he["msg"] and "stack traceback" in he["msg"], he
        a.wait_for("stepdown", timeout=5, reason="resign")
        a.term()
        assert a.wait_exit(10) == 0


def test_on_leader_error_ignore_keeps_the_term():
    setenv("spin")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "ia", path=PATH, script=POLICY,
                    extra=["--hook-timeout", "200", "--on-leader-error", "ignore"])
        la = a.wait_for("leader", timeout=10)
        a.wait_for("hook_error", timeout=5)
        time.sleep(0.5)
        assert not a.find("stepdown"), a.describe()
        assert h.leaders_now([a]) == [a]
        ma = a.mark()
        a.term()
        assert a.wait_for("stepdown", timeout=5, since=ma)["epoch"] == la["epoch"]
        assert a.wait_exit(10) == 0


def test_preempted_hook_with_misbehaving_closers():
    setenv("closers")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "ca", path=PATH, script=POLICY, extra=["--hook-timeout", "300"])
        a.wait_for("leader", timeout=10)
        wait_msg(a, "closers waiting", timeout=5)
        ma = a.mark()
        a.term()
        a.wait_for("hook_preempted", timeout=5, since=ma)
        # the endless __close was stopped by the budget; the agent left cleanly
        assert a.wait_exit(10) == 0
        assert any("exceeded its budget of 300 ms" in e["msg"] for e in a.find("hook_error")), \
            a.describe()


def test_restart_pending_when_the_term_ends():
    setenv("restart_resign")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "rr", path=PATH, script=POLICY)
        a.wait_for("stepdown", timeout=10, reason="resign")
        wait_msg(a, "restart_resign term=2", timeout=10)
        time.sleep(1.0)          # the first term's restart timer fires in the second term
        assert a.alive(), a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def test_hooks_run_one_at_a_time_in_order():
    setenv("exec")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "qa", path=PATH, script=POLICY)
        a.wait_for("leader", timeout=10)
        b = h.Agent(zk, "qb", path=PATH, script=POLICY)
        wait_msg(b, "on_follower start", timeout=10)
        mb = b.mark()
        a.term()          # b leads while its on_follower still sleeps
        b.wait_for("leader", timeout=5, since=mb)
        e = wait_msg(b, "on_follower end", timeout=5)
        first_exec = wait_msg(b, "exec1", timeout=10)
        assert e["_i"] < first_exec["_i"], "on_leader started before on_follower ended"
        assert a.wait_exit(10) == 0
        b.term()
        assert b.wait_exit(10) == 0


def test_health_withdraws_and_rejoins():
    with h.ZooKeeper() as zk:
        flags = ["--health-interval", "100", "--health-fails", "2", "--health-passes", "2"]
        da = setenv("idle")
        os.environ["ZKT_HEALTH"] = "1"
        try:
            a = h.Agent(zk, "ha", path=PATH, script=POLICY, extra=flags)
            la = a.wait_for("leader", timeout=10)
            setenv("idle")
            b = h.Agent(zk, "hb", path=PATH, script=POLICY, extra=flags)
            b.wait_for("follower", timeout=10)
        finally:
            del os.environ["ZKT_HEALTH"]
        time.sleep(0.5)
        assert not a.find("health"), a.find("health")      # healthy: nothing to say
        ma, mb = a.mark(), b.mark()
        open(os.path.join(da, "unhealthy"), "w").close()
        sd = a.wait_for("stepdown", timeout=5, since=ma)
        assert sd["reason"] == "health" and sd["epoch"] == la["epoch"], sd
        fails = [e for e in a.find("health", since=ma) if "check failed" in e["msg"]]
        assert len(fails) >= 2 and "marker file present" in fails[0]["msg"], fails
        b.wait_for("leader", timeout=5, since=mb)
        # out of the election while unhealthy: no node, no rejoin
        time.sleep(1.0)
        assert not a.find("joined", since=ma), a.describe()
        m2 = a.mark()
        os.unlink(os.path.join(da, "unhealthy"))
        j = a.wait_for("joined", timeout=5, since=m2)
        f = a.wait_for("follower", timeout=5, since=m2)
        assert f["leader"] == "hb", f
        assert any("healthy again" in e["msg"] for e in a.find("health", since=m2))
        h.stop_cleanly([a, b], 10)


V1 = """
function on_leader(ev)
  zkelect.log("info", "v1 on_leader reload=" .. tostring(ev.reload) .. " epoch=" .. ev.epoch)
  if not ev.reload then
    zkelect.reload()          -- happens once this hook has returned
    zkelect.sleep(0.2)
    zkelect.log("info", "v1 hook done")
  end
end
"""
V2 = """
function on_leader(ev)
  zkelect.log("info", "v2 on_leader reload=" .. tostring(ev.reload) .. " epoch=" .. ev.epoch)
end
function on_stepdown(ev)
  zkelect.log("info", "v2 on_stepdown " .. ev.reason)
end
"""


def test_reload_keeps_candidacy():
    d = h.mkdtemp("reload")
    pol = os.path.join(d, "policy.lua")
    with open(pol, "w") as f:
        f.write(V1)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "la", path=PATH, script=pol)
        la = a.wait_for("leader", timeout=10)
        # zkelect.reload() from a hook: the swap waits for the hook to end
        done = wait_msg(a, "v1 hook done", timeout=5)
        again = wait_msg(a, "v1 on_leader reload=true", timeout=5)
        assert done["_i"] < again["_i"] and ("epoch=%d" % la["epoch"]) in again["msg"], again
        # that reload's own line can follow the new script's first lines:
        # read before the mark, so that the next reload line is SIGHUP's
        first = a.wait_for("reload", timeout=5)
        assert first["level"] == "info", first
        # a broken file is refused; the running script stays
        with open(pol, "w") as f:
            f.write("function on_leader(ev)\n")
        m = a.mark()
        a.signal(__import__("signal").SIGHUP)
        r = a.wait_for("reload", timeout=5, since=m)
        assert r["level"] == "error" and "policy.lua" in r["msg"], r
        assert r["msg"].endswith("; the old script keeps running"), r
        # SIGHUP with a good file: told the current role, same term
        with open(pol, "w") as f:
            f.write(V2)
        m = a.mark()
        a.signal(__import__("signal").SIGHUP)
        v2 = wait_msg(a, "v2 on_leader reload=true", timeout=5, since=m)
        assert ("epoch=%d" % la["epoch"]) in v2["msg"], v2
        assert not a.find("stepdown", since=m) and not a.find("leader", since=m)
        a.term()
        wait_msg(a, "v2 on_stepdown shutdown", timeout=5, since=m)
        assert a.wait_exit(10) == 0


IDENTITY = """
local out = os.getenv("ZKT_OUT")
-- the top level runs before the candidate joins: its child has the identity too
zkelect.spawn{ "sh", "-c", 'echo "$ZKELECT_ID $ZKELECT_PATH $ZKELECT_ROLE" > "$1/top"', "sh", out }
zkelect.log("info", "top id=" .. tostring(zkelect.id) .. " path=" .. tostring(zkelect.path))
local told = false
function health()
  if not told then
    told = true
    zkelect.log("info", "health id=" .. tostring(zkelect.id) .. " status.id=" .. tostring(zkelect.status().id))
  end
  local ok = zkelect.exec{ "test", "!", "-e", out .. "/unhealthy-" .. zkelect.id }
  return ok, "marker file present"
end
function on_leader(ev) zkelect.log("info", "leading " .. ev.id) end
"""


def test_identity_health_log_and_empty_reload():
    """zkelect.id/.path at the top level and in health(), ZKELECT_ID/_PATH in
    a child started before the candidate joined (--id given as a flag, no
    ZKELECT_ID in the agent's environment); a withdrawn candidate logs its
    failed checks once, not at every interval; reloading a script with no
    hook while leading warns."""
    d = h.mkdtemp("ident")
    pa, pb = os.path.join(d, "a.lua"), os.path.join(d, "b.lua")
    for p in (pa, pb):
        with open(p, "w") as f:
            f.write(IDENTITY)
    flags = ["--health-interval", "100", "--health-fails", "2", "--health-passes", "2"]
    os.environ["ZKT_OUT"] = d
    try:
        with h.ZooKeeper() as zk:
            a = h.Agent(zk, "ida", path=PATH, script=pa, extra=flags)
            a.wait_for("leader", timeout=10)
            assert "top id=ida path=%s" % PATH in msgs(a), msgs(a)
            wait_msg(a, "health id=ida status.id=ida", timeout=5)
            h.wait_until(lambda: os.path.exists(os.path.join(d, "top")), 5, "the top level's child")
            h.wait_until(lambda: open(os.path.join(d, "top")).read().strip() != "", 5, "its output")
            assert open(os.path.join(d, "top")).read().split() == ["ida", PATH, "idle"]
            b = h.Agent(zk, "idb", path=PATH, script=pb, extra=flags)
            b.wait_for("follower", timeout=10)
            # withdrawn: two warnings (1 of 2, 2 of 2) and the withdrawal, then quiet
            ma, mb = a.mark(), b.mark()
            open(os.path.join(d, "unhealthy-ida"), "w").close()
            sd = a.wait_for("stepdown", timeout=5, since=ma)
            assert sd["reason"] == "health", sd
            b.wait_for("leader", timeout=5, since=mb)
            time.sleep(1.5)                           # about 15 more failed checks
            lines = [e["msg"] for e in a.find("health", since=ma)]
            fails = [m for m in lines if "check failed" in m]
            assert len(fails) == 2 and "(1 of 2)" in fails[0] and "(2 of 2)" in fails[1], lines
            assert sum("unhealthy: withdrawing" in m for m in lines) == 1, lines
            m2 = a.mark()
            os.unlink(os.path.join(d, "unhealthy-ida"))
            a.wait_for("follower", timeout=5, since=m2)
            lines = [e["msg"] for e in a.find("health", since=m2)]
            assert lines[:2] == ["check passed (1 of 2) while withdrawn", "healthy again: rejoining"], lines
            # b leads: a script without hooks, reloaded while leading, warns
            with open(pb, "w") as f:
                f.write("x = 1\n")
            m3 = b.mark()
            b.signal(__import__("signal").SIGHUP)
            b.wait_for("reload", timeout=5, since=m3)
            w = [e for e in b.find("log", since=m3) if "defines no hook" in e.get("msg", "")]
            assert len(w) == 1 and w[0]["level"] == "warn" and "while leading" in w[0]["msg"], b.describe(10)
            # a follower reloading it is told nothing
            with open(pa, "w") as f:
                f.write("x = 1\n")
            m4 = a.mark()
            a.signal(__import__("signal").SIGHUP)
            a.wait_for("reload", timeout=5, since=m4)
            assert not [e for e in a.find("log", since=m4) if "defines no hook" in e.get("msg", "")]
            h.stop_cleanly([a, b], 10)
    finally:
        del os.environ["ZKT_OUT"]


def test_supervised_spawn_restarts_within_the_term():
    d = setenv("supervise")
    starts = os.path.join(d, "starts")
    count = lambda: len(open(starts).read().split()) if os.path.exists(starts) else 0  # noqa: E731
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "sv", path=PATH, script=POLICY)
        la = a.wait_for("leader", timeout=10)
        h.wait_until(lambda: count() >= 4, 10, "restarts of the failing child")
        # every restart has the first start's environment (ZKELECT_EPOCH, env = {...})
        assert set(open(starts).read().split()) == {"%d-t1" % la["epoch"]}
        a.term()
        assert a.wait_exit(10) == 0
        n = count()
        time.sleep(0.5)
        assert count() == n, "restarted after the term ended"


def test_lua_helpers():
    setenv("helpers")
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "lh", path=PATH, script=POLICY)
        a.wait_for("leader", timeout=10)
        wait_msg(a, "helpers done", timeout=10)
        m = msgs(a)
        assert "run out=hi|" in m, m
        assert "try ok=false msg=echo bad >&2; exit 4: exit code 4: bad" in m, m
        assert any(x.startswith("run_fail ok=false") and "false: exit code 1" in x for x in m), m
        assert "debounced x=5" in m and "debounce calls=1" in m, m
        assert any(x.startswith("missing ok=false") and "not found" in x for x in m), m
        assert "badname ok=false" in m, m
        assert any(x.startswith("badenv ok=false") and "env name 'A=B'" in x for x in m), m
        a.term()
        assert a.wait_exit(10) == 0


JSON_POLICY = """
function on_follower(ev)
  local v, err = zkelect.json.decode(ev.leader_data or "")
  if not v then zkelect.log("info", "json bad: " .. err) return end
  zkelect.log("info", string.format("json addr=%s port=%d tags=%s,%s null=%s",
    v.addr, v.port, v.tags[1], v.tags[2], tostring(v.backup == zkelect.json.null)))
  zkelect.log("info", "json out=" .. zkelect.json.encode{ id = zkelect.id, n = { 1, 2 } })
end
"""


def test_json_round_trip_through_zookeeper():
    """zkelect.json across processes: the leader's --data is a JSON object,
    which ZooKeeper carries to a follower, whose on_follower decodes it
    (nested values, null) and encodes a reply; data that is no JSON is
    `nil, msg` there, not an error of the hook."""
    d = h.mkdtemp("rtjson")
    script = os.path.join(d, "p.lua")
    with open(script, "w") as fh:
        fh.write(JSON_POLICY)
    data = json.dumps({"addr": "10.0.0.7", "port": 5432, "tags": ["a", "b"], "backup": None})
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "ja", path=PATH + "-json", script=script, data=data)
        a.wait_for("leader", timeout=10)
        b = h.Agent(zk, "jb", path=PATH + "-json", script=script)
        wait_msg(b, "json out=", timeout=10)
        m = msgs(b)
        assert "json addr=10.0.0.7 port=5432 tags=a,b null=true" in m, m
        out = [x for x in m if x.startswith("json out=")][0][len("json out="):]
        assert json.loads(out) == {"id": "jb", "n": [1, 2]}, out
        a.term()
        assert a.wait_exit(10) == 0
        b.wait_for("leader", timeout=10)
        c = h.Agent(zk, "jc", path=PATH + "-json", script=script, data="not {json")
        c.wait_for("follower", timeout=10)
        b.term()
        assert b.wait_exit(10) == 0
        c.wait_for("leader", timeout=10)
        d2 = h.Agent(zk, "jd", path=PATH + "-json", script=script)
        wait_msg(d2, "json bad: ", timeout=10)
        assert not d2.find(lambda e: e.get("level") == "error"), d2.describe()
        for x in (c, d2):
            x.term()
            assert x.wait_exit(10) == 0


def test_check_warns_about_misspelt_hooks():
    """A near name whose hook the script defines is a warning (the hook
    runs); a helper of another name is nothing."""
    d = h.mkdtemp("rtc")
    f = os.path.join(d, "typo.lua")
    with open(f, "w") as fh:
        fh.write("function on_leader(ev) end\nfunction on_leaders(ev) end\nfunction helper() end\n")
    code, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", f])
    assert code == 0 and "'on_leaders' is not a hook (did you mean on_leader?)" in err, (code, err)
    assert "helper" not in err, err


def test_a_misspelt_hook_refuses_run_check_and_reload():
    """on_stepdwon beside on_leader (vip.lua's shape: the address would stay
    up after the term) is refused by run and by check alike, exit 78 naming
    on_stepdown (run warned twice and led without a step-down hook); a
    reload to such a script is refused and the old one runs on; not_hooks
    lets a helper keep a hook-like name."""
    d = h.mkdtemp("rtm")
    good = os.path.join(d, "good.lua")
    typo = os.path.join(d, "typo.lua")
    with open(typo, "w") as fh:
        fh.write("function on_leader(ev) end\nfunction on_stepdwon(ev) end\n")
    want = "'on_stepdwon' is not a hook and on_stepdown is not defined: did you mean on_stepdown?"
    code, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", typo])
    assert code == 78 and want in err and out == "", (code, out, err)
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "mt", path=PATH + "-typo", script=typo, log="text")
        assert a.wait_exit(15) == 78, a.other_lines()
        lines = a.other_lines()
        assert any(want in l and l.startswith("zkelect: error:") for l in lines), lines
        with open(good, "w") as fh:
            fh.write("function on_leader(ev) zkelect.log('info', 'leading') end\n"
                     "function on_stepdown(ev) end\n")
        b = h.Agent(zk, "mg", path=PATH + "-typo", script=good)
        b.wait_for("leader", timeout=15)
        with open(good, "w") as fh:
            fh.write("function on_leader(ev) end\nfunction on_stepdwon(ev) end\n")
        m = b.mark()
        b.signal(signal.SIGHUP)
        ev = b.wait_for(lambda e: e.get("event") == "reload" and e.get("level") == "error",
                        timeout=10, since=m)
        assert want in ev.get("msg", ""), ev
        with open(good, "w") as fh:
            fh.write('not_hooks = { "on_stepdwon" }\nfunction on_leader(ev) end\n'
                     'function on_stepdown(ev) end\nfunction on_stepdwon(ev) end\n')
        m = b.mark()
        b.signal(signal.SIGHUP)
        ev = b.wait_for("reload", timeout=10, since=m)
        assert ev.get("level") == "info" and not b.find("hook_warning", since=m), b.describe()
        b.term()
        assert b.wait_exit(10) == 0


def test_check_strict_is_a_ci_gate():
    """check --strict exits 78 on any warning (a misspelt hook, a health_check
    meant as health, no hook at all) and 0 on a clean script; check names an
    observer script's on_leader_change instead of `hooks: none`."""
    d = h.mkdtemp("rts")

    def script(name, text):
        p = os.path.join(d, name)
        with open(p, "w") as fh:
            fh.write(text)
        return p

    def check(path, *flags):
        return h.run([h.ZKELECT_BIN, "check"] + list(flags) + ["--script", path])

    # near names whose hooks are defined: warnings (a misspelt hook whose
    # hook is missing does not load: test_a_misspelt_hook_refuses_run_check_and_reload)
    typo = script("typo.lua", "function on_stepdwon(ev) end\nfunction health_check() return true end\n"
                              "function on_leader(ev) end\nfunction on_stepdown(ev) end\n"
                              "function health() return health_check() end\n")
    code, out, err, _ = check(typo)
    assert code == 0, (code, out, err)
    assert "'on_stepdwon' is not a hook (did you mean on_stepdown?)" in err, err
    assert "'health_check' is not a hook (did you mean health?)" in err, err
    assert out == "%s: 2 warnings; hooks: health on_leader on_stepdown\n" % typo, out
    code, out, err, _ = check(typo, "--strict")
    assert code == 78, (code, out, err)
    assert "zkelect: error: %s: 2 warnings (--strict)" % typo in err, err
    # the same helper made local is no hook candidate: clean
    clean = script("clean.lua", "local function health_check() return true end\n"
                                "function health() return health_check() end\nfunction on_leader(ev) end\n")
    code, out, err, _ = check(clean, "--strict")
    assert code == 0 and err == "" and out == "%s: ok; hooks: health on_leader\n" % clean, (code, out, err)
    # an observer script (zkelect watch --script)
    obs = script("obs.lua", "function on_leader_change(ev) end\n")
    code, out, err, _ = check(obs, "--strict")
    assert code == 0 and err == "", (code, out, err)
    assert out == "%s: ok; observer hooks (zkelect watch --script): on_leader_change\n" % obs, out
    both = script("both.lua", "function on_leader_change(ev) end\nfunction on_follower(ev) end\n")
    code, out, err, _ = check(both, "--strict")
    assert code == 0 and "hooks: on_follower; observer hooks (zkelect watch --script): on_leader_change" in out, \
        (code, out, err)
    # no hook at all: a warning, so --strict refuses it
    empty = script("empty.lua", "x = 1\n")
    code, out, err, _ = check(empty)
    assert code == 0 and "defines no hook" in err and "1 warning; hooks: none" in out, (code, out, err)
    code, out, err, _ = check(empty, "--strict")
    assert code == 78 and "1 warning (--strict)" in err, (code, out, err)
    # the shipped helpers pass the gate
    code, out, err, _ = check(os.path.join(h.REPO, "examples", "singleton.lua"), "--strict")
    assert code == 0, (code, out, err)


def test_bad_hook_budgets_refused():
    d = h.mkdtemp("rtb")
    bad = os.path.join(d, "bad.lua")
    with open(bad, "w") as f:
        f.write("hook_budgets = { on_leeder = 3 }\nfunction on_leader(ev) end\n")
    code, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", bad])
    assert code == 78 and "hook_budgets.on_leeder: not a hook name" in err, (code, err)
    with open(bad, "w") as f:
        f.write("hook_budgets = { on_leader = -1 }\n")
    code, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", bad])
    assert code == 78 and "hook_budgets.on_leader must be seconds" in err, (code, err)


if __name__ == "__main__":
    h.run_tests(globals())
