#!/usr/bin/python3
"""examples/postgres/writer.py: a writer that carries the term's epoch.

    writer.py HOST PORT ACKS_FILE [--interval SECONDS] [--term epoch|timeline]

Connects through HAProxy (HOST:PORT), reads the epoch of the term from
zkelect_term when it connects, and inserts numbered rows into `items`, each
with that epoch; the trigger of schema.sql rejects a row whose epoch is not
the current term's. Every acknowledged row (the commit returned: with
synchronous replication, a standby has flushed it) is one JSON line in
ACKS_FILE: {"n": N, "epoch": E, "t": wall-clock seconds}; a failed attempt is
{"err": "...", "n": N, "t": ...}. On any error it reconnects (and reads the
epoch again) after 20 ms. Runs until SIGTERM. `--term timeline` (for a
cluster run by another HA agent, bench/postgres/run) sends the server's
timeline instead of the epoch, with the trigger dropped.
"""
import argparse
import json
import signal
import sys
import time

import psycopg2

stop = False
TERM_SQL = {
    "epoch": "SELECT epoch FROM zkelect_term",
    # the timeline of the WAL insert position: a promotion starts a new one
    "timeline": "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int",
}


def on_term(*_):
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("acks")
    ap.add_argument("--interval", type=float, default=0.0)
    ap.add_argument("--term", choices=("epoch", "timeline"), default="epoch")
    a = ap.parse_args()
    host, port, path, interval = a.host, a.port, a.acks, a.interval
    term_sql = TERM_SQL[a.term]
    signal.signal(signal.SIGTERM, on_term)
    out = open(path, "a", buffering=1)
    conn, epoch, n = None, None, 0
    while not stop:
        n += 1
        try:
            if conn is None:
                conn = psycopg2.connect(host=host, port=port, user="postgres", dbname="postgres",
                                        connect_timeout=1)
                conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute(term_sql)
                    epoch = cur.fetchone()[0]
            with conn.cursor() as cur:
                cur.execute("INSERT INTO items (id, epoch) VALUES (%s, %s)", (n, epoch))
            out.write(json.dumps({"n": n, "epoch": epoch, "t": time.time()}) + "\n")
            if interval:
                time.sleep(interval)
        except psycopg2.Error as e:
            out.write(json.dumps({"err": str(e).strip()[:200], "n": n, "t": time.time()}) + "\n")
            try:
                if conn is not None:
                    conn.close()
            except psycopg2.Error:
                pass
            conn = None
            time.sleep(0.02)
    out.close()


if __name__ == "__main__":
    main()
