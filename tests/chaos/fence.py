#!/usr/bin/python3
"""The fenced fake resource of the chaos suite (reference §3.11).

    python3 fence.py SOCKET_PATH LOG_PATH [--state FILE]

A Unix stream socket server on a filesystem path (such sockets cross network
namespaces, so a partitioned leader can still reach it: the worst case).
Clients (tests/tools/fence_writer.c) send lines

    W <cand> <epoch> <n>\\n

The fence keeps max_epoch_seen. epoch >= max_epoch_seen: reply "OK\\n" and log
an `accept`; else reply "REJECT <max>\\n" and log a `reject`. Every log line is
one JSON object with CLOCK_MONOTONIC `mono_ns` (time.monotonic_ns()), `wall`,
`src` = "fence", `pid`, `ev`; accepts and rejects carry cand, epoch, n and the
writer's pid (SO_PEERCRED, `peer_pid`), so the harness can kill orphaned
writers by pid. `connect` / `disconnect` lines too.

The same socket holds a marker table: state a term sets and must undo, with
no epoch to fence it (a virtual IP address on a candidate's host). Lines

    M SET <cand> <epoch> <via>\\n     M CLEAR <cand> <epoch> <via>\\n

(`fence_writer --mark set|clear`; via is "hook" or "fence:<reason>") set or
remove cand's marker, whatever it held before: every request is granted
("OK\\n"), as an `ip addr` on that host would be. Logged as `marker_set`
{cand, epoch, via, replaced: the epoch of cand's marker it replaced or null,
others: [{cand, epoch}] the other candidates' markers at that moment} and
`marker_clear` {cand, epoch, via, removed: the epoch of the marker removed or
null}: the checker's S8 (state exclusion) reads them.

--state FILE keeps max_epoch_seen across restarts of the fence (the writers
reconnect). SIGTERM/SIGINT: close and exit 0. Standard library only.
"""
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time


