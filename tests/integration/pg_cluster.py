"""A PostgreSQL 15 cluster run by examples/postgres (one zkelect per node),
HAProxy in front, and the epoch-carrying writer: shared by
test_example_postgres.py and bench/postgres/run."""
import json
import os
import pwd
import signal
import subprocess
import time

import zkharness as h
import examples_util as u

EXAMPLE = os.path.join(h.REPO, "examples", "postgres")
PG_BIN = "/usr/lib/postgresql/15/bin"
PSQL = os.path.join(PG_BIN, "psql")
HAPROXY = "/usr/sbin/haproxy"
# the agents' timing: lease and step-down sized for a fast shutdown in on_stepdown
SESSION_MS = 6000
AGENT_FLAGS = ["--stepdown-budget", "2000", "--health-interval", "1000", "--health-fails", "2",
               "--health-passes", "1"]


def psql(port, sql, timeout=10.0, check=True):
    p = subprocess.run([PSQL, "-XAtq", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port),
                        "-U", "postgres", "-d", "postgres", "-c", sql],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, PGCONNECT_TIMEOUT="2"))
    if check and p.returncode != 0:
        raise AssertionError("psql -p %s %r: %s" % (port, sql, p.stderr.strip()))
    return p.stdout.strip() if p.returncode == 0 else None


