#!/usr/bin/python3
"""`zkelect run --status`: GET /status, /metrics and the checks load
balancers speak (/leader, /primary, /follower, /replica, /health, with GET,
HEAD and OPTIONS) served on the agent's loop; a frozen leader never answers
/leader 200 after its lease. Under load from a second process while the election changes
leader, every request is answered and no candidate loses or gains a role it
should not; malformed requests get 4xx and do not stall the loop; hook
timeouts and failures are counted; bad --status values are refused."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "chaos"))
import zkharness as h  # noqa: E402
from ensemble import MiniZK  # noqa: E402  (a stdlib ZooKeeper client)

PATH = "/app/http"
POLICY = os.path.join(h.POLICIES, "http.lua")
BAD_HOOKS = os.path.join(h.POLICIES, "http_bad_hooks.lua")
LOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "http_load.py")
STATUS = ["--status", "127.0.0.1:0"]


def addr_of(a):
    ev = a.wait_for("status_listen", timeout=10)
    host, port = ev["addr"].rsplit(":", 1)
    return host.strip("[]"), int(port)


def get(addr, path, method="GET"):
    c = http.client.HTTPConnection(addr[0], addr[1], timeout=5)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def status(addr):
    code, hdrs, body = get(addr, "/status")
    assert code == 200, (code, body)
    assert hdrs.get("Content-Type") == "application/json", hdrs
    return json.loads(body)


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? '
                    r'(-?[0-9.eE+-]+|\+Inf|NaN)$')


def metrics(addr):
    """Parses the Prometheus text; checks its shape; returns {name{labels}: value}."""
    code, hdrs, body = get(addr, "/metrics")
    assert code == 200, (code, body)
    assert hdrs.get("Content-Type", "").startswith("text/plain; version=0.0.4"), hdrs
    out, typed = {}, {}
    for line in body.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            typed[name] = kind
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "not a Prometheus sample line: %r" % line
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or base in typed, "sample without # TYPE: %r" % line
        key = line.rsplit(" ", 1)[0]
        assert key not in out, "duplicate sample %r" % key
        out[key] = float(line.rsplit(" ", 1)[1])
    return out


def check_histograms(m):
    """Cumulative buckets never decrease and +Inf equals _count."""
    hooks = {re.search(r'hook="([^"]+)"', k).group(1) for k in m
             if k.startswith("zkelect_hook_duration_seconds_count")}
    for hk in hooks:
        bks = [(k, v) for k, v in m.items()
               if k.startswith('zkelect_hook_duration_seconds_bucket{hook="%s"' % hk)]
        vals = [v for _, v in bks]
        assert vals == sorted(vals), bks
        inf = m['zkelect_hook_duration_seconds_bucket{hook="%s",le="+Inf"}' % hk]
        assert inf == m['zkelect_hook_duration_seconds_count{hook="%s"}' % hk]
    return hooks


def no_role_change(a, since, allowed=()):
    bad = [e for e in a.events()[since:]
           if e.get("event") in ("leader", "stepdown", "suspend", "follower", "expired")
           and e.get("event") not in allowed]
    assert not bad, "%s changed role under load: %s" % (a.id, bad)


def test_endpoints_under_load_while_the_leader_changes():
    with h.ZooKeeper() as zk:
        agents = h.start_in_order(zk, ("h1", "h2", "h3"), path=PATH, script=POLICY,
                                  extra=STATUS)
        h1, h2, h3 = agents
        addrs = {a.id: addr_of(a) for a in agents}
        assert all(host == "127.0.0.1" for host, _ in addrs.values()), addrs
        e1 = h1.wait_for("leader", timeout=5)
        assert get(addrs["h1"], "/leader")[0] == 200
        assert get(addrs["h2"], "/leader")[0] == 503
        stop_file = os.path.join(h.mkdtemp("load"), "stop")
        urls = ["http://%s:%d%s" % (addrs[n][0], addrs[n][1], p)
                for n in ("h2", "h3") for p in ("/status", "/metrics", "/leader")]
        marks = {a.id: a.mark() for a in (h2, h3)}
        load = subprocess.Popen([sys.executable, LOAD, "--duration", "40", "--threads", "16",
                                 "--stop-file", stop_file] + urls,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(1.5)
            # change of leader under load: h1 leaves, h2 takes over
            t_term = time.time()
            h1.term()
            assert h1.wait_exit(10) == 0
            e2 = h2.wait_for("leader", timeout=10)
            time.sleep(1.0)
            # a new candidate joins, and h2 reloads its script, under load
            h4 = h.Agent(zk, "h4", path=PATH, script=POLICY, extra=STATUS)
            h4.wait_for("follower", timeout=10)
            h2.signal(signal.SIGHUP)
            h2.wait_for("reload", timeout=10)
            time.sleep(1.5)
        finally:
            open(stop_file, "w").close()
            out, err = load.communicate(timeout=60)
        assert load.returncode == 0, err.decode()[-2000:]
        res = json.loads(out)
        print("  info: load: %d requests, codes %s, slowest %.3fs"
              % (res["requests"], res["codes"], res["max_s"]), flush=True)
        assert res["nerrors"] == 0, res["errors"]
        assert res["bad_bodies"] == 0, res
        assert set(res["codes"]) <= {"200", "503"}, res["codes"]
        assert res["requests"] >= 300, "too little load to mean anything: %s" % res
        # /leader on h2 said 503 until it led, then 200, never back: no 503
        # for a request sent after a 200 was received
        tl = res["leader"]["%s:%d" % addrs["h2"]]
        first200 = min((r for s, r, c in tl if c == 200), default=None)
        assert first200 is not None, tl
        late503 = [(s, r, c) for s, r, c in tl if c == 503 and s > first200]
        assert not late503, "h2's /leader said 503 after saying 200: %s" % late503[:5]
        assert all(c == 503 for s, r, c in tl if r < t_term), "200 before h1 left"
        assert any(c == 200 for s, r, c in tl if s > h.parse_ts(e2["ts"]) + 0.5)
        assert all(c == 503 for _, _, c in res["leader"]["%s:%d" % addrs["h3"]])
        # the candidates kept their roles: h2 led once (no lease step-down,
        # no suspend), h3 stayed a follower
        no_role_change(h2, marks["h2"], allowed=("leader", "follower"))
        assert len(h2.find("leader")) == 1 and not h2.find("stepdown")
        no_role_change(h3, marks["h3"], allowed=("follower",))
        assert not h3.find("leader")

        # the census catches up with h4's arrival within its interval
        h.wait_until(lambda: status(addrs["h2"])["candidates"] == 3, 10, "h2 counts 3 candidates")
        # h3 watches h2, not h1, so its own listing still names h1: its
        # status shows the census view, read again after every change
        h.wait_until(lambda: (status(addrs["h3"])["leader"] or {}).get("id") == "h2", 10,
                     "h3's status names the new leader")
        s2, s3 = status(addrs["h2"]), status(addrs["h3"])
        assert s2["id"] == "h2" and s2["role"] == "leader" and s2["position"] == 0, s2
        assert s2["epoch"] == e2["epoch"] and s2["epoch"] > e1["epoch"], (s2, e2)
        assert s2["node"] == e2["node"] and s2["lease_remaining_ms"] > 0, s2
        assert s2["leader"]["id"] == "h2" and s2["leader"]["epoch"] == e2["epoch"], s2
        assert s2["candidates"] == 3 and s2["session"]["state"] == "connected", s2
        assert s2["session"]["id"] == e2["session"], (s2, e2)
        assert s2["session"]["connects"] == 1 and s2["session"]["expirations"] == 0, s2
        lt = [t for t in s2["transitions"] if t["event"] == "leader"]
        assert len(lt) == 1 and lt[0]["reason"] == e2["reason"] and lt[0]["epoch"] == e2["epoch"], s2
        assert [t["event"] for t in s2["transitions"]][:2] == ["joined", "follower"], s2
        # on_leader ran when h2 took over and again after the reload (ev.reload)
        assert s2["hooks"]["on_leader"]["runs"] == 2 and s2["hooks"]["on_leader"]["ok"] == 2, s2
        assert s2["hooks"]["on_leader"]["seconds_total"] >= 0.02, s2
        assert s2["reloads"] == {"ok": 1, "failed": 0}, s2
        assert s3["role"] == "follower" and s3["position"] == 1, s3
        assert s3["leader"]["id"] == "h2" and s3["leader"]["epoch"] == e2["epoch"], s3
        assert s3["epoch"] is None and s3["lease_remaining_ms"] is None, s3

        m2 = metrics(addrs["h2"])
        assert m2["zkelect_is_leader"] == 1 and m2["zkelect_epoch"] == e2["epoch"], m2
        assert m2['zkelect_role{role="leader"}'] == 1 and m2['zkelect_role{role="follower"}'] == 0
        assert m2['zkelect_transitions_total{event="leader",reason="%s"}' % e2["reason"]] == 1
        assert m2['zkelect_session_state{state="connected"}'] == 1
        assert m2["zkelect_candidates"] == 3 and m2["zkelect_position"] == 0
        assert m2["zkelect_lease_remaining_seconds"] > 0
        assert m2['zkelect_reloads_total{result="ok"}'] == 1
        assert m2['zkelect_hook_runs_total{hook="on_leader",outcome="ok"}'] == 2
        assert "on_leader" in check_histograms(m2)
        m3 = metrics(addrs["h3"])
        assert m3["zkelect_is_leader"] == 0 and m3["zkelect_leader_epoch"] == e2["epoch"]
        check_histograms(m3)
        for a in (h2, h3, h4):
            a.term()
            assert a.wait_exit(10) == 0


def raw(addr, data, read=True, timeout=5):
    s = socket.create_connection(addr, timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return b""
        buf = b""
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            buf += chunk
        return buf
    finally:
        s.close()


def code_of(resp):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp)
    return int(m.group(1)) if m else None


def test_malformed_requests_get_4xx_and_never_stall_the_loop():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "m1", path=PATH, script=POLICY, extra=STATUS)
        e = a.wait_for("leader", timeout=10)
        addr = addr_of(a)
        # /leader says 200 once on_leader (20 ms) is done
        h.wait_until(lambda: get(addr, "/leader")[0] == 200, 5, "/leader 200")
        mark = a.mark()
        # hold 30 half-sent requests open for the whole test
        held = []
        for _ in range(30):
            s = socket.create_connection(addr, timeout=5)
            s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            held.append(s)
        try:
            # a request line that is not HTTP at all is closed without a
            # reply (None); anything that looks like HTTP gets a status
            cases = [
                (b"GARBAGE\r\n\r\n", (400, None)),
                (b"GARBAGE /x\r\n\r\n", (400,)),
                (b"GET /status\r\n\r\n", (400,)),
                (b"GET /status HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", (400,)),
                (b"GET /status HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", (400,)),
                (b"GET /status HTTP/1.1\r\n\r\n", (400,)),                     # no Host
                (b"GET /status HTTP/9.9\r\nHost: x\r\n\r\n", (400, 505)),
                (b"\x00\xff\xfe binary\r\n\r\n", (400, None)),
                (b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (404,)),
                (b"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", (405,)),
                (b"DELETE /leader HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", (405,)),
                (b"GET /status HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n",
                 (400, 413, 431)),
                # a chunked body with a bad chunk size
                (b"GET /status HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                 (200, 400)),
            ]
            for req, want in cases:
                resp = raw(addr, req)
                assert code_of(resp) in want, (req[:60], resp[:200])
                if code_of(resp) == 405:
                    assert b"\r\nAllow: GET, HEAD, OPTIONS\r\n" in resp, resp[:300]
            # the endpoint still answers, HEAD has no body, a query is ignored
            assert get(addr, "/leader")[0] == 200
            code, hdrs, body = get(addr, "/status", method="HEAD")
            assert code == 200 and body == b"", (code, body)
            assert get(addr, "/status?verbose=1")[0] == 200
            # pipelined requests on one connection are all answered
            resp = raw(addr, b"GET /leader HTTP/1.1\r\nHost: x\r\n\r\n" * 3 +
                       b"GET /leader HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert resp.count(b"HTTP/1.1 200") == 4, resp[:500]
        finally:
            for s in held:
                s.close()
        # the loop kept the lease: still the same leader, no step-down
        no_role_change(a, mark)
        st = status(addr)
        assert st["role"] == "leader" and st["epoch"] == e["epoch"] and not st["suspended"], st
        a.term()
        assert a.wait_exit(10) == 0


def test_hook_timeouts_and_failures_are_counted():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "t1", path=PATH, script=BAD_HOOKS,
                    extra=STATUS + ["--hook-timeout", "200", "--on-leader-error", "ignore",
                                    "--health-interval", "100", "--health-fails", "1000"])
        a.wait_for("leader", timeout=10)
        addr = addr_of(a)
        a.wait_for(lambda ev: ev.get("event") == "hook_error" and ev.get("hook") == "on_leader",
                   timeout=10)

        def counted():
            m = metrics(addr)
            return m.get('zkelect_hook_runs_total{hook="health",outcome="failed"}', 0) >= 2 and m
        m = h.wait_until(counted, 10, "two failed health() runs counted")
        assert m['zkelect_hook_runs_total{hook="on_leader",outcome="timed_out"}'] == 1, m
        assert m['zkelect_hook_runs_total{hook="on_leader",outcome="failed"}'] == 0, m
        assert m['zkelect_hook_runs_total{hook="health",outcome="timed_out"}'] == 0, m
        # one way to count each thing: the outcomes are labels of
        # zkelect_hook_runs_total, not metrics of their own
        assert not [k for k in m if k.startswith(("zkelect_hook_failures_total",
                                                  "zkelect_hook_timeouts_total"))], m
        assert m["zkelect_is_leader"] == 1          # --on-leader-error ignore
        check_histograms(m)
        st = status(addr)
        assert st["hooks"]["on_leader"]["timed_out"] == 1, st
        assert st["hooks"]["on_leader"]["last_outcome"] == "timed_out", st
        assert st["hooks"]["on_leader"]["seconds_max"] >= 0.2, st
        assert st["hooks"]["health"]["failed"] >= 2, st
        a.term()
        assert a.wait_exit(10) == 0


def test_a_foreign_leader_with_binary_data_gives_valid_json():
    """A foreign leader's data is any bytes: /status stays valid UTF-8 JSON
    (invalid sequences replaced) and cuts it at 4 KiB."""
    with h.ZooKeeper() as zk:
        cli = MiniZK("127.0.0.1", zk.port)
        assert cli.create("/app", b"")
        assert cli.create(PATH, b"")
        data = b"\xff\xfe\xc0\xafok\xe2\x82" + "é".encode() * 5000
        assert cli.create(PATH + "/8d2c1b0a9e8f__lock__0000000000", data, ephemeral=True)
        a = h.Agent(zk, "u1", path=PATH, extra=STATUS)
        a.wait_for("follower", timeout=10)
        st = status(addr_of(a))              # json.loads of the raw bytes: UTF-8 or it fails
        d = st["leader"]["data"]
        assert d.startswith("\ufffd\ufffd\ufffd\ufffdok\ufffd"), d[:20]
        assert d.endswith("...") and len(d.encode()) <= 4096 + 8, len(d.encode())
        m = metrics(addr_of(a))
        assert m["zkelect_is_leader"] == 0
        a.term()
        assert a.wait_exit(10) == 0
        cli.close()


def test_bad_status_addresses_are_refused():
    with h.ZooKeeper() as zk:
        base = [h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH, "--id", "b1"]
        for bad in ("nope", "127.0.0.1:70000", "127.0.0.1:", "host.example:80", "[::1:80", ""):
            code, out, err, _ = h.run(base + ["--status", bad], timeout=10)
            assert code == 64, (bad, code, err)
            assert "--status" in err, err
        # an address in use: a configuration error naming it
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        try:
            code, out, err, _ = h.run(base + ["--status", "127.0.0.1:%d" % port], timeout=10)
        finally:
            busy.close()
        # 75: temporary (an old instance may still hold it), so systemd retries
        assert code == 75 and "127.0.0.1:%d" % port in err and "in use" in err, (code, err)
        # IPv6 loopback works too
        a = h.Agent(zk, "v6", path=PATH, extra=["--status", "[::1]:0"])
        a.wait_for("leader", timeout=10)
        host, port = addr_of(a)
        assert host == "::1"
        assert get((host, port), "/leader")[0] == 200
        a.term()
        assert a.wait_exit(10) == 0


def test_slow_readers_and_pipelined_bursts_do_not_lock_out_a_check():
    """64 clients each pipeline 300 requests and never read their answers:
    a check still gets its answer (the client that kept answers waiting
    longest makes room), every answer of a 40-request pipeline arrives, a
    HEAD that is refused gets no body, and an absolute-form target's
    authority ends at '?'."""
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "p1", path=PATH, extra=STATUS)
        a.wait_for("leader", timeout=10)
        addr = addr_of(a)
        h.wait_until(lambda: get(addr, "/leader")[0] == 200, 5, "/leader 200")
        resp = raw(addr, b"GET /leader HTTP/1.1\r\nHost: x\r\n\r\n" * 39 +
                   b"GET /leader HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert resp.count(b"HTTP/1.1 200") == 40, resp.count(b"HTTP/1.1 200")
        resp = raw(addr, b"HEAD /status HTTP/1.1\r\n\r\n")          # no Host: 400
        assert code_of(resp) == 400 and resp.endswith(b"\r\n\r\n"), resp
        resp = raw(addr, b"GET http://x?y/leader HTTP/1.1\r\nHost: x\r\n"
                         b"Connection: close\r\n\r\n")
        assert code_of(resp) == 200 and b"zkelect" in resp, resp[:300]   # "/" (the index)
        slow = []
        try:
            burst = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 300
            for _ in range(64):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(addr)
                s.setblocking(False)
                try:
                    s.send(burst)
                except BlockingIOError:
                    pass
                slow.append(s)
            time.sleep(0.5)
            for _ in range(5):
                c = http.client.HTTPConnection(addr[0], addr[1], timeout=2)
                c.request("GET", "/leader")
                assert c.getresponse().status == 200
                c.close()
        finally:
            for s in slow:
                s.close()
        a.term()
        assert a.wait_exit(10) == 0


def _half_requests(addr, n, hold):
    """n clients each send half a request; closed at once unless hold."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(addr, timeout=5)
        s.sendall(b"GET /status HTTP/1.1\r\nHo")
        if hold:
            socks.append(s)
        else:
            s.close()
    return socks


