#!/usr/bin/python3
"""A userspace TCP proxy in front of ZooKeeper servers (reference §3.5).

    python3 proxy.py --control CTRL_SOCKET --log LOG_FILE \\
        LISTEN_HOST:PORT=TARGET_HOST:PORT [...]

One listener per server. Modes, switched at run time through the control
socket (a Unix stream socket; one command line per connection, one JSON
reply line):

    arm [N [PREFIX]]  cut-after-create for the next N (default 1) create
                requests whose path starts with PREFIX (default: any path),
                over all listeners (later connections pass through)
    disarm      back to pass-through
    status      {"armed": n, "cuts": n, "conns": n}

cut-after-create: ZooKeeper frames are a 4-byte big-endian length + body. The
first client frame of a connection is the ConnectRequest (no header); later
frames start with {int32 xid, int32 type}. On a create (opcodes 1 create,
15 create2, 19 createContainer, 21 createTTL) while armed: forward that frame,
stop forwarding server->client bytes at once (else the reply slips through),
wait CUT_DELAY (~200 ms) so the server applies it, then abort both sockets
(RST). The log (JSON lines, CLOCK_MONOTONIC mono_ns) records every connection
and every cut.

Standard library only (asyncio). SIGTERM/SIGINT: exit 0.
"""
import asyncio
import json
import os
import signal
import struct
import sys
import time

CREATE_OPS = {1: "create", 15: "create2", 19: "createContainer", 21: "createTTL"}
CUT_DELAY = 0.2
MAX_FRAME = 64 * 1024 * 1024


