#!/usr/bin/python3
"""kazoo_candidate: the kazoo Election candidates of the benchmark (bench/foreign.md).

    /usr/bin/python3 bench/kazoo_candidate.py HOSTPORT PATH SESSION_MS COUNT

(/usr/bin/python3: kazoo is the Debian package python3-kazoo 2.8.0.)

The process hosts COUNT candidates ("slots" 0..COUNT-1), each with its own
KazooClient (own session, timeout=SESSION_MS/1000) and its own
Election(PATH).run(func) in a thread, started in slot order. stdout: one line
per event, one os.write() each: "<mono_us> <slot> <event>[ <detail>]",
mono_us = time.monotonic_ns() // 1000 (CLOCK_MONOTONIC). Events: leader (first
statement of func), node <name> (election.lock.node, polled every 2 ms until
known), stopped, error <text>, and once "<mono_us> -1 ready" when all COUNT
slots are started. No follower line: kazoo has no such callback.
stdin: "stop <slot>", "add", "quit" (EOF = quit). SIGTERM/SIGINT = quit.
"""
import logging
import os
import select
import signal
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState


def now():
    return time.monotonic_ns() // 1000


def emit(us, slot, event):
    line = "%d %d %s\n" % (us, slot, event)
    try:
        os.write(1, line.encode())
    except OSError:
        pass


def error(slot, text):
    emit(now(), slot, "error " + " ".join(str(text).splitlines()))


class Slot:
    def __init__(self, idx, hosts, path, session_ms):
        self.idx = idx
        self.stopping = False
        self.stop_lock = threading.Lock()
        self.stopped = False
        self.done = threading.Event()       # "stopped" printed
        self.release = threading.Event()    # the leader function returns
        self.client = KazooClient(hosts=hosts, timeout=session_ms / 1000.0)
        self.client.add_listener(self.on_state)
        self.election = self.client.Election(path, "%d-%d" % (os.getpid(), idx))
        self.thread = None

    def on_state(self, state):
        if not self.stopping and state != KazooState.CONNECTED:
            error(self.idx, "connection %s" % state)

    def lead(self):
        t = now()
        emit(t, self.idx, "leader")
        self.release.wait()                 # lead until stopped

    def contend(self):
        try:
            self.election.run(self.lead)    # returns when lead() returns or on cancel()
        except Exception as e:              # noqa: BLE001 - reported, not raised
            if not self.stopping:
                error(self.idx, "election: %r" % e)

    def start(self):
        self.client.start(timeout=15)       # blocks until connected
        self.thread = threading.Thread(target=self.contend, name="election-%d" % self.idx,
                                       daemon=True)
        self.thread.start()

    def node(self):
        return self.election.lock.node

    # graceful stop, first half: leave the election (our node is deleted);
    # False if this slot's stop was already begun
    def stop_election(self):
        with self.stop_lock:
            if self.stopped:
                return False
            self.stopped = True
        self.stopping = True
        self.release.set()                  # a leader returns from lead(): the lock is released
        self.election.cancel()              # a waiting contender gives up and deletes its node
        if self.thread is not None:
            self.thread.join(15)
            if self.thread.is_alive():
                error(self.idx, "stop: election thread did not finish in 15 s")
        return True

    # second half: close the session
    def stop_client(self):
        try:
            self.client.stop()
            self.client.close()
        except Exception as e:              # noqa: BLE001
            error(self.idx, "stop: %r" % e)
        emit(now(), self.idx, "stopped")
        self.done.set()

    def stop(self):
        if not self.stop_election():
            return False
        self.stop_client()
        return True


class NodePoller(threading.Thread):
    """One thread, every 2 ms while some slot's node name is unknown."""

    def __init__(self):
        threading.Thread.__init__(self, name="node-poller", daemon=True)
        self.cond = threading.Condition()
        self.pending = []

    def watch(self, slot):
        with self.cond:
            self.pending.append(slot)
            self.cond.notify()

    def run(self):
        while True:
            with self.cond:
                while not self.pending:
                    self.cond.wait()
                snap = list(self.pending)
            for s in snap:
                node = None if s.stopping else s.node()
                if node is not None:
                    emit(now(), s.idx, "node " + node)
                if node is not None or s.stopping:
                    with self.cond:
                        self.pending.remove(s)
            time.sleep(0.002)


def main():
    if len(sys.argv) != 5:
        sys.stderr.write("usage: kazoo_candidate.py HOSTPORT PATH SESSION_MS COUNT\n")
        return 64
    hosts, path = sys.argv[1], sys.argv[2]
    session_ms, count = int(sys.argv[3]), int(sys.argv[4])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    def excepthook(args):
        error(-1, "uncaught in %s: %r" % (args.thread.name if args.thread else "?", args.exc_value))
    threading.excepthook = excepthook

    # SIGTERM/SIGINT only wake the main loop up (signal.set_wakeup_fd); the
    # graceful stop then runs in the main thread
    term = []
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, lambda signum, frame: term.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: term.append(signum))

    poller = NodePoller()
    poller.start()
    slots = []

    def add():
        s = Slot(len(slots), hosts, path, session_ms)
        slots.append(s)
        try:
            s.start()
            poller.watch(s)
        except Exception as e:              # noqa: BLE001
            error(s.idx, "start: %r" % e)

    def stop_all():
        # leave the election with every slot, the newest first (the back of
        # the queue first: no hand-over inside the process), then close the
        # clients in parallel
        closers = []
        for s in reversed(slots):
            if not s.stop_election():
                continue
            t = threading.Thread(target=s.stop_client, name="close-%d" % s.idx, daemon=True)
            t.start()
            closers.append(t)
        for t in closers:
            t.join(15)
        for s in slots:
            s.done.wait(15)

    for _ in range(count):
        if term:
            break
        add()
    if not term:
        emit(now(), -1, "ready")

    buf = b""
    while not term:
        try:
            r, _, _ = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in r:
            os.read(wake_r, 512)
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            break                           # EOF = quit
        buf += chunk
        quit_now = False
        while b"\n" in buf and not quit_now:
            line, buf = buf.split(b"\n", 1)
            w = line.decode(errors="replace").split()
            if not w:
                continue
            if w == ["quit"]:
                quit_now = True
            elif w == ["add"]:
                add()
            elif len(w) == 2 and w[0] == "stop" and w[1].isdigit():
                i = int(w[1])
                if i >= len(slots):
                    error(i, "stop: no such slot")
                elif not slots[i].stop():
                    error(i, "stop: already stopped")
            else:
                error(-1, "unknown command: " + line.decode(errors="replace"))
        if quit_now:
            break
    stop_all()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
