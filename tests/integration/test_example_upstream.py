#!/usr/bin/python3
"""examples/upstream.lua: each candidate's HAProxy (a real one, master-worker
mode, on a loopback port) forwards to the leader's backend; after every
failover (SIGTERM, SIGKILL) requests through each live candidate's proxy
reach the new leader's backend within a bound, including a candidate far
from the front (it learns through the census, --status)."""
import os
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
import examples_util as u  # noqa: E402

EXAMPLE = os.path.join(h.REPO, "examples", "upstream.lua")
PATH = "/app/upstream"
BOUND = 6.0        # seconds for every proxy to follow a new leader

BACKEND_PY = r"""
import http.server, sys
name = sys.argv[2].encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(name)))
        self.end_headers()
        self.wfile.write(name)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

MAIN_CFG = """global
    master-worker
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend fe
    bind 127.0.0.1:%d
    default_backend leader
"""

spawn = h.spawn_logged


class Host:
    """One candidate's host: its service (an HTTP backend naming it) and its HAProxy."""

    def __init__(self, name):
        self.name = name
        self.dir = h.mkdtemp("upstream-" + name)
        self.backend_port = h.free_port()
        self.proxy_port = h.free_port()
        self.cfg = os.path.join(self.dir, "main.cfg")
        self.backend_cfg = os.path.join(self.dir, "leader.cfg")
        self.pidfile = os.path.join(self.dir, "haproxy.pid")
        with open(self.cfg, "w") as f:
            f.write(MAIN_CFG % self.proxy_port)
        with open(self.backend_cfg, "w") as f:     # no leader known yet
            f.write("backend leader\n    server leader 127.0.0.1:1\n")
        self.backend = spawn(["/usr/bin/python3", "-c", BACKEND_PY, str(self.backend_port), name],
                             os.path.join(self.dir, "backend.log"))
        self.haproxy = spawn(["haproxy", "-f", self.cfg, "-f", self.backend_cfg, "-p", self.pidfile],
                             os.path.join(self.dir, "haproxy.log"))
        h.wait_until(lambda: self.get(self.backend_port) == name, 10, "backend " + name)
        h.wait_until(lambda: os.path.exists(self.pidfile), 10, "haproxy of " + name)

    @staticmethod
    def get(port):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=2) as r:
                return r.read().decode()
        except Exception as e:
            return "error: %s" % e

    def via_proxy(self):
        return self.get(self.proxy_port)

    def agent(self, zk):
        return u.EnvAgent(zk, self.name, path=PATH, script=EXAMPLE,
                          data="127.0.0.1:%d" % self.backend_port,
                          extra=["--status", "127.0.0.1:0"],
                          env={"UPSTREAM_CFG": self.cfg, "UPSTREAM_BACKEND": self.backend_cfg,
                               "UPSTREAM_PIDFILE": self.pidfile, "UPSTREAM_POLL": "0.3"})


def all_reach(hosts, leader):
    t0 = time.monotonic()
    for x in hosts:
        h.wait_until(lambda: x.via_proxy() == leader, BOUND,
                     "%s's proxy to reach %s" % (x.name, leader), interval=0.1)
    return time.monotonic() - t0


def test_proxies_follow_the_leader():
    try:
        hosts = {n: Host(n) for n in ("a", "b", "c")}
        with h.ZooKeeper() as zk:
            ag = {}
            ag["a"] = hosts["a"].agent(zk)
            ag["a"].wait_for("leader", timeout=15)
            for n in ("b", "c"):
                ag[n] = hosts[n].agent(zk)
                assert u.wait_role(ag[n])["event"] == "follower"
            dt = all_reach(hosts.values(), "a")
            print("  info: every proxy reaches a after %.2fs" % dt, flush=True)
            master = open(hosts["b"].pidfile).read().strip()

            # graceful: b leads; c (position 2) is not told, the census tells it
            mb = ag["b"].mark()
            ag["a"].term()
            ag["b"].wait_for("leader", timeout=5, since=mb)
            assert ag["a"].wait_exit(10) == 0
            dt = all_reach([hosts["b"], hosts["c"]], "b")
            print("  info: b's and c's proxies reach b %.2fs after a left" % dt, flush=True)
            assert open(hosts["b"].pidfile).read().strip() == master, "haproxy was restarted, not reloaded"

            # SIGKILL: c leads once b's session expired
            mc = ag["c"].mark()
            ag["b"].kill9()
            ag["c"].wait_for("leader", timeout=10, since=mc)
            dt = all_reach([hosts["c"]], "c")
            # a comes back: it learns the leader when it joins
            ag["a2"] = hosts["a"].agent(zk)
            assert u.wait_role(ag["a2"])["event"] == "follower"
            all_reach([hosts["a"], hosts["c"]], "c")
            for _ in range(20):      # and it stays there
                assert hosts["a"].via_proxy() == "c" and hosts["c"].via_proxy() == "c"
                time.sleep(0.05)
            for x in ag.values():
                errs = [e for e in x.events() if e.get("event") == "hook_error" or
                        (e.get("event") == "script" and "not applied" in e.get("msg", ""))]
                assert not errs, "%s: %s" % (x.id, errs)
            applied = u.script_lines(ag["c"], "upstream now")
            assert [e["msg"].split()[2] for e in applied] == \
                ["127.0.0.1:%d" % hosts[n].backend_port for n in ("a", "b", "c")], applied
    finally:
        h.stop_spawned()


if __name__ == "__main__":
    h.run_tests(globals())
