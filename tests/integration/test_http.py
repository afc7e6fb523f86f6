#!/usr/bin/python3
"""`zkelect run --status`: GET /status, /metrics and /leader served on the
agent's loop. Under load from a second process while the election changes
leader, every request is answered and no candidate loses or gains a role it
should not; malformed requests get 4xx and do not stall the loop; hook
timeouts and failures are counted; bad --status values are refused."""
import http.client
import json
import os
import re
import shutil
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
                    assert b"\r\nAllow: GET, HEAD\r\n" in resp, resp[:300]
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
        assert m['zkelect_hook_timeouts_total{hook="on_leader"}'] == 1, m
        assert m['zkelect_hook_runs_total{hook="on_leader",outcome="timed_out"}'] == 1
        assert m['zkelect_hook_failures_total{hook="on_leader"}'] == 1
        assert m['zkelect_hook_timeouts_total{hook="health"}'] == 0
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


def _mapped(pid):
    with open("/proc/%d/maps" % pid) as f:
        return {l.split()[-1] for l in f if len(l.split()) >= 6}


def test_libmicrohttpd_is_loaded_only_for_status():
    """libmicrohttpd (and its TLS stack) is dlopen()ed when --status is
    given: an agent without it maps neither; with it both are mapped and the
    endpoint answers. With the library missing (hidden in a private mount
    namespace) --status exits 78 naming the package; a run without --status
    is unaffected."""
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "m1", path=PATH, script=POLICY)
        a.wait_for("leader", timeout=10)
        b = h.Agent(zk, "m2", path=PATH, script=POLICY, extra=STATUS)
        addr = addr_of(b)
        assert get(addr, "/status")[0] == 200
        lib = None
        if not h.WRAP:                  # under valgrind the pid maps valgrind's own files
            without, with_ = _mapped(a.pid), _mapped(b.pid)
            assert not [m for m in without if "microhttpd" in m or "gnutls" in m], sorted(without)
            lib = [m for m in with_ if "libmicrohttpd.so" in m]
            assert lib and [m for m in with_ if "gnutls" in m], sorted(with_)
        for x in (b, a):
            x.term()
            assert x.wait_exit(10) == 0
        if lib is None or os.geteuid() != 0 or not shutil.which("unshare"):
            print("  info: missing-library case skipped (needs root, unshare, no wrapper)",
                  flush=True)
            return
        # /dev/null bound over the library: dlopen() fails as for a missing file
        # (unshare and sh exec: the agent keeps the pid we started)
        ns = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
              "mount --bind /dev/null %s && exec \"$@\"" % lib[0], "sh"]
        code, out, err, _ = h.run(ns + [h.ZKELECT_BIN, "run", "--zk", zk.hostport, "--path", PATH,
                                        "--id", "m3", "--status", "127.0.0.1:0"],
                                  timeout=20, nowrap=True)
        assert code == 78, (code, err)
        assert "--status needs libmicrohttpd" in err and "libmicrohttpd12" in err, err
        assert len(err.strip().splitlines()) == 1, err

        # without --status a candidate there runs as usual
        class Hidden(h.Agent):
            def argv(self):
                return ns + h.Agent.argv(self)
        c = Hidden(zk, "m4", path=PATH, script=POLICY)
        c.wait_for("leader", timeout=10)
        c.term()
        assert c.wait_exit(10) == 0


if __name__ == "__main__":
    h.run_tests(globals())
