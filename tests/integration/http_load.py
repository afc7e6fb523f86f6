#!/usr/bin/python3
"""Load for the status endpoint, run as a second process by test_http.py.

    http_load.py --duration S --threads N --stop-file F URL [URL ...]

Each thread loops over the URLs until the duration ends or F exists: half of
the threads keep one HTTP/1.1 connection per target, the other half open a
new connection per request. Prints one JSON object: requests, answers by
status code, errors (first few), the slowest answer, and a timeline of
/leader answers per target (sent, answered, status; wall clock) for the
caller to check."""
import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--stop-file")
    ap.add_argument("urls", nargs="+")
    args = ap.parse_args()
    targets = [urllib.parse.urlsplit(u) for u in args.urls]
    lock = threading.Lock()
    res = {"requests": 0, "codes": {}, "errors": [], "nerrors": 0, "max_s": 0.0,
           "leader": {}, "bad_bodies": 0}
    t_end = time.monotonic() + args.duration

    def done():
        return time.monotonic() >= t_end or (args.stop_file and os.path.exists(args.stop_file))

    def worker(k):
        keep = k % 2 == 0
        conns = {}
        i = k
        while not done():
            t = targets[i % len(targets)]
            i += 1
            key = t.netloc
            t0 = time.monotonic()
            w0 = time.time()
            try:
                c = conns.get(key) if keep else None
                if c is None:
                    c = http.client.HTTPConnection(t.hostname, t.port, timeout=5)
                    if keep:
                        conns[key] = c
                c.request("GET", t.path)
                r = c.getresponse()
                body = r.read()
                dt = time.monotonic() - t0
                ok_body = True
                if t.path == "/status" and r.status == 200:
                    try:
                        doc = json.loads(body)
                        ok_body = isinstance(doc, dict) and "role" in doc
                    except ValueError:
                        ok_body = False
                elif t.path == "/metrics" and r.status == 200:
                    ok_body = b"zkelect_is_leader " in body
                with lock:
                    res["requests"] += 1
                    res["codes"][str(r.status)] = res["codes"].get(str(r.status), 0) + 1
                    res["max_s"] = max(res["max_s"], dt)
                    if not ok_body:
                        res["bad_bodies"] += 1
                    if t.path == "/leader":
                        res["leader"].setdefault(key, []).append((w0, time.time(), r.status))
                if not keep:
                    c.close()
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    res["nerrors"] += 1
                    if len(res["errors"]) < 5:
                        res["errors"].append("%s %s: %r" % (key, t.path, e))
                conns.pop(key, None)
        for c in conns.values():
            c.close()

    ths = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(args.threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(args.duration + 30)
    for v in res["leader"].values():
        v.sort()
    json.dump(res, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
