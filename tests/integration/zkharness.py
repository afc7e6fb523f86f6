"""zkharness: integration-test harness for zkelect (Python 3 standard library only).

Each test script is standalone:

    import zkharness as h

    def test_something():
        with h.ZooKeeper() as zk:
            a = h.Agent(zk, "a")
            a.wait_for("leader")

    if __name__ == "__main__":
        h.run_tests(globals())

Rules kept by everything here:
  * only 127.0.0.1, one ZooKeeper server per test on its own free port (a
    fresh one: the spare a test may get was started during the test before,
    and no client has used it);
  * every process is started by us, remembered by pid, and killed by pid at
    the end of its test (and at exit, and via PR_SET_PDEATHSIG if the runner
    itself dies);
  * every wait is bounded in time and in iterations; sleeps are only poll
    intervals between checks of a real condition.

Environment:
  ZKELECT_BIN      the zkelect binary (default <repo>/build/zkelect)
  ZKE_EXPIRE_BIN   the zke_expire tool (default <repo>/build/tests/tools/zke_expire)
  ZK_JAR           ZooKeeper server class path (default /usr/share/java/zookeeper.jar)
  ZKH_KEEP         if set, keep temp dirs (logs, dataDir) after the run
  ZKH_TEST_TIMEOUT per-test time bound in seconds (default 60)
  ZKH_CDS          0: start ZooKeeper without the class-data archive (a file
                   under $TMPDIR/zkelect-it-cds-UID, written by the first start)
  ZKH_SPARE        0: no spare server (the next test's, started during the
                   test before: a test then waits for its server's start-up)
  ZKELECT_WRAP     a command line every zkelect process is started under, e.g.
                   "valgrind --error-exitcode=99 --leak-check=full
                   --errors-for-leak-kinds=definite,indirect --child-silent-after-fork=yes
                   -q" (scripts/valgrind.sh);
                   for valgrind each process logs to its own file, and a log
                   with an error or a definite/indirect leak fails the test
                   (agents still running at its end get SIGTERM first, so their
                   leak check runs)
"""

import atexit
import ctypes
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
POLICIES = os.path.join(HERE, "policies")

# absolute: agents run in directories of their own, where a relative path
# (ZKELECT_BIN=build/zkelect) would name nothing
ZKELECT_BIN = os.path.abspath(os.environ.get("ZKELECT_BIN") or
                              os.path.join(REPO, "build", "zkelect"))
ZKE_EXPIRE_BIN = os.path.abspath(os.environ.get("ZKE_EXPIRE_BIN") or os.path.join(
    REPO, "build", "tests", "tools", "zke_expire"))
ZK_JAR = os.environ.get("ZK_JAR") or "/usr/share/java/zookeeper.jar"
SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"
KEEP = bool(os.environ.get("ZKH_KEEP"))
TEST_TIMEOUT = float(os.environ.get("ZKH_TEST_TIMEOUT") or 60)
WRAP = shlex.split(os.environ.get("ZKELECT_WRAP") or "")

POLL = 0.02          # poll interval (seconds) between checks of a condition
NODE_RE = re.compile(r"^n_[0-9a-f]{16}-[0-9]{10}$")

# Everything started during the current test (for diagnostics and teardown).
_servers = []
_agents = []
_tmpdirs = []


# --------------------------------------------------------------------------
# small helpers

class Timeout(AssertionError):
    pass


def _pdeathsig():
    """preexec_fn: the child gets SIGKILL if the test runner dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _child_env(extra=None):
    """Environment for children: no ZKELECT_* / ZKE_* leaking into flags."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("ZKELECT_") or k.startswith("ZKE_"))}
    env.update(extra or {})
    return env


_vg = {"dir": None}


def wrap(args):
    """args, under ZKELECT_WRAP when args[0] is the zkelect binary. Under
    valgrind every process gets its own log file, checked by check_wrap_logs
    at the end of the test."""
    if not WRAP or not args or os.path.realpath(args[0]) != os.path.realpath(ZKELECT_BIN):
        return list(args)
    pre = list(WRAP)
    if os.path.basename(pre[0]) == "valgrind":
        if _vg["dir"] is None:
            _vg["dir"] = mkdtemp("valgrind")
        pre.append("--log-file=%s/vg.%%p.log" % _vg["dir"])
    return pre + list(args)


# A valgrind record starts with "==PID== text" and goes on with indented
# "==PID==    at/by ..." lines. Records that are not findings: warnings, and
# leak kinds other than definite and indirect (-q prints nothing else).
_VG_RECORD = re.compile(r"^==\d+== \S")
_VG_BENIGN = re.compile(r"^==\d+== (Warning: |.*are (possibly lost|still reachable) in loss record)")


def _vg_findings(lines):
    out, keep = [], False
    for l in lines:
        if _VG_RECORD.match(l):
            keep = not _VG_BENIGN.match(l)
        if keep and l.strip():
            out.append(l)
    return out


def check_wrap_logs():
    """Raises AssertionError naming every valgrind log of this test that holds
    an error or a definite/indirect leak (with -q a clean run logs nothing)."""
    if _vg["dir"] is None:
        return
    bad = []
    for name in sorted(os.listdir(_vg["dir"])):
        path = os.path.join(_vg["dir"], name)
        with open(path, errors="replace") as f:
            lines = [l.rstrip("\n") for l in f]
        findings = _vg_findings(lines)
        if findings:
            bad.append("---- %s ----\n%s" % (path, "\n".join(findings[:200])))
    if bad:
        raise AssertionError("valgrind found errors or leaks:\n" + "\n".join(bad))


def mkdtemp(prefix):
    d = tempfile.mkdtemp(prefix="zkelect-it-" + prefix + "-")
    _tmpdirs.append(d)
    return d


