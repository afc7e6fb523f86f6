#!/usr/bin/python3
"""http_flood PORT SECONDS: floods 127.0.0.1:PORT (a candidate's --status,
run inside the candidate's network namespace) for SECONDS with held and
half-open connections: each connection sends half a request, and half of
them are held open (at most 300 at a time, the oldest closed first) while
the others close at once. Then it closes everything and measures how long
the endpoint takes to answer GET /status (bounded: 5 s). Prints one JSON
line: {"opened": N, "held_max": N, "answer_ms": MS or null, "error": ...}."""
import collections
import json
import socket
import sys
import time

HALF = b"GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: "


def answer(port, bound=5.0):
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < bound:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1.0)
            s.settimeout(1.0)
            s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while not data.endswith(b"}") and len(data) < 1 << 20:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            s.close()
            if data.startswith(b"HTTP/1.1 200"):
                return round((time.monotonic() - t0) * 1000, 1), None
            last = "answer %r" % data[:40]
        except OSError as e:
            last = str(e)
        time.sleep(0.02)
    return None, last


def main():
    port, secs = int(sys.argv[1]), float(sys.argv[2])
    held = collections.deque()
    opened = held_max = 0
    t_end = time.monotonic() + secs
    i = 0
    while time.monotonic() < t_end:
        i += 1
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=0.5)
            s.sendall(HALF)
            opened += 1
            if i % 2:
                held.append(s)
                if len(held) > 300:
                    held.popleft().close()
                held_max = max(held_max, len(held))
            else:
                s.close()
        except OSError:
            time.sleep(0.01)        # refused (the agent stopped) or a full backlog
    for s in held:
        s.close()
    ms, err = answer(port)
    print(json.dumps({"opened": opened, "held_max": held_max, "answer_ms": ms, "error": err}),
          flush=True)


if __name__ == "__main__":
    main()