def _answers_within(addr, seconds):
    """The endpoint answers GET /leader within seconds (connect and reply)."""
    t0 = time.monotonic()
    while True:
        try:
            c = http.client.HTTPConnection(addr[0], addr[1], timeout=seconds)
            c.request("GET", "/leader")
            code = c.getresponse().status
            c.close()
            return code, time.monotonic() - t0
        except (OSError, http.client.HTTPException) as e:
            if time.monotonic() - t0 > seconds:
                raise AssertionError("no answer within %.1f s: %r" % (seconds, e))
            time.sleep(0.05)


def test_a_flood_of_half_requests_leaves_the_endpoint_answering():
    """65, then 300, clients each send half a request and close: the
    endpoint answers within a second after each flood (with libmicrohttpd
    it stayed deaf: the 65th connection took its listening socket out of
    its epoll set for good). Then 200 connections held open with half a
    request: a check still gets its answer while they are held, as the
    connection that waited longest makes room."""
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "f1", path=PATH, extra=STATUS)
        a.wait_for("leader", timeout=10)
        addr = addr_of(a)
        assert _answers_within(addr, 5)[0] == 200
        for n in (65, 300):
            _half_requests(addr, n, hold=False)
            code, took = _answers_within(addr, 2.0)
            assert code == 200, code
        held = _half_requests(addr, 200, hold=True)
        try:
            for _ in range(5):
                code, took = _answers_within(addr, 2.0)
                assert code == 200, code
            # the oldest of the held ones were closed to make room
            closed = 0
            for s in held[:20]:
                s.settimeout(2)
                try:
                    closed += s.recv(1) == b""
                except (ConnectionResetError, socket.timeout):
                    closed += 1
            assert closed == 20, closed
        finally:
            for s in held:
                s.close()
        assert _answers_within(addr, 2.0)[0] == 200
        # the flood cost the election nothing
        assert not a.find(lambda ev: ev.get("event") in ("stepdown", "suspend", "follower")), \
            a.describe()
        a.term()
        assert a.wait_exit(10) == 0