class Fence:
    def __init__(self, path, log_path, state_path=None):
        self.path = path
        self.state_path = state_path
        self.max_epoch = None
        if state_path and os.path.exists(state_path):
            try:
                with open(state_path) as f:
                    self.max_epoch = int(f.read().strip())
            except (OSError, ValueError):
                self.max_epoch = None
        self.log = open(log_path, "a", buffering=1)
        self.sel = selectors.DefaultSelector()
        self.clients = {}      # sock -> {"buf": bytes, "peer_pid": int}
        self.stopping = False
        self.accepts = 0
        self.rejects = 0
        self.markers = {}      # cand -> epoch of its marker
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        os.chmod(path, 0o666)
        self.srv.listen(64)
        self.srv.setblocking(False)
        self.sel.register(self.srv, selectors.EVENT_READ, None)
        self.emit("start", max_epoch=self.max_epoch, socket=path)

    def emit(self, ev, **fields):
        rec = {"mono_ns": time.monotonic_ns(), "wall": time.time(), "src": "fence",
               "pid": os.getpid(), "ev": ev}
        rec.update(fields)
        self.log.write(json.dumps(rec, separators=(",", ":")) + "\n")

    def _accept(self):
        for _ in range(64):
            try:
                c, _ = self.srv.accept()
            except (BlockingIOError, InterruptedError):
                return
            c.setblocking(False)
            peer = None
            try:
                cred = c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                peer = struct.unpack("3i", cred)[0]
            except OSError:
                pass
            self.clients[c] = {"buf": b"", "peer_pid": peer}
            self.sel.register(c, selectors.EVENT_READ, None)
            self.emit("connect", peer_pid=peer)

    def _drop(self, c):
        info = self.clients.pop(c, None)
        try:
            self.sel.unregister(c)
        except (KeyError, ValueError):
            pass
        c.close()
        if info is not None:
            self.emit("disconnect", peer_pid=info["peer_pid"])

    def _marker(self, info, parts):
        op, cand, epoch, via = parts[1], parts[2], int(parts[3]), parts[4]
        if op == "SET":
            others = [{"cand": k, "epoch": v} for k, v in sorted(self.markers.items()) if k != cand]
            replaced = self.markers.get(cand)
            self.markers[cand] = epoch
            self.emit("marker_set", cand=cand, epoch=epoch, via=via, replaced=replaced,
                      others=others, peer_pid=info["peer_pid"])
        else:
            removed = self.markers.pop(cand, None)
            self.emit("marker_clear", cand=cand, epoch=epoch, via=via, removed=removed,
                      peer_pid=info["peer_pid"])
        return b"OK\n"

    def _line(self, c, info, line):
        parts = line.decode("utf-8", "replace").split()
        if len(parts) == 5 and parts[0] == "M" and parts[1] in ("SET", "CLEAR"):
            try:
                return self._marker(info, parts)
            except ValueError:
                self.emit("bad", line=line.decode("utf-8", "replace")[:200], peer_pid=info["peer_pid"])
                return b"ERR\n"
        if len(parts) != 4 or parts[0] != "W":
            self.emit("bad", line=line.decode("utf-8", "replace")[:200], peer_pid=info["peer_pid"])
            return b"ERR\n"
        cand = parts[1]
        try:
            epoch = int(parts[2])
            n = int(parts[3])
        except ValueError:
            self.emit("bad", line=line.decode("utf-8", "replace")[:200], peer_pid=info["peer_pid"])
            return b"ERR\n"
        if self.max_epoch is None or epoch >= self.max_epoch:
            if self.max_epoch is None or epoch > self.max_epoch:
                self.max_epoch = epoch
                self._save()
            self.accepts += 1
            self.emit("accept", cand=cand, epoch=epoch, n=n, peer_pid=info["peer_pid"])
            return b"OK\n"
        self.rejects += 1
        self.emit("reject", cand=cand, epoch=epoch, n=n, max_epoch=self.max_epoch,
                  peer_pid=info["peer_pid"])
        return ("REJECT %d\n" % self.max_epoch).encode()

    def _save(self):
        if not self.state_path:
            return
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % self.max_epoch)
        os.replace(tmp, self.state_path)

    def _read(self, c):
        info = self.clients.get(c)
        if info is None:
            return
        try:
            data = c.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(c)
            return
        if not data:
            self._drop(c)
            return
        info["buf"] += data
        out = []
        for _ in range(10000):
            i = info["buf"].find(b"\n")
            if i < 0:
                break
            line, info["buf"] = info["buf"][:i], info["buf"][i + 1:]
            out.append(self._line(c, info, line))
        if len(info["buf"]) > 4096:
            self.emit("bad", line="overlong line", peer_pid=info["peer_pid"])
            self._drop(c)
            return
        if out:
            try:
                c.sendall(b"".join(out))    # tiny replies; the socket buffer takes them
            except OSError:
                self._drop(c)

    def serve(self):
        while not self.stopping:
            for key, _ in self.sel.select(timeout=0.5):
                if key.fileobj is self.srv:
                    self._accept()
                else:
                    self._read(key.fileobj)
        for c in list(self.clients):
            self._drop(c)
        self.sel.close()
        self.srv.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass
        self.emit("stop", accepts=self.accepts, rejects=self.rejects, max_epoch=self.max_epoch,
                  markers=[{"cand": k, "epoch": v} for k, v in sorted(self.markers.items())])
        self.log.close()


def main(argv):
    args = list(argv[1:])
    state = None
    if "--state" in args:
        i = args.index("--state")
        if i + 1 >= len(args):
            print("usage: fence.py SOCKET_PATH LOG_PATH [--state FILE]", file=sys.stderr)
            return 64
        state = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print("usage: fence.py SOCKET_PATH LOG_PATH [--state FILE]", file=sys.stderr)
        return 64
    fence = Fence(args[0], args[1], state)

    def on_sig(signum, frame):
        fence.stopping = True
    signal.signal(signal.SIGTERM, on_sig)
    signal.signal(signal.SIGINT, on_sig)
    fence.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
