"""ensemble: a real 3-node ZooKeeper 3.8 ensemble for the chaos suite, plus a
tiny ZooKeeper client (standard library only) for reading the election
folder, and the ZooKeeper CLI (org.apache.zookeeper.ZooKeeperMain) for
operator actions such as `deleteall`.

Rules (same as tests/integration/zkharness.py, which is reused here):
  * every process is started by us, remembered by pid, killed by pid;
  * every wait is bounded in time and iterations.

The servers bind their client ports on 0.0.0.0 (clientPortAddress) so that
candidates in child network namespaces reach them through the host side of
their veth; the chaos runner only ever starts the ensemble inside its own
private network namespace (see chaos.py), so nothing is exposed on the host.
Quorum and election ports are on 127.0.0.1.

Each server may run under its own uid (`Ensemble(uids=[...])`, root only):
the chaos runner's quorum firewall (net.QuorumFirewall) tells the servers'
connections apart by the uid of the socket that opened them, so it can
black-hole the links of one server to the others (peer and election ports)
without touching client traffic. syncLimit is a parameter of the ensemble;
`set_sync_limit` restarts all three servers with the new value (the data
directories are kept).
"""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import zkharness as h  # noqa: E402

ZK_JAR = h.ZK_JAR
SLF4J_SIMPLE = h.SLF4J_SIMPLE


def _classpath():
    cp = ZK_JAR
    if os.path.exists(SLF4J_SIMPLE):
        cp += ":" + SLF4J_SIMPLE
    return cp


