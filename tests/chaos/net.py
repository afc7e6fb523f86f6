"""net: network placement for the chaos suite (reference §3.3, §3.4).

  * The whole run happens inside a private network namespace (and a private
    mount namespace, so the named namespaces under /run/netns live on a
    private tmpfs and vanish with the run): `reexec_private()` re-executes the
    runner under `unshare --net --mount` and brings `lo` up there. ZooKeeper
    may then bind 0.0.0.0 without exposing anything on the host.
  * Each candidate gets a child namespace `CandidateNet`, joined to the run's
    namespace by a veth pair with a private /30 (10.250.N.1 host side,
    10.250.N.2 candidate side). Candidates reach the servers at 10.250.N.1.
  * A partition is an nftables drop of the given TCP ports in both directions
    inside the candidate's namespace (a silent black hole); heal = flush.
  * `QuorumFirewall` (run namespace): partitions ZooKeeper servers from each
    other, never clients from servers. Each server runs under its own uid;
    the first packet of every TCP connection on `lo` marks the connection's
    conntrack entry with the opener's server number (meta skuid), and the
    original destination port tells whose listener (peer or election port)
    accepted it. `isolate(F)` then drops, silently and both ways, every
    packet of every connection between server F and another server, the
    established ones included (they stay open: nothing is reset), and new
    ones (their SYNs). Clients and 4-letter words are untouched.
    `stall(L, F)` drops one direction only, the data the leader L sends
    the follower F on F's quorum connection (conntrack's reply direction of
    it): TCP sends it again once healed, a stall; `isolate_but(F, L)` cuts
    F off but lets that direction through.

Only addresses and links this module creates are touched; everything is
deleted in teardown (and disappears anyway with the private namespaces).
"""
import os
import re
import signal
import subprocess
import sys
import time

ENV_FLAG = "ZKECHAOS_PRIVATE_NETNS"


class NetError(Exception):
    pass


