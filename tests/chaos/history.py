"""history: turns what a chaos trial recorded into the checker's input
(reference §4.1): one JSON object per line with mono_ns, wall, src, pid, ev.

Sources:
  * candidates: zkelect's JSON log lines (stderr, `--log json`), mapped by
    `convert_agent_event` (the mapping is the contract with the agent; see
    AGENT_EVENTS below);
  * the fence (tests/chaos/fence.py): already in the checker's format;
  * the proxy (tests/chaos/proxy.py): src "proxy", kept for the timeline;
  * the harness itself: `Recorder.emit`.
"""
import json
import os
import re
import time

ACTION_RE = re.compile(r"^action epoch=(-?[0-9.e+]+)\s*$")
HOOK_START_RE = re.compile(r"^hook_start (\S+)(?: epoch=(-?[0-9.e+]+))?\s*$")
HOOK_END_RE = re.compile(r"^hook_end (\S+)\s*$")

# zkelect event -> checker kind (fields copied as listed)
AGENT_EVENTS = {
    "leader": ("became_leader", ("epoch", "seq", "node", "session", "reason", "previous", "candidates",
                                 "lease_ms")),
    "stepdown": ("stepped_down", ("epoch", "reason", "node")),
    "session": ("session", ("session", "reason")),
    "joined": ("joined", ("node", "seq", "session", "reason")),
    "follower": ("follower", ("node", "seq", "leader", "predecessor", "position")),
    "suspend": ("conn_state", ("reason", "epoch", "lease_ms")),
    "resume": ("conn_state", ("reason", "epoch", "lease_ms")),
    "stopped": ("stopped", ("reason",)),
    "lease": ("lease", ("epoch", "deadline_mono_ns", "deadline_ns")),
    "reload": ("reload", ("msg",)),
}


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def _num(s):
    try:
        return int(s)
    except ValueError:
        return int(float(s))


def convert_agent_event(src, pid, e):
    """One zkelect JSON log line (dict) -> list of checker records."""
    name = e.get("event")
    if "mono_ns" not in e or name in (None, "log", "start"):
        return []
    base = {"mono_ns": int(e["mono_ns"]), "wall": e.get("ts"), "src": src, "pid": pid}
    out = []

    def rec(ev, **f):
        r = dict(base)
        r["ev"] = ev
        r.update({k: v for k, v in f.items() if v is not None})
        out.append(r)
        return r

    if name in AGENT_EVENTS:
        kind, fields = AGENT_EVENTS[name]
        r = rec(kind, **{k: e.get(k) for k in fields})
        if name == "session":
            r["id"] = e.get("session")
        if name in ("suspend", "resume"):
            r["state"] = name
        if name == "lease" and "deadline_mono_ns" not in r and "deadline_ns" in r:
            r["deadline_mono_ns"] = r["deadline_ns"]
        if name == "lease" and "deadline_mono_ns" not in r:
            out.pop()            # a lease line without a deadline: not usable
        # lease_ms (lease left) on leader/suspend/resume: while suspended the
        # lease cannot be renewed, so mono_ns + lease_ms is the deadline (S6);
        # on leader/resume renewals go on unlogged: only a "renewing" marker
        # lease_ms is the lease left truncated to the ms when the agent made
        # the event, at or before the line's stamp: the deadline is before
        # mono_ns + lease_ms + 1 ms, and no earlier bound is sure (a line
        # once put it 0.8 ms early, and an action 0.2 ms after that counted)
        if name in ("leader", "suspend", "resume") and isinstance(e.get("lease_ms"), int):
            rec("lease", epoch=e.get("epoch"),
                deadline_mono_ns=int(e["mono_ns"]) + (e["lease_ms"] + 1) * 1000000,
                lease_ms=e["lease_ms"], renewing=(name != "suspend"))
    elif name == "script":
        msg = (e.get("msg") or "").strip()
        m = ACTION_RE.match(msg)
        if m:
            ep = _num(m.group(1))
            rec("action_begin", epoch=ep, action="tick", hook=e.get("hook"))
            rec("action_end", epoch=ep, action="tick", rc=0)
            return out
        m = HOOK_START_RE.match(msg)
        if m:
            rec("hook_start", hook=m.group(1), epoch=_num(m.group(2)) if m.group(2) else None)
            return out
        m = HOOK_END_RE.match(msg)
        if m:
            rec("hook_end", hook=m.group(1))
            return out
        rec("script", msg=msg, hook=e.get("hook"), level=e.get("level"))
    elif name == "fail_stop":
        # the fail-stop watcher (a process of its own, same log): kept as is
        rec("fail_stop", msg=(e.get("msg") or "")[:500], level=e.get("level"))
    elif name == "hook_error":
        msg = e.get("msg") or ""
        killed = "budget" in msg or "exceeded" in msg or "timeout" in msg or "timed out" in msg
        rec("hook_end", hook=e.get("hook") or "?", killed=killed, error=msg[:300])
    else:
        rec("agent_" + name, **{k: v for k, v in e.items()
                                if k not in ("ts", "level", "id", "event", "mono_ns") and not k.startswith("_")})
    return out


class Recorder:
    """Harness-side records of one trial."""

    def __init__(self):
        self.recs = []
        self.pid = os.getpid()

    def emit(self, ev, t=None, **fields):
        r = {"mono_ns": t if t is not None else time.monotonic_ns(), "wall": time.time(),
             "src": "harness", "pid": self.pid, "ev": ev}
        r.update(fields)
        self.recs.append(r)
        return r


def read_jsonl(path):
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue          # a line cut by a kill: the checker input stays valid
                if isinstance(r, dict):
                    out.append(r)
    except OSError:
        pass
    return out


def write_history(path, recorder, agents, extra_files=()):
    """Merges everything into one JSON-lines file sorted by mono_ns.
    agents: [(src, pid, [zkelect event dicts], exit_record or None)]."""
    bid = boot_id()
    recs = list(recorder.recs)
    for src, pid, events, _ in agents:
        conv = []
        for e in events:
            conv.extend(convert_agent_event(src, pid, e))
        if conv:
            first = min(r["mono_ns"] for r in conv)
            recs.append({"mono_ns": first, "wall": None, "src": src, "pid": pid, "ev": "meta",
                         "boot_id": bid})
        recs.extend(conv)
    for _, _, _, ex in agents:
        if ex is not None:
            recs.append(ex)
    for p in extra_files:
        got = read_jsonl(p)
        if got:
            recs.append({"mono_ns": min(r["mono_ns"] for r in got), "wall": None,
                         "src": got[0].get("src", "?"), "pid": got[0].get("pid", 0), "ev": "meta",
                         "boot_id": bid})
        recs.extend(got)
    order = {id(r): i for i, r in enumerate(recs)}
    recs.sort(key=lambda r: (r["mono_ns"], order[id(r)]))
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r, separators=(",", ":"), default=str) + "\n")
    return len(recs)
