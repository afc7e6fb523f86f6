#!/bin/sh
# examples/postgres/setup.sh: a new cluster for postgres.lua, on one host.
#   setup.sh BASE sync|async PORT1 PORT2 [PORT3]
# BASE/n1 (PORT1) becomes the primary (initdb, the zkelect_term table and its
# trigger, a demo table `items`), BASE/n2... its streaming standbys
# (pg_basebackup); all of them are started. BASE must be writable by
# PG_OS_USER (default postgres; run as root, the commands run as that user).
# Loopback only, trust authentication: a test bed, not a production setup.
set -eu
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_OS_USER=${PG_OS_USER:-postgres}
base=${1:?BASE}; mode=${2:?sync or async}; shift 2
[ $# -ge 2 ] || { echo "setup.sh: a primary and at least one standby port" >&2; exit 64; }
case $mode in sync) names="'ANY 1 (*)'" ;; async) names="''" ;; *) echo "setup.sh: sync or async" >&2; exit 64 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "$PG_OS_USER" -- "$@"; else "$@"; fi; }

node() { export PGDATA="$base/n$1" PGPORT="$2" PG_NAME="n$1"; }
node 1 "$1"
as_pg "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust --no-instructions >/dev/null
as_pg sh -c 'cat >>"$1/postgresql.conf"' sh "$PGDATA" <<CONF
# examples/postgres: the same on every node (node-specific settings are
# command-line options of pgnode.sh: pg_rewind and pg_basebackup copy this file)
wal_level = replica
wal_log_hints = on               # pg_rewind needs it (or data checksums)
hot_standby = on
max_wal_senders = 10
wal_keep_size = '256MB'
synchronous_standby_names = $names  # sync: a commit waits for one standby's flush
synchronous_commit = on
wal_receiver_status_interval = 1s
wal_sender_timeout = 5s
wal_receiver_timeout = 5s
wal_retrieve_retry_interval = 500ms
CONF
as_pg sh -c 'echo "host all,replication all 127.0.0.1/32 trust" >>"$1/pg_hba.conf"' sh "$PGDATA"
# the standbys are not there yet: a synchronous primary would wait on them for the schema
as_pg "$PG_BIN/pg_ctl" start -w -D "$PGDATA" -l "$PGDATA.log" \
  -o "-p $PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=${PG_SOCKDIR:-/tmp} -c cluster_name=n1 -c synchronous_standby_names=''" >/dev/null
"$PG_BIN/psql" -XAtq -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -f "$here/schema.sql" >/dev/null
as_pg "$PG_BIN/pg_ctl" stop -w -m fast -D "$PGDATA" >/dev/null
# the primary, as pgnode.sh starts it
as_pg "$PG_BIN/pg_ctl" start -w -D "$PGDATA" -l "$PGDATA.log" \
  -o "-p $PGPORT -c listen_addresses=127.0.0.1 -c unix_socket_directories=${PG_SOCKDIR:-/tmp} -c cluster_name=n1" >/dev/null
primary="127.0.0.1:$1"
i=1
for port in "$@"; do
  [ "$i" -gt 1 ] && {
    node "$i" "$port"
    as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "${primary#*:}" -U postgres -D "$PGDATA" -X stream -c fast
    as_pg sh -c 'touch "$1/standby.signal" && printf "primary_conninfo = '"'%s'"'\n" "$2" >>"$1/postgresql.auto.conf"' \
      sh "$PGDATA" "host=127.0.0.1 port=${primary#*:} user=postgres application_name=n$i"
    as_pg "$PG_BIN/pg_ctl" start -w -D "$PGDATA" -l "$PGDATA.log" \
      -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=${PG_SOCKDIR:-/tmp} -c cluster_name=n$i" >/dev/null
  }
  i=$((i + 1))
done
echo "setup.sh: n1 primary on $primary, $((i - 2)) standby(s), $mode"
