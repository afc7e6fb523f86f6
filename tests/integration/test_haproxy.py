#!/usr/bin/python3
"""contrib/haproxy.cfg with the real HAProxy: candidates with --status,
each beside a backend that answers its id; HAProxy checks them with
`option httpchk OPTIONS /primary` (and /replica for the followers' port).

Traffic follows the leader: a client connects through HAProxy every 50 ms
while the leader gets SIGTERM and then the next one SIGKILL: the leader's
port reaches only the leader's backend (never a follower's), stops reaching
a former leader's backend within a check interval (plus the check's timeout
and slack) of its end, and reaches the new leader's backend within a check
interval (plus slack) of its leader event; the followers' port never
reaches the leader's.

No two leaders: in Patroni's shape (backends that zkelect does not stop,
--notify told of each change), with the documented setting
--status-takeover-delay = the config's inter + timeout check, a client
connecting every 10 ms across a resign (the old leader lives on and says
503) and a graceful stop never reaches the new leader's backend before the
last connection to the old one's; the new one's gets traffic no sooner than
the delay after its leader event. (Without the delay the two overlap for
up to a check interval, in about half of the handovers:
bench/haproxy/run measures it, docs/benchmarks.md has the numbers.)"""
import http.client
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
    """Asks through the leader's port every period s: (sent, name)."""

    def __init__(self, port, period=0.05):
        super().__init__(daemon=True)
        self.port, self.period, self.log, self.stop = port, period, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t = time.time()
            self.log.append((t, ask(self.port)))
            self.stop.wait(self.period)


NOTIFY_NOOP = "#!/bin/sh\n# the service is not ours to stop (Patroni's shape): nothing to do\nexit 0\n"


def takeover_delay_ms(cfg):
    """The documented --status-takeover-delay for a config: its check
    interval plus its check timeout, which its header's command line gives."""
    inter, tcheck = timing(cfg)
    ms = int((inter + tcheck) * 1000)
    assert "#     zkelect run ... --status 0.0.0.0:9464 --status-takeover-delay %d\n" % ms in cfg, \
        "the config's header does not give --status-takeover-delay %d (inter + timeout check)" % ms
    return ms


def start_haproxy(d, template, names, ports):
    """HAProxy on contrib's config, checked and started: (process, leader's
    port, followers' port)."""
    lport, fport = h.free_port(), h.free_port()
    cfg = os.path.join(d, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(local_config(template, lport, fport, [(n, ports[n][0], ports[n][1]) for n in names]))
    code, out, err, _ = h.run([HAPROXY, "-c", "-f", cfg], timeout=20, nowrap=True)
    assert code == 0, (code, out, err)
    return spawn([HAPROXY, "-db", "-f", cfg], os.path.join(d, "haproxy.log")), lport, fport


def stop_haproxy(hap):
    hap.send_signal(signal.SIGTERM)
    try:
        hap.wait(10)
    except subprocess.TimeoutExpired:
        hap.kill()


def lb_election(zk, d, names, extra=()):
    """A backend per name (answering its name) and an agent per name, each
    with --status on its own port, a control socket (a.sock) and extra;
    started in order (the first leads). Returns (agents, ports: name ->
    (backend, status))."""
    ports = {n: (h.free_port(), h.free_port()) for n in names}
    for n in names:
        spawn(["/usr/bin/python3", "-c", BACKEND_PY, str(ports[n][0]), n],
              os.path.join(d, "backend-%s.log" % n))
    agents = []
    for n in names:
        sock = os.path.join(d, "%s.sock" % n)
        a = h.Agent(zk, n, path=PATH, extra=["--status", "127.0.0.1:%d" % ports[n][1],
                                             "--control", sock] + list(extra))
        a.sock = sock
        a.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=15)
        agents.append(a)
    agents[0].wait_for("leader", timeout=5)
    return agents, ports


def overlap(log, old, new):
    """Seconds during which the client reached both old's and new's backend:
    from new's first answer to old's last one (<= 0: never both)."""
    return max(t for t, n in log if n == old) - min(t for t, n in log if n == new)


def primary(status_port):
    """GET /primary on a candidate's status port: (code, body)."""
    c = http.client.HTTPConnection("127.0.0.1", status_port, timeout=5)
    try:
        c.request("GET", "/primary")
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def test_traffic_follows_the_leader_through_haproxy():
    with open(CFG) as f:
        template = f.read()
    inter, tcheck = timing(template)
    off = inter + tcheck + SLACK       # a former leader's backend gets no new connection after
    on = inter + SLACK                 # the new leader's backend gets every one after
    with h.ZooKeeper() as zk:
        names = ("c1", "c2", "c3", "c4")
        d = h.mkdtemp("haproxy")
        (c1, c2, c3, c4), ports = lb_election(zk, d, names)
        hap, lport, fport = start_haproxy(d, template, names, ports)
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
            stop_haproxy(hap)
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


