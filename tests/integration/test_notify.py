#!/usr/bin/python3
"""systemd readiness (sd_notify): a datagram socket in $NOTIFY_SOCKET, as
systemd sets it for Type=notify, receives READY=1 only once the candidate has
joined and knows its role (never while ZooKeeper is still down), STATUS= on
role changes, RELOADING=1 then READY=1 around a SIGHUP reload (also a
refused one), STOPPING=1 on SIGTERM, WATCHDOG=1 pings when WATCHDOG_USEC is
set; an abstract socket name (@name) works too. Logs stay one JSON object
per line (what journald stores as MESSAGE)."""
import json
import os
import signal
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402

PATH = "/app/notify"
POLICY = """
function on_leader(ev) zkelect.log("info", "leading " .. ev.epoch) end
function on_follower(ev) end
"""


class Notify:
    """The receiving end of $NOTIFY_SOCKET: every datagram with its
    CLOCK_MONOTONIC arrival time (ns), comparable with the log's mono_ns."""

    def __init__(self, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "zkelect-it-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            d = h.mkdtemp("notify")
            self.env = os.path.join(d, "notify.sock")
            self.sock.bind(self.env)
        self.sock.setblocking(False)
        self.msgs = []      # (mono_ns, {key: value}, raw)

    def _drain(self):
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return
            t = time.monotonic_ns()
            kv = {}
            for line in data.decode("utf-8", "replace").split("\n"):
                if "=" in line:
                    k, v = line.split("=", 1)
                    kv[k] = v
            self.msgs.append((t, kv, data))

    def all(self):
        self._drain()
        return list(self.msgs)

    def mark(self):
        return len(self.all())

    def wait(self, key, value=None, since=0, timeout=10.0, match=None):
        """First message at index >= since carrying key (with value, or with
        a value containing match); returns (index, mono_ns, kv)."""
        def find():
            for i, (t, kv, _) in enumerate(self.all()[since:], since):
                if key in kv and (value is None or kv[key] == value) and \
                        (match is None or match in kv[key]):
                    return (i, t, kv)
            return None
        return h.wait_until(find, timeout, "notify %s=%s%s (got %r)"
                            % (key, value or "", " ~" + match if match else "",
                               [m[2] for m in self.msgs[since:]]))

    def close(self):
        self.sock.close()


def agent_with_notify(zk, id, n, env=None, **kw):
    """Starts an agent whose environment carries NOTIFY_SOCKET (and env)."""
    extra_env = dict(env or {}, NOTIFY_SOCKET=n.env)
    saved = {k: os.environ.get(k) for k in extra_env}
    os.environ.update(extra_env)
    try:
        return h.Agent(zk, id, path=PATH, **kw)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def policy(text=POLICY):
    d = h.mkdtemp("notify-policy")
    p = os.path.join(d, "policy.lua")
    with open(p, "w") as f:
        f.write(text)
    return p


def assert_json_lines(a):
    other = [l for l in a.other_lines() if l.strip()]
    assert not other, "non-JSON lines in the --log json output: %r" % other[:5]
    for e in a.events():
        assert isinstance(e.get("event"), str) and e.get("level") and e.get("ts"), e


def test_ready_only_once_joined_then_status_reload_stopping():
    n = Notify()
    script = policy()
    zk = h.ZooKeeper(start=False)
    try:
        # ZooKeeper is not up yet: the agent connects in the background
        a = agent_with_notify(zk, "na", n, script=script, extra=["--connect-timeout", "60000"])
        h.wait_until(lambda: n.all(), 10, "a first STATUS while connecting")
        time.sleep(1.0)
        assert a.alive(), a.describe()
        early = n.all()
        assert not any("READY" in kv for _, kv, _ in early), early
        assert any("connecting" in kv.get("STATUS", "") for _, kv, _ in early), early

        zk.start()
        i_ready, t_ready, kv = n.wait("READY", "1", timeout=30)
        joined = a.wait_for("joined", timeout=5)
        lead = a.wait_for("leader", timeout=5)
        assert joined["mono_ns"] < t_ready and lead["mono_ns"] < t_ready, (joined, lead, t_ready)
        assert kv.get("STATUS", "").startswith("leader, epoch %d" % lead["epoch"]), kv
        assert sum(1 for _, m, _ in n.all() if "READY" in m) == 1, n.all()

        # a second candidate follows: its own socket says so
        n2 = Notify()
        b = agent_with_notify(zk, "nb", n2, script=script)
        _, _, kv2 = n2.wait("READY", "1", timeout=10)
        assert kv2["STATUS"] == "follower, position 1, leader na", kv2

        # SIGHUP: RELOADING=1, then READY=1 once the new state is in
        m = n.mark()
        a.signal(signal.SIGHUP)
        i1, t1, kv = n.wait("RELOADING", "1", since=m, timeout=5)
        assert int(kv["MONOTONIC_USEC"]) > 0, kv
        assert kv.get("STATUS") == "reloading the script", kv     # whole, not cut at 64 bytes
        i2, t2, kv = n.wait("READY", "1", since=i1 + 1, timeout=5)
        assert kv["STATUS"].startswith("script reloaded; leader, epoch"), kv
        a.wait_for("reload", timeout=5)

        # a script that no longer loads: refused, still READY=1, and said so
        with open(script, "w") as f:
            f.write("function on_leader(ev\n")
        m = n.mark()
        a.signal(signal.SIGHUP)
        i1, _, _ = n.wait("RELOADING", "1", since=m, timeout=5)
        _, _, kv = n.wait("READY", "1", since=i1 + 1, timeout=5)
        assert kv["STATUS"].startswith("reload failed, old script kept:"), kv
        assert "leader, epoch" in kv["STATUS"], kv

        # SIGTERM: STOPPING=1 first; the follower takes over and says so
        m, m2 = n.mark(), n2.mark()
        a.term()
        n.wait("STOPPING", "1", since=m, timeout=5)
        assert a.wait_exit(10) == 0
        n2.wait("STATUS", since=m2, match="leader, epoch", timeout=10)
        assert not any("READY" in kv for _, kv, _ in n2.all()[m2:]), "READY=1 sent twice"
        b.term()
        n2.wait("STOPPING", "1", since=m2, timeout=5)
        assert b.wait_exit(10) == 0
        assert_json_lines(a)
        assert_json_lines(b)
        n2.close()
    finally:
        n.close()
        zk.close()


def test_abstract_socket_and_watchdog():
    n = Notify(abstract=True)
    try:
        with h.ZooKeeper() as zk:
            a = agent_with_notify(zk, "nw", n, env={"WATCHDOG_USEC": "200000"})
            _, _, kv = n.wait("READY", "1", timeout=10)
            assert kv["STATUS"].startswith("leader, epoch"), kv
            m = n.mark()
            time.sleep(1.0)
            pings = [kv for _, kv, _ in n.all()[m:] if kv.get("WATCHDOG") == "1"]
            assert 3 <= len(pings) <= 20, "WATCHDOG=1 every 100 ms expected, got %d" % len(pings)
            a.term()
            n.wait("STOPPING", "1", since=m, timeout=5)
            assert a.wait_exit(10) == 0
    finally:
        n.close()


def test_a_receiver_that_stops_reading_never_stalls_the_loop():
    """The receiver reads nothing for 3 s (longer than the session timeout)
    while 10 ms watchdog pings fill its queue (net.unix.max_dgram_qlen is
    small): the leader still keeps its session and its lease, hands over on SIGTERM and exits at once; the important messages
    queued meanwhile (STOPPING=1) arrive once the receiver reads again."""
    n = Notify()
    try:
        with h.ZooKeeper() as zk:
            a = agent_with_notify(zk, "nq", n, env={"WATCHDOG_USEC": "20000"})
            n.wait("READY", "1", timeout=10)
            b = h.Agent(zk, "nq2", path=PATH)
            b.wait_for("follower", timeout=10)
            m = n.mark()
            time.sleep(3.0)             # not reading: the queue fills up
            # a stalled loop would have lost its session (2 s) by now
            assert not b.find("leader"), b.describe()
            assert not a.find("session", reason="expired") and not a.find("stepdown"), a.describe()
            mark = a.mark()
            a.term()
            # with a blocking sd_notify() the agent would hang in STOPPING=1;
            # ours queues it and sends it once the receiver reads again, for
            # up to 1 s after its loop is over: the receiver comes back 300 ms
            # on (the agent has handed over and is on its way out by then)
            time.sleep(0.3)
            n.wait("STOPPING", "1", since=m, timeout=5)
            b.wait_for("leader", timeout=5)
            assert a.wait_exit(10) == 0
            assert not a.find("stepdown", since=mark, reason="lease"), a.describe()
            b.term()
            assert b.wait_exit(10) == 0
    finally:
        n.close()


def test_watchdog_of_another_pid_is_not_ours():
    n = Notify()
    try:
        with h.ZooKeeper() as zk:
            a = agent_with_notify(zk, "nx", n, env={"WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"})
            n.wait("READY", "1", timeout=10)
            time.sleep(0.5)
            assert not any("WATCHDOG" in kv for _, kv, _ in n.all()), n.all()
            a.term()
            assert a.wait_exit(10) == 0
    finally:
        n.close()


class _Addr:
    """A $NOTIFY_SOCKET value with nobody behind it."""

    def __init__(self, env):
        self.env = env


def test_unsupported_address_kinds_warn_once():
    """Only AF_UNIX addresses (a path, @abstract) are spoken to. systemd 254's
    vsock:CID:PORT (and anything else) gets one notify_unsupported warning
    naming the value and why; the agent runs as without $NOTIFY_SOCKET,
    through a reload and a stop that would each have notified."""
    with h.ZooKeeper() as zk:
        for addr, why in (("vsock:2:9999", "AF_VSOCK"), ("relative/notify.sock", "AF_UNIX path")):
            a = agent_with_notify(zk, "nv", _Addr(addr), env={"WATCHDOG_USEC": "100000"},
                                  script=policy())
            a.wait_for("leader", timeout=10)
            a.signal(signal.SIGHUP)
            a.wait_for("reload", timeout=10)
            time.sleep(0.3)
            a.term()
            assert a.wait_exit(10) == 0
            warn = a.find("notify_unsupported")
            assert len(warn) == 1, a.describe()
            assert warn[0]["level"] == "warn" and warn[0]["notify_socket"] == addr, warn
            assert why in warn[0]["reason"], warn
            assert not [e for e in a.events() if "sd_notify" in json.dumps(e)], a.describe()
            assert_json_lines(a)


def test_malformed_watchdog_usec_means_no_pings():
    """sd_watchdog_enabled(3): WATCHDOG_USEC must be a number of
    microseconds > 0; otherwise one warning and no pings (readiness and
    status still go out)."""
    n = Notify()
    try:
        with h.ZooKeeper() as zk:
            for bad in ("abc", "0", "-5", "100ms"):
                m = n.mark()
                a = agent_with_notify(zk, "nb", n, env={"WATCHDOG_USEC": bad})
                n.wait("READY", "1", since=m, timeout=10)
                time.sleep(0.3)
                assert not any("WATCHDOG" in kv for _, kv, _ in n.all()[m:]), (bad, n.all()[m:])
                assert any("WATCHDOG_USEC" in e.get("msg", "") for e in a.find("log")), a.describe()
                a.term()
                assert a.wait_exit(10) == 0
    finally:
        n.close()


def test_without_notify_socket_nothing_changes():
    with h.ZooKeeper() as zk:
        a = h.Agent(zk, "nn", path=PATH)
        a.wait_for("leader", timeout=10)
        a.term()
        assert a.wait_exit(10) == 0
        assert not [e for e in a.events() if "sd_notify" in json.dumps(e)], a.describe()


def test_journal_stream_gets_priority_prefixes():
    """With stderr being the stream named in $JOURNAL_STREAM, each line
    starts with a syslog priority (<6> info, <4> warn...) that journald
    strips; the rest is the same JSON object or text line. Text lines carry
    the same fields as JSON lines."""
    with h.ZooKeeper() as zk:
        for fmt in ("json", "text"):
            a = h.Agent(zk, "nj-" + fmt, path=PATH, log=fmt, start=False)
            open(a.logfile, "wb").close()
            st = os.stat(a.logfile)
            os.environ["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
            try:
                a.start()
            finally:
                os.environ.pop("JOURNAL_STREAM", None)
            h.wait_until(lambda: "leader" in open(a.logfile).read(), 10, "leader line")
            a.term()
            assert a.wait_exit(10) == 0
            lines = [l for l in open(a.logfile).read().splitlines() if l.strip()]
            assert lines and all(l[:3] in ("<6>", "<4>", "<7>", "<3>") for l in lines), lines[:5]
            lead = [l[3:] for l in lines if " leader " in l or '"event":"leader"' in l]
            assert lead and all(l.startswith("<6>") for l in lines if l[3:] in lead), lines
            if fmt == "json":
                ev = json.loads(lead[0])
                json_keys = set(ev) - {"ts", "level", "id", "event"}
            else:
                # ts level [id] event k=v ...
                parts = lead[0].split(" ")
                assert parts[1] == "info" and parts[2] == "[nj-text]" and parts[3] == "leader", parts
                text_keys = {p.split("=", 1)[0] for p in parts[4:]}
        assert json_keys == text_keys, (json_keys, text_keys)


if __name__ == "__main__":
    h.run_tests(globals())
