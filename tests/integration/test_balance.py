#!/usr/bin/python3
"""Balanced groups (zke_group_*, docs/embedding.md "Balanced groups") against
a real ZooKeeper, with bench_many's group mode (BENCH_MANY_GROUP) as the
gateway: E elections per process on one zke_conn each, a settle delay of
SETTLE_MS. Every wait is for the condition, bounded by SETTLE_BOUND s
(the figure docs/embedding.md states: a few settle delays and hand-overs).

* Three processes with E = 30 settle at 10/10/10 (the first led all 30).
  One of them leaves gracefully (stdin "leave"): the other two settle at
  15/15, exactly its 10 elections changed leader (each once) and no
  other one did, and it exits 0.
* Weights 2, 1, 1 with E = 40: 20/10/10.
* A max of 4 among three with E = 30: 4/13/13.
* A leave whose elections no other member holds (another prefix) ends:
  each receiver refuses (no_candidate) once, and the leave says its
  elections were not handed over, instead of asking again forever.
* Agents taken out of the group (zke_group_remove) while their hand-overs
  are under way, then the group freed: the process exits cleanly (the
  hand-overs' results come after the group is gone; ASan builds check
  that nothing touches it).
* In every case, every election's terms never overlap: each new leader
  line (with its epoch) comes after the previous leader's stepdown line,
  and the epochs of one election only grow.
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zkharness as h  # noqa: E402
from test_many import MANY_BIN, Many, pump, wait  # noqa: E402

T = 4000
SETTLE_MS = 300
SETTLE_BOUND = 15.0


class Member(Many):
    """A bench_many process in group mode, member `mid`."""

    def __init__(self, zk, prefix, e, mid, weight=None, max_=None, group=None):
        self.mid = mid
        env = dict(BENCH_MANY_GROUP=group or prefix + "-group", BENCH_MANY_ID=mid,
                   BENCH_MANY_SETTLE_MS=str(SETTLE_MS), BENCH_MANY_LOG="info")
        if weight is not None:
            env["BENCH_MANY_WEIGHT"] = str(weight)
        if max_ is not None:
            env["BENCH_MANY_MAX"] = str(max_)
        super().__init__(zk, prefix, e, T, env=env, tag="balance")

    def group(self):
        """The last group line as a dict (members, leads, target, moving, moved_out)."""
        for p in reversed(self.lines):
            if len(p) >= 3 and p[1] == "-" and p[2] == "group":
                return {k: int(v) for k, v in (x.split("=") for x in p[3:])}
        return None


def settled(ms, want):
    """Each member's group line says it leads its wanted count, which is its
    target, with nothing moving and every member seen."""
    pump(*ms)
    for m, n in zip(ms, want):
        g = m.group()
        if g is None or g["leads"] != n or g["target"] != n or g["moving"] != 0 or \
                g["members"] != len(ms):
            return False
    return True


def wait_settled(ms, want, since, what):
    try:
        wait(lambda: settled(ms, want), SETTLE_BOUND, "%s: %s" % (what, want), *ms)
    except h.Timeout as e:
        why = ["%s: %s; %s" % (m.mid, m.group(), [l for l in m.stderr().splitlines()
                                                   if "hand-over" in l][-3:]) for m in ms]
        raise h.Timeout("%s\n%s" % (e, "\n".join(why)))
    took = time.monotonic() - since
    print("  info: %s settled at %s in %.2f s (settle delay %d ms)" % (what, want, took, SETTLE_MS),
          flush=True)
    return took


def terms(ms):
    """Per election, its (us, member, kind, epoch) events in time order."""
    ev = {}
    for m in ms:
        pump(m)
        for p in m.lines:
            if len(p) >= 3 and p[1] != "-" and p[2] in ("leader", "stepdown", "stopped"):
                epoch = int(p[3]) if p[2] == "leader" and len(p) >= 4 else 0
                ev.setdefault(int(p[1]), []).append((int(p[0]), m.mid, p[2], epoch))
    for v in ev.values():
        v.sort()
    return ev


def check_no_overlap(ms):
    """No election has two terms at once, and its epochs grow."""
    moved = 0
    for i, evs in terms(ms).items():
        holder, last_epoch = None, 0
        for us, mid, kind, epoch in evs:
            if kind == "leader":
                assert holder is None, "election %d: %s led at %d while %s's term was open: %s" % (
                    i, mid, us, holder, evs)
                assert epoch > last_epoch, "election %d: epoch %d after %d" % (i, epoch, last_epoch)
                if last_epoch:
                    moved += 1
                holder, last_epoch = mid, epoch
            elif mid == holder:
                holder = None
    return moved


def leaders_at(ms):
    """Election -> the member whose term is open now (from the lines)."""
    out = {}
    for i, evs in terms(ms).items():
        for us, mid, kind, epoch in evs:
            if kind == "leader":
                out[i] = mid
            elif out.get(i) == mid:
                del out[i]
    return out


def leader_changes(ms, after_us):
    """Election -> the number of leader lines after after_us."""
    out = {}
    for i, evs in terms(ms).items():
        out[i] = sum(1 for us, mid, kind, _ in evs if kind == "leader" and us > after_us)
    return out


def start_three(zk, prefix, e, kw=({}, {}, {})):
    """p1 first (it leads all e), then p2 and p3."""
    ms = [Member(zk, prefix, e, "p1", **kw[0])]
    wait(ms[0].joined, 20, "p1 joins %d elections" % e, *ms)
    t0 = time.monotonic()
    ms.append(Member(zk, prefix, e, "p2", **kw[1]))
    ms.append(Member(zk, prefix, e, "p3", **kw[2]))
    return ms, t0


def close(ms):
    for m in ms:
        m.close()


def test_three_settle_evenly_and_a_leave_moves_only_its_elections():
    assert os.access(MANY_BIN, os.X_OK), "bench_many not built: %s" % MANY_BIN
    with h.ZooKeeper() as zk:
        ms = []
        try:
            ms, t0 = start_three(zk, "/bal/even", 30)
            wait_settled(ms, [10, 10, 10], t0, "three joined")
            # 20 when p1 saw p2 and p3 join within one settle delay; a
            # slower join of p3 moves some twice (p1 -> p2 -> p3)
            moves = check_no_overlap(ms)
            print("  info: %d elections moved to settle (20 needed)" % moves, flush=True)
            assert moves >= 20, moves
            before = leaders_at(ms)
            mine = sorted(i for i, mid in before.items() if mid == "p1")
            assert len(mine) == 10 and len(before) == 30, before
            t_leave = time.monotonic()
            leave_us = int(time.monotonic_ns() / 1000)
            ms[0].send("leave")
            wait_settled(ms[1:], [15, 15], t_leave, "p1 left")
            assert ms[0].p.wait(SETTLE_BOUND) == 0, ms[0].stderr()[-2000:]
            pump(*ms)
            assert any(p[1:3] == ["-", "left"] for p in ms[0].lines), ms[0].lines[-5:]
            changes = leader_changes(ms, leave_us)
            moved = sorted(i for i, n in changes.items() if n > 0)
            assert moved == mine, "moved %s, p1 led %s" % (moved, mine)
            assert all(changes[i] == 1 for i in mine), changes
            after = leaders_at(ms[1:])
            assert all(before[i] == after[i] for i in before if i not in mine), (before, after)
            check_no_overlap(ms)
        finally:
            close(ms)


def test_weights_and_a_max_set_the_shares():
    """Weights 2, 1, 1 with E = 40: 20/10/10; a max of 4 among three with
    E = 30: 4/13/13 (one server, a group each)."""
    cases = (("/bal/weight", 40, ({"weight": 2}, {}, {}), [20, 10, 10], "weights 2, 1, 1"),
             ("/bal/max", 30, ({"max_": 4}, {}, {}), [4, 13, 13], "a max of 4"))
    with h.ZooKeeper() as zk:
        for prefix, e, opts, want, desc in cases:
            ms = []
            try:
                ms, t0 = start_three(zk, prefix, e, opts)
                wait_settled(ms, want, t0, desc)
                check_no_overlap(ms)
            finally:
                close(ms)


def group_line(m, pred):
    pump(m)
    g = m.group()
    return g is not None and pred(g)


def test_a_leave_ends_when_no_member_holds_its_elections():
    with h.ZooKeeper() as zk:
        ms = []
        try:
            grp = "/bal/apart-group"
            ms = [Member(zk, "/bal/apart-a", 10, "p1", group=grp)]
            wait(ms[0].joined, 20, "p1 joins", *ms)
            ms += [Member(zk, "/bal/apart-b", 10, mid, group=grp) for mid in ("p2", "p3")]
            wait(lambda: all(m.joined() for m in ms) and
                 group_line(ms[0], lambda g: g["members"] == 3), SETTLE_BOUND, "three members", *ms)
            ms[0].send("leave")
            assert ms[0].p.wait(SETTLE_BOUND) == 0, ms[0].stderr()[-2000:]
            pump(*ms)
            assert any(p[1:3] == ["-", "left"] for p in ms[0].lines), ms[0].lines[-5:]
            assert "not handed over" in ms[0].stderr(), ms[0].stderr()[-2000:]
        finally:
            close(ms)


def test_agents_removed_mid_hand_over_then_the_group_freed():
    with h.ZooKeeper() as zk:
        ms = []
        try:
            ms = [Member(zk, "/bal/remove", 30, "p1")]
            wait(ms[0].joined, 20, "p1 joins", *ms)
            ms.append(Member(zk, "/bal/remove", 30, "p2"))
            wait(lambda: group_line(ms[0], lambda g: g["moving"] > 0), SETTLE_BOUND,
                 "p1 hands over", *ms)
            ms[0].send("remove")
            assert ms[0].p.wait(SETTLE_BOUND) == 0, ms[0].stderr()[-2000:]
        finally:
            close(ms)


if __name__ == "__main__":
    h.run_tests(globals())