def test_no_two_leaders_behind_haproxy_with_the_takeover_delay():
    """Patroni's shape: each candidate's backend runs throughout (zkelect
    does not stop it; --notify is told and does nothing). With the
    documented setting, --status-takeover-delay = inter + timeout check of
    contrib/haproxy.cfg, a client asking every 10 ms across a resign (c1
    lives on as a follower, its /primary 503) and a graceful stop (c2 exits,
    its backend lives on) never reaches two backends: the old leader's last
    answer comes before the new leader's first. The new leader's /primary
    says why it is 503 during the delay, and its backend gets traffic no
    sooner than the delay after its leader event, and within the delay, an
    interval and a check timeout (plus slack)."""
    with open(CFG) as f:
        template = f.read()
    inter, tcheck = timing(template)
    delay = takeover_delay_ms(template)
    # the documented config is this file: docs/operations.md quotes it whole
    with open(os.path.join(h.REPO, "docs", "operations.md")) as f:
        assert "```\n" + template + "```\n" in f.read(), \
            "docs/operations.md's copy of contrib/haproxy.cfg differs from the file"
    with h.ZooKeeper() as zk:
        names = ("c1", "c2", "c3")
        d = h.mkdtemp("haproxy-delay")
        notify = os.path.join(d, "notify.sh")
        with open(notify, "w") as f:
            f.write(NOTIFY_NOOP)
        os.chmod(notify, 0o755)
        (c1, c2, c3), ports = lb_election(zk, d, names, extra=[
            "--notify", notify, "--status-takeover-delay", str(delay)])
        assert c1.last("status_listen")["takeover_delay_ms"] == delay
        hap, lport, fport = start_haproxy(d, template, names, ports)
        leads = {}
        try:
            # every server has had its first check (HAProxy 2.6 counts a
            # server as up until then) and c1's delay is long over
            time.sleep(inter + tcheck + 0.5)
            h.wait_until(lambda: ask(lport) == "c1", 15, "traffic reaches c1 through HAProxy")
            client = Client(lport, period=0.01)
            client.start()
            time.sleep(1.0)
            # a resign: c1 lives on, a follower whose /primary says 503
            m2 = c2.mark()
            code, out, err, _ = h.run([h.ZKELECT_BIN, "ctl", "--control", c1.sock, "resign"],
                                      timeout=40)
            assert code == 0, (code, out, err)
            leads["c2"] = h.parse_ts(c2.wait_for("leader", timeout=10, since=m2)["ts"])
            code, body = primary(ports["c2"][1])
            assert code == 503 and body.startswith("not leader: takeover delay, "), (code, body)
            h.wait_until(lambda: primary(ports["c2"][1])[0] == 200, delay / 1000.0 + 5,
                         "c2's /primary 200 after its takeover delay")
            h.wait_until(lambda: any(n == "c2" for _, n in client.log), inter + tcheck + 5,
                         "traffic reaches c2")
            time.sleep(1.0)
            # a graceful stop: c2 exits, its backend lives on
            m3 = c3.mark()
            c2.term()
            assert c2.wait_exit(10) == 0
            leads["c3"] = h.parse_ts(c3.wait_for("leader", timeout=10, since=m3)["ts"])
            h.wait_until(lambda: any(n == "c3" for _, n in client.log),
                         delay / 1000.0 + inter + tcheck + 5, "traffic reaches c3")
            time.sleep(1.0)
            client.stop.set()
            client.join(10)
        finally:
            stop_haproxy(hap)
        log = client.log
        assert len(log) > 200, len(log)
        for old, new in (("c1", "c2"), ("c2", "c3")):
            both = overlap(log, old, new)
            first = min(t for t, n in log if n == new) - leads[new]
            print("  info: %s -> %s: %s's backend first reached %.3f s after its leader event "
                  "(delay %.3f s); reached both for %.3f s"
                  % (old, new, new, first, delay / 1000.0, max(0.0, both)), flush=True)
            assert both < 0, "HAProxy reached both %s and %s for %.3f s" % (old, new, both)
            # stamped before the connect that HAProxy routed: early by the client's
            # own lateness at most (a loaded machine's thread, 0.3 s of slack)
            assert first > delay / 1000.0 - 0.3, (new, first)
            assert first < delay / 1000.0 + inter + tcheck + SLACK, (new, first)
        for a in (c1, c3):
            a.term()
            assert a.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
