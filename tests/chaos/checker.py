#!/usr/bin/python3
"""Safety and liveness checker for recorded leader-election histories
(the properties are listed in tests/chaos/README.md).

    python3 checker.py [options] HISTORY.jsonl [MORE.jsonl ...]

Input: JSON lines from candidates, the fence and the harness, each with the
required fields mono_ns (CLOCK_MONOTONIC ns), wall, src, pid, ev. Files are
merged and ordered by mono_ns (ties keep file order). Event kinds (§4.1):

  candidate  became_leader{epoch,seq,node,session} stepped_down{epoch,reason}
             action_begin{epoch,action} action_end{epoch,action,rc}
             hook_start{hook,epoch} hook_end{hook,killed?,rc?}
             session{id,reason} conn_state{state} joined{node,seq,session}
             lease{deadline_mono_ns,epoch?,renewing?} reload{ok|error} exit{rc}
             fail_stop{msg} (a line of the agent's fail-stop watcher, another
             process: it may come after the agent's exit)
             (a lease record with renewing=true only says the lease is being
             renewed from then on: no fixed deadline until the next one)
  fence      accept{cand,epoch,n} reject{cand,epoch,max_epoch}
             marker_set{cand,epoch,via} marker_clear{cand,epoch,via,removed}
             (the marker table: a term's state with no epoch, fence.py)
  harness    meta{boot_id} config{...} fault_begin{kind,target,...}
             fault_end{kind} killed{target,signal,sent_ns?} paused{target}
             resumed{target} steady_begin steady_end phase{name}
             final_children{phase,path,children:[{name,owner}],live:[ids]}
             (killed: stamped once the target is frozen, before the signal;
             sent_ns once the signal was sent, the start of S1's slack)
  zk         session_end{session,how,server} (a ZooKeeper server's log line
             on a session's end, how: "expired" (`Expiring session`) or
             "closed" (`Submitting global closeSession request` with no
             expiry before it); the server stamps it, to the ms, before the
             end takes effect: its nodes go after it)
  Unknown kinds are kept and ignored.

config (harness) may set: T_ms, tick_ms, H_ms, eps_ms, eps_resume_ms,
eps_take_ms, x_ms, s2_bound_ms, fence_slack_ms, hook_grace_ms, min_hold_ms,
zk_clock_ms (how far a server's stamp, wall clock to the ms turned into
mono_ns, may be late), scenario, trial. Command-line options override it.

fault_begin may carry: target (candidate id), l2 (L2 applies: the target was
the leader and died / was cut off / paused), no_change (no leadership change
from the fault until the end of the next steady window), s2p (A1 broken for
the target: S2 reported for it, S2p decides), s2_bound_ms (override of B for
overlaps inside the fault's window, lower or higher; where the windows of
several faults with one meet, the largest), duty_bound_ms (S7 applies to
overlaps inside the fault's window, with this bound), x_ms (override of X),
expect (list of scenario expectations, property E; see EXPECTATIONS below).
A fault's window runs from its fault_begin to X after its fault_end.

Properties, each reported separately; any failure fails the run:
  S1 epoch order      S2 belief overlap <= B     S2p pause (resumed ex-leader)
  S3 action overlap   S4 fence                   S5 well-formedness
  S6 lease respect    S7 duty exclusion          S8 state exclusion
  L1 recovery within X
  L2 takeover bound   L3 no flapping             L4 nothing stuck
  E  scenario expectations
S7: a term's duty span runs from its first to its last write attempt at the
fence, accepted or rejected (a rejected write is a duty process of an old
term still acting); spans of two candidates' terms may overlap by at most
the duty_bound_ms of a fault window they meet (skipped without such a fault).
S8: a marker is owned by the term that set it (cand/epoch of its marker_set)
and exists from that set until the marker_clear that removed it (or another
set by the same candidate, which replaces it); markers of two candidates'
terms never exist at the same time (a marker left over when the successor
sets its own is a violation), a marker is set only by a term its candidate
led (from its became_leader on), and none is left once every candidate has stopped
(a final_children record of phase after_stop). Skipped without marker
records.

A history whose config record has group: true is a balanced group's
(bench_many processes, tests/chaos/chaos.py's balance_kill9): it is checked
by GroupChecker instead (G1 no overlap per election, G2 settled, G3 no line
after a process's end; its docstring has the records).

Output: a one-line verdict on stdout; --json FILE writes the summary (per
property pass|fail|skipped with witnesses, and metrics); --timeline FILE
writes leadership intervals as CSV (for Figure-T).
Exit: 0 all pass, 1 a property failed, 2 malformed input, 64 usage.
"""
import argparse
import json
import re
import sys

EXIT_PASS, EXIT_FAIL, EXIT_MALFORMED, EXIT_USAGE = 0, 1, 2, 64
REQUIRED = ("mono_ns", "wall", "src", "pid", "ev")
# fields each kind needs (beyond REQUIRED)
KIND_FIELDS = {
    "became_leader": ("epoch",),
    "stepped_down": ("epoch",),
    "action_begin": ("epoch",),
    "action_end": ("epoch",),
    "hook_start": ("hook",),
    "hook_end": ("hook",),
    "accept": ("cand", "epoch"),
    "reject": ("cand", "epoch"),
    "fault_begin": ("kind",),
    "fault_end": ("kind",),
    "killed": ("target",),
    "paused": ("target",),
    "resumed": ("target",),
    "final_children": ("children",),
    "marker_set": ("cand", "epoch"),
    "marker_clear": ("cand",),
    "lease": ("deadline_mono_ns",),
    "session_end": ("session", "how"),
}
NON_CANDIDATE = ("fence", "harness", "proxy", "zk")
DEFAULTS = {
    "T_ms": 2000.0, "tick_ms": 200.0, "H_ms": None, "eps_ms": 50.0, "eps_resume_ms": 100.0,
    "eps_take_ms": 500.0, "x_ms": None, "s2_bound_ms": None, "fence_slack_ms": 20.0,
    "hook_grace_ms": 1000.0, "min_hold_ms": 1000.0, "zk_clock_ms": 2.0,
}
EXPECTATIONS = """
  {"type":"stepdown_reason","target":C,"reasons":[...]}  C's first stepped_down after
                                                        the fault has one of reasons
  {"type":"stepped_down","target":C}   C stepped down (any reason) after the fault
  {"type":"gap_positive","target":C}   C's term ended (stepped down, exited or killed)
                                       before anyone else became leader
  {"type":"exited","target":C}         C's process ended after the fault, without a
                                       harness kill (e.g. its fail-stop watcher)
  {"type":"leader_change"}             someone other than the leader at fault time leads
  {"type":"no_leader_change"}          the leader at fault time still leads at the end
  {"type":"no_expiry","target":C}      no session{reason:expired} of C after the fault
  {"type":"hook_killed","target":C}    a hook_end{killed} of C after the fault
  {"type":"epoch_up"}                  the first leader after the fault has a higher
                                       epoch than every leader before it
  {"type":"marker_cleared","target":C,"via":[...]}  the first marker_clear after the
                                       fault that removed C's marker came by one of
                                       via ("hook", "fence": a prefix of its via)
  {"type":"session_closed","target":C,"within_ms":W}  C's keeper (fail_stop lines)
                                       closed the session C led with at the fault:
                                       its "session 0x.. is closed" line; a server
                                       took a close of it (zk session_end "closed",
                                       no expiry); the successor led after every
                                       line the keeper logged before its close
                                       (the term's end, the fence) and after the
                                       server's close (less zk_clock_ms), within W
                                       of C's `killed` record (of the fault without
                                       one)
  {"type":"session_expired","target":C,"silent":B}  nobody closed the session C
                                       led with at the fault (no "is closed" line
                                       of its keeper; silent: no line of its
                                       keeper at all, which died with C): a server
                                       expired it (zk session_end "expired"), and
                                       the successor led only after that (less
                                       zk_clock_ms)
"""


# the keeper's line once a server took its close of the dead agent's session
KEEPER_CLOSED_RE = re.compile(r"session (0x[0-9a-fA-F]+) is closed \(at ([^,]*), (\d+) ms after "
                              r"the agent was gone")


class Malformed(Exception):
    pass


def ms(ns):
    return None if ns is None else round(ns / 1e6, 3)


