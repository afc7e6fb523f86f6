"""The embedding example (examples/embed) under valgrind against a real
ZooKeeper: two elections on one shared conn, a resign from a host timer, a
second (plain) host taking over both, a graceful stop. valgrind must report
no invalid access and no definite or indirect leak (--error-exitcode=99).
No suppression file: the run frees every block (the ZooKeeper C client's
included), so none is needed; add one here, with a reason per entry, if a
client update ever leaks on its own. Registered only in the normal build
(ASan and valgrind do not mix; the ASan build runs the same code in
integration.embed and integration.api)."""
import os
import signal
import subprocess

import zkharness as h

EMBED = os.environ.get("ZKELECT_EMBED_BIN") or os.path.join(h.REPO, "build", "examples", "embed_libev")
VALGRIND = os.environ.get("VALGRIND_BIN") or "valgrind"
PATHS = "/vg/e1,/vg/e2"


def start(argv, name):
    d = h.mkdtemp("vg-" + name)
    out = os.path.join(d, "out.log")
    f = open(out, "wb")
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                         preexec_fn=h._pdeathsig)
    return p, out, f


def lines(path):
    with open(path, errors="replace") as f:
        return [l.rstrip("\n") for l in f]


def count(path, prefix):
    return len([l for l in lines(path) if l.startswith(prefix)])


def test_embed_under_valgrind():
    with h.ZooKeeper() as zk:
        vg, vout, vf = start([VALGRIND, "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                              "--error-exitcode=99", "--track-fds=no", EMBED, zk.hostport, PATHS, "v1", "8"],
                             "v1")
        plain = None
        try:
            h.wait_until(lambda: count(vout, "event leader ") == 2, timeout=40,
                         desc="v1 (under valgrind) leads both elections")
            plain, pout, pf = start([EMBED, zk.hostport, PATHS, "v2"], "v2")
            h.wait_until(lambda: count(pout, "event follower ") == 2, timeout=20, desc="v2 follows in both")
            # v1's timer resigns both; v2 leads both; v1 rejoins behind it
            h.wait_until(lambda: count(pout, "event leader ") == 2, timeout=30, desc="v2 leads both")
            h.wait_until(lambda: count(vout, "event follower ") == 2, timeout=30, desc="v1 follows in both")
            assert count(vout, "event stepdown ") == 2
            assert all("reason=resign" in l for l in lines(vout) if l.startswith("event stepdown "))
            # one session for both of v1's elections
            sessions = {l.split("session=")[1] for l in lines(vout) if l.startswith("host heartbeat")}
            assert len(sessions) == 1, sessions
            for p in (vg, plain):
                p.send_signal(signal.SIGINT)
            rc = vg.wait(60)
            text = "\n".join(lines(vout))
            assert rc == 0, "valgrind exit %d:\n%s" % (rc, text[-6000:])
            assert "ERROR SUMMARY: 0 errors" in text, text[-6000:]
            assert "definitely lost" not in text or "definitely lost: 0 bytes" in text, text[-6000:]
            assert count(vout, "event stopped ") == 2, text
            assert plain.wait(20) == 0
        finally:
            for p in (vg, plain):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait(5)
            vf.close()


if __name__ == "__main__":
    h.run_tests(globals(), timeout=170)
