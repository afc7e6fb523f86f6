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

Only addresses and links this module creates are touched; everything is
deleted in teardown (and disappears anyway with the private namespaces).
"""
import os
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
        """Prefix for a command to run in this namespace (`ip netns exec`
        execs, so the pid of the started process is the command's pid)."""
        return ["ip", "netns", "exec", self.name]

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