def sid(s):
    """A session id (\"0x..\" or an int) as an int, None if it is none."""
    try:
        return int(s, 16) if isinstance(s, str) else (None if s is None else int(s))
    except ValueError:
        return None


# --------------------------------------------------------------------------
# input

def load(paths):
    recs = []
    for fi, path in enumerate(paths):
        try:
            f = open(path, encoding="utf-8")
        except OSError as e:
            raise Malformed("%s: %s" % (path, e))
        with f:
            for li, line in enumerate(f):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    raise Malformed("%s:%d: unparsable line: %s" % (path, li + 1, e))
                if not isinstance(r, dict):
                    raise Malformed("%s:%d: not a JSON object" % (path, li + 1))
                for k in REQUIRED:
                    if k not in r:
                        raise Malformed("%s:%d: missing field %r" % (path, li + 1, k))
                if not isinstance(r["mono_ns"], int):
                    raise Malformed("%s:%d: mono_ns is not an integer" % (path, li + 1))
                for k in KIND_FIELDS.get(r["ev"], ()):
                    if k not in r:
                        raise Malformed("%s:%d: %s without field %r" % (path, li + 1, r["ev"], k))
                r["_f"], r["_l"] = fi, li + 1
                r["_where"] = "%s:%d" % (path, li + 1)
                recs.append(r)
    boots = {(r["boot_id"]) for r in recs if r["ev"] == "meta" and r.get("boot_id")}
    if len(boots) > 1:
        raise Malformed("differing boot_id across files: %s" % sorted(boots))
    recs.sort(key=lambda r: (r["mono_ns"], r["_f"], r["_l"]))
    for i, r in enumerate(recs):
        r["_i"] = i
    return recs


def witness(r):
    """A record as shown in the summary (no internal keys except where)."""
    out = {k: v for k, v in r.items() if not k.startswith("_")}
    out["where"] = r.get("_where")
    return out


# --------------------------------------------------------------------------
# the checker