def under_asan(pid):
    """The process runs an ASan build (a debug build several times slower,
    its loop late by 50 ms and more when the suite's tests share 2 cores)."""
    with open("/proc/%d/maps" % pid) as f:
        return "libasan" in f.read()


def policy(prefix, text):
    """A policy script with this text in a new temporary folder; its path."""
    path = os.path.join(mkdtemp(prefix), "policy.lua")
    with open(path, "w") as f:
        f.write(text)
    return path


def _cds_archive():
    """The ZooKeeper server's class-data-sharing archive (AppCDS): the
    classes it loads, parsed and verified once, mapped by every later start
    (0.61 s of CPU a start without, 0.46 with: a fifth of the suite's CPU is
    the servers' start-up). Named for the JDK and the class path, in a folder
    of this uid's under the system's temporary directory; None disables it
    (ZKH_CDS=0). The JVM checks an archive it maps and runs without one that
    does not match (-Xshare:auto)."""
    if os.environ.get("ZKH_CDS") == "0":
        return None
    java = shutil.which("java")
    if java is None:
        return None
    key = []
    for f in [os.path.realpath(java), ZK_JAR, SLF4J_SIMPLE]:
        try:
            st = os.stat(f)
            key.append("%s:%d:%d" % (f, st.st_size, int(st.st_mtime)))
        except OSError:
            key.append(f)
    import hashlib
    d = os.path.join(tempfile.gettempdir(), "zkelect-it-cds-%d" % os.getuid())
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        if os.stat(d).st_uid != os.getuid():
            return None
    except OSError:
        return None
    return os.path.join(d, "zk-%s.jsa" % hashlib.sha256("|".join(key).encode()).hexdigest()[:16])


def wait_until(cond, timeout=10.0, desc="condition", interval=POLL):
    """Polls cond() (bounded in time and count) until it returns a truthy
    value, which is returned. Raises Timeout with the last value otherwise."""
    deadline = time.monotonic() + timeout
    max_iter = int(timeout / interval) + 10
    last = None
    for _ in range(max_iter):
        last = cond()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise Timeout("timed out after %.1fs waiting for %s (last: %r)" % (timeout, desc, last))


def pid_alive(pid):
    """True while pid is a live process (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def pid_stopped(pid):
    """True while pid is stopped (state T: a SIGSTOP took effect)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "T"
    except OSError:
        return False


def watchers(ppid=None, cwd=None):
    """The pids of the fail-stop watcher processes (named zkelect-guard),
    only those whose parent is ppid and whose working directory is cwd
    (its real path) where given."""
    found, cwd = [], os.path.realpath(cwd) if cwd else None
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            comm = st[st.index("(") + 1:st.rindex(")")]
            if comm != "zkelect-guard":
                continue
            if ppid is not None and int(st[st.rindex(")") + 2:].split()[1]) != ppid:
                continue
            if cwd is not None and os.readlink("/proc/%s/cwd" % d) != cwd:
                continue
        except (OSError, ValueError):
            continue
        found.append(int(d))
    return found


_ports_given = set()


def free_port():
    """A free loopback TCP port, never one this process handed out before:
    a port is free only until someone listens on it, and the kernel may hand
    the same one to two binds in a row when the first was closed at once (a
    postgres --data port and an agent's --status port collided so)."""
    for _ in range(1000):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        finally:
            s.close()
        if port not in _ports_given:
            _ports_given.add(port)
            return port
    raise RuntimeError("no free loopback port that this test has not handed out already")


def parse_ts(ts):
    """ISO-8601 UTC timestamp of a log line -> seconds since the epoch."""
    s = ts.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    d = datetime.datetime.fromisoformat(s)
    if d.tzinfo is None:
        d = d.replace(tzinfo=datetime.timezone.utc)
    return d.timestamp()


def sid(x):
    """Session id in any form ("0x1a", "1a", int) -> int."""
    if isinstance(x, int):
        return x
    return int(str(x), 16)


