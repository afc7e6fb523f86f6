#!/usr/bin/python3
"""kazoo_candidate: one kazoo Election contender, for the mixed-election tests
(tests/integration/test_mixed.py).

    python3 kazoo_candidate.py HOSTPORT PATH ID [SESSION_MS]

Prints one JSON line per event on stdout (flushed), the same contract as
CuratorCandidate.java:
  {"event":"started","id":...}                    the client is connected, contending
  {"event":"leader","id":...,"node":...,"t":MONO_NS,"contenders":[...]}
  {"event":"stepdown","id":...,"node":...,"t":MONO_NS}   leadership ends (before release)
  {"event":"stopped","id":...}
"t" is time.monotonic_ns() (CLOCK_MONOTONIC). On SIGTERM the contender
leaves: a leader returns from its leader function (the Lock is released, our
node deleted), a waiting contender cancels (its node is deleted); then the
client is stopped and the process exits 0.
"""
import json
import signal
import sys
import threading
import time

from kazoo.client import KazooClient


def emit(event, ident, **kw):
    d = {"event": event, "id": ident, "t": time.monotonic_ns()}
    d.update(kw)
    sys.stdout.write(json.dumps(d) + "\n")
    sys.stdout.flush()


def main():
    if len(sys.argv) < 4:
        sys.stderr.write("usage: kazoo_candidate.py HOSTPORT PATH ID [SESSION_MS]\n")
        return 64
    hosts, path, ident = sys.argv[1], sys.argv[2], sys.argv[3]
    session_ms = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    stop = threading.Event()
    client = KazooClient(hosts=hosts, timeout=session_ms / 1000.0)
    client.start(timeout=15)
    election = client.Election(path, ident)

    def lead():
        node = election.lock.node
        emit("leader", ident, node=node, contenders=election.contenders())
        stop.wait()             # lead until asked to stop
        emit("stepdown", ident, node=node)

    def contend():
        election.run(lead)      # returns after lead() returns or on cancel()

    def on_term(signum, frame):
        stop.set()
        election.cancel()       # a waiting contender gives up (and deletes its node)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    t = threading.Thread(target=contend, daemon=True)
    t.start()
    for _ in range(1000):
        if election.lock.node is not None:
            break
        time.sleep(0.01)
    emit("started", ident, node=election.lock.node)
    while not stop.is_set():
        stop.wait(0.2)
    t.join(10)
    client.stop()
    client.close()
    emit("stopped", ident)
    return 0


if __name__ == "__main__":
    sys.exit(main())