def test_held_connections_do_not_delay_failover():
    """Every candidate's endpoint is held full (64 half-sent requests each,
    topped up) while the leader is stopped: the next in line leads, its
    endpoint answers /leader 200 within a second of its leader event."""
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "g1", path=PATH, extra=STATUS)
        a.wait_for("leader", timeout=10)
        b = h.Agent(zk, "g2", path=PATH, extra=STATUS)
        b.wait_for("follower", timeout=10)
        addrs = [addr_of(a), addr_of(b)]
        held = []
        try:
            for ad in addrs:
                held += _half_requests(ad, 70, hold=True)
            mark = b.mark()
            a.term()
            ev = b.wait_for("leader", timeout=10, since=mark)
            held += _half_requests(addrs[1], 70, hold=True)
            code, took = _answers_within(addrs[1], 2.0)
            assert code in (200, 503), code      # 503 only while on_leader runs
            h.wait_until(lambda: _answers_within(addrs[1], 2.0)[0] == 200, 5, "/leader 200")
            assert a.wait_exit(10) == 0
            assert ev["epoch"] > 0
        finally:
            for s in held:
                s.close()
        b.term()
        assert b.wait_exit(10) == 0


CHECKS = {"/": "leader", "/leader": "leader", "/primary": "leader",
          "/follower": "follower", "/replica": "follower", "/health": "health"}