def tail(path, max_lines=60, max_bytes=16000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return "<cannot read %s: %s>" % (path, e)
    return "\n".join(data.splitlines()[-max_lines:])


def _kill_pid(proc, sig):
    if proc is not None and proc.poll() is None:
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass


def _wait_proc(proc, timeout):
    """Waits (bounded) for proc to exit; returns its code or None."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def crash_markers(text):
    """Signs of a crash or sanitizer report in some output."""
    marks = ["Segmentation", "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
             "runtime error:", "stack traceback", "core dumped", "Aborted", "double free",
             "free(): ", "malloc(): "]
    return [m for m in marks if m in text]


# --------------------------------------------------------------------------
# ZooKeeper server

# The next test's server, started while a test runs (ZKH_SPARE=0: none): a
# test that asks for a server of the default configuration (started, tick
# 200, no extra_cfg) gets the spare, which no client has used, and the wait
# for its start-up (0.5-1 s of every test) overlaps the test before. Started
# while run_tests has tests left to run in this process; the last one is
# SIGKILLed at exit.
SPARE = os.environ.get("ZKH_SPARE") != "0"
_spare = {"zk": None, "left": 0}


def _start_spare():
    if SPARE and _spare["zk"] is None and _spare["left"] > 0:
        _spare["zk"] = ZooKeeper(spare=True)


def _drop_spare():
    zk, _spare["zk"] = _spare["zk"], None
    if zk is not None:
        zk.kill()
        zk._cds_keep()
        if not KEEP:
            shutil.rmtree(zk.dir, ignore_errors=True)


class ZooKeeper:
    """A standalone ZooKeeper 3.8 server on a free loopback port."""

    def __init__(self, start=True, tick=200, startup_timeout=30.0, extra_cfg=(), spare=False,
                 tls=None):
        """extra_cfg: more zoo.cfg lines, e.g. ("enforce.auth.enabled=true",).
        spare: the next test's server (_start_spare), launched, not waited for.
        tls: a TLS-only server (secureClientPort, no clientPort: Netty, client
        certificates required): a dict with keystore, truststore, password
        (the JKS/PKCS12 files the server reads) and ca, cert, key (PEM files
        of a client the server trusts, for the harness's four-letter words)."""
        default = start and tick == 200 and not extra_cfg and not spare and tls is None
        self.tls = tls
        if default and _spare["zk"] is not None:
            zk, _spare["zk"] = _spare["zk"], None
            if zk.running():
                self.__dict__.update(zk.__dict__)
                self.startup_timeout = startup_timeout
                _tmpdirs.append(self.dir)
                _servers.append(self)
                self._await()
                _start_spare()
                return
            _spare["zk"] = zk
            _drop_spare()           # it died: a server of this test's own instead
        self.port = free_port()
        self.tick = tick
        self.dir = tempfile.mkdtemp(prefix="zkelect-it-zk-") if spare else mkdtemp("zk")
        self.datadir = os.path.join(self.dir, "data")
        os.makedirs(self.datadir)
        self.cfg = os.path.join(self.dir, "zoo.cfg")
        self.log = os.path.join(self.dir, "zookeeper.log")
        self.startup_timeout = startup_timeout
        self.proc = None
        self.pid = None
        self.starts = 0
        with open(self.cfg, "w") as f:
            f.write("\n".join([
                "tickTime=%d" % tick,
                "initLimit=10",
                "syncLimit=5",
                "dataDir=%s" % self.datadir,
            ] + ([
                "clientPort=%d" % self.port,
                "clientPortAddress=127.0.0.1",
            ] if tls is None else [
                "secureClientPort=%d" % self.port,
                "secureClientPortAddress=127.0.0.1",
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                "ssl.keyStore.location=%s" % tls["keystore"],
                "ssl.keyStore.password=%s" % tls["password"],
                "ssl.trustStore.location=%s" % tls["truststore"],
                "ssl.trustStore.password=%s" % tls["password"],
                "ssl.clientAuth=need",
            ]) + [
                "maxClientCnxns=0",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                "minSessionTimeout=400",
                "maxSessionTimeout=20000",
                "autopurge.purgeInterval=0",
            ] + list(extra_cfg) + [""]))
        if spare:
            self._launch()
            return
        _servers.append(self)
        if start:
            self.start()
        if default:
            _start_spare()

    @property
    def hostport(self):
        return "127.0.0.1:%d" % self.port

    def __repr__(self):
        return "ZooKeeper(%s pid=%s)" % (self.hostport, self.pid)

    def start(self):
        self._launch()
        return self._await()

    def _launch(self):
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        logf = open(self.log, "ab")
        logf.write(("\n==== start #%d at %s ====\n" % (self.starts, time.strftime("%H:%M:%S"))).encode())
        logf.flush()
        cp = ZK_JAR
        if self.tls is not None:    # (Debian's zookeeper.jar does not name Netty's codec)
            cp += ":/usr/share/java/netty-codec.jar"
        if os.path.exists(SLF4J_SIMPLE):      # server log (else slf4j logs nothing)
            cp += ":" + SLF4J_SIMPLE
        # the class-data archive if there is one, else this start writes it
        # when it exits (under a name of its own, renamed once it is whole)
        cds, self._cds_dump = (_cds_archive() if self.tls is None else None), None
        if cds is not None and os.path.exists(cds):
            share = ["-XX:SharedArchiveFile=" + cds]
        elif cds is not None:
            self._cds_dump = (cds + ".%d.tmp" % os.getpid() + "-%d" % self.starts, cds)
            share = ["-XX:ArchiveClassesAtExit=" + self._cds_dump[0]]
        else:
            share = []
        cmd = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-XX:-UsePerfData"] + share + [
               "-Dzookeeper.log.dir=" + self.dir,
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
               "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
               "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", self.cfg]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                     cwd=self.dir, env=_child_env(), preexec_fn=_pdeathsig)
        logf.close()
        self.pid = self.proc.pid

    def _await(self):
        try:
            wait_until(self._serving, timeout=self.startup_timeout,
                       desc="ZooKeeper to serve on %s" % self.hostport, interval=0.05)
        except Timeout:
            code = self.proc.poll()
            raise Timeout("ZooKeeper on %s did not start (exit code %s); log tail:\n%s"
                          % (self.hostport, code, tail(self.log, 30)))
        return self

    def _serving(self):
        if self.proc.poll() is not None:
            raise AssertionError("ZooKeeper exited with %s during start-up; log tail:\n%s"
                                 % (self.proc.returncode, tail(self.log, 30)))
        try:
            if self.four("ruok", timeout=1.0).strip() != "imok":
                return False
            return "Mode:" in self.four("srvr", timeout=1.0)
        except OSError:
            return False

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def _connect(self, timeout):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if self.tls is None:
            return s
        import ssl
        ctx = ssl.create_default_context(cafile=self.tls["ca"])
        ctx.check_hostname = False
        ctx.load_cert_chain(self.tls["cert"], self.tls["key"])
        try:
            return ctx.wrap_socket(s)
        except ssl.SSLError as e:
            s.close()
            raise OSError("TLS handshake: %s" % e)

    def four(self, cmd, timeout=5.0):
        """Sends a four-letter word, returns the whole answer as text."""
        with self._connect(timeout) as s:
            s.sendall(cmd.encode())
            chunks = []
            deadline = time.monotonic() + timeout
            for _ in range(100000):
                if time.monotonic() > deadline:
                    raise socket.timeout("four-letter word %s: no EOF within %.1fs" % (cmd, timeout))
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode("utf-8", "replace")

    # -- parsed four-letter words ---------------------------------------------

    @staticmethod
    def _parse_grouped(text):
        out = {}
        key = None
        for line in text.splitlines():
            if not line.strip():
                continue
            if line[0] in " \t":
                if key is not None:
                    out[key].add(line.strip())
            else:
                key = line.strip()
                out.setdefault(key, set())
        return out

    def wchc(self):
        """Data watches by session: {"0x..": {path, ...}} (sessions as the server prints them).
        Note: the server lists only data/exists watches here, not child watches."""
        return self._parse_grouped(self.four("wchc"))

    def wchp(self):
        """Data watches by path: {path: {"0x..", ...}}."""
        return self._parse_grouped(self.four("wchp"))

    def mntr(self):
        out = {}
        for line in self.four("mntr").splitlines():
            parts = line.split("\t", 1)
            if len(parts) == 2:
                out[parts[0].strip()] = parts[1].strip()
        return out

    def watch_count(self):
        """All watches (data + child) on the server, from mntr."""
        return int(self.mntr()["zk_watch_count"])

    def ephemerals(self):
        """From `dump`: {session int: {ephemeral path, ...}}."""
        text = self.four("dump")
        out = {}
        in_eph = False
        key = None
        for line in text.splitlines():
            if line.startswith("Sessions with Ephemerals"):
                in_eph = True
                continue
            if not in_eph:
                continue
            if not line.strip():
                continue
            if line[0] in " \t":
                if key is not None:
                    out[key].add(line.strip())
            elif re.match(r"^0x[0-9a-fA-F]+:?$", line.strip()):
                key = sid(line.strip().rstrip(":"))
                out.setdefault(key, set())
            else:
                break
        return out

    def cons(self):
        """From `cons`: {session int: {"recved": n, "sent": n, "lcxid": n, "lop": s}} per connection."""
        out = {}
        for line in self.four("cons").splitlines():
            m = re.search(r"\((.*)\)\s*$", line.strip())
            if not m or "sid=" not in m.group(1):
                continue
            fields = {}
            for kv in m.group(1).split(","):
                if "=" in kv:
                    k, v = kv.split("=", 1)
                    fields[k.strip()] = v.strip()
            s = sid(fields["sid"])
            info = {"lop": fields.get("lop")}
            for k in ("recved", "sent"):
                if k in fields:
                    info[k] = int(fields[k])
            if "lcxid" in fields:
                info["lcxid"] = int(fields["lcxid"], 16) if fields["lcxid"].startswith("0x") \
                    else int(fields["lcxid"])
            out[s] = info
        return out

    # -- process control --------------------------------------------------------

    def session_expired(self, session):
        """Whether the server's log says it expired session (an int): its
        "Expiring session 0x..." line (a session closed by a client logs
        nothing that a reset connection does not log too)."""
        try:
            with open(self.log, errors="replace") as f:
                return re.search(r"Expiring session 0x%x\b" % session, f.read()) is not None
        except OSError:
            return False

    def stop(self, timeout=10.0):
        """SIGTERM by pid, then SIGKILL after a bounded wait."""
        if self.proc is None or self.proc.poll() is not None:
            self._cds_keep()
            return
        _kill_pid(self.proc, signal.SIGTERM)
        if _wait_proc(self.proc, timeout) is None:
            _kill_pid(self.proc, signal.SIGKILL)
            _wait_proc(self.proc, 10.0)
        self._cds_keep()

    def _cds_keep(self):
        """The archive this start wrote at its exit, put in place if the JVM
        ended on its own (a SIGKILL can leave half a file: removed)."""
        dump, self._cds_dump = getattr(self, "_cds_dump", None), None
        if dump is None or self.proc is None or self.proc.poll() is None:
            return
        try:
            if self.proc.returncode in (0, 143) and os.path.getsize(dump[0]) > 0:
                os.replace(dump[0], dump[1])
            else:
                os.unlink(dump[0])
        except OSError:
            pass

    def kill(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        _kill_pid(self.proc, signal.SIGKILL)
        _wait_proc(self.proc, 10.0)
        self._cds_keep()

    def restart(self):
        """Stop, then start again on the same port and dataDir."""
        self.stop()
        self._wait_port_free()
        return self.start()

    def _wait_port_free(self):
        def free():
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", self.port))
                return True
            except OSError:
                return False
            finally:
                s.close()
        wait_until(free, timeout=10.0, desc="port %d to be free" % self.port)

    def sigstop(self):
        _kill_pid(self.proc, signal.SIGSTOP)

    def sigcont(self):
        _kill_pid(self.proc, signal.SIGCONT)

    def close(self):
        """The end of the server (its test's end): SIGKILL, its dataDir is
        thrown away (the orderly shutdown of a SIGTERM took 0.37 s of every
        server), unless this start writes the class-data archive at its exit."""
        if self.proc is not None and self.proc.poll() is None:
            if getattr(self, "_cds_dump", None) is None:
                self.kill()
            else:
                self.sigcont()
                self.stop(timeout=5.0)
        self._cds_keep()        # (a server that died on its own)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop_all_agents()
        self.close()
        return False


# --------------------------------------------------------------------------
# zkelect agent

class Agent:
    """One `zkelect run` process, logging JSON lines to a file."""

    def __init__(self, zk, id, path="/app/election", script=None, session_timeout=2000, data=None,
                 session_file=None, extra=(), start=True, log="json", zkhosts=None,
                 server_tick="auto", env=None, session_password=False):
        self.zk = zk
        self.env = dict(env or {})      # on top of the harness's own (_child_env)
        self.id = id
        # the servers' tickTime, as an operator who knows it states it
        # (--server-tick): "auto" passes the harness server's own; None
        # leaves the default (half the granted session timeout)
        self.server_tick = getattr(zk, "tick", None) if server_tick == "auto" else server_tick
        self.path = path
        self.script = script
        self.session_timeout = session_timeout
        self.data = data
        self.session_file = session_file
        # --session-file-password: the file holds the password too, which
        # zke_expire (expire_session) needs; the id alone otherwise
        self.session_password = session_password
        self.extra = list(extra)
        self.logfmt = log
        self.zkhosts = zkhosts
        self.dir = mkdtemp("agent-" + re.sub(r"[^A-Za-z0-9_.-]", "_", id))
        self.logfile = os.path.join(self.dir, "agent.log")
        self.proc = None
        self.pid = None
        self._events = []
        self._other = []
        self._pos = 0
        self._partial = b""
        self.t_start = None
        _agents.append(self)
        if start:
            self.start()

    def __repr__(self):
        return "Agent(%s pid=%s)" % (self.id, self.pid)

    def argv(self):
        cmd = [ZKELECT_BIN, "run", "--zk", self.zkhosts or self.zk.hostport, "--path", self.path,
               "--id", self.id]
        if self.script:
            cmd += ["--script", self.script]
        if self.session_timeout is not None:
            cmd += ["--session-timeout", str(self.session_timeout)]
        if self.data is not None:
            cmd += ["--data", self.data]
        if self.session_file:
            cmd += ["--session-file", self.session_file]
            if self.session_password:
                cmd += ["--session-file-password"]
        if self.logfmt:
            cmd += ["--log", self.logfmt]
        if self.server_tick and "--server-tick" not in self.extra:
            cmd += ["--server-tick", str(self.server_tick)]
        return cmd + self.extra

    def start(self):
        assert self.proc is None, "agent %s started twice" % self.id
        if not os.access(ZKELECT_BIN, os.X_OK):
            raise AssertionError("zkelect binary not found or not executable: %s (set ZKELECT_BIN)"
                                 % ZKELECT_BIN)
        out = open(self.logfile, "wb")
        self.t_start = time.time()
        self.proc = subprocess.Popen(wrap(self.argv()), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, cwd=self.dir,
                                     env=_child_env(self.env), preexec_fn=_pdeathsig)
        out.close()
        self.pid = self.proc.pid
        return self

    # -- log ----------------------------------------------------------------------

    def _read(self):
        try:
            with open(self.logfile, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except OSError:
            return
        if not data:
            return
        self._pos += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()       # incomplete last line (if any)
        now = time.time()
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if not line.strip():
                continue
            ev = None
            if line.lstrip().startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    ev = None
            if isinstance(ev, dict):
                ev["_i"] = len(self._events)
                ev["_seen"] = now
                try:
                    ev["_t"] = parse_ts(ev["ts"])
                except Exception:
                    ev["_t"] = now
                self._events.append(ev)
            else:
                self._other.append(line)

    def events(self, name=None):
        """All JSON events so far (optionally only those named `name`)."""
        self._read()
        if name is None:
            return list(self._events)
        return [e for e in self._events if e.get("event") == name]

    def other_lines(self):
        self._read()
        return list(self._other)

    def mark(self):
        """Index to pass as `since` to only look at later events."""
        self._read()
        return len(self._events)

    @staticmethod
    def _matcher(pred, fields):
        def m(ev):
            if isinstance(pred, str) and ev.get("event") != pred:
                return False
            if callable(pred) and not pred(ev):
                return False
            for k, v in fields.items():
                if ev.get(k) != v:
                    return False
            return True
        return m

    def find(self, pred=None, since=0, **fields):
        m = self._matcher(pred, fields)
        return [e for e in self.events()[since:] if m(e)]

    def wait_event(self, pred, timeout=10.0, since=0, **fields):
        """Waits for the first event at index >= since that matches pred (an
        event name or a callable) and the given field values; returns it."""
        m = self._matcher(pred, fields)
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / POLL) + 10):
            for ev in self.events()[since:]:
                if m(ev):
                    return ev
            if self.proc.poll() is not None:
                self._read()
                for ev in self._events[since:]:
                    if m(ev):
                        return ev
                raise AssertionError("%s exited (code %s) before logging %s %s; last events:\n%s"
                                     % (self.id, self.proc.returncode, pred, fields, self.describe(12)))
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL)
        raise Timeout("%s: no event %s %s within %.1fs (since #%d); last events:\n%s"
                      % (self.id, pred, fields, timeout, since, self.describe(12)))

    wait_for = wait_event

    def describe(self, n=20):
        evs = self.events()[-n:]
        return "\n".join("  #%d %s" % (e["_i"], json.dumps({k: v for k, v in e.items()
                                                            if not k.startswith("_")}))
                         for e in evs) or "  <no events>"

    # -- facts derived from the log ----------------------------------------------------

    def session(self):
        """Current session id (int) as last reported by the agent, or None."""
        s = None
        for e in self.events():
            if e.get("event") in ("session", "joined", "leader") and e.get("session"):
                s = sid(e["session"])
        return s

    def last(self, name):
        evs = self.events(name)
        return evs[-1] if evs else None

    # -- process control ------------------------------------------------------------

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        _kill_pid(self.proc, sig)

    def term(self):
        self.signal(signal.SIGTERM)

    def sigstop(self):
        self.signal(signal.SIGSTOP)

    def sigcont(self):
        self.signal(signal.SIGCONT)

    def int_(self):
        self.signal(signal.SIGINT)

    def kill9(self):
        self.signal(signal.SIGKILL)
        _wait_proc(self.proc, 10.0)

    def kill9_with_keeper(self):
        """The host's crash: the agent and its fail-stop keeper die together,
        so nobody closes the session (it expires). The agent is stopped
        first (it would see its keeper stop and step down at once), then the
        keeper (which acts on a stopped agent only at its lease's soft end),
        each stop seen in /proc; then the keeper is killed before the agent
        (the agent's death orphans the keeper's process group, and the
        kernel sends a stopped member of an orphaned group SIGHUP and
        SIGCONT: a keeper left stopped would run and close the session)."""
        keepers = watchers(ppid=self.pid)
        assert keepers, "%s has no keeper to kill with it" % self.id
        self.signal(signal.SIGSTOP)
        wait_until(lambda: pid_stopped(self.pid), 5, "%s stopped" % self.id)
        for k in keepers:
            os.kill(k, signal.SIGSTOP)
        wait_until(lambda: all(pid_stopped(k) for k in keepers), 5, "its keeper stopped")
        for k in keepers:
            os.kill(k, signal.SIGKILL)
        wait_until(lambda: not any(pid_alive(k) for k in keepers), 10, "the keeper's end")
        self.signal(signal.SIGKILL)
        _wait_proc(self.proc, 10.0)

    def wait_exit(self, timeout=10.0):
        """Exit code (negative: killed by that signal); raises Timeout if still running."""
        code = _wait_proc(self.proc, timeout)
        if code is None:
            raise Timeout("%s still running %.1fs after being asked to stop; last events:\n%s"
                          % (self.id, timeout, self.describe(12)))
        self.t_exit = time.time()
        self._read()
        return code

    def stop(self):
        if self.alive():
            _kill_pid(self.proc, signal.SIGKILL)
            _wait_proc(self.proc, 10.0)


