#!/usr/bin/python3
"""examples/gateway: three gateway instances, each a candidate publishing its
own backend, forward client connections to the current leader's backend.
A client keeps connecting through one follower gateway while the leader
gateway is stopped (SIGTERM) and the next one is killed (SIGKILL, session
expiry); after each switch every new connection reaches the new leader's
backend and none reaches the dead gateway's. Then: connections that are
mid-transfer when their backend goes away (or stops being the leader's) are
closed, not hung; a large echo goes through the bounded buffers intact;
connections wait a bounded time while no leader is known; no descriptor
leaks."""
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

GATEWAY = os.path.abspath(os.environ.get("ZKELECT_GATEWAY_BIN") or os.path.join(
    h.REPO, "build", "examples", "zkelect_gateway"))
PATH = "/gw/election"
SESSION_MS = 2000
SWITCH_BOUND = 1.0      # s after the new leader's `leader` event: every new connection is switched
CLIENT_TIMEOUT = 3.0    # s: a client connection that takes longer counts as hung
LINE_RE = re.compile(r"^(\S+) (\w+) \[([^\]]*)\] (\S+) mono_ns=(\d+)(.*)$")
KV_RE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)')

_backends = []


def now_ns():
    return time.monotonic_ns()       # CLOCK_MONOTONIC, like the gateway's mono_ns


# --------------------------------------------------------------------------
# backends: tiny TCP servers that answer each connection with their name,
# then echo until EOF

class Backend:
    def __init__(self, name):
        self.name = name
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.addr = "127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = set()
        self.served = 0
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        _backends.append(self)

    def _accept(self):
        while not self.closed:
            try:
                s, _ = self.lsock.accept()
            except OSError:
                return
            with self.lock:
                self.conns.add(s)
                self.served += 1
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s):
        try:
            s.sendall((self.name + "\n").encode())
            for _ in range(1000000):
                b = s.recv(65536)
                if not b:
                    break
                s.sendall(b)
        except OSError:
            pass
        finally:
            with self.lock:
                self.conns.discard(s)
            try:
                s.close()
            except OSError:
                pass

    def drop_connections(self):
        """Closes every open connection (as if the backend went away)."""
        with self.lock:
            conns = list(self.conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(conns)

    def stop(self):
        self.closed = True
        try:
            # close() alone would leave it listening while the accept thread
            # is blocked in accept(); shutdown() wakes it and stops listening
            self.lsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(5)
        try:
            self.lsock.close()
        except OSError:
            pass
        self.drop_connections()


def stop_backends():
    for b in _backends:
        b.stop()
    del _backends[:]


# --------------------------------------------------------------------------
# gateway processes

class Gateway(h.Agent):
    """One zkelect_gateway process; its text log parsed into events."""

    def __init__(self, zk, id, backend, extra=(), **kw):
        self.backend = backend
        self._junk = []
        h.Agent.__init__(self, zk, id, path=PATH, session_timeout=SESSION_MS, log=None,
                         extra=extra, **kw)

    def argv(self):
        return [GATEWAY, "--zk", self.zkhosts or self.zk.hostport, "--path", self.path, "--id", self.id,
                "--listen", "127.0.0.1:0", "--backend", self.backend.addr,
                "--session-timeout", str(self.session_timeout)] + self.extra

    def start(self):
        assert os.access(GATEWAY, os.X_OK), "gateway not built: %s (set ZKELECT_GATEWAY_BIN)" % GATEWAY
        return h.Agent.start(self)

    def _read(self):
        h.Agent._read(self)
        # text lines land in _other; turn the gateway's into events
        while self._other:
            line = self._other.pop(0)
            m = LINE_RE.match(line)
            if not m:
                self._junk.append(line)
                continue
            ev = {"ts": m.group(1), "level": m.group(2), "id": m.group(3), "event": m.group(4),
                  "mono_ns": int(m.group(5)), "_i": len(self._events), "_line": line}
            for k, v in KV_RE.findall(m.group(6)):
                ev[k] = v[1:-1] if v.startswith('"') else v
            self._events.append(ev)

    def port(self):
        return int(self.wait_for("listen", timeout=10)["addr"].rsplit(":", 1)[1])

    def upstream(self, addr, since=0, timeout=10):
        return self.wait_for("upstream", addr=addr, since=since, timeout=timeout)

    def assert_clean(self):
        """No sanitizer report or crash in the log, no line that is not an event."""
        self._read()
        with open(self.logfile, errors="replace") as f:
            text = f.read()
        assert not h.crash_markers(text), "%s: %s\n%s" % (self.id, h.crash_markers(text), h.tail(self.logfile))
        assert not self._junk, "%s: unparsed lines: %s" % (self.id, self._junk[:5])

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))