WHAT = {"leader": "leader", "follower": "follower", "health": "healthy"}


def says(body, kind, why):
    """A check's body: "<what>" on a 200 (why None), "not <what>: <why>" on a 503."""
    line = body.split(b"\n", 1)[0].decode()
    want = WHAT[kind] if why is None else "not %s: %s" % (WHAT[kind], why)
    return line == want


def check_all(addr, want, epoch, why):
    """Every check path with GET, HEAD and OPTIONS: want[kind] is the status
    expected, why[kind] the reason a 503's body gives (GET and OPTIONS);
    each answer carries the role and epoch headers."""
    for path, kind in CHECKS.items():
        for method in ("GET", "HEAD", "OPTIONS"):
            code, hdrs, body = get(addr, path, method=method)
            assert code == want[kind], (addr, method, path, code, want, body)
            if method != "HEAD":
                assert says(body, kind, why.get(kind) if code == 503 else None), \
                    (addr, method, path, code, body)
            assert hdrs.get("X-Zkelect-Epoch") == str(epoch), (method, path, hdrs)
            assert hdrs.get("X-Zkelect-Role") in ("leader", "follower", "idle"), hdrs
            if method == "HEAD":
                assert body == b"" and int(hdrs["Content-Length"]) > 0, (path, hdrs, body)
            if method == "OPTIONS":
                assert hdrs.get("Allow") == "GET, HEAD, OPTIONS", (path, hdrs)


