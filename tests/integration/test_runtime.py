#!/usr/bin/python3
"""The Lua runtime for leader duties (issue 4), against a real ZooKeeper:
hooks run in coroutines and wait on commands and timers without blocking
the loop; a timeout kills the command's whole process group; losing
leadership preempts a waiting on_leader; a hook past its budget fails and a
failed on_leader resigns; a hook that never waits is stopped even through
pcall; blocking calls point to the asynchronous API; hooks run one at a
time, in event order."""
import os
import re
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
        for x in (a, b):
            x.term()
        for x in (a, b):
            assert x.wait_exit(10) == 0


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
        for x in (a, b):
            x.term()
        for x in (a, b):
            assert x.wait_exit(10) == 0


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
        # a broken file is refused; the running script stays
        with open(pol, "w") as f:
            f.write("function on_leader(ev)\n")
        m = a.mark()
        a.signal(__import__("signal").SIGHUP)
        r = a.wait_for("reload", timeout=5, since=m)
        assert r["level"] == "error" and "policy.lua" in r["msg"], r
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


def test_check_warns_about_misspelt_hooks():
    d = h.mkdtemp("rtc")
    f = os.path.join(d, "typo.lua")
    with open(f, "w") as fh:
        fh.write("function on_leaders(ev) end\nfunction helper() end\n")
    code, out, err, _ = h.run([h.ZKELECT_BIN, "check", "--script", f])
    assert code == 0 and "'on_leaders' is not a hook (did you mean on_leader?)" in err, (code, err)
    assert "helper" not in err, err


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