# --------------------------------------------------------------------------
# foreign candidates: Curator LeaderLatch and kazoo Election (tests/interop)

INTEROP = os.path.join(REPO, "tests", "interop")
# Curator 5.4 and its ZooKeeper 3.8 client from Debian (libcurator-recipes-java,
# zookeeper); the client needs no netty (NIO socket); slf4j-nop keeps stdout clean.
CURATOR_JARS = ["curator-recipes", "curator-framework", "curator-client", "zookeeper",
                "zookeeper-jute", "slf4j-api", "slf4j-nop", "guava"]


class StallProxy:
    """A TCP proxy in front of the server that can hold every byte, both
    ways, for a while (a connection that is up but silent: a blip the
    client does not see as a disconnect) and then deliver them."""

    def __init__(self, target_port):
        import socket
        import threading
        self.target = ("127.0.0.1", target_port)
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.hostport = "127.0.0.1:%d" % self.port
        self.held_until = 0.0
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, seconds):
        with self.lock:
            self.held_until = time.monotonic() + seconds

    def _held(self):
        with self.lock:
            return time.monotonic() < self.held_until

    def _accept(self):
        import socket
        import threading
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(self.target)
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(c, s), daemon=True).start()

    def _pump(self, a, b):
        import select
        pend = {a: b"", b: b""}          # bytes read from x, to go to the other
        other = {a: b, b: a}
        try:
            while not self.closed:
                # block until bytes come; held with bytes pending, look again
                # every 20 ms: the hold may end early (hold(0)), and released
                # bytes go out at once, not at the next byte
                with self.lock:
                    left = self.held_until - time.monotonic()
                wait = min(max(0.0, left), 0.02) if left > 0 and (pend[a] or pend[b]) else 0.5
                r, _, _ = select.select([a, b], [], [], wait)
                for x in r:
                    data = x.recv(65536)
                    if not data:
                        return
                    self.note(x, data)
                    pend[x] += data
                if not self._held():
                    for x in (a, b):
                        if pend[x]:
                            other[x].sendall(pend[x])
                            pend[x] = b""
        except OSError:
            pass
        finally:
            a.close()
            b.close()

    def note(self, x, data):
        """Bytes read from x (a subclass may look at them)."""

    def close(self):
        self.closed = True
        self.lsock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def curator_classpath():
    jars = ["/usr/share/java/%s.jar" % j for j in CURATOR_JARS]
    missing = [j for j in jars if not os.path.exists(j)]
    assert not missing, "missing %s (run scripts/setup.sh --dev)" % ", ".join(missing)
    return ":".join(jars)


