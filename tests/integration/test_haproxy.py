#!/usr/bin/python3
"""contrib/haproxy.cfg with the real HAProxy: four candidates with --status,
each beside a backend that answers its id; HAProxy checks them with
`option httpchk OPTIONS /primary` (and /replica for the followers' port).
A client connects through HAProxy every 50 ms while the leader gets SIGTERM
and then the next one SIGKILL: the leader's port reaches only the leader's
backend (never a follower's), stops reaching a former leader's backend
within a check interval (plus the check's timeout and slack) of its end, and
reaches the new leader's backend within a check interval (plus slack) of
its leader event; the followers' port never reaches the leader's."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

CFG = os.path.join(h.REPO, "contrib", "haproxy.cfg")
HAPROXY = "/usr/sbin/haproxy"
PATH = "/app/haproxy"
SLACK = 2.0        # seconds beyond the config's own interval and check timeout (a loaded machine)

BACKEND_PY = r"""
import socket, sys, threading
name = sys.argv[2].encode()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(128)
def serve(c):
    try:
        c.settimeout(5)
        c.recv(4096)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(name), name))
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

spawn = h.spawn_logged


def timing(cfg):
    """The check interval and the check timeout the config sets (seconds)."""
    inter = re.search(r"^\s*default-server inter (\d+)s fall 1 rise 1 ", cfg, re.M)
    tcheck = re.search(r"^\s*timeout check (\d+)s$", cfg, re.M)
    assert inter and tcheck, "contrib/haproxy.cfg no longer has the lines this test reads"
    return float(inter.group(1)), float(tcheck.group(1))


def local_config(cfg, leader_port, followers_port, servers):
    """contrib/haproxy.cfg on loopback: its binds on our ports, its server
    lines replaced by ours (name, backend port, status port)."""
    assert cfg.count("bind *:5000") == 1 and cfg.count("bind *:5001") == 1
    cfg = cfg.replace("bind *:5000", "bind 127.0.0.1:%d" % leader_port)
    cfg = cfg.replace("bind *:5001", "bind 127.0.0.1:%d" % followers_port)
    ours = "".join("    server %s 127.0.0.1:%d check port %d\n" % s for s in servers)
    blocks = re.findall(r"(?:^    server db-\d \S+ check port 9464\n)+", cfg, re.M)
    assert len(blocks) == 2, blocks
    for b in blocks:
        cfg = cfg.replace(b, ours, 1)
    return cfg


def ask(port, timeout=2.0):
    """One request through HAProxy: the backend's name, or None (refused,
    closed without an answer: no server up)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            buf = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        if b"\r\n\r\n" not in buf:
            return None
        return buf.split(b"\r\n\r\n", 1)[1].decode()
    except OSError:
        return None


class Client(threading.Thread):
    """Asks through the leader's port every 50 ms: (sent, name)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port, self.log, self.stop = port, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t = time.time()
            self.log.append((t, ask(self.port)))
            self.stop.wait(0.05)


def test_traffic_follows_the_leader_through_haproxy():
    with open(CFG) as f:
        template = f.read()
    inter, tcheck = timing(template)
    off = inter + tcheck + SLACK       # a former leader's backend gets no new connection after
    on = inter + SLACK                 # the new leader's backend gets every one after
    with h.ZooKeeper() as zk:
        names = ("c1", "c2", "c3", "c4")
        ports = {n: (h.free_port(), h.free_port()) for n in names}     # backend, status
        d = h.mkdtemp("haproxy")
        for n in names:
            spawn(["/usr/bin/python3", "-c", BACKEND_PY, str(ports[n][0]), n],
                  os.path.join(d, "backend-%s.log" % n))
        agents = []
        for n in names:
            a = h.Agent(zk, n, path=PATH, extra=["--status", "127.0.0.1:%d" % ports[n][1]])
            a.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=15)
            agents.append(a)
        c1, c2, c3, c4 = agents
        c1.wait_for("leader", timeout=5)
        lport, fport = h.free_port(), h.free_port()
        cfg = os.path.join(d, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(local_config(template, lport, fport,
                                 [(n, ports[n][0], ports[n][1]) for n in names]))
        code, out, err, _ = h.run([HAPROXY, "-c", "-f", cfg], timeout=20, nowrap=True)
        assert code == 0, (code, out, err)
        hap = spawn([HAPROXY, "-db", "-f", cfg], os.path.join(d, "haproxy.log"))
        try:
            # HAProxy 2.6 counts a server as up until its first check:
            # every server has had one after an interval and a check timeout
            time.sleep(inter + tcheck + 0.5)
            h.wait_until(lambda: ask(lport) == "c1", 15, "traffic reaches c1 through HAProxy")
            seen = {ask(lport) for _ in range(8)}
            assert seen == {"c1"}, seen
            h.wait_until(lambda: ask(fport) in ("c2", "c3", "c4"), 15, "the followers' port")
            seen = {ask(fport) for _ in range(12)}
            assert seen <= {"c2", "c3", "c4"} and len(seen) >= 2, seen

            client = Client(lport)
            client.start()
            time.sleep(1.0)
            # a graceful stop: c1 steps down and leaves, c2 leads
            m2 = c2.mark()
            c1.term()
            assert c1.wait_exit(10) == 0
            end1 = h.parse_ts(c1.last("stepdown")["ts"])
            lead2 = h.parse_ts(c2.wait_for("leader", timeout=10, since=m2)["ts"])
            time.sleep(max(0.0, lead2 + on + 1.0 - time.time()))
            # a crash: c2 killed, c3 leads once c2's session expires
            m3 = c3.mark()
            kill2 = time.time()
            c2.kill9()
            lead3 = h.parse_ts(c3.wait_for("leader", timeout=20, since=m3)["ts"])
            time.sleep(max(0.0, lead3 + on + 1.0 - time.time()))
            # the followers' port: never the leader's backend now
            seen = {ask(fport) for _ in range(8)}
            assert seen == {"c4"}, seen
            client.stop.set()
            client.join(10)
        finally:
            hap.send_signal(signal.SIGTERM)
            try:
                hap.wait(10)
            except subprocess.TimeoutExpired:
                hap.kill()
        log = client.log
        assert len(log) > 50, log
        got = {n for _, n in log}
        assert "c4" not in got, "a follower's backend got leader traffic"
        bad = [(t, n) for t, n in log if n == "c1" and t > end1 + off]
        assert not bad, "c1's backend reached %.2f s after its step-down" % (bad[0][0] - end1)
        bad = [(t, n) for t, n in log if n == "c2" and t > kill2 + off]
        assert not bad, "c2's backend reached %.2f s after it was killed" % (bad[0][0] - kill2)
        bad = [(t, n) for t, n in log if lead2 + on < t < kill2 and n != "c2"]
        assert not bad, "not c2 while it led: %s" % bad[:5]
        bad = [(t, n) for t, n in log if t > lead3 + on and n != "c3"]
        assert not bad, "not c3 while it led: %s" % bad[:5]
        for name, since in (("c2", lead2), ("c3", lead3)):
            first = min(t for t, n in log if n == name)
            print("  info: %s's backend reached %.2f s after its leader event"
                  % (name, first - since), flush=True)
        print("  info: c2 led %.2f s after c1's step-down; c3 %.2f s after c2's kill"
              % (lead2 - end1, lead3 - kill2), flush=True)
        for a in (c3, c4):
            a.term()
            assert a.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