def test_load_balancer_checks_answer_get_head_and_options():
    """/leader and /primary 200 only on the leader, /follower and /replica
    only on a follower that knows its leader, /health on both while
    connected, / like /leader (as in Patroni); OPTIONS answers the check's
    status (HAProxy's `option httpchk OPTIONS /primary`), with the role and
    epoch headers. With ZooKeeper frozen: /health and /follower say 503
    once the session is disconnected, /leader once the leader suspends (or
    steps down: its lease can run out before the silence is seen)."""
    with h.ZooKeeper() as zk:
        l1, f1 = h.start_in_order(zk, ("l1", "f1"), path=PATH, script=POLICY, extra=STATUS)
        e = l1.wait_for("leader", timeout=5)
        la, fa = addr_of(l1), addr_of(f1)
        h.wait_until(lambda: get(la, "/leader")[0] == 200, 5, "/leader 200 after on_leader")
        # the follower names the leader's epoch once the leader published it
        h.wait_until(lambda: get(fa, "/health")[1].get("X-Zkelect-Epoch") == str(e["epoch"]),
                     10, "the follower's epoch header")
        check_all(la, {"leader": 200, "follower": 503, "health": 200}, e["epoch"],
                  {"follower": "leader"})
        check_all(fa, {"leader": 503, "follower": 200, "health": 200}, e["epoch"],
                  {"leader": "follower"})
        assert get(la, "/leader")[1]["X-Zkelect-Role"] == "leader"
        assert get(fa, "/leader")[1]["X-Zkelect-Role"] == "follower"
        code, hdrs, body = get(fa, "/")
        assert code == 503 and b"not leader: follower" in body and b"/replica" in body, body
        # the documents answer OPTIONS with 200 and no body; OPTIONS * too
        for path in ("/status", "/metrics"):
            code, hdrs, body = get(la, path, method="OPTIONS")
            assert code == 200 and body == b"" and hdrs["Allow"] == "GET, HEAD, OPTIONS", hdrs
        resp = raw(la, b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert code_of(resp) == 200 and b"\r\nAllow: GET, HEAD, OPTIONS\r\n" in resp, resp
        for method in ("POST", "PUT", "DELETE"):
            code, hdrs, body = get(la, "/primary", method=method)
            assert code == 405 and hdrs["Allow"] == "GET, HEAD, OPTIONS", (method, code, hdrs)
        assert get(la, "/nope", method="OPTIONS")[0] == 404
        # ZooKeeper frozen: both lose the session's connection
        mark = l1.mark()
        zk.sigstop()
        try:
            # a frozen server sends nothing: the client sees the connection
            # gone 2T/3 after the last byte, and a lease (0.85 T from its
            # base) whose base was older than about T/5 at the freeze runs out
            # first: a step-down, no suspend
            l1.wait_for(lambda e: e.get("event") == "suspend" or
                        (e.get("event") == "stepdown" and e.get("reason") == "lease"),
                        timeout=10, since=mark)
            code, _, body = get(la, "/leader")
            assert code == 503 and re.match(rb"not leader: (suspended|idle|lease ended)", body), body
            code, _, body = get(la, "/primary", method="OPTIONS")
            assert code == 503 and re.match(rb"not leader: \w", body), body
            h.wait_until(lambda: get(la, "/health")[0] == 503, 10, "leader /health 503")
            h.wait_until(lambda: get(fa, "/health")[0] == 503, 10, "follower /health 503")
            for addr in (la, fa):
                code, _, body = get(addr, "/health")
                assert code == 503 and body == b"not healthy: disconnected from ZooKeeper\n", body
            code, _, body = get(fa, "/replica", method="OPTIONS")
            assert code == 503 and body == b"not follower: disconnected from ZooKeeper\n", body
        finally:
            zk.sigcont()
        for a in (l1, f1):
            a.term()
            assert a.wait_exit(10) == 0


def test_a_frozen_leader_never_answers_200_after_its_lease():
    """Keep-alive connections to the leader's /leader, each answered 200,
    then the leader is frozen (SIGSTOP, --fail-stop off so nothing kills
    it) for three session timeouts while each connection sends one more
    request; the follower takes over meanwhile. When the old leader runs
    again, every answer it gives is 503: the lease is read on the clock
    when the answer is built, not from what the loop last heard."""
    with h.ZooKeeper() as zk:
        extra = STATUS + ["--fail-stop", "off"]
        a1, a2 = h.start_in_order(zk, ("z1", "z2"), path=PATH, script=POLICY, extra=extra)
        a1.wait_for("leader", timeout=5)
        addr = addr_of(a1)
        h.wait_until(lambda: get(addr, "/leader")[0] == 200, 5, "/leader 200")
        conns = []
        for _ in range(8):
            c = http.client.HTTPConnection(addr[0], addr[1], timeout=30)
            c.request("GET", "/leader")
            r = c.getresponse()
            assert r.status == 200 and r.read() == b"leader\n"
            conns.append(c)
        mark2 = a2.mark()
        a1.sigstop()
        try:
            t_stop = time.time()
            for c in conns:
                c.request("GET", "/leader")     # buffered by the kernel until it runs again
            a2.wait_for("leader", timeout=15, since=mark2)
            time.sleep(max(0.0, t_stop + 6.0 - time.time()))
        finally:
            a1.sigcont()
        codes = []
        for c in conns:
            r = c.getresponse()
            codes.append((r.status, r.getheader("X-Zkelect-Role"), r.read()))
            c.close()
        assert all(code == 503 for code, _, _ in codes), codes
        assert get(addr_of(a2), "/leader")[0] == 200
        a1.wait_for("stepdown", timeout=10)
        for a in (a1, a2):
            a.term()
            assert a.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
