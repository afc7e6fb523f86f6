#!/usr/bin/env python3
"""zkelect demo: three candidates on a local ZooKeeper, two failovers.

Uses the integration tests' harness (tests/integration/zkharness.py) to run
the server and the agents; everything it starts is stopped by pid at the end.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
os.environ.setdefault("ZKELECT_BIN", os.path.join(REPO, "build", "zkelect"))
import zkharness as h  # noqa: E402

POLICY = os.path.join(REPO, "examples", "policy.lua")
SESSION_MS = 2000
T0 = time.time()
shown = {}


def show(agents):
    """Prints the new log lines of every agent, merged by time."""
    lines = []
    for a in agents:
        evs = a.events()
        for ev in evs[shown.get(a.id, 0):]:
            if ev.get("event") in ("start", "log") and ev.get("level") == "info":
                continue
            keys = [k for k in ("reason", "node", "epoch", "leader", "position", "predecessor", "msg")
                    if k in ev and ev[k] is not None]
            detail = " ".join("%s=%s" % (k, ev[k]) for k in keys if k != "msg")
            if "msg" in ev:
                detail = (detail + " " if detail else "") + ev["msg"]
            lines.append((ev["_t"], "%7.3fs  [%s] %-18s %s" % (ev["_t"] - T0, a.id, ev["event"], detail)))
        shown[a.id] = len(evs)
    for _, line in sorted(lines):
        print(line)
    sys.stdout.flush()


def leader_of(agents):
    ls = h.leaders_now(agents)
    return ls[0] if len(ls) == 1 else None


def wait_leader(agents, not_this=None, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        a = leader_of([x for x in agents if x.alive() and x is not not_this])
        if a is not None:
            return a
        time.sleep(0.02)
    raise SystemExit("demo: no leader within %d s" % timeout)


def main():
    print("== zkelect demo: ZooKeeper on a free loopback port, 3 candidates, policy %s" % POLICY)
    with h.ZooKeeper() as zk:
        print("== ZooKeeper %s (pid %d) is up" % (zk.hostport, zk.pid))
        agents = []
        for name in ("alpha", "bravo", "charlie"):
            agents.append(h.Agent(zk, name, script=POLICY, session_timeout=SESSION_MS))
            agents[-1].wait_event("joined", timeout=15)
        h.wait_roles(agents)
        show(agents)
        first = wait_leader(agents)
        print("\n== %s leads. Stopping it with SIGTERM (graceful: on_stepdown, node deleted)..." % first.id)
        t = time.time()
        first.term()
        code = first.wait_exit(15)
        second = wait_leader(agents, not_this=first)
        ev = second.last("leader")
        show(agents)
        print("== %s exited with %d; %s took over %.1f ms after the signal (no session timeout)"
              % (first.id, code, second.id, (ev["_t"] - t) * 1000))
        print("\n== Now killing %s with SIGKILL: the others wait for its session (%d ms) to expire..."
              % (second.id, SESSION_MS))
        t = time.time()
        second.kill9()
        third = wait_leader(agents, not_this=second, timeout=SESSION_MS / 1000 * 5)
        ev = third.last("leader")
        show(agents)
        print("== %s took over %.0f ms after the kill (session timeout %d ms)"
              % (third.id, (ev["_t"] - t) * 1000, SESSION_MS))
        print("\n== Cleaning up.")
        third.term()
        third.wait_exit(15)
        show(agents)
    h.stop_all_agents()
    print("== done")


if __name__ == "__main__":
    try:
        main()
    finally:
        h.stop_all_agents()