class Foreign(Agent):
    """A Curator LeaderLatch participant (kind "curator") or a kazoo Election
    contender (kind "kazoo"), one JSON line per event on stdout, with the
    events of an Agent where they mean the same: "started" (node known),
    "leader", "stepdown" (the claim ends), "follower", "stopped"; "t" is
    CLOCK_MONOTONIC in ns, like an agent's "mono_ns"."""

    def __init__(self, zk, kind, id, path="/app/election", session_timeout=2000, start=True):
        assert kind in ("curator", "kazoo"), kind
        self.kind = kind
        Agent.__init__(self, zk, id, path=path, session_timeout=session_timeout, log=None,
                       start=start)

    def __repr__(self):
        return "Foreign(%s %s pid=%s)" % (self.kind, self.id, self.pid)

    def argv(self):
        args = [self.zk.hostport, self.path, self.id, str(self.session_timeout)]
        if self.kind == "curator":
            return ["java", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                    "-cp", curator_classpath(), os.path.join(INTEROP, "CuratorCandidate.java")] + args
        return ["/usr/bin/python3", os.path.join(INTEROP, "kazoo_candidate.py")] + args

    def start(self):
        assert self.proc is None, "candidate %s started twice" % self.id
        out = open(self.logfile, "wb")
        self.t_start = time.time()
        self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, cwd=self.dir, env=_child_env(),
                                     preexec_fn=_pdeathsig)
        out.close()
        self.pid = self.proc.pid
        return self

    def _read(self):
        Agent._read(self)
        for ev in self._events:
            if "t" in ev and "mono_ns" not in ev:
                ev["mono_ns"] = ev["t"]