def free_ports(n, host="127.0.0.1"):
    """n distinct free TCP ports (bound together, so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _preexec_as(uid):
    """preexec_fn: drop to uid (gid = uid, no supplementary groups) first,
    then PR_SET_PDEATHSIG (a credential change clears it)."""
    def f():
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        h._pdeathsig()
    return f


def _chown_tree(path, uid):
    for root, dirs, files in os.walk(path):
        for n in [root] + [os.path.join(root, x) for x in dirs + files]:
            try:
                os.lchown(n, uid, uid)
            except OSError:
                pass


class Server:
    """One QuorumPeerMain JVM."""

    def __init__(self, ens, index, client_port, peer_port, elect_port, uid=None):
        self.ens = ens
        self.uid = uid                # None: the runner's own
        self.index = index            # 1-based myid
        self.client_port = client_port
        self.peer_port = peer_port
        self.elect_port = elect_port
        self.dir = os.path.join(ens.dir, "zk%d" % index)
        self.datadir = os.path.join(self.dir, "data")
        os.makedirs(self.datadir, exist_ok=True)
        with open(os.path.join(self.datadir, "myid"), "w") as f:
            f.write("%d\n" % index)
        self.cfg = os.path.join(self.dir, "zoo.cfg")
        self.log = os.path.join(self.dir, "zookeeper.log")
        self.proc = None
        self.pid = None
        self.starts = 0
        self.stopped = False          # SIGSTOPped by us

    def write_cfg(self):
        lines = [
            "tickTime=%d" % self.ens.tick,
            "initLimit=10",
            "syncLimit=%d" % self.ens.sync_limit,
            "dataDir=%s" % self.datadir,
            "clientPort=%d" % self.client_port,
            "clientPortAddress=0.0.0.0",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            "autopurge.purgeInterval=0",
        ]
        for s in self.ens.servers:
            lines.append("server.%d=127.0.0.1:%d:%d" % (s.index, s.peer_port, s.elect_port))
        with open(self.cfg, "w") as f:
            f.write("\n".join(lines) + "\n")

    def __repr__(self):
        return "zk%d(port=%d pid=%s)" % (self.index, self.client_port, self.pid)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        assert not self.running(), "%r already running" % self
        self.starts += 1
        logf = open(self.log, "ab")
        logf.write(("\n==== start #%d at %s ====\n" % (self.starts, time.strftime("%H:%M:%S"))).encode())
        logf.flush()
        if self.uid is not None:
            _chown_tree(self.dir, self.uid)
        cmd = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-XX:-UsePerfData",
               "-Dzookeeper.log.dir=" + self.dir,
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
               "-Dorg.slf4j.simpleLogger.showDateTime=true",
               "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
               "-cp", _classpath(), "org.apache.zookeeper.server.quorum.QuorumPeerMain", self.cfg]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                     cwd=self.dir, env=h._child_env(), preexec_fn=_preexec_as(self.uid))
        logf.close()
        self.pid = self.proc.pid
        self.stopped = False
        return self

    def quorum_ports(self):
        """(peer port, election port): what the other servers connect to."""
        return (self.peer_port, self.elect_port)

    def signal(self, sig):
        if self.running():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        """SIGKILL by pid; waits (bounded) for the exit."""
        if not self.running():
            return
        self.signal(signal.SIGKILL)
        h._wait_proc(self.proc, 10.0)
        self.stopped = False

    def terminate(self, timeout=10.0):
        if not self.running():
            return
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if h._wait_proc(self.proc, timeout) is None:
            self.kill()
        self.stopped = False

    def stop_signal(self):
        self.signal(signal.SIGSTOP)
        self.stopped = True

    def cont(self):
        self.signal(signal.SIGCONT)
        self.stopped = False

    def four(self, cmd, timeout=2.0):
        """A four-letter word; returns the answer as text."""
        with socket.create_connection(("127.0.0.1", self.client_port), timeout=timeout) as s:
            s.sendall(cmd.encode())
            chunks = []
            deadline = time.monotonic() + timeout
            for _ in range(100000):
                if time.monotonic() > deadline:
                    raise socket.timeout("4lw %s: no EOF within %.1fs" % (cmd, timeout))
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode("utf-8", "replace")

    def mode(self, timeout=1.0):
        """'leader', 'follower', 'standalone' or None (not serving)."""
        if not self.running() or self.stopped:
            return None
        try:
            text = self.four("srvr", timeout=timeout)
        except OSError:
            return None
        m = re.search(r"^Mode:\s*(\S+)", text, re.M)
        return m.group(1) if m else None

    def connections(self):
        """Remote IPs of client connections, from `cons`."""
        out = []
        try:
            text = self.four("cons")
        except OSError:
            return out
        for line in text.splitlines():
            m = re.match(r"\s*/([0-9.]+):(\d+)\[", line)
            if m:
                out.append(m.group(1))
        return out

    def _port_free(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", self.client_port))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def wait_port_free(self, timeout=10.0):
        h.wait_until(self._port_free, timeout=timeout, desc="port %d free" % self.client_port,
                     interval=0.05)


class Ensemble:
    """Three QuorumPeerMain servers on 127.0.0.1 (client ports on 0.0.0.0)."""

    def __init__(self, workdir, tick=200, sync_limit=5, uids=None):
        self.dir = workdir
        self.tick = tick
        self.sync_limit = sync_limit
        os.makedirs(self.dir, exist_ok=True)
        ports = free_ports(9)
        uids = list(uids or [None, None, None])
        self.servers = [Server(self, i + 1, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], uids[i])
                        for i in range(3)]
        for s in self.servers:
            s.write_cfg()

    # -- lifecycle -------------------------------------------------------------

    def start(self, timeout=60.0):
        for s in self.servers:
            s.start()
        return self.wait_healthy(timeout)

    def close(self):
        for s in self.servers:
            if s.running():
                s.cont()
        for s in self.servers:
            s.terminate(timeout=5.0)

    def set_sync_limit(self, sync_limit, timeout=60.0):
        """Restarts all three servers with syncLimit = sync_limit (nothing
        if that is the value already). Returns the seconds it took."""
        if sync_limit == self.sync_limit:
            return 0.0
        t0 = time.monotonic()
        self.sync_limit = sync_limit
        for s in self.servers:
            s.cont()
            s.kill()
        for s in self.servers:
            s.write_cfg()
            s.wait_port_free()
        for s in self.servers:
            s.start()
        self.wait_healthy(timeout)
        return time.monotonic() - t0

    def server(self, i):
        """Server by 0-based index."""
        return self.servers[i]

    def kill(self, i):
        self.servers[i].kill()

    def stop_signal(self, i):
        self.servers[i].stop_signal()

    def cont(self, i):
        self.servers[i].cont()

    def restart(self, i, wait=False, timeout=60.0):
        s = self.servers[i]
        if s.running():
            s.kill()
        s.wait_port_free()
        s.start()
        if wait:
            self.wait_healthy(timeout)
        return s

    def ensure_all_running(self):
        """Starts every server that is not running, continues stopped ones."""
        for i, s in enumerate(self.servers):
            if s.running() and s.stopped:
                s.cont()
            if not s.running():
                self.restart(i)

    # -- state -----------------------------------------------------------------

    def modes(self):
        return [s.mode() for s in self.servers]

    def healthy(self):
        m = self.modes()
        return m.count("leader") == 1 and m.count("follower") == 2

    def wait_healthy(self, timeout=60.0):
        """Waits for one leader and two followers (srvr). Returns seconds taken."""
        t0 = time.monotonic()
        for s in self.servers:
            if not s.running():
                raise AssertionError("%r is not running; log tail:\n%s" % (s, h.tail(s.log, 20)))
        try:
            h.wait_until(self.healthy, timeout=timeout, desc="ensemble healthy", interval=0.1)
        except h.Timeout:
            raise h.Timeout("ensemble not healthy within %.0fs: modes %s\n%s" % (
                timeout, self.modes(),
                "\n".join("-- %r:\n%s" % (s, h.tail(s.log, 15)) for s in self.servers)))
        return time.monotonic() - t0

    def leader_index(self):
        """0-based index of the server in Mode: leader, or None."""
        for i, m in enumerate(self.modes()):
            if m == "leader":
                return i
        return None

    def connect_string(self, host="127.0.0.1", for_namespace=None, ports=None):
        """host:port,... ; for_namespace: an object with `.host_ip` (the
        host-side veth address the namespace reaches the servers through)."""
        if for_namespace is not None:
            host = for_namespace.host_ip
        ports = ports or [s.client_port for s in self.servers]
        return ",".join("%s:%d" % (host, p) for p in ports)

    def pids(self):
        return [s.pid for s in self.servers if s.running()]

    # -- clients ---------------------------------------------------------------

    def client(self, timeout=5.0):
        """A MiniZK connected to any serving server (the leader preferred)."""
        order = list(range(3))
        li = self.leader_index()
        if li is not None:
            order.remove(li)
            order.insert(0, li)
        last = None
        for i in order:
            s = self.servers[i]
            if not s.running() or s.stopped:
                continue
            try:
                return MiniZK("127.0.0.1", s.client_port, timeout=timeout)
            except (OSError, ZKError) as e:
                last = e
        raise ZKError("no server accepted a session: %s" % last)

    def children_with_owner(self, path, timeout=5.0):
        """[{name, owner (int), czxid}] of path's children (None if path is missing)."""
        zk = self.client(timeout=timeout)
        try:
            kids = zk.get_children(path)
            if kids is None:
                return None
            out = []
            for k in sorted(kids):
                st = zk.exists(path.rstrip("/") + "/" + k)
                if st is None:
                    continue            # went away meanwhile
                out.append({"name": k, "owner": st["ephemeralOwner"], "czxid": st["czxid"]})
            return out
        finally:
            zk.close()

    def ensure_path(self, path, timeout=5.0):
        zk = self.client(timeout=timeout)
        try:
            zk.ensure_path(path)
        finally:
            zk.close()

    def cli(self, *args, timeout=60.0):
        """Runs org.apache.zookeeper.ZooKeeperMain (zkCli) with one command;
        returns (rc, stdout+stderr, seconds)."""
        li = self.leader_index()
        s = self.servers[li if li is not None else 0]
        cmd = ["java", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
               "-cp", _classpath(), "org.apache.zookeeper.ZooKeeperMain",
               "-server", "127.0.0.1:%d" % s.client_port] + list(args)
        code, out, err, dt = h.run(cmd, timeout=timeout)
        return code, out + err, dt

    def deleteall(self, path, timeout=60.0):
        """zkCli `deleteall PATH` (one multi per batch of 1000 nodes, as an
        operator would do it). Returns seconds taken; raises on failure."""
        code, out, dt = self.cli("deleteall", path, timeout=timeout)
        if code != 0 or "Exception" in out:
            raise AssertionError("deleteall %s failed (rc %s): %s" % (path, code, out[-2000:]))
        return dt