def try_psql(port, sql, timeout=5.0):
    try:
        return psql(port, sql, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None


class Node:
    def __init__(self, cluster, i):
        self.cluster, self.i, self.name = cluster, i, "n%d" % i
        self.port, self.status_port = h.free_port(), h.free_port()
        self.pgdata = os.path.join(cluster.base, self.name)
        self.agent = None

    def env(self):
        return {"PGDATA": self.pgdata, "PGPORT": str(self.port), "PG_NAME": self.name,
                "PGNODE": os.path.join(EXAMPLE, "pgnode.sh"), "PG_SOCKDIR": self.cluster.base}

    def start_agent(self, zk):
        self.agent = u.EnvAgent(zk, self.name, path=self.cluster.path,
                                script=os.path.join(EXAMPLE, "postgres.lua"),
                                session_timeout=SESSION_MS, data="127.0.0.1:%d" % self.port,
                                extra=["--status", "127.0.0.1:%d" % self.status_port] + AGENT_FLAGS,
                                env=self.env())
        return self.agent

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.pgdata, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if h.pid_alive(pid) else None

    def in_recovery(self):
        return try_psql(self.port, "SELECT pg_is_in_recovery()")

    def stop_postgres(self):
        pid = self.postmaster_pid()
        if pid:
            os.kill(pid, signal.SIGQUIT)
            h.wait_until(lambda: not h.pid_alive(pid), 10, "%s's postgres stopped" % self.name)


class Cluster:
    """n nodes: n1 the first primary; `mode` sync or async."""

    def __init__(self, zk, n=3, mode="sync", path="/db/pg"):
        self.zk, self.mode, self.path = zk, mode, path
        self.base = h.mkdtemp("pg")
        pw = pwd.getpwnam("postgres")
        os.chown(self.base, pw.pw_uid, pw.pw_gid)
        self.nodes = [Node(self, i + 1) for i in range(n)]
        self.haproxy = None
        self.writer = None
        self.acks = os.path.join(self.base, "acks.jsonl")

    def setup(self):
        u.sh([os.path.join(EXAMPLE, "setup.sh"), self.base, self.mode] +
             [str(nd.port) for nd in self.nodes], timeout=120)

    def start_agents(self):
        first = self.nodes[0].start_agent(self.zk)
        first.wait_for("leader", timeout=30)
        for nd in self.nodes[1:]:
            nd.start_agent(self.zk)
        for nd in self.nodes[1:]:
            u.wait_role(nd.agent, timeout=30)

    def start_haproxy(self):
        self.hport = h.free_port()
        cfg = os.path.join(self.base, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(haproxy_cfg(self.hport, [(nd.name, nd.port, nd.status_port) for nd in self.nodes]))
        u.sh([HAPROXY, "-c", "-f", cfg])
        log = open(os.path.join(self.base, "haproxy.log"), "ab")
        self.haproxy = subprocess.Popen([HAPROXY, "-f", cfg], stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, preexec_fn=h._pdeathsig)
        log.close()

    def start_writer(self):
        log = open(os.path.join(self.base, "writer.log"), "ab")
        self.writer = subprocess.Popen(["/usr/bin/python3", os.path.join(EXAMPLE, "writer.py"),
                                        "127.0.0.1", str(self.hport), self.acks],
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       preexec_fn=h._pdeathsig)
        log.close()

    def stop_writer(self):
        if self.writer and self.writer.poll() is None:
            self.writer.send_signal(signal.SIGTERM)
            try:
                self.writer.wait(15)
            except subprocess.TimeoutExpired:
                self.writer.kill()
                self.writer.wait(10)

    def records(self):
        out = []
        try:
            with open(self.acks) as f:
                for line in f:
                    if line.endswith("\n"):
                        out.append(json.loads(line))
        except OSError:
            pass
        return out

    def acked(self):
        return [r for r in self.records() if "epoch" in r]

    def leader(self, timeout=30.0, since=None, exclude=()):
        """The node whose agent leads (its last role event is leader)."""
        def find():
            for nd in self.nodes:
                if nd.name in exclude or nd.agent is None or not nd.agent.alive():
                    continue
                roles = [e for e in nd.agent.events()
                         if e.get("event") in ("leader", "follower", "stepdown")]
                if roles and roles[-1]["event"] == "leader":
                    return nd, roles[-1]
            return None
        return h.wait_until(find, timeout, "a leader among the nodes")

    def wait_writable(self, epoch, fault_t, timeout=60.0):
        """Seconds from fault_t to the first acknowledged row of `epoch`."""
        rec = h.wait_until(lambda: [r for r in self.acked() if r["epoch"] == epoch], timeout,
                           "a write acknowledged under epoch %d" % epoch)
        return rec[0]["t"] - fault_t

    def wait_standby_of(self, nd, primary, timeout=60.0):
        """nd streams from primary (as seen on the primary) and is in recovery."""
        def ok():
            st = try_psql(primary.port, "SELECT count(*) FROM pg_stat_replication WHERE "
                          "application_name = '%s' AND state = 'streaming'" % nd.name)
            return st == "1" and nd.in_recovery() == "t"
        return h.wait_until(ok, timeout, "%s streaming from %s" % (nd.name, primary.name),
                            interval=0.2)

    def check_rows(self, primary):
        """(acknowledged rows lost, rows under an old epoch after a newer one)"""
        rows = psql(primary.port, "SELECT id, epoch FROM items ORDER BY id", timeout=30)
        have = {}
        for line in rows.splitlines():
            i, e = line.split("|")
            have[int(i)] = int(e)
        lost = [r["n"] for r in self.acked() if r["n"] not in have]
        stale, top = 0, -1
        for i in sorted(have):
            if have[i] < top:
                stale += 1
            top = max(top, have[i])
        return lost, stale

    def close(self):
        self.stop_writer()
        if self.haproxy and self.haproxy.poll() is None:
            self.haproxy.kill()
            self.haproxy.wait(10)
        for nd in self.nodes:
            if nd.agent is not None:
                nd.agent.stop()
        for nd in self.nodes:
            try:
                nd.stop_postgres()
            except (AssertionError, ProcessLookupError):
                pass


def haproxy_cfg(port, servers):
    lines = ["global", "    maxconn 200", "defaults", "    mode tcp", "    timeout connect 1s",
             "    timeout client 60s", "    timeout server 60s", "    timeout check 1s",
             "listen primary", "    bind 127.0.0.1:%d" % port,
             "    option httpchk GET /primary", "    http-check expect status 200",
             "    default-server inter 200ms fall 1 rise 1 on-marked-down shutdown-sessions"]
    lines += ["    server %s 127.0.0.1:%d check port %d" % s for s in servers]
    return "\n".join(lines) + "\n"