def stop_all_agents():
    if WRAP:
        # let wrapped processes exit on their own, so valgrind checks for leaks
        for a in list(_agents):
            if a.alive():
                a.signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for a in list(_agents):
            if a.proc is not None:
                _wait_proc(a.proc, max(0.1, deadline - time.monotonic()))
    for a in list(_agents):
        a.stop()


def run(args, timeout=20.0, env=None, cwd=None, nowrap=False):
    """Runs a command to completion (bounded); returns (code, stdout, stderr, seconds).
    nowrap: not under ZKELECT_WRAP (a long table of cases, one of which is)."""
    t0 = time.monotonic()
    p = subprocess.Popen(list(args) if nowrap else wrap(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=_child_env(env), cwd=cwd, preexec_fn=_pdeathsig)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate(timeout=10)
        raise Timeout("%s did not finish within %.1fs; stderr:\n%s"
                      % (" ".join(args), timeout, err.decode("utf-8", "replace")[-3000:]))
    return p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), \
        time.monotonic() - t0


def run_together(cmds, timeout=20.0):
    """Runs commands at once, each to completion (bounded): for the cases
    of a test that each wait out a time of their own. Returns run()'s
    (code, stdout, stderr, seconds) for each, in order; seconds from the
    start of all."""
    t0 = time.monotonic()
    procs = [subprocess.Popen(wrap(args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=_child_env(), preexec_fn=_pdeathsig)
             for args in cmds]
    _spawned.extend(procs)      # (stopped at the teardown of a test cut short)
    res = [None] * len(procs)

    def reap(i, p):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate(timeout=10)
            res[i] = Timeout("%s did not finish within %.1fs; stderr:\n%s"
                             % (" ".join(cmds[i]), timeout, err.decode("utf-8", "replace")[-3000:]))
            return
        res[i] = (p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                  time.monotonic() - t0)
    threads = [threading.Thread(target=reap, args=(i, p), daemon=True) for i, p in enumerate(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 15)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    for i, r in enumerate(res):
        if r is None:
            raise Timeout("%s: no result within %.1fs" % (" ".join(cmds[i]), timeout + 15))
        if isinstance(r, Timeout):
            raise r
    return res


def expire_session(zk, session_file, timeout=30.0):
    """Runs zke_expire on a session file written by `--session-file` with
    `--session-file-password` (Agent(session_password=True))."""
    if not os.access(ZKE_EXPIRE_BIN, os.X_OK):
        raise AssertionError("zke_expire not found or not executable: %s (set ZKE_EXPIRE_BIN)"
                             % ZKE_EXPIRE_BIN)
    code, out, err, _ = run([ZKE_EXPIRE_BIN, zk.hostport, session_file], timeout=timeout)
    assert code == 0, "zke_expire failed (%d): %s %s" % (code, out, err)
    print("  info: zke_expire: %s" % out.strip(), flush=True)
    return out


def read_session_file(path):
    """(session int, password hex) from a --session-file, the password None
    when the file holds the id alone (no --session-file-password); None if
    the file is not (yet) there."""
    try:
        with open(path) as f:
            parts = f.read().split()
    except OSError:
        return None
    if len(parts) not in (1, 2):
        return None
    try:
        return sid(parts[0]), parts[1] if len(parts) == 2 else None
    except ValueError:
        return None


# --------------------------------------------------------------------------
# election-level assertions shared by tests

def node_seq(node):
    return int(node.rsplit("-", 1)[1])


def assert_node(node):
    assert isinstance(node, str) and NODE_RE.match(node), "bad node name %r" % (node,)


def leaders_now(agents):
    """Agents whose last role event is `leader` (and that did not step down since)."""
    out = []
    for a in agents:
        role = None
        for e in a.events():
            if e.get("event") in ("leader", "follower"):
                role = e["event"]
            elif e.get("event") in ("stepdown", "stopped"):
                role = None
        if role == "leader":
            out.append(a)
    return out


def stop_cleanly(agents, timeout=10.0):
    """SIGTERM to every agent, then each must exit 0 within timeout."""
    for a in agents:
        a.term()
    for a in agents:
        code = a.wait_exit(timeout)
        assert code == 0, "%s exited %s; last events:\n%s" % (a.id, code, a.describe(8))


def start_in_order(zk, names, **kw):
    """Starts candidates one at a time, each after the previous one took a
    role, so sequence order is start order. Returns the agents."""
    agents = []
    for name in names:
        a = Agent(zk, name, **kw)
        a.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=15)
        agents.append(a)
    return agents


def wait_roles(agents, timeout=15.0):
    """Waits until every agent has logged leader or follower; returns {agent: first role event}."""
    def all_have():
        res = {}
        for a in agents:
            evs = [e for e in a.events() if e.get("event") in ("leader", "follower")]
            if not evs:
                if not a.alive():
                    raise AssertionError("%s exited (code %s) before taking a role:\n%s"
                                         % (a.id, a.proc.returncode, a.describe()))
                return None
            res[a] = evs[0]
        return res
    return wait_until(all_have, timeout=timeout, desc="every candidate to take a role")


def watches_by_session(zk):
    """wchc with int session keys: {session int: {path, ...}}."""
    return {sid(k): v for k, v in zk.wchc().items()}


def wait_watches(zk, expected, timeout=10.0):
    """Waits until the server's data watches are exactly `expected`
    ({session int: {path, ...}}) and no other watch (child watches included,
    counted by mntr) exists. Returns the last observation."""
    want_total = sum(len(v) for v in expected.values())

    def check():
        got = {k: v for k, v in watches_by_session(zk).items() if v}
        total = zk.watch_count()
        state = (got, total)
        check.last = state
        return got == expected and total == want_total
    check.last = None
    try:
        wait_until(check, timeout=timeout, desc="watches")
    except Timeout:
        got, total = check.last
        lines = ["server watches differ from expected (total watches %s, expected %d)" % (total, want_total)]
        for s in sorted(set(got) | set(expected)):
            if got.get(s) != expected.get(s):
                lines.append("  session 0x%x: got %s, expected %s"
                             % (s, sorted(got.get(s, ())), sorted(expected.get(s, ()))))
        raise AssertionError("\n".join(lines))
    return check.last


def assert_quiet(agents, marks, seconds, allow=lambda a, e: e.get("event") == "log"):
    """Observation window for a negative check: during `seconds`, none of
    `agents` logs an event after its mark (unless allow(agent, event); by
    default only library chatter, event "log", is allowed).
    Polls and fails at the first offending event."""
    deadline = time.monotonic() + seconds
    for _ in range(int(seconds / POLL) + 10):
        for a in agents:
            bad = [e for e in a.events()[marks[a]:] if not allow(a, e)]
            assert not bad, "%s logged unexpected events:\n%s" % (a.id, a.describe(len(bad) + 3))
        if time.monotonic() >= deadline:
            return
        time.sleep(POLL)


# --------------------------------------------------------------------------
# runner

def _diagnostics():
    out = []
    for zk in _servers:
        out.append("---- %r log tail (%s) ----" % (zk, zk.log))
        out.append(tail(zk.log, 40, 8000))
    for a in _agents:
        code = a.proc.poll() if a.proc else None
        out.append("---- agent %s pid=%s exit=%s log tail (%s) ----" % (a.id, a.pid, code, a.logfile))
        out.append("  argv: %s" % " ".join(a.argv()))
        out.append(tail(a.logfile, 40, 12000))
    return "\n".join(out)


_spawned = []


def spawn_logged(argv, log):
    """Starts a helper process of a test (a backend, HAProxy ...) with its
    stdout and stderr appended to log, dying with the test (PDEATHSIG); it
    is stopped by stop_spawned(), at the latest at the test's teardown."""
    out = open(log, "ab")
    try:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             preexec_fn=_pdeathsig)
    finally:
        out.close()
    _spawned.append(p)
    return p