# --------------------------------------------------------------------------
# clients

def fetch_name(port, timeout=CLIENT_TIMEOUT):
    """One connection through the gateway: (t_open_ns, t_done_ns, name or
    None, error or None)."""
    t0 = now_ns()
    name, err = None, None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            buf = b""
            for _ in range(100):
                b = s.recv(256)
                if not b:
                    err = "eof"
                    break
                buf += b
                if b"\n" in buf:
                    name = buf.split(b"\n", 1)[0].decode()
                    break
    except socket.timeout:
        err = "timeout"
    except OSError as e:
        err = type(e).__name__
    return (t0, now_ns(), name, err)


class Client:
    """Opens a connection through one gateway every `interval` s and records
    who answered. Bounded: at most max_conns connections and max_s seconds."""

    def __init__(self, port, interval=0.02, max_conns=5000, max_s=90):
        self.port = port
        self.interval = interval
        self.max_conns = max_conns
        self.max_s = max_s
        self.records = []
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        end = time.monotonic() + self.max_s
        for _ in range(self.max_conns):
            if self.stop_ev.is_set() or time.monotonic() > end:
                return
            self.records.append(fetch_name(self.port))
            self.stop_ev.wait(self.interval)

    def served_by(self, name):
        return [r for r in self.records if r[2] == name]

    def stop(self):
        self.stop_ev.set()
        self.thread.join(CLIENT_TIMEOUT + 5)
        assert not self.thread.is_alive(), "client thread did not end"


def ms(ns):
    return ns / 1e6


def check_switch(client, label, old, new, t_action, t_leader, t_upstream, t_end):
    """Connections opened in [t_action, t_end): after the client gateway's
    upstream line none reaches `old`; after the new leader's event plus
    SWITCH_BOUND all reach `new`; none hangs. Returns the switch time (ms)."""
    recs = [r for r in client.records if t_action <= r[0] < t_end]
    assert recs, "%s: no connection in the window" % label
    hung = [r for r in recs if r[3] == "timeout"]
    assert not hung, "%s: %d connections hung: %s" % (label, len(hung), hung[:5])
    stale = [r for r in recs if r[0] > t_upstream and r[2] == old.name]
    assert not stale, "%s: %d connections reached %s after the switch: %s" % (
        label, len(stale), old.name, stale[:5])
    late = [r for r in recs if r[0] >= t_leader + SWITCH_BOUND * 1e9 and r[2] != new.name]
    assert not late, "%s: connections after leader+%.1fs not served by %s: %s" % (
        label, SWITCH_BOUND, new.name, late[:5])
    after = [r for r in recs if r[0] >= t_leader + SWITCH_BOUND * 1e9]
    assert len(after) >= 10, "%s: too few connections after the switch (%d)" % (label, len(after))
    first = min((r for r in recs if r[2] == new.name), key=lambda r: r[0])
    errors = [r for r in recs if r[3] is not None]
    switch_ms = ms(first[0] - t_leader)
    print("  info: %s: %d connections; upstream line %.1f ms after the new leader's event; "
          "first connection served by %s opened %.1f ms after it (answered %.1f ms after); "
          "%d closed around the switch (%s)"
          % (label, len(recs), ms(t_upstream - t_leader), new.name, switch_ms,
             ms(first[1] - t_leader), len(errors), sorted({r[3] for r in errors})), flush=True)
    return switch_ms


# --------------------------------------------------------------------------
# tests