class Checker:
    def __init__(self, recs, opts=None):
        self.recs = recs
        cfg = {}
        for r in recs:
            if r["ev"] == "config":
                cfg.update({k: v for k, v in r.items() if not k.startswith("_")})
        self.cfg = cfg
        p = dict(DEFAULTS)
        for k in DEFAULTS:
            if cfg.get(k) is not None:
                p[k] = float(cfg[k])
        for k, v in (opts or {}).items():
            if v is not None:
                p[k] = float(v)
        if p["H_ms"] is None:
            p["H_ms"] = min(p["T_ms"] / 3.0, 5000.0)
        if p["x_ms"] is None:
            p["x_ms"] = 2 * p["T_ms"] + p["H_ms"] + 2000.0
        if p["s2_bound_ms"] is None:
            p["s2_bound_ms"] = p["eps_ms"]
        self.p = p
        self.ns = {k: (None if v is None else int(v * 1e6)) for k, v in p.items()}
        self.t_end = recs[-1]["mono_ns"] if recs else 0
        self.t_begin = recs[0]["mono_ns"] if recs else 0
        self.results = {}
        self.metrics = {}
        self.warnings = []

    # -- helpers ---------------------------------------------------------------

    def cands(self):
        return sorted({r["src"] for r in self.recs if r["src"] not in NON_CANDIDATE
                       and not r["ev"] in ("meta", "config")})

    def by_src(self, src):
        return [r for r in self.recs if r["src"] == src]

    def evs(self, *names):
        return [r for r in self.recs if r["ev"] in names]

    def target_of(self, r):
        return r.get("target", r.get("cand"))

    def result(self, prop, violations, status=None, **extra):
        if status is None:
            status = "fail" if violations else "pass"
        res = {"status": status, "violations": violations}
        res.update(extra)
        self.results[prop] = res

    def stop_time(self):
        st = [r["mono_ns"] for r in self.recs if r["ev"] == "phase" and r.get("name") == "stop"]
        return min(st) if st else self.t_end

    # -- derived intervals ---------------------------------------------------------

    def build(self):
        """Leadership intervals, per-candidate walk; collects S5 violations."""
        self.intervals = []          # dicts: cand, epoch, start, end, end_ev, open, rec
        s5 = []
        for c in self.cands():
            cur = None
            dead = None
            for r in self.by_src(c):
                ev = r["ev"]
                if dead is not None and ev not in ("meta", "fail_stop"):
                    s5.append({"why": "event after %s" % dead["ev"], "record": witness(r),
                               "dead": witness(dead)})
                    continue
                if ev == "became_leader":
                    if cur is not None:
                        s5.append({"why": "became_leader while already leader (epoch %s)"
                                   % cur["epoch"], "record": witness(r)})
                        self._close(cur, r["mono_ns"], r)
                    cur = {"cand": c, "epoch": r["epoch"], "start": r["mono_ns"], "end": None,
                           "end_ev": None, "open": False, "rec": r}
                    self.intervals.append(cur)
                elif ev == "stepped_down":
                    if cur is None:
                        s5.append({"why": "stepped_down while not leader", "record": witness(r)})
                        continue
                    if r["epoch"] != cur["epoch"]:
                        s5.append({"why": "stepped_down epoch %s != term epoch %s"
                                   % (r["epoch"], cur["epoch"]), "record": witness(r)})
                    self._close(cur, r["mono_ns"], r)
                    cur = None
                elif ev == "exit":
                    if cur is not None:
                        self._close(cur, r["mono_ns"], r)
                        cur = None
                    dead = r
            if cur is not None and cur["end"] is None:
                cur["end"], cur["open"] = self.t_end, True
        # harness kills close intervals (killed records are harness records)
        for k in self.evs("killed"):
            c = self.target_of(k)
            for iv in self.intervals:
                if iv["cand"] == c and iv["start"] <= k["mono_ns"] and \
                        (iv["open"] or iv["end"] > k["mono_ns"]):
                    iv["end"], iv["open"], iv["end_ev"] = k["mono_ns"], False, k
            # nothing from a killed candidate after the kill
            for r in self.by_src(c):
                if r["mono_ns"] > k["mono_ns"] and r["ev"] not in ("exit", "meta", "fail_stop"):
                    s5.append({"why": "event after killed", "record": witness(r),
                               "killed": witness(k)})
        self.s5 = s5
        # fence records in fence order
        self.fence = [r for r in self.recs if r["src"] == "fence" and r["ev"] in ("accept", "reject")]
        self.faults = []
        open_f = {}
        for r in self.recs:
            if r["ev"] == "fault_begin":
                f = {"begin": r["mono_ns"], "end": None, "rec": r, "kind": r["kind"],
                     "target": r.get("target")}
                self.faults.append(f)
                open_f.setdefault(r["kind"], []).append(f)
            elif r["ev"] == "fault_end":
                lst = open_f.get(r["kind"]) or []
                if lst:
                    f = lst.pop(0)
                    f["end"] = r["mono_ns"]
                    f["end_rec"] = r
        for f in self.faults:
            f["window_end"] = self._segment_end(f["end"] if f["end"] is not None else f["begin"])

    def _close(self, iv, t, r):
        iv["end"], iv["end_ev"], iv["open"] = t, r, False

    def _segment_end(self, t):
        nxt = [f["begin"] for f in getattr(self, "faults", []) if f["begin"] > t]
        return min(nxt + [self.stop_time(), self.t_end])

    def leader_at(self, t, exclude=None):
        return [iv for iv in self.intervals if iv["start"] <= t < iv["end"]
                and iv["cand"] != exclude]

    def fault_windows_with(self, key):
        out = []
        for f in self.faults:
            if f["rec"].get(key) is not None:
                end = (f["end"] if f["end"] is not None else self.t_end) + self.ns["x_ms"]
                out.append((f["begin"], end, f))
        return out

    # -- safety ----------------------------------------------------------------------

    def check_s1(self):
        v = []
        leads = self.evs("became_leader")
        for a, b in zip(leads, leads[1:]):
            if not b["epoch"] > a["epoch"]:
                v.append({"why": "epoch not increasing: %s then %s" % (a["epoch"], b["epoch"]),
                          "records": [witness(a), witness(b)]})
        owner = {}
        for r in leads:
            owner.setdefault(r["epoch"], set()).add(r["src"])
        for e, srcs in sorted(owner.items()):
            if len(srcs) > 1:
                v.append({"why": "epoch %s claimed by %s" % (e, sorted(srcs))})
        own_epochs = {(r["src"], r["epoch"]) for r in leads}
        # no action / accept after the term's step-down
        downs = {}
        for r in self.evs("stepped_down"):
            downs.setdefault((r["src"], r["epoch"]), r)
        slack = self.ns["fence_slack_ms"]
        max_late = 0
        for r in self.evs("action_begin"):
            d = downs.get((r["src"], r["epoch"]))
            if d is not None and r["mono_ns"] > d["mono_ns"]:
                v.append({"why": "action after step-down of its term", "record": witness(r),
                          "stepped_down": witness(d)})
            if (r["src"], r["epoch"]) not in own_epochs:
                v.append({"why": "action with an epoch this candidate never led with",
                          "record": witness(r)})
        kills = {}
        for k in self.evs("killed"):
            kills.setdefault(self.target_of(k), k)
        for r in self.fence:
            if r["ev"] != "accept":
                continue
            d = downs.get((r["cand"], r["epoch"]))
            if d is not None and r["mono_ns"] > d["mono_ns"]:
                late = r["mono_ns"] - d["mono_ns"]
                max_late = max(max_late, late)
                if late > slack:
                    v.append({"why": "fence accept %.1f ms after step-down of its term"
                              % (late / 1e6), "record": witness(r), "stepped_down": witness(d)})
            k = kills.get(r["cand"])
            if k is not None and r["mono_ns"] > int(k.get("sent_ns") or k["mono_ns"]) + slack:
                v.append({"why": "fence accept from the term of a killed candidate "
                          "(orphaned duty process?)", "record": witness(r), "killed": witness(k)})
            if (r["cand"], r["epoch"]) not in own_epochs:
                v.append({"why": "fence accept with an epoch this candidate never led with",
                          "record": witness(r)})
        self.metrics["fence_accept_late_ms_max"] = ms(max_late)
        self.result("S1", v)

    def _pause_excused(self):
        """Intervals of a paused target that contain the pause (S2p decides for them)."""
        ex = set()
        for f in self.faults:
            if not f["rec"].get("s2p"):
                continue
            for p in self.evs("paused"):
                if self.target_of(p) != f["target"] or p["mono_ns"] < f["begin"]:
                    continue
                for i, iv in enumerate(self.intervals):
                    if iv["cand"] == f["target"] and iv["start"] <= p["mono_ns"] <= iv["end"]:
                        ex.add(i)
        return ex

    def _bound_for(self, lo, hi, key="s2_bound_ms", default="global"):
        """The bound for an overlap [lo, hi]: the largest `key` of the fault
        windows it meets (lower or higher than the global one), else the
        global S2 bound (or `default` when given)."""
        hits = [int(float(f["rec"][key]) * 1e6) for (a, z, f) in self.fault_windows_with(key)
                if lo <= z and hi >= a]
        if hits:
            return max(hits)
        return self.ns["s2_bound_ms"] if default == "global" else default

    def check_s2(self):
        v, info = [], []
        ex = self._pause_excused()
        worst = 0
        pairs = []
        ivs = self.intervals
        for i in range(len(ivs)):
            for j in range(i + 1, len(ivs)):
                a, b = ivs[i], ivs[j]
                if a["cand"] == b["cand"]:
                    continue
                lo, hi = max(a["start"], b["start"]), min(a["end"], b["end"])
                ov = hi - lo
                if ov <= 0:
                    continue
                worst = max(worst, ov)
                item = {"why": "%s/%s and %s/%s both leaders for %.1f ms" % (
                            a["cand"], a["epoch"], b["cand"], b["epoch"], ov / 1e6),
                        "overlap_ms": ms(ov), "a": "%s/%s" % (a["cand"], a["epoch"]),
                        "b": "%s/%s" % (b["cand"], b["epoch"]),
                        "records": [witness(a["rec"]), witness(b["rec"])]}
                pairs.append(item)
                if i in ex or j in ex:
                    item["excused"] = "pause (S2p decides)"
                    info.append(item)
                elif ov > self._bound_for(lo, hi):
                    v.append(item)
                else:
                    info.append(item)
        self.metrics["overlaps"] = len(pairs)
        self.metrics["overlap_ms_max"] = ms(worst)
        self.result("S2", v, bound_ms=self.p["s2_bound_ms"], within_bound_or_excused=info)

    def check_s2p(self):
        v = []
        checked = 0
        for f in self.faults:
            if not f["rec"].get("s2p"):
                continue
            c = f["target"]
            pauses = [r for r in self.evs("paused") if self.target_of(r) == c and r["mono_ns"] >= f["begin"]]
            for p in pauses[:1]:
                res = [r for r in self.evs("resumed") if self.target_of(r) == c and r["mono_ns"] >= p["mono_ns"]]
                if not res:
                    v.append({"why": "paused but never resumed", "record": witness(p)})
                    continue
                rs = res[0]
                held = [iv for iv in self.intervals if iv["cand"] == c and iv["start"] <= p["mono_ns"] < iv["end"]]
                if not held:
                    continue
                iv = held[0]
                took = [o for o in self.intervals if o["cand"] != c and p["mono_ns"] <= o["start"] <= rs["mono_ns"]]
                if not took:
                    continue          # nobody took over: plain S2 applies
                checked += 1
                if iv["open"]:
                    v.append({"why": "resumed ex-leader never stepped down", "record": witness(rs)})
                    continue
                sd = iv["end"]
                if sd < p["mono_ns"]:
                    continue          # ended before the pause
                # (a step-down stamped a hair before `resumed` is the harness
                # recording after SIGCONT: counted as 0 ms)
                hi = sd
                for r in self.recs:
                    if rs["mono_ns"] <= r["mono_ns"] <= hi:
                        if r["src"] == c and r["ev"] == "action_begin":
                            v.append({"why": "action between resume and step-down", "record": witness(r)})
                        if r["src"] == "fence" and r["ev"] == "accept" and r["cand"] == c:
                            v.append({"why": "fence accept between resume and step-down",
                                      "record": witness(r)})
                dt = max(0, sd - rs["mono_ns"])
                self.metrics.setdefault("resume_to_stepdown_ms", []).append(ms(dt))
                if dt > self.ns["eps_resume_ms"]:
                    v.append({"why": "step-down %.1f ms after resume (> %.0f ms)"
                              % (dt / 1e6, self.p["eps_resume_ms"]),
                              "record": witness(rs), "stepped_down": witness(iv["end_ev"])})
        self.result("S2p", v, status=None if checked or v else "skipped")

    def check_s3(self):
        v = []
        # action spans per (cand, epoch)
        spans = {}
        for r in self.recs:
            if r["ev"] in ("action_begin", "action_end") and r["src"] not in NON_CANDIDATE:
                k = (r["src"], r["epoch"])
                s = spans.setdefault(k, [r["mono_ns"], r["mono_ns"], r, r])
                if r["mono_ns"] < s[0]:
                    s[0], s[2] = r["mono_ns"], r
                if r["mono_ns"] > s[1]:
                    s[1], s[3] = r["mono_ns"], r
        holds = {}
        for r in self.fence:
            if r["ev"] == "accept":
                k = (r["cand"], r["epoch"])
                s = holds.setdefault(k, [r["mono_ns"], r["mono_ns"], r, r])
                s[1], s[3] = r["mono_ns"], r
        worst = {"actions": 0, "fence": 0}
        for what, d in (("actions", spans), ("fence", holds)):
            keys = sorted(d)
            for i in range(len(keys)):
                for j in range(i + 1, len(keys)):
                    if keys[i][0] == keys[j][0]:
                        continue
                    a, b = d[keys[i]], d[keys[j]]
                    lo, hi = max(a[0], b[0]), min(a[1], b[1])
                    ov = hi - lo
                    if ov <= 0:
                        continue
                    worst[what] = max(worst[what], ov)
                    bound = max(self.ns["eps_ms"], self._bound_for(lo, hi))
                    if ov > bound:
                        v.append({"why": "%s of %s/%s and %s/%s overlap by %.1f ms"
                                  % (what, keys[i][0], keys[i][1], keys[j][0], keys[j][1], ov / 1e6),
                                  "records": [witness(a[2]), witness(a[3]), witness(b[2]), witness(b[3])]})
        self.metrics["action_overlap_ms_max"] = ms(worst["actions"])
        self.metrics["fence_overlap_ms_max"] = ms(worst["fence"])
        self.result("S3", v)

    def check_s7(self):
        spans = {}
        for r in self.fence:
            k = (r["cand"], r["epoch"])
            sp = spans.setdefault(k, [r["mono_ns"], r["mono_ns"], r, r])
            if r["mono_ns"] < sp[0]:
                sp[0], sp[2] = r["mono_ns"], r
            if r["mono_ns"] >= sp[1]:
                sp[1], sp[3] = r["mono_ns"], r
        judged = bool(self.fault_windows_with("duty_bound_ms"))
        v, info = [], []
        worst = 0
        keys = sorted(spans, key=lambda k: spans[k][0])
        for i in range(len(keys)):
            for j in range(i + 1, len(keys)):
                if keys[i][0] == keys[j][0]:
                    continue
                a, b = spans[keys[i]], spans[keys[j]]
                lo, hi = max(a[0], b[0]), min(a[1], b[1])
                ov = hi - lo
                if ov <= 0:
                    continue
                worst = max(worst, ov)
                item = {"why": "duties of %s/%s and %s/%s overlap by %.1f ms (write attempts, "
                               "accepted or rejected)" % (keys[i][0], keys[i][1], keys[j][0],
                                                          keys[j][1], ov / 1e6),
                        "overlap_ms": ms(ov),
                        "records": [witness(a[2]), witness(a[3]), witness(b[2]), witness(b[3])]}
                bound = self._bound_for(lo, hi, key="duty_bound_ms", default=None)
                if bound is not None and ov > bound:
                    v.append(item)
                else:
                    info.append(item)
        self.metrics["duty_overlap_ms_max"] = ms(worst)
        self.result("S7", v, status=None if judged else "skipped", not_judged_or_within=info)

    def markers(self):
        """The marker intervals, from the fence's marker_set/marker_clear
        records in order: dicts cand, epoch, start, end, open, set, gone (the
        record that removed it: a clear or the same candidate's next set)."""
        live, out = {}, []
        for r in self.recs:
            if r["src"] != "fence" or r["ev"] not in ("marker_set", "marker_clear"):
                continue
            old = live.pop(r["cand"], None)
            if old is not None:
                old["end"], old["open"], old["gone"] = r["mono_ns"], False, r
            if r["ev"] == "marker_set":
                iv = {"cand": r["cand"], "epoch": r["epoch"], "start": r["mono_ns"], "end": self.t_end,
                      "open": True, "set": r, "gone": None}
                live[r["cand"]] = iv
                out.append(iv)
        return out

    def check_s8(self):
        ivs = self.markers()
        if not ivs:
            self.result("S8", [], status="skipped", note="no marker records")
            return
        v = []
        worst = 0

        def desc(iv):
            return "%s/%s (set at %.1f ms, %s)" % (
                iv["cand"], iv["epoch"], (iv["start"] - self.t_begin) / 1e6,
                "never removed" if iv["open"] else "removed at %.1f ms by %s" % (
                    (iv["end"] - self.t_begin) / 1e6, iv["gone"].get("via") or iv["gone"]["ev"]))
        for i in range(len(ivs)):
            for j in range(i + 1, len(ivs)):
                a, b = ivs[i], ivs[j]
                if a["cand"] == b["cand"]:
                    continue
                ov = min(a["end"], b["end"]) - max(a["start"], b["start"])
                if ov <= 0:
                    continue
                worst = max(worst, ov)
                v.append({"why": "markers of two terms at once for %.1f ms: %s and %s"
                          % (ov / 1e6, desc(a), desc(b)), "overlap_ms": ms(ov),
                          "records": [witness(a["set"]), witness(b["set"])]})
        for iv in ivs:
            # (a set that lands a hair after its term's stepped_down line,
            # sent by a process of the term before it was ended, is its
            # own: only the exclusion above judges when a marker exists)
            led = [t for t in self.intervals if t["cand"] == iv["cand"] and t["epoch"] == iv["epoch"]
                   and t["start"] <= iv["start"]]
            if not led:
                v.append({"why": "marker %s set by a term %s had not led" % (desc(iv), iv["cand"]),
                          "record": witness(iv["set"])})
        stopped = [r for r in self.evs("final_children") if r.get("phase") == "after_stop"]
        if stopped:
            for iv in ivs:
                if iv["open"] or iv["end"] > stopped[-1]["mono_ns"]:
                    v.append({"why": "marker %s still set after every candidate stopped" % desc(iv),
                              "record": witness(iv["set"])})
        self.metrics["markers"] = len(ivs)
        self.metrics["markers_fenced"] = sum(1 for iv in ivs if iv["gone"] is not None and
                                             str(iv["gone"].get("via", "")).startswith("fence"))
        self.metrics["marker_overlap_ms_max"] = ms(worst)
        self.result("S8", v)

    def check_s4(self):
        v = []
        mx = None
        rejects = 0
        for r in self.fence:
            if r["ev"] == "accept":
                if mx is not None and r["epoch"] < mx:
                    v.append({"why": "accept of stale epoch %s < max %s" % (r["epoch"], mx),
                              "record": witness(r)})
                mx = r["epoch"] if mx is None else max(mx, r["epoch"])
            else:
                rejects += 1
                if mx is not None and r["epoch"] >= mx:
                    v.append({"why": "reject of a current epoch %s (max %s)" % (r["epoch"], mx),
                              "record": witness(r)})
        accepts = sum(1 for r in self.fence if r["ev"] == "accept")
        self.metrics["fence_accepts"] = accepts
        self.metrics["fence_rejects"] = rejects
        expected = any(f["rec"].get("expect_rejects") for f in self.faults)
        if rejects and not expected:
            self.warnings.append("%d fence rejects in a scenario that does not expect them" % rejects)
        self.result("S4", v, status=None if self.fence else "skipped", rejects=rejects)

    def check_s5(self):
        v = list(self.s5)
        H = self.ns["H_ms"] + self.ns["hook_grace_ms"]
        ends = {}
        for c in self.cands():
            recs = self.by_src(c)
            pending = []
            for r in recs:
                if r["ev"] == "hook_start":
                    if r["hook"] == "on_leader":
                        inside = [iv for iv in self.intervals if iv["cand"] == c
                                  and iv["start"] <= r["mono_ns"] <= iv["end"]]
                        if not inside:
                            v.append({"why": "leader hook outside a leadership interval",
                                      "record": witness(r)})
                    pending.append(r)
                elif r["ev"] == "hook_end":
                    for i, s in enumerate(pending):
                        if s["hook"] == r["hook"]:
                            dt = r["mono_ns"] - s["mono_ns"]
                            if dt > H:
                                v.append({"why": "hook %s ran %.0f ms (> H + grace %.0f ms)"
                                          % (r["hook"], dt / 1e6, H / 1e6),
                                          "records": [witness(s), witness(r)]})
                            ends[r["_i"]] = dt
                            del pending[i]
                            break
                elif r["ev"] == "action_begin":
                    inside = [iv for iv in self.intervals if iv["cand"] == c and iv["epoch"] == r["epoch"]
                              and iv["start"] <= r["mono_ns"] <= iv["end"]]
                    if not inside:
                        v.append({"why": "action outside its leadership interval", "record": witness(r)})
            death = [k["mono_ns"] for k in self.evs("killed") if self.target_of(k) == c]
            death += [r["mono_ns"] for r in recs if r["ev"] == "exit"]
            for s in pending:
                d = [t for t in death if t >= s["mono_ns"]]
                if d and min(d) - s["mono_ns"] <= H:
                    continue        # the whole process went away in time
                if not d and self.t_end - s["mono_ns"] <= H:
                    continue        # not due yet at the end of the record
                v.append({"why": "hook %s never ended (no hook_end within H + grace)" % s["hook"],
                          "record": witness(s)})
        self.result("S5", v)

    def check_s6(self):
        leases = self.evs("lease")
        if not leases:
            self.result("S6", [], status="skipped", note="no lease lines")
            return
        v = []
        for r in self.evs("action_begin"):
            ls = [x for x in leases if x["src"] == r["src"] and x["mono_ns"] <= r["mono_ns"]
                  and ("epoch" not in x or x["epoch"] == r["epoch"])]
            if not ls:
                continue
            last = ls[-1]
            if last.get("renewing"):
                continue            # renewals since: no fixed deadline known
            if r["mono_ns"] >= int(last["deadline_mono_ns"]):
                v.append({"why": "action at or after the lease deadline (%.1f ms late)"
                          % ((r["mono_ns"] - int(last["deadline_mono_ns"])) / 1e6),
                          "record": witness(r), "lease": witness(last)})
        self.result("S6", v)

    # -- liveness ------------------------------------------------------------------

    def check_l1(self):
        v = []
        takes = []
        checked = 0
        for f in self.faults:
            if f["end"] is None:
                v.append({"why": "fault %s never ended (no heal)" % f["kind"], "record": witness(f["rec"])})
                continue
            checked += 1
            t0, t1 = f["end"], f["window_end"]
            X = int(float(f["rec"]["x_ms"]) * 1e6) if f["rec"].get("x_ms") is not None else self.ns["x_ms"]
            cover = [iv for iv in self.intervals if iv["start"] <= t1 and iv["end"] >= t1
                     and (iv["open"] or iv["end"] > t1)]
            if len(cover) != 1:
                v.append({"why": "%d leaders at the end of the recovery window after %s"
                          % (len(cover), f["kind"]), "fault": witness(f["rec"]),
                          "leaders": ["%s/%s" % (iv["cand"], iv["epoch"]) for iv in cover]})
                continue
            J = cover[0]
            others = [iv for iv in self.intervals if iv is not J and iv["end"] > t0 and iv["start"] < t1]
            t_rec = max([t0, J["start"]] + [iv["end"] for iv in others])
            take = t_rec - t0
            takes.append(ms(take))
            f["t_recovered"] = t_rec
            if take > X:
                v.append({"why": "leader stable only %.0f ms after the heal of %s (X = %.0f ms)"
                          % (take / 1e6, f["kind"], X / 1e6), "fault": witness(f["rec"])})
            elif t1 - t_rec < self.ns["min_hold_ms"]:
                v.append({"why": "recovery window too short to show a stable leader "
                          "(%.0f ms < %.0f ms)" % ((t1 - t_rec) / 1e6, self.p["min_hold_ms"]),
                          "fault": witness(f["rec"])})
        self.metrics["recovery_ms"] = takes
        self.result("L1", v, status=None if checked or v else "skipped", x_ms=self.p["x_ms"])

    def check_l2(self):
        v = []
        takes = []
        bound = self.ns["T_ms"] + self.ns["tick_ms"] + self.ns["eps_take_ms"]
        checked = 0
        for f in self.faults:
            if not f["rec"].get("l2"):
                continue
            checked += 1
            c = f["target"]
            nxt = [iv for iv in self.intervals if iv["cand"] != c and iv["start"] >= f["begin"]]
            if not nxt:
                v.append({"why": "nobody took over after %s of %s" % (f["kind"], c),
                          "fault": witness(f["rec"])})
                continue
            take = nxt[0]["start"] - f["begin"]
            takes.append(ms(take))
            if take > bound:
                v.append({"why": "takeover %.0f ms after %s of %s (> T + tick + eps_take = %.0f ms)"
                          % (take / 1e6, f["kind"], c, bound / 1e6),
                          "fault": witness(f["rec"]), "record": witness(nxt[0]["rec"])})
        self.metrics["t_take_ms"] = takes
        self.result("L2", v, status=None if checked else "skipped", bound_ms=ms(bound))

    def check_l3(self):
        v = []
        flaps = 0
        changes = [r for r in self.recs if r["ev"] in ("became_leader", "stepped_down")]
        begins = self.evs("steady_begin")
        ends = self.evs("steady_end")
        windows = []
        for b in begins:
            e = [x["mono_ns"] for x in ends if x["mono_ns"] >= b["mono_ns"]]
            windows.append((b["mono_ns"], min(e) if e else self.stop_time(), b, "steady window"))
        for f in self.faults:
            if f["rec"].get("no_change"):
                after = [w[1] for w in windows if w[0] >= (f["end"] or f["begin"])]
                end = min(after) if after else f["window_end"]
                windows.append((f["begin"], end, f["rec"], "no-change fault %s" % f["kind"]))
        seen = set()
        for (a, z, rec, what) in windows:
            for r in changes:
                if a < r["mono_ns"] <= z and r["_i"] not in seen:
                    seen.add(r["_i"])
                    flaps += 1
                    v.append({"why": "leadership change in %s" % what, "record": witness(r),
                              "window": witness(rec)})
        self.metrics["flaps"] = flaps
        self.result("L3", v, status=None if windows else "skipped", windows=len(windows))

    def _sessions(self, c, t):
        """The candidate's current session id (int) at time t, from its records."""
        cur = None
        for r in self.by_src(c):
            if r["mono_ns"] > t:
                break
            s = r.get("session", r.get("id")) if r["ev"] in ("session", "joined", "became_leader") else None
            if s is not None:
                try:
                    cur = int(s, 16) if isinstance(s, str) else int(s)
                except ValueError:
                    pass
        return cur

    def check_l4(self):
        v = []
        orphans = 0
        dumps = self.evs("final_children")
        pat = re.compile(self.cfg.get("node_pattern") or r"^n_[0-9a-f]{16}-\d{10}$")
        for d in dumps:
            kids = d["children"] or []
            phase = d.get("phase", "live")
            live = d.get("live")
            if live is None:
                dead = {self.target_of(k) for k in self.evs("killed") if k["mono_ns"] <= d["mono_ns"]}
                dead |= {r["src"] for r in self.evs("exit") if r["mono_ns"] <= d["mono_ns"]}
                live = [c for c in self.cands() if c not in dead]
            sessions = {c: self._sessions(c, d["mono_ns"]) for c in live} if phase == "live" else {}
            owners = {}
            for k in kids:
                owner = int(k.get("owner") or 0)
                if owner == 0:
                    if pat.match(k["name"]):
                        v.append({"why": "persistent node matching the candidate pattern: %s" % k["name"],
                                  "record": witness(d)})
                    continue
                owners.setdefault(owner, []).append(k["name"])
            for c, s in sessions.items():
                n = len(owners.get(s, [])) if s is not None else 0
                if n != 1:
                    v.append({"why": "live candidate %s (session %s) owns %d nodes"
                              % (c, None if s is None else "0x%x" % s, n), "record": witness(d)})
            known = set(sessions.values())
            for owner, names in owners.items():
                if owner not in known:
                    orphans += len(names)
                    v.append({"why": "node(s) %s owned by session 0x%x of no live candidate (%s)"
                              % (names, owner, phase), "record": witness(d)})
        self.metrics["orphans"] = orphans
        self.result("L4", v, status=None if dumps else "skipped")

    # -- expectations ------------------------------------------------------------

    def check_e(self):
        v = []
        n = 0
        for f in self.faults:
            for x in f["rec"].get("expect") or []:
                n += 1
                typ, c = x.get("type"), x.get("target", f["target"])
                t0, t1 = f["begin"], f["window_end"]
                sd = [iv for iv in self.intervals if iv["cand"] == c and iv["end_ev"] is not None
                      and iv["end_ev"]["ev"] == "stepped_down" and t0 <= iv["end"] <= t1]
                lead0 = self.leader_at(t0)
                took = [iv for iv in self.intervals if iv["start"] > t0 and iv["start"] <= t1
                        and iv["cand"] not in [l["cand"] for l in lead0]]
                ok, why = True, ""
                if typ == "stepdown_reason":
                    if not sd:
                        ok, why = False, "%s did not step down" % c
                    elif sd[0]["end_ev"].get("reason") not in x.get("reasons", []):
                        ok, why = False, "%s stepped down with reason %r, expected one of %s" % (
                            c, sd[0]["end_ev"].get("reason"), x.get("reasons"))
                elif typ == "stepped_down":
                    if not sd:
                        ok, why = False, "%s did not step down" % c
                elif typ == "gap_positive":
                    # the term C held at the fault (or its first one after it)
                    # ended: stepped down, exited or killed
                    ends = [iv for iv in self.intervals if iv["cand"] == c and not iv["open"]
                            and iv["end"] >= t0 and iv["end"] <= t1]
                    if not ends:
                        ok, why = False, "%s's term did not end" % c
                    else:
                        e0 = ends[0]
                        how = {"stepped_down": "stepped down", "exit": "exited",
                               "killed": "was killed"}.get(e0["end_ev"]["ev"], e0["end_ev"]["ev"]) \
                            if e0["end_ev"] is not None else "ended"
                        others = [iv for iv in self.intervals if iv["cand"] != c and iv["start"] > t0]
                        if others and others[0]["start"] <= e0["end"]:
                            ok, why = False, "%s became leader %.0f ms before %s %s" % (
                                others[0]["cand"], (e0["end"] - others[0]["start"]) / 1e6, c, how)
                        elif others:
                            self.metrics.setdefault("gap_ms", []).append(ms(others[0]["start"] - e0["end"]))
                elif typ == "exited":
                    ex = [r for r in self.by_src(c) if r["ev"] == "exit" and t0 <= r["mono_ns"] <= t1]
                    kl = [r for r in self.evs("killed") if self.target_of(r) == c and
                          t0 <= r["mono_ns"] <= t1]
                    if kl and (not ex or kl[0]["mono_ns"] <= ex[0]["mono_ns"]):
                        ok, why = False, "%s's process was killed by the harness, not by itself" % c
                    elif not ex:
                        ok, why = False, "%s's process did not end after the fault" % c
                elif typ == "leader_change":
                    if not took:
                        ok, why = False, "no other candidate became leader after the fault"
                elif typ == "no_leader_change":
                    if not lead0 or not [iv for iv in self.leader_at(t1 - 1) if iv is lead0[0]]:
                        ok, why = False, "the leader at fault time does not lead at the end"
                elif typ == "no_expiry":
                    ex = [r for r in self.by_src(c) if r["ev"] == "session" and r.get("reason") == "expired"
                          and t0 <= r["mono_ns"] <= t1]
                    if ex:
                        ok, why = False, "%s's session expired" % c
                elif typ == "hook_killed":
                    hk = [r for r in self.by_src(c) if r["ev"] == "hook_end" and r.get("killed")
                          and t0 <= r["mono_ns"] <= t1]
                    if not hk:
                        ok, why = False, "no killed hook of %s" % c
                elif typ == "marker_cleared":
                    gone = [iv for iv in self.markers() if iv["cand"] == c and iv["gone"] is not None
                            and iv["gone"]["ev"] == "marker_clear" and t0 <= iv["end"] <= t1]
                    via = str(gone[0]["gone"].get("via", "")) if gone else ""
                    if not gone:
                        ok, why = False, "%s's marker was not removed after the fault" % c
                    elif not any(via.startswith(p) for p in x.get("via", [])):
                        ok, why = False, "%s's marker was removed by %r, expected one of %s" % (
                            c, via, x.get("via"))
                elif typ in ("session_closed", "session_expired"):
                    ok, why = self._session_end(typ, x, f, c, t0, t1)
                elif typ == "epoch_up":
                    before = [r["epoch"] for r in self.evs("became_leader") if r["mono_ns"] < t0]
                    after = [r for r in self.evs("became_leader") if r["mono_ns"] >= t0]
                    if not after:
                        ok, why = False, "no leader after the fault"
                    elif before and not after[0]["epoch"] > max(before):
                        ok, why = False, "epoch %s not above %s" % (after[0]["epoch"], max(before))
                else:
                    ok, why = False, "unknown expectation %r" % typ
                if not ok:
                    v.append({"why": why, "expect": x, "fault": witness(f["rec"])})
        self.result("E", v, status=None if n else "skipped")

    def _session_end(self, typ, x, f, c, t0, t1):
        """The expectations session_closed and session_expired (EXPECTATIONS):
        (ok, why); the times measured go to metrics["session_ends"]."""
        held = [iv for iv in self.intervals if iv["cand"] == c and iv["start"] <= t0 < iv["end"]]
        s = sid(held[0]["rec"].get("session")) if held else None
        if s is None:
            return False, "%s led no term with a known session at the fault" % c
        keeper = [r for r in self.by_src(c) if r["ev"] == "fail_stop" and r["mono_ns"] >= t0]
        closed = [r for r in keeper if KEEPER_CLOSED_RE.search(r.get("msg") or "")]
        mine = [r for r in closed if sid(KEEPER_CLOSED_RE.search(r["msg"]).group(1)) == s]
        zk = [r for r in self.evs("session_end") if r["src"] == "zk" and sid(r["session"]) == s
              and r["mono_ns"] >= t0]
        zk = zk[0] if zk else None
        nxt = sorted((iv for iv in self.intervals if iv["cand"] != c and t0 < iv["start"] <= t1),
                     key=lambda iv: iv["start"])
        nxt = nxt[0] if nxt else None
        kills = [r["mono_ns"] for r in self.evs("killed") if self.target_of(r) == c and
                 t0 <= r["mono_ns"] <= t1]
        t_ref = kills[0] if kills else t0
        slack = self.ns["zk_clock_ms"]
        why = []
        m = {"type": typ, "target": c, "session": "0x%x" % s}
        if nxt is not None:
            m["take_ms"] = ms(nxt["start"] - t0)
            if kills:
                m["after_kill_ms"] = ms(nxt["start"] - t_ref)
        if zk is not None:
            m["server_%s_ms" % zk["how"]] = ms(zk["mono_ns"] - t0)
        if typ == "session_closed":
            if not mine:
                why.append("%s's keeper did not close its session 0x%x (its lines after the fault: "
                           "%s)" % (c, s, [(r.get("msg") or "")[:120] for r in keeper][:4] or "none"))
            else:
                line = mine[0]
                m["close_line_ms"] = ms(line["mono_ns"] - t0)
                m["closed_after_gone_ms"] = int(KEEPER_CLOSED_RE.search(line["msg"]).group(3))
                before = [r for r in keeper if r["mono_ns"] < line["mono_ns"]]
                late = [r for r in before if nxt is not None and r["mono_ns"] >= nxt["start"]]
                if late:
                    why.append("%s led %.1f ms before %s's keeper logged %r: the term was not over "
                               "when the successor started" % (nxt["cand"], (late[-1]["mono_ns"] -
                                                                             nxt["start"]) / 1e6,
                                                               c, late[-1]["msg"][:120]))
            if zk is None:
                why.append("no server logged a close of %s's session 0x%x" % (c, s))
            elif zk["how"] != "closed":
                why.append("%s's session 0x%x was %s (server %s), not closed by its keeper"
                           % (c, s, zk["how"], zk.get("server")))
            elif nxt is not None and nxt["start"] < zk["mono_ns"] - slack:
                why.append("%s led %.1f ms before a server took the close of %s's session 0x%x"
                           % (nxt["cand"], (zk["mono_ns"] - nxt["start"]) / 1e6, c, s))
            w = x.get("within_ms")
            if nxt is not None and w is not None and nxt["start"] - t_ref > float(w) * 1e6:
                why.append("%s led %.0f ms after %s (> %.0f ms): later than a close allows"
                           % (nxt["cand"], (nxt["start"] - t_ref) / 1e6,
                              "the kill" if kills else "the fault", float(w)))
        else:
            if closed:
                why.append("%s's keeper closed a session (%r): nobody is left to close it in a "
                           "host's crash" % (c, closed[0]["msg"][:120]))
            elif x.get("silent") and keeper:
                why.append("%s's keeper acted after the fault (%r): it did not die with %s"
                           % (c, keeper[0]["msg"][:120], c))
            if zk is None:
                why.append("no server expired %s's session 0x%x after the fault" % (c, s))
            elif zk["how"] != "expired":
                why.append("%s's session 0x%x was %s (server %s), not expired"
                           % (c, s, zk["how"], zk.get("server")))
            elif nxt is not None and nxt["start"] < zk["mono_ns"] - slack:
                why.append("%s led %.1f ms before a server expired %s's session 0x%x"
                           % (nxt["cand"], (zk["mono_ns"] - nxt["start"]) / 1e6, c, s))
        if nxt is None:
            why.append("no other candidate led after the fault")
        self.metrics.setdefault("session_ends", []).append(m)
        return not why, "; ".join(why)

    # -- per-fault metrics -----------------------------------------------------------

    def fault_metrics(self):
        out = []
        for f in self.faults:
            t0 = f["begin"]
            lead0 = self.leader_at(t0)
            if not lead0 and f["target"]:
                # a fault that starts before its target leads (hook_hang):
                # the target's first term after the fault stands for "the old leader"
                lead0 = [iv for iv in self.intervals if iv["cand"] == f["target"]
                         and t0 <= iv["start"] <= f["window_end"]][:1]
            m = {"kind": f["kind"], "target": f["target"], "begin_ms": ms(t0 - self.t_begin),
                 "hold_ms": ms((f["end"] - t0) if f["end"] is not None else None),
                 "leader_at_fault": lead0[0]["cand"] if lead0 else None}
            if lead0:
                old = lead0[0]
                stop = old["end"] if old["end"] <= f["window_end"] and not old["open"] else None
                acts = [r["mono_ns"] for r in self.recs if r["src"] == old["cand"] and
                        r["ev"] in ("action_begin", "action_end") and r.get("epoch") == old["epoch"]]
                if stop is not None:
                    m["t_stop_ms"] = ms(stop - t0)
                if acts and max(acts) >= t0:
                    m["t_last_action_ms"] = ms(max(acts) - t0)
                # the next term (any candidate, the old leader's own included)
                nxt = [iv for iv in self.intervals if iv is not old
                       and iv["start"] >= max(t0, old["start"]) and iv["start"] <= f["window_end"]]
                m["leader_changes"] = len([r for r in self.recs if r["ev"] in ("became_leader", "stepped_down")
                                           and t0 <= r["mono_ns"] <= f["window_end"]])
                if nxt:
                    m["t_take_ms"] = ms(nxt[0]["start"] - t0)
                    if stop is not None:
                        gap = nxt[0]["start"] - stop
                        m["gap_ms"] = ms(gap)
                        m["overlap_ms"] = ms(max(0, -gap))
            if f.get("t_recovered") is not None and f["end"] is not None:
                m["t_recovered_after_heal_ms"] = ms(f["t_recovered"] - f["end"])
            out.append(m)
        self.metrics["faults"] = out

    # -- run ---------------------------------------------------------------------

    def run(self):
        self.build()
        for fn in (self.check_s1, self.check_s2, self.check_s2p, self.check_s3, self.check_s4,
                   self.check_s5, self.check_s6, self.check_s7, self.check_s8, self.check_l1, self.check_l2, self.check_l3,
                   self.check_l4, self.check_e):
            fn()
        self.fault_metrics()
        failed = [k for k, r in self.results.items() if r["status"] == "fail"]
        return {
            "verdict": "fail" if failed else "pass",
            "failed": failed,
            "scenario": self.cfg.get("scenario"),
            "trial": self.cfg.get("trial"),
            "params_ms": self.p,
            "candidates": self.cands(),
            "properties": self.results,
            "metrics": self.metrics,
            "warnings": self.warnings,
            "records": len(self.recs),
        }

    def timeline_csv(self):
        lines = ["cand,epoch,start_ms,end_ms,open,end_reason"]
        for iv in self.intervals:
            reason = ""
            if iv["end_ev"] is not None:
                reason = iv["end_ev"].get("reason") or iv["end_ev"]["ev"]
            lines.append("%s,%s,%.3f,%.3f,%d,%s" % (iv["cand"], iv["epoch"], (iv["start"] - self.t_begin) / 1e6,
                                                   (iv["end"] - self.t_begin) / 1e6, iv["open"], reason))
        return "\n".join(lines) + "\n"


