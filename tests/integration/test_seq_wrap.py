#!/usr/bin/python3
"""The 2^31 sequence wrap as ZooKeeper 3.8 really does it (issue 38, item 7).

2^31 creates are out of a test's reach, so the election folder is prepared:
the server is stopped, its dataDir rewritten by java/SetCversion.java (the
folder's create counter set to 2^31 - 2) and the server started again. Its
stat then reads cversion -4 (2 x counter - numChildren, in 32 bits). The
next creates get 2147483646, then 2147483647, then 2147483647 again: the
suffix never goes negative (only one prepared behind an uncommitted create
would), so two candidates share it. Whichever sorts first by name, the two
never both lead when the leader before them goes; the agents warn once; the
tie ends when one of the pair goes, and the other leads."""
import hashlib
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import zkharness as h  # noqa: E402
from ensemble import MiniZK  # noqa: E402  (a stdlib ZooKeeper client)

PATH = "/app/wrap"
INT32_MAX = 2**31 - 1
SRC = os.path.join(HERE, "java", "SetCversion.java")
CP = ":".join("/usr/share/java/%s.jar" % j for j in ("zookeeper", "zookeeper-jute", "slf4j-api",
                                                     "slf4j-nop"))


def set_cversion_classes():
    """SetCversion compiled once per source version, cached in the build
    directory (beside the zkelect binary); returns the class directory."""
    with open(SRC, "rb") as f:
        digest = hashlib.sha1(f.read()).hexdigest()[:12]
    out = os.path.join(os.path.dirname(h.ZKELECT_BIN), "tests", "java", "SetCversion-" + digest)
    if os.path.exists(os.path.join(out, "SetCversion.class")):
        return out
    tmp = "%s.tmp%d" % (out, os.getpid())
    os.makedirs(tmp, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-d", tmp, "-cp", CP, SRC], check=True, timeout=120)
    try:
        os.rename(tmp, out)
    except OSError:             # another run put it there first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def prepare_folder(zk, counter):
    """The folder PATH with its create counter at `counter`, by a rewritten
    snapshot; returns its stat as the restarted server reports it."""
    classes = set_cversion_classes()
    c = MiniZK("127.0.0.1", zk.port)
    c.ensure_path(PATH)
    c.close()
    zk.stop()
    subprocess.run(["java", "-Dzookeeper.digest.enabled=false", "-cp", classes + ":" + CP,
                    "SetCversion", zk.datadir, PATH, str(counter)], check=True, timeout=60,
                   stdout=subprocess.DEVNULL)
    zk._wait_port_free()
    zk.start()
    c = MiniZK("127.0.0.1", zk.port)
    st = c.exists(PATH)
    c.close()
    return st


def joined(a):
    return a.wait_for("joined", timeout=15)["node"]


def role(a, since=0):
    return a.wait_for(lambda e: e.get("event") in ("leader", "follower"), timeout=15, since=since)


def wrap_warnings(a):
    return [e for e in a.events() if e.get("level") == "warn" and
            "2^31 sequence wrap" in str(e.get("msg", ""))]


def test_a_shared_suffix_after_the_wrap_never_leads_twice():
    with h.ZooKeeper() as zk:
        st = prepare_folder(zk, INT32_MAX - 1)
        assert st["cversion"] == -4 and st["numChildren"] == 0, st
        a = h.Agent(zk, "a", path=PATH)
        assert h.node_seq(joined(a)) == INT32_MAX - 1
        a.wait_for("leader", timeout=15)
        # b joins until its guid is in the upper half (a coin toss per guid:
        # a small guid of b's left c's tries below little chance, 1 in 13
        # runs lost: CI run 60)
        for i in range(12):
            b = h.Agent(zk, "b" if i == 0 else "b%d" % i, path=PATH)
            nb = joined(b)
            role(b)
            if nb[2] >= "8":
                break
            b.term()
            assert b.wait_exit() == 0
        assert nb[2] >= "8", "no guid of b in the upper half in 12 tries"
        # c joins until its node sorts before b's by name (a coin toss or
        # better per guid): then both are next in line behind a, which made
        # both lead
        for i in range(12):
            c = h.Agent(zk, "c%d" % i, path=PATH)
            nc = joined(c)
            role(c)
            if nc < nb:
                break
            c.term()
            assert c.wait_exit() == 0
        assert nc < nb, "no guid of c sorted before b's in 12 tries"
        assert h.node_seq(nb) == h.node_seq(nc) == INT32_MAX, (nb, nc)      # given twice
        mb, mc = b.mark(), c.mark()
        a.term()
        assert a.wait_exit() == 0

        def settled():
            led = [x for x, m in ((b, mb), (c, mc)) if x.find("leader", since=m)]
            moved = [x for x, m in ((b, mb), (c, mc)) if x.find("predecessor_change", since=m)]
            return len(led) == 2 or len(led) + len(moved) == 2
        h.wait_until(settled, timeout=10, desc="b and c to act on a's departure")
        led = [x.id for x, m in ((b, mb), (c, mc)) if x.find("leader", since=m)]
        assert not led, "%s led after a left (suffixes %s, %s):\n%s\n%s" % (
            led, nb, nc, b.describe(8), c.describe(8))
        for x in (b, c):
            w = wrap_warnings(x)
            assert len(w) == 1, "%s: %d wrap warnings:\n%s" % (x.id, len(w), x.describe(12))
        # the tie ends with b: c is the one smallest suffix, and leads
        mc = c.mark()
        b.term()
        assert b.wait_exit() == 0
        c.wait_for("leader", timeout=10, since=mc)
        assert not b.find("leader"), b.describe(12)
        h.stop_cleanly([c])


if __name__ == "__main__":
    h.run_tests(globals())
