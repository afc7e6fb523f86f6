#!/usr/bin/python3
"""Agent-side limits: zkelect followers behind 20,000 other children.

A filler session creates ZKE_SCALE_N (default 20000) ephemeral sequential
nodes named like ours (pipelined creates, a few seconds), then three
candidates with --status join behind them. Checked from each agent's own
counters in /metrics (zkelect_zk_requests_total{op},
zkelect_zk_listed_children_total) and /proc:
  * quiet: no listing at all while nothing changes (the census reads only the
    path's stat: cversion);
  * unrelated changes (filler nodes deleted in the middle, new ones at the
    back): no election listing (a follower watches only its predecessor),
    and the census re-lists a big election at most every interval * n / 1000
    (here: about once in 20 s, not every second);
  * RSS stays bounded: a listing of 20k names is held once, not accumulated;
  * the predecessor going away: exactly one listing by its successor.
"""
import os
import struct
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import zkharness as h  # noqa: E402
from ensemble import MiniZK, OPEN_ACL  # noqa: E402

PATH = "/app/scale"
N = max(2000, min(int(os.environ.get("ZKE_SCALE_N") or 20000), 200000))
MiB = 1024 * 1024


def bulk_create(cli, path, n, batch=2000):
    """n ephemeral sequential children path/f_<16 zeros>-<seq> on cli's
    session, pipelined `batch` at a time; returns their names."""
    acl = MiniZK._acl(OPEN_ACL)
    names = []
    for _ in range((n + batch - 1) // batch):
        k = min(batch, n - len(names))
        if k <= 0:
            break
        buf = []
        first = cli.xid + 1
        for _ in range(k):
            cli.xid += 1
            body = MiniZK._path(path + "/f_0000000000000000-") + struct.pack(">i", 0) + acl + \
                struct.pack(">i", 3)            # ephemeral | sequential
            pkt = struct.pack(">ii", cli.xid, 1) + body
            buf.append(struct.pack(">i", len(pkt)) + pkt)
        cli.sock.sendall(b"".join(buf))
        for i in range(k):
            resp = cli._recv()
            rxid, _, err = struct.unpack(">iqi", resp[:16])
            assert rxid == first + i and err == 0, (rxid, first + i, err)
            (ln,) = struct.unpack(">i", resp[16:20])
            names.append(resp[20:20 + ln].decode().rsplit("/", 1)[1])
    return names


def delete(cli, path):
    err, _ = cli._call(2, MiniZK._path(path) + struct.pack(">i", -1))
    assert err == 0, (path, err)


def metrics(addr):
    with urllib.request.urlopen("http://%s/metrics" % addr, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("zkelect_zk_"):
            k, v = line.rsplit(" ", 1)
            out[k.replace("zkelect_zk_requests_total", "req").replace(
                "zkelect_zk_listed_children_total", "names")] = int(v)
    return out


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def lists(m):
    return m['req{op="list"}']


def test_followers_behind_many_children():
    with h.ZooKeeper() as zk:
        cli = MiniZK("127.0.0.1", zk.port, timeout=30, session_timeout=30000)
        cli.ensure_path(PATH)
        t0 = time.monotonic()
        fill = bulk_create(cli, PATH, N)
        print("  info: %d children created in %.1fs" % (N, time.monotonic() - t0), flush=True)
        agents = [h.Agent(zk, x, path=PATH, extra=["--status", "127.0.0.1:0"]) for x in ("a", "b", "c")]
        addrs = {a.id: a.wait_for("status_listen")["addr"] for a in agents}
        seqs = {a.id: a.wait_for("follower", timeout=30)["seq"] for a in agents}
        agents.sort(key=lambda a: seqs[a.id])          # they joined in any order
        for i, a in enumerate(agents):
            assert a.last("follower")["position"] == N + i, a.last("follower")
        # the census lists the election for a reader of the view (/metrics
        # here), once at the first look (big: then not before interval * 20);
        # answered: its names received, on top of the join's listing
        def census_listed(m):
            return lists(m) >= 2 and m["names"] >= 2 * N
        h.wait_until(lambda: all(census_listed(metrics(addrs[a.id])) for a in agents), 10,
                     "the census's listing for the first reader, answered")
        m0 = {a.id: metrics(addrs[a.id]) for a in agents}
        r0 = {a.id: rss(a.pid) for a in agents}
        print("  info: after the join: %s; RSS %s" % (m0, r0), flush=True)

        # quiet: nothing changes -> no listing at all
        time.sleep(3)
        m1 = {a.id: metrics(addrs[a.id]) for a in agents}
        for a in agents:
            assert lists(m1[a.id]) == lists(m0[a.id]), (a.id, m0[a.id], m1[a.id])
            assert m1[a.id]['req{op="exists"}'] > m0[a.id]['req{op="exists"}'], "no census?"

        # unrelated changes for 6 s: deletes in the middle, creates at the back
        t_end = time.monotonic() + 6
        k = 0
        for _ in range(200):
            if time.monotonic() > t_end:
                break
            delete(cli, PATH + "/" + fill[N // 2 + k])
            k += 1
            bulk_create(cli, PATH, 1)
            time.sleep(0.1)
        m2 = {a.id: metrics(addrs[a.id]) for a in agents}
        r2 = {a.id: rss(a.pid) for a in agents}
        print("  info: after %d unrelated changes in 6 s: %s; RSS %s" % (k, m2, r2), flush=True)
        for a in agents:
            # election: nothing; census: at most one listing in that window
            # (every 20 intervals at 20k children)
            assert lists(m2[a.id]) - lists(m1[a.id]) <= 1, (a.id, m1[a.id], m2[a.id])
            if h.WRAP:
                continue        # under valgrind the RSS is valgrind's (its leak check stands in)
            assert r2[a.id] - r0[a.id] < 2 * MiB, (a.id, r0[a.id], r2[a.id])
            assert r2[a.id] < 64 * MiB or "asan" in open("/proc/%d/maps" % a.pid).read(), r2
        assert not h.leaders_now(agents)

        # the second's predecessor (the first) leaves: it re-lists once; the third does not
        m3 = {x.id: metrics(addrs[x.id]) for x in agents[1:]}
        agents[0].term()
        assert agents[0].wait_exit(10) == 0
        mark = 0
        h.wait_until(lambda: [e for e in agents[1].events()[mark:] if e.get("new") == fill[-1]],
                     10, "the second behind the fillers")
        time.sleep(0.5)
        m4 = {x.id: metrics(addrs[x.id]) for x in agents[1:]}
        b, c = agents[1].id, agents[2].id
        assert 1 <= lists(m4[b]) - lists(m3[b]) <= 2, (m3[b], m4[b])   # + at most 1 census
        assert lists(m4[c]) - lists(m3[c]) <= 1, (m3[c], m4[c])
        cli.close()


if __name__ == "__main__":
    h.run_tests(globals())