class GroupChecker:
    """Balanced groups: the history of a group of bench_many processes
    (bench/many.c with BENCH_MANY_GROUP), each leading some of the group's
    E elections, while processes join, leave and are killed. Records:

      process  g_leader{e} g_stepdown{e} g_follower{e} g_stopped{e}
               (bench_many's "<us> <i> leader|stepdown|follower|stopped"
               lines: a term of election e runs from g_leader to the next
               g_stepdown, g_follower or g_stopped of the same process and
               election), g_group{members,leads,target,moving} (its group
               line), exit{rc}
      harness  config{group: true, E} killed{target, sent_ns} (sent_ns: the
               SIGKILL was sent: nothing the process does comes after it, so
               its open terms end there) leave{target} settled{} or
               unsettled{} (the harness's own wait for the end state)

    Properties: G1 no overlap: two processes' terms of one election never
    meet (bound 0: a hand-over ends the old term, on_stepdown, before its
    node goes; a killed process's terms end at the signal, before its
    keeper closes the session); G2 settled: at the harness's settled
    record, every process alive then says the group has exactly them, moves
    nothing and leads its target (its last group line), the targets sum to
    E, and every election has exactly one open term, by the lines; G3
    well-formed: no line of a process after its kill or exit, no term begun
    by a process that was already leading that election."""

    TERM_END = ("g_stepdown", "g_follower", "g_stopped")

    def __init__(self, recs):
        self.recs = recs
        self.cfg = {}
        for r in recs:
            if r["ev"] == "config":
                self.cfg.update({k: v for k, v in r.items() if not k.startswith("_")})
        self.results = {}

    def run(self):
        recs = self.recs
        ends = {}       # src -> mono_ns after which it does nothing (kill sent, exit)
        for r in recs:
            if r["ev"] == "killed" and r["src"] == "harness":
                t = r.get("sent_ns", r["mono_ns"])
                ends[r["target"]] = min(ends.get(r["target"], t), t)
        g3, terms, open_ = [], [], {}
        for r in recs:
            src = r["src"]
            if src in NON_CANDIDATE or not r["ev"].startswith("g_"):
                if r["ev"] == "exit" and src not in NON_CANDIDATE:
                    ends[src] = min(ends.get(src, r["mono_ns"]), r["mono_ns"])
                continue
            if src in ends and r["mono_ns"] > ends[src]:
                g3.append({"why": "%s wrote %s after its end (kill or exit)" % (src, r["ev"]),
                           "rec": witness(r)})
            if r["ev"] == "g_group":
                continue
            key = (src, r.get("e"))
            if r["ev"] == "g_leader":
                if key in open_:
                    g3.append({"why": "%s: leader of election %s twice without an end between" % key,
                               "rec": witness(r)})
                    continue
                open_[key] = {"src": src, "e": r.get("e"), "start": r["mono_ns"], "end": None}
            elif key in open_:
                iv = open_.pop(key)
                iv["end"] = r["mono_ns"]
                terms.append(iv)
        for key, iv in open_.items():
            iv["end"] = ends.get(key[0])        # None: still leading at the history's end
            terms.append(iv)
        t_last = recs[-1]["mono_ns"] if recs else 0
        by_e = {}
        for iv in terms:
            by_e.setdefault(iv["e"], []).append(iv)
        g1, worst = [], 0
        for e, ivs in sorted(by_e.items(), key=lambda kv: str(kv[0])):
            ivs.sort(key=lambda iv: iv["start"])
            for i, a in enumerate(ivs):
                a_end = a["end"] if a["end"] is not None else t_last + 1
                for b in ivs[i + 1:]:
                    if b["start"] >= a_end:
                        break
                    if b["src"] == a["src"]:
                        continue
                    ov = min(a_end, b["end"] if b["end"] is not None else t_last + 1) - b["start"]
                    worst = max(worst, ov)
                    g1.append({"why": "election %s: %s led from %.3f ms to %s, %s from %.3f ms: "
                               "%.3f ms of two leaders" % (
                                   e, a["src"], ms(a["start"] - recs[0]["mono_ns"]),
                                   "%.3f ms" % ms(a["end"] - recs[0]["mono_ns"])
                                   if a["end"] is not None else "the end", b["src"],
                                   ms(b["start"] - recs[0]["mono_ns"]), ms(ov))})
        self.result("G1", g1)
        self.result("G2", self.settled(terms, ends))
        self.result("G3", g3)
        failed = [k for k, v in self.results.items() if v["status"] == "fail"]
        return {"verdict": "fail" if failed else "pass", "failed": failed,
                "scenario": self.cfg.get("scenario"), "trial": self.cfg.get("trial"),
                "properties": self.results, "warnings": [], "records": len(recs),
                "metrics": {"overlaps": len(g1), "overlap_ms_max": ms(worst) if g1 else None,
                            "terms": len(terms), "faults": [], "flaps": None, "orphans": None,
                            "fence_rejects": None}}

    def settled(self, terms, ends):
        recs = self.recs
        st = [r for r in recs if r["ev"] in ("settled", "unsettled") and r["src"] == "harness"]
        if not st or st[-1]["ev"] != "settled":
            return [{"why": "the harness saw no settled group (%s)" % (
                "unsettled" if st else "no settled record")}]
        t = st[-1]["mono_ns"]
        e_total = self.cfg.get("E")
        started = {r["src"] for r in recs if r["ev"].startswith("g_") and r["mono_ns"] <= t}
        live = sorted(s for s in started if ends.get(s) is None or ends[s] > t)
        last = {}
        for r in recs:
            if r["ev"] == "g_group" and r["mono_ns"] <= t:
                last[r["src"]] = r
        out = []
        for s in live:
            g = last.get(s)
            if g is None or g.get("members") != len(live) or g.get("moving") != 0 or \
                    g.get("leads") != g.get("target"):
                out.append({"why": "%s at the settled record: group line %s, %d processes live" % (
                    s, None if g is None else {k: g.get(k) for k in (
                        "members", "leads", "target", "moving")}, len(live))})
        targets = sum(last[s].get("target", 0) for s in live if s in last)
        if e_total is not None and targets != e_total:
            out.append({"why": "the targets of the live processes sum to %d, not E = %d" % (
                targets, e_total)})
        led = {}
        for iv in terms:
            if iv["start"] <= t and (iv["end"] is None or iv["end"] > t):
                led.setdefault(iv["e"], []).append(iv["src"])
        bad = {e: v for e, v in led.items() if len(v) != 1}
        if bad:
            out.append({"why": "elections led by more than one process at the settled record: %s"
                        % bad})
        if e_total is not None and len(led) != e_total:
            out.append({"why": "%d of E = %d elections led at the settled record" % (
                len(led), e_total)})
        return out

    def result(self, prop, violations):
        self.results[prop] = {"status": "fail" if violations else "pass",
                              "violations": violations}