def sh(args, input=None, timeout=10.0, check=True):
    """Runs a short command (bounded); returns stdout text."""
    p = subprocess.run(args, input=input.encode() if input else None, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    if check and p.returncode != 0:
        raise NetError("%s failed (rc %d): %s" % (" ".join(args), p.returncode,
                                                   p.stderr.decode(errors="replace").strip()))
    return p.stdout.decode(errors="replace")


def inside_private():
    return os.environ.get(ENV_FLAG) == "inner"


def reexec_private(argv, grace=60.0):
    """Called first by the runner. In the host namespace: re-executes argv
    under `unshare --net --mount` and exits with its code (SIGINT/SIGTERM are
    forwarded once as SIGTERM; if the inner run has not ended `grace` seconds
    later it is killed). Inside: sets the namespace up and returns."""
    if inside_private():
        _setup_inside()
        return
    if os.geteuid() != 0:
        print("chaos: needs root (network namespaces, nftables)", file=sys.stderr)
        sys.exit(77)
    env = dict(os.environ)
    env[ENV_FLAG] = "inner"
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    cmd = ["unshare", "--net", "--mount", "--propagation", "private", "--",
           sys.executable] + list(argv)
    p = subprocess.Popen(cmd, env=env)
    got = []

    def fwd(signum, frame):
        if not got:
            got.append(time.monotonic())
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    signal.signal(signal.SIGINT, fwd)
    signal.signal(signal.SIGTERM, fwd)
    rc = None
    for _ in range(10 ** 7):          # the run itself is bounded by the runner
        try:
            rc = p.wait(timeout=1.0)
            break
        except subprocess.TimeoutExpired:
            if got and time.monotonic() - got[0] > grace:
                p.kill()
    if rc is None:
        p.kill()
        rc = p.wait(10)
    sys.exit(rc if rc >= 0 else 128 - rc)


def _setup_inside():
    sh(["ip", "link", "set", "lo", "up"])
    os.makedirs("/run/netns", exist_ok=True)
    # a private tmpfs: named namespaces of this run are invisible on the host
    sh(["mount", "-t", "tmpfs", "-o", "size=1m,mode=755", "zkechaos", "/run/netns"])


class QuorumFirewall:
    """nftables table `inet zkquorum` in the run namespace (see the module
    docstring). uids: {server number: uid}; created before the servers start
    (a connection opened earlier is not marked, so it could not be cut)."""

    TABLE = "zkquorum"

    def __init__(self, uids):
        self.uids = dict(uids)
        self.created = False
        self.isolated = None

    def create(self):
        marks = "".join("    ct state new meta skuid %d ct mark set %d\n" % (uid, n)
                        for n, uid in sorted(self.uids.items()))
        sh(["nft", "-f", "-"], input=(
            "table inet %s {\n"
            "  chain qmark { type filter hook output priority -150; policy accept;\n"
            "    oifname != \"lo\" accept\n%s"
            "  }\n"
            "  chain qdrop { type filter hook output priority 0; policy accept; }\n"
            "  counter qfwd { }\n"
            "}\n" % (self.TABLE, marks)))
        self.created = True
        return self

    def isolate(self, n, ports, allow=None):
        """Black-holes server n from the others. ports: {server number:
        (peer port, election port)} of all three servers. allow: a match
        that passes first (isolate_but)."""
        mine = ", ".join(str(p) for p in sorted(ports[n]))
        theirs = ", ".join(str(p) for m in sorted(ports) if m != n for p in ports[m])
        others = ", ".join(str(m) for m in sorted(self.uids) if m != n)
        sh(["nft", "-f", "-"], input=(
            "flush chain inet {t} qdrop\n" +
            ("add rule inet {t} qdrop %s accept\n" % allow if allow else "") +
            "add rule inet {t} qdrop oifname \"lo\" ct mark {n} meta l4proto tcp "
            "ct original proto-dst {{ {theirs} }} counter drop\n"
            "add rule inet {t} qdrop oifname \"lo\" ct mark {{ {others} }} meta l4proto tcp "
            "ct original proto-dst {{ {mine} }} counter drop\n").format(
                t=self.TABLE, n=n, theirs=theirs, others=others, mine=mine))
        self.isolated = n

    def _from_to(self, src, dst, ports):
        """Matches what server src sends to server dst on the quorum
        connection dst opened to src's peer port (dst follows src): the
        reply direction of that connection."""
        return ("oifname \"lo\" ct mark %d meta l4proto tcp ct original proto-dst %d "
                "ct direction reply" % (dst, ports[src][0]))

    def stall(self, src, dst, ports):
        """Black-holes one direction of one quorum link: the segments with a
        payload that leader src sends follower dst (pings, proposals,
        commits, sync answers) are dropped; its bare acknowledgements pass,
        and so does the other direction, whole (the follower's requests are
        read and acknowledged: it sends nothing twice). Dropped segments are
        sent again by TCP's retransmission (its backoff: about 0.2, 0.6,
        1.4 s after the first loss), so once healed the follower reads
        everything, in order, late: a stall. What dst then sends src with a
        payload (a forwarded request, a ping reply) is counted
        (forwarded())."""
        sh(["nft", "-f", "-"], input=(
            "reset counter inet {t} qfwd\n"
            "flush chain inet {t} qdrop\n"
            "add rule inet {t} qdrop oifname \"lo\" ct mark {dst} meta l4proto tcp "
            "ct original proto-dst {port} ct direction original meta length > 64 "
            "counter name \"qfwd\"\n"
            "add rule inet {t} qdrop {match} meta length > 64 counter drop\n").format(
                t=self.TABLE, dst=dst, port=ports[src][0], match=self._from_to(src, dst, ports)))
        self.isolated = None

    def forwarded(self):
        """Packets with a payload the stalled follower sent its leader
        since stall() (0 if none)."""
        out = sh(["nft", "list", "counter", "inet", self.TABLE, "qfwd"], check=False)
        m = re.search(r"packets (\d+)", out)
        return int(m.group(1)) if m else 0

    def isolate_but(self, n, src, ports):
        """isolate(n), except what server src sends n on n's quorum
        connection to src, which passes (in one transaction: a stall of that
        direction in place is healed as the rest is cut)."""
        self.isolate(n, ports, allow=self._from_to(src, n, ports))

    def heal(self):
        if self.created:
            sh(["nft", "flush", "chain", "inet", self.TABLE, "qdrop"])
        self.isolated = None

    def counters(self):
        """Packets dropped by the isolation rules so far (0 if none)."""
        out = sh(["nft", "list", "chain", "inet", self.TABLE, "qdrop"], check=False)
        return sum(int(x) for x in re.findall(r"counter packets (\d+)", out))

    def delete(self):
        if self.created:
            sh(["nft", "delete", "table", "inet", self.TABLE], check=False)
            self.created = False


class CandidateNet:
    """A child namespace + veth pair for candidate number n (1..250)."""

    def __init__(self, n, tag):
        self.n = n
        self.name = "zkechaos-%s-%d" % (tag, n)
        self.host_if = "zkh%d" % n
        self.ns_if = "zkc%d" % n
        self.host_ip = "10.250.%d.1" % n
        self.ns_ip = "10.250.%d.2" % n
        self.created = False
        self.partitioned = False

    def create(self):
        sh(["ip", "netns", "add", self.name])
        self.created = True
        sh(["ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if])
        sh(["ip", "link", "set", self.ns_if, "netns", self.name])
        sh(["ip", "addr", "add", self.host_ip + "/30", "dev", self.host_if])
        sh(["ip", "link", "set", self.host_if, "up"])
        sh(["ip", "-n", self.name, "addr", "add", self.ns_ip + "/30", "dev", self.ns_if])
        sh(["ip", "-n", self.name, "link", "set", self.ns_if, "up"])
        sh(["ip", "-n", self.name, "link", "set", "lo", "up"])
        sh(["ip", "netns", "exec", self.name, "nft", "-f", "-"], input=(
            "table inet chaos {\n"
            "  chain out { type filter hook output priority 0; policy accept; }\n"
            "  chain in  { type filter hook input  priority 0; policy accept; }\n"
            "}\n"))
        return self

    def exec_prefix(self):
        """Prefix for a command to run in this namespace: nsenter execs, so
        the pid of the started process is the command's pid. (Not `ip netns
        exec`, which also gives the command a mount namespace with the
        netns's own /sys, where no cgroup2 hierarchy is mounted: the agents
        could not hold their terms' processes in cgroups there.)"""
        return ["nsenter", "--net=/run/netns/" + self.name, "--"]

    def partition(self, ports):
        """Drops TCP to/from the given server ports, both directions."""
        ps = ", ".join(str(p) for p in sorted(set(ports)))
        sh(self.exec_prefix() + ["nft", "-f", "-"], input=(
            "flush chain inet chaos out\n"
            "flush chain inet chaos in\n"
            "add rule inet chaos out ip daddr %s tcp dport { %s } drop\n"
            "add rule inet chaos in ip saddr %s tcp sport { %s } drop\n"
            % (self.host_ip, ps, self.host_ip, ps)))
        self.partitioned = True

    def heal(self):
        if not self.created:
            return
        sh(self.exec_prefix() + ["nft", "-f", "-"], input=(
            "flush chain inet chaos out\nflush chain inet chaos in\n"))
        self.partitioned = False

    def rules(self):
        return sh(self.exec_prefix() + ["nft", "list", "table", "inet", "chaos"], check=False)

    def delete(self):
        if not self.created:
            return
        sh(["ip", "link", "del", self.host_if], check=False)
        sh(["ip", "netns", "del", self.name], check=False)
        self.created = False