# --------------------------------------------------------------------------
# MiniZK: just enough of the ZooKeeper wire protocol (jute) for inspection
# and operator actions: connect, getChildren, exists, getData, create (any
# mode: ephemeral, sequential), setData, delete, ping, addAuth, getACL,
# setACL, close. Synchronous, bounded; no watches. It has no heartbeat of its
# own: a caller that holds ephemeral nodes across a wait calls ping() (or
# keepalive()) more often than a third of the negotiated session timeout.

class ZKError(Exception):
    pass


OP_CREATE, OP_DELETE, OP_EXISTS, OP_GETDATA, OP_SETDATA, OP_GETCHILDREN, OP_PING, OP_CLOSE = \
    1, 2, 3, 4, 5, 8, 11, -11
PING_XID = -2
MODE_EPHEMERAL, MODE_SEQUENTIAL = 1, 2
OP_GETACL, OP_SETACL, OP_AUTH = 6, 7, 100
ZNONODE, ZNODEEXISTS, ZNOAUTH = -101, -110, -102
AUTH_XID = -4
PERM_READ, PERM_WRITE, PERM_CREATE, PERM_DELETE, PERM_ADMIN, PERM_ALL = 1, 2, 4, 8, 16, 31
OPEN_ACL = [(PERM_ALL, "world", "anyone")]