def check_counter(values, final, claims, led, ends):
    """The guarded counter's duty (chaos.py sc_guarded_counter), a real
    counter: each term reads the counter's node and sets value + 1 with the
    version it read, in one guarded multi that appends to the audit trail.
    values: the trail as ZooKeeper keeps it, (czxid, value, epoch, name) in
    commit order (value, epoch None: another writer's bytes); final: the
    node's (value, epoch), None if it holds no counter; claims: what the
    leaders' policies say they applied, (candidate, epoch, value); led: the
    epochs of the terms that led; ends: {epoch: zxid}, that term's node was
    deleted before zxid. Checks: every value applied once and by a term that
    led (no value applied twice, claimed by at most one candidate, under its
    epoch), the values consecutive from 1, epochs non-decreasing along them,
    the node's value the number of values applied (its epoch the last's),
    and no value of a term committed after its node was deleted. Returns the
    violations (strings)."""
    bad = []
    by_value = {}
    newest = None
    for i, (zxid, value, epoch, name) in enumerate(values):
        if epoch is None or epoch not in led:
            bad.append("value %s (%s) names epoch %s, not a term that led" % (value, name, epoch))
        if value in by_value:
            bad.append("value %s applied twice: by epochs %s and %s" % (value, by_value[value], epoch))
        elif value != i + 1:
            bad.append("value %s (%s) is number %d applied: not consecutive" % (value, name, i + 1))
        by_value.setdefault(value, epoch)
        if epoch is not None and newest is not None and epoch < newest[1]:
            bad.append("value %s of epoch %d came after value %s of epoch %d (an older term "
                       "wrote after a newer one)" % (value, epoch, newest[0], newest[1]))
        if epoch is not None and (newest is None or epoch > newest[1]):
            newest = (value, epoch)
        if epoch in ends and zxid > ends[epoch]:
            bad.append("value %s of epoch %d was committed (zxid 0x%x) after its term's node was "
                       "deleted (before 0x%x)" % (value, epoch, zxid, ends[epoch]))
    last = values[-1][2] if values else 0
    if final is None or final[0] != len(values) or (values and final[1] != last):
        bad.append("the counter's node holds %s, but %d values were applied (the last by epoch "
                   "%s)" % (final, len(values), last))
    seen = {}
    for cid, epoch, value in claims:
        if value in seen:
            bad.append("value %d claimed twice: by %s and %s" % (value, seen[value], cid))
        seen[value] = cid
        if value not in by_value:
            bad.append("value %d that %s wrote (epoch %d) is not in ZooKeeper" % (value, cid, epoch))
        elif by_value[value] != epoch:
            bad.append("value %d that %s wrote in epoch %d holds epoch %s"
                       % (value, cid, epoch, by_value[value]))
    return bad


