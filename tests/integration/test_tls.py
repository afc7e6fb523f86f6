#!/usr/bin/python3
"""TLS to ZooKeeper (zkelect-tls: the C client built with OpenSSL from
Debian's source, cmake -DZKELECT_TLS=ON) against a real server that serves
only a secureClientPort (Netty, client certificates required; no plain
clientPort in its zoo.cfg), its keystore and truststore made by the JDK's
keytool from a CA and certificates the test makes with openssl. A plain
four-letter word on the port gets no answer and Debian's plain zkelect
cannot connect (exit 69): the traffic is TLS. Two zkelect-tls candidates
elect a leader, which hands over to the other (`ctl resign --to`: the
hand-over reads the election on the agent's own TLS session) and leads again
at once when the other stops (its session closed over TLS, not left to
expire); `zkelect-tls status`, `history` and `audit --once` read the election
over TLS too, and so does the leader's /history. The servers are not asked their tickTime
or mode over TLS: the lease plans twice the stated tick (an observer
assumed), with a warning, and `zkelect-tls check` says so. The leader's /metrics and
/status show its certificate's end (zkelect_tls_cert_expiry_timestamp_seconds)
and read the file again when it changes (an expired one: usable 0). A client
that does not trust
the server's CA, and one whose certificate another CA signed (the server
refuses the handshake), never connect and never lead (exit 69). Settings
are checked at start: an expired certificate, a key that is not the
certificate's, or any TLS flag given to the plain build is refused (exit 78).
Without a ZooKeeper: a TCP listener that accepts and never speaks TLS holds
no agent's loop (its /status answers during the handshake) and the agent
exits 69 within its connect timeout; a server whose certificate expired is
refused (exit 69); a key that stops being the certificate's (a renewal gone
wrong: the files are read at every connection) fails the connections
without a busy loop."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zkharness as h  # noqa: E402

TLS_BIN = os.path.abspath(os.environ.get("ZKELECT_TLS_BIN") or
                          os.path.join(os.path.dirname(h.ZKELECT_BIN), "zkelect-tls"))
PASSWORD = "keystore-pw"


def sh(*args):
    r = subprocess.run(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    assert r.returncode == 0, (args, r.stderr.decode(errors="replace"))


def make_pki(d):
    """Two CAs (the good one and a stranger), the server's certificate and
    two client certificates (one per CA) with openssl; the server's keystore
    and truststore with keytool. Returns the paths."""
    p = {k: os.path.join(d, k) for k in (
        "ca.pem", "ca.key", "other.pem", "other.key", "server.pem", "server.key", "server.p12",
        "client.pem", "client.key", "stranger.pem", "stranger.key", "expired.pem",
        "oldsrv.pem", "oldsrv.key", "misnamed.pem", "misnamed.key", "dnsonly.pem", "dnsonly.key",
        "ipasdns.pem", "ipasdns.key",
        "keystore.jks", "truststore.jks", "san.ext", "misnamed.ext", "dnsonly.ext", "ipasdns.ext")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "other"):
        sh("openssl", "req", "-x509", *ec, "-keyout", p[ca + ".key"], "-out", p[ca + ".pem"],
           "-days", "2", "-subj", "/CN=zkelect-test-" + ca)
    for ext, san in (("san.ext", "IP:127.0.0.1,DNS:localhost"),
                     ("misnamed.ext", "DNS:zk.example.invalid"),     # our CA's, another host's
                     ("dnsonly.ext", "DNS:localhost"),
                     ("ipasdns.ext", "DNS:127.0.0.1")):          # an address is an IP name only
        with open(p[ext], "w") as f:
            f.write("subjectAltName=%s\n" % san)

    def leaf(name, ca, cn, days="2", ext=None):
        csr = os.path.join(d, name + ".csr")
        sh("openssl", "req", *ec, "-keyout", p[name + ".key"], "-out", csr, "-subj", "/CN=" + cn)
        sh("openssl", "x509", "-req", "-in", csr, "-CA", p[ca + ".pem"], "-CAkey", p[ca + ".key"],
           "-CAcreateserial", "-out", p[name + ".pem"], "-days", days,
           *(["-extfile", ext] if ext else []))
    leaf("server", "ca", "localhost", ext=p["san.ext"])
    leaf("client", "ca", "zkelect")
    leaf("stranger", "other", "stranger")
    leaf("oldsrv", "ca", "localhost", days="-1", ext=p["san.ext"])    # expired yesterday
    leaf("misnamed", "ca", "misnamed", ext=p["misnamed.ext"])
    leaf("dnsonly", "ca", "dnsonly", ext=p["dnsonly.ext"])
    leaf("ipasdns", "ca", "ipasdns", ext=p["ipasdns.ext"])
    # a certificate of the client's key that expired yesterday
    sh("openssl", "x509", "-in", p["client.pem"], "-signkey", p["client.key"], "-out",
       p["expired.pem"], "-days", "-1")
    sh("openssl", "pkcs12", "-export", "-in", p["server.pem"], "-inkey", p["server.key"],
       "-certfile", p["ca.pem"], "-out", p["server.p12"], "-passout", "pass:" + PASSWORD,
       "-name", "server")
    # the server's stores, by the JDK's keytool (two JVMs at once)
    procs = [subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for args in (
        ["keytool", "-importkeystore", "-srckeystore", p["server.p12"], "-srcstoretype", "PKCS12",
         "-srcstorepass", PASSWORD, "-destkeystore", p["keystore.jks"], "-deststoretype", "JKS",
         "-deststorepass", PASSWORD, "-noprompt"],
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", p["ca.pem"],
         "-keystore", p["truststore.jks"], "-storetype", "JKS", "-storepass", PASSWORD])]
    for pr in procs:
        out = pr.communicate(timeout=30)[0]
        assert pr.returncode == 0, out
    return p


def tls_flags(ca, cert, key):
    return ["--zk-tls-ca", ca, "--zk-tls-cert", cert, "--zk-tls-key", key]


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return r.read().decode()


def gauge(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("%s not in /metrics:\n%s" % (name, text))


def ctl(sock, *args):
    code, out, err, t = h.run([TLS_BIN, "ctl", "--control", sock] + list(args), timeout=20)
    assert code == 0, (args, code, out, err)
    return out


class TlsAgent(h.Agent):
    def argv(self):
        return [TLS_BIN] + h.Agent.argv(self)[1:]


def test_tls_only_server_elects_and_refuses_strangers():
    assert os.access(TLS_BIN, os.X_OK), "%s not built (cmake -DZKELECT_TLS=ON)" % TLS_BIN
    d = h.mkdtemp("tls")
    p = make_pki(d)
    tls = {"keystore": p["keystore.jks"], "truststore": p["truststore.jks"], "password": PASSWORD,
           "ca": p["ca.pem"], "cert": p["client.pem"], "key": p["client.key"]}
    with h.ZooKeeper(tls=tls) as zk:
        with open(zk.cfg) as f:
            cfg = f.read()
        assert "secureClientPort=%d" % zk.port in cfg and "clientPort=" not in cfg.replace(
            "secureClientPort=", ""), cfg
        assert "Mode: standalone" in zk.four("srvr")     # over TLS, as the harness asks
        # plain TCP on the port: no answer to a four-letter word
        with socket.create_connection(("127.0.0.1", zk.port), timeout=3) as s:
            s.sendall(b"ruok")
            try:
                got = s.recv(100)
            except (ConnectionResetError, socket.timeout):
                got = b""
        assert b"imok" not in got, got
        # those that must not get in, all at once, beside the election
        base = ["run", "--zk", zk.hostport, "--path", "/tls/e", "--connect-timeout", "3000",
                "--fail-stop", "off", "--log", "json"]
        bad = {
            "plain": subprocess.Popen([h.ZKELECT_BIN] + base + ["--id", "plain"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE),
            "wrong_ca": subprocess.Popen(
                [TLS_BIN] + base + ["--id", "wrongca"] + tls_flags(p["other.pem"], p["client.pem"],
                                                                   p["client.key"]),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
            "stranger": subprocess.Popen(
                [TLS_BIN] + base + ["--id", "stranger"] + tls_flags(p["ca.pem"], p["stranger.pem"],
                                                                    p["stranger.key"]),
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE),
        }
        flags = tls_flags(p["ca.pem"], p["client.pem"], p["client.key"])
        a_pem = os.path.join(d, "a.pem")    # a's own copy: renewed (and expired) below
        shutil.copy(p["client.pem"], a_pem)
        sport = h.free_port()
        a = TlsAgent(zk, "a", path="/tls/e", extra=tls_flags(p["ca.pem"], a_pem, p["client.key"]) +
                     ["--status", "127.0.0.1:%d" % sport, "--history",
                      "--control", os.path.join(d, "a.sock")])
        a.wait_for("leader", timeout=10)
        b = TlsAgent(zk, "b", path="/tls/e", extra=flags + [
            "--history", "--control", os.path.join(d, "b.sock")])
        start = [e for e in a.events() if e.get("event") == "start"][0]
        assert start.get("tls") == a_pem and start.get("tls_cert_expires", 0) > time.time(), start
        # the servers not asked over TLS: the worst case planned (an observer's extra
        # tick on the stated one), with the warning, at the start and at connect
        assert start.get("server_tick_ms") == 2 * zk.tick, start
        assert a.find(lambda e: e.get("level") == "warn" and
                      "not asked over TLS" in e.get("msg", "")), a.describe()
        assert a.find(lambda e: e.get("msg", "").startswith("lease ") and
                      "server tick %d ms, stated, x 2: the servers not asked over TLS" % (2 * zk.tick)
                      in e["msg"]), a.describe()
        # the certificate's end where operators alert, read again when the file changes
        expires = start["tls_cert_expires"]
        met = get(sport, "/metrics")
        assert gauge(met, "zkelect_tls_cert_expiry_timestamp_seconds") == expires, met
        assert gauge(met, "zkelect_tls_cert_usable") == 1, met
        st = json.loads(get(sport, "/status"))["tls"]
        assert st == {"cert": a_pem, "cert_expires": expires, "usable": True}, st
        shutil.copy(p["expired.pem"], a_pem + ".new")
        os.rename(a_pem + ".new", a_pem)
        met = get(sport, "/metrics")
        assert gauge(met, "zkelect_tls_cert_expiry_timestamp_seconds") < time.time(), met
        assert gauge(met, "zkelect_tls_cert_usable") == 0, met
        shutil.copy(p["client.pem"], a_pem + ".new")
        os.rename(a_pem + ".new", a_pem)
        assert json.loads(get(sport, "/status"))["tls"]["usable"] is True
        b.wait_for("follower", timeout=10)
        # resign --to: the hand-over reads the election on a's own TLS session
        m = b.mark()
        ctl(os.path.join(d, "a.sock"), "resign", "--to", "b")
        b.wait_for("leader", since=m, timeout=10)
        a.wait_for("follower", since=0, timeout=10)
        m = a.mark()
        b.term()
        assert b.wait_exit(10) == 0, b.describe()
        t_exit = time.monotonic()
        a.wait_for("leader", since=m, timeout=10)
        took = time.monotonic() - t_exit
        # the session closed over TLS: no wait for its expiry (2 s)
        assert took < 1.5, "a led %.2f s after b's exit" % took
        for name, pr in bad.items():
            out, err = pr.communicate(timeout=15)
            err = err.decode(errors="replace")
            assert pr.returncode == 69, (name, pr.returncode, err[-2000:])
            assert '"event":"leader"' not in err.replace(" ", "") and "joined" not in err, (name, err)
        zkp = ["--zk", zk.hostport, "--path", "/tls/e"]
        reads = h.run_together([
            [TLS_BIN, "status", "--json"] + zkp + flags,
            [TLS_BIN, "history", "--json"] + zkp + flags,
            [TLS_BIN, "audit", "--once", "--log", "json"] + zkp + flags,
            [TLS_BIN, "check", "--strict", "--id", "c"] + zkp + flags], timeout=15)
        (c1, o1, e1, _), (c2, o2, e2, _), (c3, o3, e3, _), (c4, o4, e4, _) = reads
        # check says it; without --server-tick the tick is a guess: a warning (--strict: 78)
        assert c4 == 78 and "TLS: the servers not asked" in o4 and "--server-tick" in e4, (c4, o4, e4)
        assert c1 == 0 and '"a"' in o1, (c1, o1, e1)
        assert c2 == 0, (c2, o2, e2)
        terms = json.loads(o2)["terms"]
        assert [t["id"] for t in terms] == ["a", "b", "a"], (c2, o2, e2)
        assert c3 == 0, (c3, o3, e3)
        # a's /history: its reader's own session is TLS too (the history reader has no
        # log line for its connects: read until it shows the three terms)
        def history_ids():
            try:
                return [t["id"] for t in json.loads(get(sport, "/history"))["terms"]]
            except urllib.error.HTTPError as e:     # 503 until its first reading
                return e.code
        h.wait_until(lambda: history_ids() == ["a", "b", "a"], timeout=5,
                     desc="a's /history over TLS (%s)" % (history_ids(),))
        h.stop_cleanly([a])
        print("tls: a led %.2f s after b's exit" % took)


def cpu_seconds(pid):
    """user + system CPU time of a process (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Listener:
    """A loopback TCP server for the cases without ZooKeeper: each
    connection accepted is held open and never written to (silent), or gets
    a TLS handshake with the certificate given (ctx). Counts the accepts."""

    def __init__(self, ctx=None):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.ctx, self.held, self.accepts, self.stop = ctx, [], 0, False
        self.handshakes = 0             # TLS handshakes the client completed
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def serve(self):
        for _ in range(600):            # bounded: 2 minutes of 0.2 s accepts
            if self.stop:
                return
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            self.accepts += 1
            self.held.append(c)
            if self.ctx is not None:
                c.settimeout(2)
                try:
                    self.held.append(self.ctx.wrap_socket(c, server_side=True))
                    self.handshakes += 1
                except (ssl.SSLError, OSError):
                    pass                # the client refused our certificate

    def close(self):
        self.stop = True
        self.t.join(5)
        for c in self.held:
            c.close()
        self.sock.close()


def server_ctx(p, name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(p[name + ".pem"], p[name + ".key"])
    return ctx


def test_tls_without_zookeeper():
    """Settings checked at start (exit 78); a silent server holds no loop; an
    expired server certificate is refused; so is one of our CA that names
    another host, while one that names the host as --zk writes it (a DNS
    name here) is taken."""
    d = h.mkdtemp("tlsbad")
    p = make_pki(d)
    flags = tls_flags(p["ca.pem"], p["client.pem"], p["client.key"])
    silent = Listener()
    expired = Listener(server_ctx(p, "oldsrv"))
    misnamed = Listener(server_ctx(p, "misnamed"))
    dnsonly = Listener(server_ctx(p, "dnsonly"))
    ipasdns = Listener(server_ctx(p, "ipasdns"))
    lame = Listener()
    try:
        # a renewal gone wrong: the key swapped for one that is not the
        # certificate's while the agent connects (the files are read at
        # every connection): failed connections, not a busy loop
        key = os.path.join(d, "renewed.key")
        shutil.copy(p["client.key"], key)
        renew = subprocess.Popen([TLS_BIN, "run", "--path", "/tls/e", "--fail-stop", "off",
                                  "--zk", "127.0.0.1:%d" % lame.port, "--id", "renew",
                                  "--connect-timeout", "20000", "--log", "json"] +
                                 tls_flags(p["ca.pem"], p["client.pem"], key),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        sport = h.free_port()
        run = ["run", "--path", "/tls/e", "--fail-stop", "off", "--connect-timeout", "3000",
               "--session-timeout", "2000", "--log", "json"]
        mute = subprocess.Popen([TLS_BIN] + run + ["--zk", "127.0.0.1:%d" % silent.port, "--id",
                                "mute", "--status", "127.0.0.1:%d" % sport] + flags,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        old = subprocess.Popen([TLS_BIN] + run + ["--zk", "127.0.0.1:%d" % expired.port, "--id",
                               "old"] + flags, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # the name: our CA's certificate for another host is refused; one that
        # names the host as --zk writes it (localhost, a DNS name) is taken
        wrong = subprocess.Popen([TLS_BIN] + run + ["--zk", "127.0.0.1:%d" % misnamed.port,
                                 "--id", "wrong"] + flags, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ipdns = subprocess.Popen([TLS_BIN] + run + ["--zk", "127.0.0.1:%d" % ipasdns.port,
                                 "--id", "ipdns"] + flags, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        named = subprocess.Popen([TLS_BIN] + run + ["--zk", "localhost:%d" % dnsonly.port,
                                 "--id", "named"] + flags, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0 = time.monotonic()
        h.wait_until(lambda: silent.accepts > 0 and lame.accepts > 0, timeout=5,
                     desc="a connection to each silent server")
        shutil.copy(p["stranger.key"], key + ".new")
        os.rename(key + ".new", key)
        # the handshake waits on the server: the loop answers meanwhile
        answered = 0
        for _ in range(5):
            t = time.monotonic()
            body = json.loads(get(sport, "/status"))
            assert time.monotonic() - t < 0.5 and body["session"]["state"] != "connected", body
            answered += 1
            time.sleep(0.2)
        # its first attempt is cut after 1 s; from the second on, the key is not the cert's
        h.wait_until(lambda: lame.accepts > 1, timeout=5, desc="a second connect attempt")
        cpu0 = cpu_seconds(renew.pid)
        time.sleep(1)                           # the window measured, not a wait
        busy = cpu_seconds(renew.pid) - cpu0
        print("tls: a broken key: %.2f CPU s in 1 s of failed connects" % busy)
        renew.terminate()
        # a busy loop took 0.97 s; failed connects take 0.04 s, 0.23 s under ASan
        assert renew.wait(10) == 0 and busy < 0.5, ("CPU seconds in 1 s", busy)
        err = mute.communicate(timeout=10)[1].decode(errors="replace")
        took = time.monotonic() - t0
        assert mute.returncode == 69 and took < 5, (mute.returncode, took, err[-2000:])
        assert "no answer to the connect attempt" in err, err[-2000:]
        err = old.communicate(timeout=10)[1].decode(errors="replace")
        assert old.returncode == 69 and expired.accepts > 0, (old.returncode, err[-2000:])
        err = wrong.communicate(timeout=10)[1].decode(errors="replace")
        assert wrong.returncode == 69 and misnamed.accepts > 0 and misnamed.handshakes == 0, (
            wrong.returncode, misnamed.accepts, misnamed.handshakes, err[-2000:])
        assert "names none of the hosts 127.0.0.1:%d" % misnamed.port in err, err[-2000:]
        err = ipdns.communicate(timeout=10)[1].decode(errors="replace")
        assert ipdns.returncode == 69 and ipasdns.accepts > 0 and ipasdns.handshakes == 0, (
            ipdns.returncode, ipasdns.accepts, ipasdns.handshakes, err[-2000:])
        err = named.communicate(timeout=10)[1].decode(errors="replace")
        # no ZooKeeper behind the handshake: no session, exit 69 all the same
        assert named.returncode == 69 and dnsonly.handshakes > 0, (
            named.returncode, dnsonly.accepts, dnsonly.handshakes, err[-2000:])
        assert "names none of the hosts" not in err, err[-2000:]
    finally:
        for lst in (silent, expired, misnamed, dnsonly, ipasdns, lame):
            lst.close()
    base = ["run", "--zk", "127.0.0.1:1", "--path", "/tls/e", "--id", "x", "--fail-stop", "off"]
    cases = [
        (TLS_BIN, tls_flags(p["ca.pem"], p["expired.pem"], p["client.key"]), "expired"),
        (TLS_BIN, tls_flags(p["ca.pem"], p["client.pem"], p["stranger.key"]), "not the key"),
        (TLS_BIN, tls_flags(p["ca.pem"], p["client.pem"], os.path.join(d, "none.key")),
         "No such file"),
        (TLS_BIN, ["--zk-tls-ca", p["ca.pem"]], "together"),
        (h.ZKELECT_BIN, tls_flags(p["ca.pem"], p["client.pem"], p["client.key"]), "no TLS"),
    ]
    for binary, fl, want in cases:
        code, out, err, t = h.run([binary] + base + fl, timeout=10)
        assert code == 78 and want in err, (binary, fl, code, err)


if __name__ == "__main__":
    h.run_tests(globals())