def digest_id(user, password):
    """The id ZooKeeper's digest scheme gives user:password ("user:base64(sha1)")."""
    import base64
    import hashlib
    h = hashlib.sha1(("%s:%s" % (user, password)).encode()).digest()
    return "%s:%s" % (user, base64.b64encode(h).decode())
_STAT = struct.Struct(">qqqqiiiqiiq")
_STAT_KEYS = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
              "ephemeralOwner", "dataLength", "numChildren", "pzxid")


class MiniZK:
    def __init__(self, host, port, timeout=5.0, session_timeout=4000):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.xid = 0
        body = struct.pack(">iqiqi", 0, 0, session_timeout, 0, 16) + b"\0" * 16 + b"\0"
        self._send(body)
        resp = self._recv()
        if len(resp) < 20:
            self.sock.close()
            raise ZKError("short connect response")
        _, self.negotiated, self.session_id = struct.unpack(">iiq", resp[:16])
        if self.session_id == 0:
            self.sock.close()
            raise ZKError("server refused the session (not serving?)")

    def _send(self, body):
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def _recvn(self, n):
        buf = b""
        deadline = time.monotonic() + self.timeout
        for _ in range(100000):
            if len(buf) >= n:
                return buf
            if time.monotonic() > deadline:
                raise ZKError("timeout reading reply")
            b = self.sock.recv(n - len(buf))
            if not b:
                raise ZKError("connection closed")
            buf += b
        raise ZKError("reply too fragmented")

    def _recv(self):
        (n,) = struct.unpack(">i", self._recvn(4))
        if n < 0 or n > 64 * 1024 * 1024:
            raise ZKError("bad frame length %d" % n)
        return self._recvn(n)

    @staticmethod
    def _path(p):
        b = p.encode()
        return struct.pack(">i", len(b)) + b

    def _call(self, op, body):
        self.xid += 1
        xid = self.xid
        self._send(struct.pack(">ii", xid, op) + body)
        for _ in range(1000):
            resp = self._recv()
            rxid, zxid, err = struct.unpack(">iqi", resp[:16])
            if rxid == xid:
                return err, resp[16:]
            # watch events (-1) / pings (-2) are skipped
        raise ZKError("no reply to xid %d" % xid)

    @staticmethod
    def _acl(acl):
        out = struct.pack(">i", len(acl))
        for perms, scheme, ident in acl:
            out += struct.pack(">i", perms) + MiniZK._path(scheme) + MiniZK._path(ident)
        return out

    def add_auth(self, scheme, credentials):
        """addAuth; returns the server's error code (0: accepted)."""
        cred = credentials.encode() if isinstance(credentials, str) else credentials
        body = struct.pack(">ii", AUTH_XID, OP_AUTH) + struct.pack(">i", 0) + self._path(scheme) + \
            struct.pack(">i", len(cred)) + cred
        self._send(body)
        for _ in range(1000):
            resp = self._recv()
            rxid, zxid, err = struct.unpack(">iqi", resp[:16])
            if rxid == AUTH_XID:
                return err
        raise ZKError("no reply to addAuth")

    def get_acl(self, path):
        """[(perms, scheme, id), ...], or None if there is no such node."""
        err, rest = self._call(OP_GETACL, self._path(path))
        if err == ZNONODE:
            return None
        if err != 0:
            raise ZKError("getACL %s: error %d" % (path, err))
        (count,) = struct.unpack(">i", rest[:4])
        off = 4
        out = []
        for _ in range(max(count, 0)):
            (perms,) = struct.unpack(">i", rest[off:off + 4])
            off += 4
            strs = []
            for _ in range(2):
                (ln,) = struct.unpack(">i", rest[off:off + 4])
                off += 4
                strs.append(rest[off:off + ln].decode("utf-8", "replace"))
                off += ln
            out.append((perms, strs[0], strs[1]))
        return out

    def set_acl(self, path, acl, version=-1):
        """setACL; returns the server's error code (0, ZNOAUTH, ZNONODE...)."""
        err, _ = self._call(OP_SETACL, self._path(path) + self._acl(acl) + struct.pack(">i", version))
        return err

    def exists(self, path):
        err, rest = self._call(OP_EXISTS, self._path(path) + b"\0")
        if err == ZNONODE:
            return None
        if err != 0:
            raise ZKError("exists %s: error %d" % (path, err))
        return dict(zip(_STAT_KEYS, _STAT.unpack(rest[:_STAT.size])))

    def get_data(self, path):
        """(data bytes, stat dict), or None if there is no such node."""
        err, rest = self._call(OP_GETDATA, self._path(path) + b"\0")
        if err == ZNONODE:
            return None
        if err != 0:
            raise ZKError("getData %s: error %d" % (path, err))
        (ln,) = struct.unpack(">i", rest[:4])
        data = rest[4:4 + max(ln, 0)]
        off = 4 + max(ln, 0)
        return data, dict(zip(_STAT_KEYS, _STAT.unpack(rest[off:off + _STAT.size])))

    def set_data(self, path, data, version=-1):
        """setData; returns the new stat dict (raises on any error)."""
        body = self._path(path) + struct.pack(">i", len(data)) + data + struct.pack(">i", version)
        err, rest = self._call(OP_SETDATA, body)
        if err != 0:
            raise ZKError("setData %s: error %d" % (path, err))
        return dict(zip(_STAT_KEYS, _STAT.unpack(rest[:_STAT.size])))

    def delete(self, path, version=-1):
        """delete; True if deleted, False if there was no such node."""
        err, _ = self._call(OP_DELETE, self._path(path) + struct.pack(">i", version))
        if err == ZNONODE:
            return False
        if err != 0:
            raise ZKError("delete %s: error %d" % (path, err))
        return True

    def create_node(self, path, data=b"", ephemeral=False, sequential=False, acl=None):
        """create in any mode; returns the path the server created (with the
        sequence suffix for a sequential node). Raises on any error."""
        mode = (MODE_EPHEMERAL if ephemeral else 0) | (MODE_SEQUENTIAL if sequential else 0)
        body = self._path(path) + struct.pack(">i", len(data)) + data + \
            self._acl(acl or OPEN_ACL) + struct.pack(">i", mode)
        err, rest = self._call(OP_CREATE, body)
        if err != 0:
            raise ZKError("create %s: error %d" % (path, err))
        (ln,) = struct.unpack(">i", rest[:4])
        return rest[4:4 + ln].decode("utf-8", "replace")

    def ping(self):
        """One ping (keeps the session, and its ephemeral nodes, alive)."""
        self._send(struct.pack(">ii", PING_XID, OP_PING))
        for _ in range(1000):
            resp = self._recv()
            (rxid,) = struct.unpack(">i", resp[:4])
            if rxid == PING_XID:
                return
        raise ZKError("no reply to ping")

    def keepalive(self, seconds, every=0.3):
        """Sleeps `seconds`, pinging every `every` seconds."""
        end = time.monotonic() + seconds
        for _ in range(int(seconds / every) + 2):
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(every, left))
            self.ping()

    def get_children(self, path):
        err, rest = self._call(OP_GETCHILDREN, self._path(path) + b"\0")
        if err == ZNONODE:
            return None
        if err != 0:
            raise ZKError("getChildren %s: error %d" % (path, err))
        (count,) = struct.unpack(">i", rest[:4])
        off = 4
        out = []
        for _ in range(max(count, 0)):
            (ln,) = struct.unpack(">i", rest[off:off + 4])
            off += 4
            out.append(rest[off:off + ln].decode("utf-8", "replace"))
            off += ln
        return out

    def create(self, path, data=b"", ephemeral=False, acl=None):
        """Creates a node (open ACL unless given); True if created, False if it existed."""
        acl = self._acl(acl or OPEN_ACL)
        body = self._path(path) + struct.pack(">i", len(data)) + data + acl + \
            struct.pack(">i", 1 if ephemeral else 0)
        err, _ = self._call(OP_CREATE, body)
        if err == ZNODEEXISTS:
            return False
        if err != 0:
            raise ZKError("create %s: error %d" % (path, err))
        return True

    def ensure_path(self, path):
        """Creates path and its missing parents (persistent nodes)."""
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            self.create("/" + "/".join(parts[:i]))

    def close(self):
        try:
            self.xid += 1
            self._send(struct.pack(">ii", self.xid, OP_CLOSE))
            self._recv()
        except (OSError, ZKError, struct.error):
            pass
        finally:
            self.sock.close()