def test_failover_through_a_follower():
    try:
        with h.ZooKeeper() as zk:
            b = [Backend("b1"), Backend("b2"), Backend("b3")]
            g = []
            for i in range(3):
                x = Gateway(zk, "g%d" % (i + 1), b[i])
                x.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=15)
                g.append(x)
            g1, g2, g3 = g
            g1.wait_for("leader", timeout=1)
            port = g3.port()
            g3.upstream(b[0].addr)
            fd_base = g3.fd_count()
            c = Client(port)
            h.wait_until(lambda: len(c.served_by("b1")) >= 10, 10, "10 connections served by b1")

            # 1: graceful stop of the leader gateway
            m2, m3 = g2.mark(), g3.mark()
            t1 = now_ns()
            g1.term()
            l2 = g2.wait_for("leader", since=m2, timeout=10)
            u2 = g3.upstream(b[1].addr, since=m3, timeout=10)
            assert g1.wait_exit(10) == 0
            h.wait_until(lambda: len([r for r in c.records if r[0] > l2["mono_ns"] + SWITCH_BOUND * 1e9])
                         >= 20, 10, "20 connections after the first switch")

            # 2: SIGKILL of the next leader gateway: g3 leads once g2's session expired
            m3 = g3.mark()
            t2 = now_ns()
            g2.kill9()
            l3 = g3.wait_for("leader", since=m3, timeout=15)
            u3 = g3.upstream(b[2].addr, since=m3, timeout=10)
            g3.wait_for("upstream", addr=b[2].addr, source="self", since=m3, timeout=5)
            h.wait_until(lambda: len([r for r in c.records if r[0] > l3["mono_ns"] + SWITCH_BOUND * 1e9])
                         >= 20, 10, "20 connections after the second switch")
            c.stop()
            t_end = now_ns()

            s1 = check_switch(c, "SIGTERM g1", b[0], b[1], t1, l2["mono_ns"], u2["mono_ns"], t2)
            s2 = check_switch(c, "SIGKILL g2", b[1], b[2], t2, l3["mono_ns"], u3["mono_ns"], t_end)
            print("  info: switch times (new leader's event -> first connection it served): "
                  "%.1f ms after SIGTERM, %.1f ms after SIGKILL (expiry %d ms)"
                  % (s1, s2, SESSION_MS), flush=True)
            # before the first failover only b1 answered, and nothing failed
            before = [r for r in c.records if r[0] < t1]
            assert before and all(r[2] == "b1" for r in before), before[:5]
            # the SIGKILL'd gateway's backend answered until the switch: it was still up
            assert c.served_by("b2"), "b2 never served"
            # no descriptor left behind by about 100+ proxied connections
            assert len(c.records) > 100, len(c.records)
            h.wait_until(lambda: g3.fd_count() <= fd_base, 5,
                         "g3's descriptors back to %d" % fd_base)
            g3.term()
            assert g3.wait_exit(10) == 0
            assert g3.find("stopped", reason="stop")
            for x in g:
                x.assert_clean()
    finally:
        stop_backends()


def echo(s, payload, timeout=5.0):
    s.sendall(payload)
    got = b""
    deadline = time.monotonic() + timeout
    for _ in range(10000):
        if len(got) >= len(payload) or time.monotonic() > deadline:
            break
        b = s.recv(65536)
        if not b:
            break
        got += b
    return got


def wait_closed(s, timeout=2.0):
    """Seconds until the peer closed s (EOF or reset); raises if it does not
    within timeout. Reads (and drops) whatever still arrives."""
    t0 = time.monotonic()
    s.settimeout(timeout)
    for _ in range(1000):
        try:
            b = s.recv(65536)
        except socket.timeout:
            raise AssertionError("connection still open %.1fs later" % timeout)
        except ConnectionResetError:
            return time.monotonic() - t0
        if not b:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            break
    raise AssertionError("connection still open %.1fs later" % timeout)


def connect_through(port, expect):
    s = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT)
    s.settimeout(CLIENT_TIMEOUT)
    line = b""
    for _ in range(100):
        b = s.recv(1)
        if not b or b == b"\n":
            break
        line += b
    assert line.decode() == expect, "answered by %r, expected %r" % (line, expect)
    return s


