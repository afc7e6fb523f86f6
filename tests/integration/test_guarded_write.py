#!/usr/bin/python3
"""Leader-guarded writes (zkelect.zk, zke_agent_write): a deposed leader's
guarded write fails in ZooKeeper itself. Leader A's write to /gw/value is
issued while its connection is held silent (a StallProxy), then A is frozen
(SIGSTOP) and its node deleted from outside; B leads and its guarded write
lands. Once A runs again and its held bytes reach the server, ZooKeeper
refuses A's multi on its first op, the check of A's node (nonode): the value
stays B's. A plain write held the same way on another live session through
the same proxy does land after the successor's: the guard is what stops
A's. A's on_stepdown then tries another write: its term has ended, and the
write is refused before it is sent (ETERM). B's multi whose second op fails
applies nothing and names that op; paths outside the allow-list raise. On a build whose guard checks
the election folder instead of A's node, A's held write lands after B's
(the value A's, version 2) and this test fails; so it does on code without
--zk-write-prefixes."""
import os
import signal
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

PATH = "/app/gw_election"
T = 10000
POLICY = os.path.join(h.POLICIES, "guarded.lua")


def script_line(agent, word, since=0, timeout=10):
    return agent.wait_for(lambda e: e.get("event") == "script" and
                          str(e.get("msg", "")).startswith(word), timeout=timeout, since=since)


def test_a_deposed_leaders_guarded_write_fails_in_zookeeper():
    with h.ZooKeeper(extra_cfg=("maxSessionTimeout=20000",)) as zk, h.StallProxy(zk.port) as px:
        kz = KazooClient(hosts=zk.hostport, timeout=10)
        kz.start(timeout=10)
        held = KazooClient(hosts=px.hostport, timeout=10)     # a plain client, held like A
        held.start(timeout=10)
        try:
            kz.create("/gw/value", b"init", makepath=True)
            kz.create("/gw/plain", b"init")
            extra = ["--zk-write-prefixes", "/gw", "--session-timeout", str(T)]
            a = h.Agent(zk, "a", path=PATH, script=POLICY, zkhosts=px.hostport,
                        session_timeout=None, extra=extra)
            script_line(a, "ready", timeout=15)
            px.hold(30)                                       # A's write goes into the hold
            b = h.Agent(zk, "b", path=PATH, script=POLICY, session_timeout=None, extra=extra)
            ma, mb = a.mark(), b.mark()
            script_line(a, "writing", timeout=5)
            held.set_async("/gw/plain", b"stale")             # held too: a plain write
            node = a.wait_for("leader", timeout=1)["node"]
            b.wait_for("follower", timeout=15)
            a.sigstop()
            kz.delete(PATH + "/" + node)                      # A is deposed
            b.wait_for("leader", timeout=10, since=mb)
            ok = script_line(b, "write_ok", since=mb)
            multi = script_line(b, "multi", since=mb)["msg"]
            assert multi == "multi r=nil code=ENONODE op=2", multi
            raised = script_line(b, "raised", since=mb)["msg"]
            assert raised.startswith("raised true true true: ") and "not under a write prefix" in \
                raised and "candidate's node" in raised and "'..' component" in raised, raised
            kz.set("/gw/plain", b"new")                       # the successor's plain write
            assert kz.get("/gw/value")[0].startswith(b"b@"), kz.get("/gw/value")
            a.sigcont()
            px.hold(0)                                        # A's held bytes reach ZooKeeper
            # the hook waits for it (EDEPOSED), or its term's end came first
            # and the agent's log says what ZooKeeper answered (late)
            ref = a.wait_for(lambda e: e.get("event") == "log" and
                             str(e.get("msg", "")).startswith("guarded write"), timeout=10, since=ma)
            msg = ref["msg"]
            print("  info: A's write: %s; B's: %s" % (msg, ok["msg"]))
            assert ": deposed: " in msg or ": late: " in msg, msg
            assert "ZooKeeper refused the write" in msg and "(nonode)" in msg, msg
            h.wait_until(lambda: kz.get("/gw/plain")[0] == b"stale", timeout=5,
                         desc="the held plain write lands after the successor's")
            sd = script_line(a, "stepdown_write", since=ma)
            assert "code=ETERM" in sd["msg"], sd
            assert kz.exists("/gw/m1") is None          # the failed multi applied nothing
            value, st = kz.get("/gw/value")
            assert value.startswith(b"b@") and st.version == 1, (value, st)
            for x in (a, b):
                x.term()
                assert x.wait_exit(10) == 0
        finally:
            held.stop()
            kz.stop()


if __name__ == "__main__":
    h.run_tests(globals())