class Proxy:
    def __init__(self, log_path):
        self.armed = 0
        self.prefix = ""
        self.cuts = 0
        self.conns = 0
        self.open = set()
        self.log = open(log_path, "a", buffering=1)

    def emit(self, ev, **fields):
        rec = {"mono_ns": time.monotonic_ns(), "wall": time.time(), "src": "proxy",
               "pid": os.getpid(), "ev": ev}
        rec.update(fields)
        self.log.write(json.dumps(rec, separators=(",", ":")) + "\n")

    async def handle(self, creader, cwriter, listen, target):
        peer = cwriter.get_extra_info("peername")
        try:
            sreader, swriter = await asyncio.wait_for(
                asyncio.open_connection(target[0], target[1]), timeout=5.0)
        except (OSError, asyncio.TimeoutError) as e:
            self.emit("upstream_fail", listen=listen, error=str(e))
            cwriter.transport.abort()
            return
        self.conns += 1
        conn = {"blocked": False, "closed": False, "peer": "%s:%s" % (peer[0], peer[1]) if peer else "?"}
        self.open.add(cwriter)
        self.emit("conn", listen=listen, peer=conn["peer"])

        def abort_both():
            if not conn["closed"]:
                conn["closed"] = True
                cwriter.transport.abort()
                swriter.transport.abort()

        async def c2s():
            buf = b""
            first = True
            try:
                while not conn["closed"]:
                    data = await creader.read(65536)
                    if not data:
                        break
                    buf += data
                    out = b""
                    cut = None
                    for _ in range(100000):
                        if len(buf) < 4:
                            break
                        (n,) = struct.unpack(">i", buf[:4])
                        if n < 0 or n > MAX_FRAME:
                            raise ValueError("bad frame length %d" % n)
                        if len(buf) < 4 + n:
                            break
                        frame, buf = buf[:4 + n], buf[4 + n:]
                        if first:
                            first = False
                        elif n >= 12:
                            xid, op = struct.unpack(">ii", frame[4:12])
                            path = create_path(frame) if op in CREATE_OPS else None
                            if path is not None:
                                self.emit("create", listen=listen, peer=conn["peer"], xid=xid,
                                          op=CREATE_OPS[op], path=path, armed=self.armed)
                            if path is not None and self.armed > 0 and path.startswith(self.prefix):
                                self.armed -= 1
                                conn["blocked"] = True   # before the create goes out
                                out += frame
                                cut = (xid, op, path)
                                break
                        out += frame
                    if out:
                        swriter.write(out)
                        await swriter.drain()
                    if cut is not None:
                        self.cuts += 1
                        self.emit("cut", listen=listen, peer=conn["peer"], xid=cut[0],
                                  op=CREATE_OPS[cut[1]], path=cut[2], delay_ms=int(CUT_DELAY * 1000))
                        await asyncio.sleep(CUT_DELAY)
                        abort_both()
                        self.emit("cut_done", listen=listen, peer=conn["peer"])
                        return
            except (OSError, ValueError, asyncio.IncompleteReadError):
                pass
            abort_both()

        async def s2c():
            try:
                while not conn["closed"]:
                    data = await sreader.read(65536)
                    if not data:
                        break
                    if conn["blocked"]:
                        continue              # swallowed: the reply never arrives
                    cwriter.write(data)
                    await cwriter.drain()
            except OSError:
                pass
            if not conn["blocked"]:
                abort_both()

        try:
            await asyncio.gather(c2s(), s2c())
        finally:
            abort_both()
            self.open.discard(cwriter)
            self.emit("close", listen=listen, peer=conn["peer"])

    async def control(self, reader, writer):
        try:
            line = await asyncio.wait_for(reader.readline(), timeout=5.0)
            parts = line.decode("utf-8", "replace").split()
            cmd = parts[0] if parts else ""
            if cmd == "arm":
                n = int(parts[1]) if len(parts) > 1 else 1
                self.armed = n
                self.prefix = parts[2] if len(parts) > 2 else ""
                self.emit("arm", n=n, prefix=self.prefix)
            elif cmd == "disarm":
                self.armed = 0
                self.emit("disarm")
            elif cmd != "status":
                writer.write(b'{"error":"unknown command"}\n')
                await writer.drain()
                return
            writer.write((json.dumps({"armed": self.armed, "cuts": self.cuts,
                                      "conns": self.conns}) + "\n").encode())
            await writer.drain()
        except (OSError, ValueError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()


def create_path(frame):
    """The path of a create request frame (4-byte length, xid, type, then
    the jute string path), or None if the frame is too short."""
    if len(frame) < 16:
        return None
    (ln,) = struct.unpack(">i", frame[12:16])
    if ln < 0 or 16 + ln > len(frame):
        return None
    return frame[16:16 + ln].decode("utf-8", "replace")


def parse_map(s):
    left, right = s.split("=", 1)
    lh, lp = left.rsplit(":", 1)
    th, tp = right.rsplit(":", 1)
    return (lh, int(lp)), (th, int(tp))


async def amain(ctrl, log_path, maps):
    proxy = Proxy(log_path)
    servers = []
    for (lh, lp), target in maps:
        listen = "%s:%d" % (lh, lp)

        def cb(r, w, listen=listen, target=target):
            return proxy.handle(r, w, listen, target)
        servers.append(await asyncio.start_server(cb, lh, lp, reuse_address=True))
    try:
        os.unlink(ctrl)
    except FileNotFoundError:
        pass
    servers.append(await asyncio.start_unix_server(proxy.control, path=ctrl))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    proxy.emit("start", listeners=["%s:%d=%s:%d" % (a[0], a[1], b[0], b[1]) for a, b in maps])
    await stop.wait()
    for s in servers:
        s.close()
    for w in list(proxy.open):
        w.transport.abort()
    proxy.emit("stop", cuts=proxy.cuts, conns=proxy.conns)
    try:
        os.unlink(ctrl)
    except OSError:
        pass


def control(ctrl, cmd, timeout=5.0):
    """Client side of the control socket (used by the harness)."""
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(ctrl)
        s.sendall((cmd + "\n").encode())
        buf = b""
        for _ in range(1000):
            b = s.recv(4096)
            if not b:
                break
            buf += b
            if b"\n" in buf:
                break
    return json.loads(buf.decode() or "{}")


def main(argv):
    args = argv[1:]
    ctrl = log = None
    maps = []
    i = 0
    try:
        while i < len(args):
            if args[i] == "--control":
                ctrl = args[i + 1]
                i += 2
            elif args[i] == "--log":
                log = args[i + 1]
                i += 2
            else:
                maps.append(parse_map(args[i]))
                i += 1
    except (IndexError, ValueError):
        maps = []
    if not ctrl or not log or not maps:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 64
    asyncio.run(amain(ctrl, log, maps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