def test_connections_mid_transfer_are_closed():
    try:
        with h.ZooKeeper() as zk:
            b1, b2 = Backend("b1"), Backend("b2")
            g1 = Gateway(zk, "g1", b1)
            g1.wait_for("leader", timeout=15)
            g2 = Gateway(zk, "g2", b2)
            g2.wait_for("follower", timeout=15)
            port = g2.port()
            g2.upstream(b1.addr)
            fd_base = g2.fd_count()

            # a large echo through the bounded buffers (backpressure both ways)
            s = connect_through(port, "b1")
            payload = os.urandom(4 << 20)
            got = []
            reader = threading.Thread(target=lambda: got.append(echo_read(s, len(payload))),
                                      daemon=True)
            reader.start()
            s.sendall(payload)
            reader.join(30)
            assert not reader.is_alive(), "the echo did not come back within 30 s"
            assert got and got[0] == payload, "echo differs (%d of %d bytes)" % (
                len(got[0]) if got else 0, len(payload))
            s.close()

            # the backend goes away mid-transfer: the client is closed, not left hanging
            s = connect_through(port, "b1")
            assert echo(s, b"ping\n") == b"ping\n"
            assert b1.drop_connections() >= 1
            dt = wait_closed(s, 2.0)
            print("  info: backend dropped: client closed %.1f ms later" % (dt * 1000), flush=True)
            s.close()

            # the leader changes mid-transfer: connections to the old leader's backend are closed
            s = connect_through(port, "b1")
            assert echo(s, b"ping\n") == b"ping\n"
            m = g2.mark()
            t_term = now_ns()
            g1.term()
            g2.wait_for("leader", since=m, timeout=10)
            u = g2.upstream(b2.addr, since=m, timeout=5)
            wait_closed(s, 2.0)
            t_closed = now_ns()
            # the client sees its close inside the switch, before the gateway
            # writes the switch's line: wait for the line, do not just look
            sw = g2.wait_for("upstream_switch", since=m, timeout=5)
            assert int(sw["closed"]) >= 1, sw
            print("  info: leader changed: g2 switched %.1f ms after the SIGTERM, the client to "
                  "the old backend saw its close by %.1f ms" % (ms(u["mono_ns"] - t_term),
                                                              ms(t_closed - t_term)), flush=True)
            s.close()
            assert g1.wait_exit(10) == 0
            s = connect_through(port, "b2")
            assert echo(s, b"pong\n") == b"pong\n"
            s.close()
            # the leader's backend is down (refuses): new connections are closed at once
            b2.stop()
            r = fetch_name(port)
            assert r[2] is None and r[3] in ("eof", "ConnectionResetError"), r
            assert ms(r[1] - r[0]) < 1000, r
            assert g2.find("conn_close") == [], "connection lines at the default log level"
            h.wait_until(lambda: g2.fd_count() <= fd_base, 5, "g2's descriptors back to %d" % fd_base)
            g2.term()
            assert g2.wait_exit(10) == 0
            g1.assert_clean()
            g2.assert_clean()
    finally:
        stop_backends()


def echo_read(s, n, timeout=30.0):
    got = bytearray()
    deadline = time.monotonic() + timeout
    s.settimeout(timeout)
    for _ in range(1000000):
        if len(got) >= n or time.monotonic() > deadline:
            break
        b = s.recv(1 << 16)
        if not b:
            break
        got += b
    return bytes(got)


def test_no_leader_yet_waits_bounded():
    try:
        zk = h.ZooKeeper(start=False)
        with zk:
            b1 = Backend("b1")
            # --wait 300: a connection while no leader is known is closed after about 300 ms
            g = Gateway(zk, "g1", b1, extra=["--wait", "300"])
            port = g.port()
            r = fetch_name(port)
            assert r[2] is None and r[3] in ("eof", "ConnectionResetError"), r
            waited = ms(r[1] - r[0])
            assert 250 <= waited <= 2000, waited
            print("  info: no leader: connection closed after %.0f ms (--wait 300)" % waited,
                  flush=True)
            g.stop()
            # --wait 30000: a connection made before ZooKeeper is up is served once g2 leads
            g2 = Gateway(zk, "g2", b1, extra=["--wait", "30000"])
            port = g2.port()
            res = []
            t = threading.Thread(target=lambda: res.append(fetch_name(port, timeout=40)), daemon=True)
            t.start()
            time.sleep(0.3)
            zk.start()
            g2.wait_for("leader", timeout=20)
            t.join(20)
            assert res and res[0][2] == "b1", res
            g2.term()
            assert g2.wait_exit(10) == 0
            g2.assert_clean()
    finally:
        stop_backends()


def test_missing_chroot_exits_78():
    try:
        with h.ZooKeeper() as zk:
            # the agent and the observer both find the chroot missing; either ends the run
            g = Gateway(zk, "g1", Backend("b1"), zkhosts=zk.hostport + "/nochroot")
            assert g.wait_exit(20) == 78
            g.wait_for("stopped", timeout=1)
            g.assert_clean()
    finally:
        stop_backends()


def test_bad_flags():
    for args, want in ((["--zk", "127.0.0.1:1"], "required"),
                       (["--zk", "127.0.0.1:1", "--path", PATH, "--id", "x", "--listen", "127.0.0.1:0",
                         "--backend", "localhost:80"], "numeric"),
                       (["--zk", "127.0.0.1:1", "--path", "rel", "--id", "x", "--listen", "127.0.0.1:0",
                         "--backend", "127.0.0.1:80"], "path"),
                       (["--bogus", "1"], "unknown flag")):
        code, out, err, _ = h.run([GATEWAY] + args, timeout=10)
        assert code == 64 and want in err, (args, code, err)


if __name__ == "__main__":
    h.run_tests(globals(), timeout=120)