def group_verdict_line(summary):
    parts = ["%s:%s" % (k, "ok" if r["status"] == "pass" else "FAIL(%d)" % len(r["violations"]))
             for k, r in summary["properties"].items()]
    m = summary["metrics"]
    return "%s %s %s terms=%s overlaps=%s worst=%sms" % (
        "PASS" if summary["verdict"] == "pass" else "FAIL", summary.get("scenario") or "history",
        " ".join(parts), m.get("terms"), m.get("overlaps"), m.get("overlap_ms_max"))


def verdict_line(summary):
    parts = []
    for k in ("S1", "S2", "S2p", "S3", "S4", "S5", "S6", "S7", "S8", "L1", "L2", "L3", "L4", "E"):
        r = summary["properties"].get(k)
        if r is None:
            continue
        mark = {"pass": "ok", "fail": "FAIL", "skipped": "-"}.get(r["status"], r["status"])
        if r["status"] == "fail":
            mark += "(%d)" % len(r["violations"])
        parts.append("%s:%s" % (k, mark))
    m = summary["metrics"]
    name = summary.get("scenario") or "history"
    head = "PASS" if summary["verdict"] == "pass" else "FAIL"
    extra = "overlaps=%s worst=%sms flaps=%s orphans=%s rejects=%s" % (
        m.get("overlaps"), m.get("overlap_ms_max"), m.get("flaps"), m.get("orphans"),
        m.get("fence_rejects"))
    return "%s %s %s %s" % (head, name, " ".join(parts), extra)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Leader-election history checker (reference §4).",
                                 epilog="Expectations (fault_begin.expect):" + EXPECTATIONS,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("history", nargs="+", help="JSON-lines history file(s)")
    ap.add_argument("--json", metavar="FILE", help="write the JSON summary here ('-' = stdout)")
    ap.add_argument("--timeline", metavar="FILE", help="write leadership intervals as CSV")
    ap.add_argument("--quiet", action="store_true", help="only the verdict line")
    for k in DEFAULTS:
        ap.add_argument("--" + k.replace("_", "-"), dest=k, type=float, metavar="MS"
                        if k.endswith("_ms") else "N", help="override %s" % k)
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code not in (0, None) else 0
    try:
        recs = load(a.history)
        if not recs:
            raise Malformed("empty history")
        group = any(r["ev"] == "config" and r.get("group") for r in recs)
        ck = GroupChecker(recs) if group else Checker(recs, {k: getattr(a, k) for k in DEFAULTS})
        summary = ck.run()
    except Malformed as e:
        print("MALFORMED %s" % e)
        return EXIT_MALFORMED
    line = group_verdict_line(summary) if group else verdict_line(summary)
    print(line)
    if not a.quiet:
        for k, r in summary["properties"].items():
            for w in r["violations"][:5]:
                print("  %s: %s" % (k, w.get("why")))
        for w in summary["warnings"]:
            print("  warning: %s" % w)
    if a.json:
        text = json.dumps(summary, indent=1, default=str)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as f:
                f.write(text + "\n")
    if a.timeline and not group:
        with open(a.timeline, "w") as f:
            f.write(ck.timeline_csv())
    return EXIT_PASS if summary["verdict"] == "pass" else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