def stop_spawned(timeout=10.0):
    """SIGTERM to every process of spawn_logged() still running, SIGKILL to
    those still there after timeout seconds; each is reaped."""
    for p in _spawned:
        _kill_pid(p, signal.SIGTERM)
    for p in _spawned:
        if _wait_proc(p, timeout) is None:
            _kill_pid(p, signal.SIGKILL)
            _wait_proc(p, timeout)
    del _spawned[:]


def _teardown():
    stop_all_agents()
    stop_spawned()
    for zk in list(_servers):
        try:
            zk.close()
        except Exception:
            pass
    del _agents[:]
    del _servers[:]
    _vg["dir"] = None
    if not KEEP:
        for d in _tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
    del _tmpdirs[:]


atexit.register(_teardown)
atexit.register(_drop_spare)


class _TestTimeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _TestTimeout("test exceeded its time bound of %.0fs" % TEST_TIMEOUT)


def _on_term(signum, frame):
    _teardown()
    sys.exit(128 + signum)


def run_tests(g, timeout=None):
    """Runs every test_* function of module globals g; prints ok/FAIL per test;
    exits non-zero if any failed. `argv[1:]` may name tests to run, or,
    after `--not`, tests to leave out (a long script split into several
    ctest entries that run in parallel)."""
    bound = timeout or TEST_TIMEOUT
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGTERM, _on_term)
    names = sorted(n for n, f in g.items() if n.startswith("test_") and callable(f))
    # keep definition order when possible
    order = [n for n in g if n in names]
    args = sys.argv[1:]
    skip = set()
    if "--not" in args:
        skip = set(args[args.index("--not") + 1:])
        args = args[:args.index("--not")]
        unknown = skip - set(order)
        if unknown:
            print("unknown tests: %s" % ", ".join(sorted(unknown)))
            sys.exit(2)
        order = [n for n in order if n not in skip]
    if args:
        order = [n for n in order if n in args]
        missing = set(args) - set(order)
        if missing:
            print("unknown tests: %s" % ", ".join(sorted(missing)))
            sys.exit(2)
    script = os.path.basename(g.get("__file__", "?"))
    failed = []
    t_all = time.monotonic()
    for i, name in enumerate(order):
        _spare["left"] = len(order) - 1 - i
        t0 = time.monotonic()
        err = None
        signal.setitimer(signal.ITIMER_REAL, bound)
        try:
            g[name]()
            if WRAP:
                stop_all_agents()
                check_wrap_logs()
        except BaseException as e:  # includes the time bound
            signal.setitimer(signal.ITIMER_REAL, 0)
            if isinstance(e, KeyboardInterrupt):
                _teardown()
                raise
            err = traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.monotonic() - t0
        if err is None:
            print("ok   %s %s (%.1fs)" % (script, name, dt), flush=True)
        else:
            failed.append(name)
            print("FAIL %s %s (%.1fs)\n%s" % (script, name, dt, err), flush=True)
            print(_diagnostics(), flush=True)
        _teardown()
    print("%s: %d passed, %d failed (%.1fs)" % (script, len(order) - len(failed), len(failed),
                                                 time.monotonic() - t_all), flush=True)
    sys.exit(1 if failed else 0)
