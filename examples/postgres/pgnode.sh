#!/bin/sh
# examples/postgres/pgnode.sh: the PostgreSQL side of postgres.lua, one
# subcommand per step (README.md says why each one does what it does).
#   pgnode.sh check-primary                 the leader's health: ready, not in recovery
#   pgnode.sh follow LEADER MAX_LAG         a follower's health: be a streaming standby of
#                                           LEADER (host:port, may be empty); exit 0 once it
#                                           is one and at most MAX_LAG bytes behind
#   pgnode.sh promote EPOCH [OTHER...]      the fence (no OTHER standby ahead of this one),
#                                           the promotion, the term's epoch
#   pgnode.sh fence [TENTHS]                stop the local server (on_stepdown): a fast
#                                           shutdown, an immediate one after TENTHS/10 s,
#                                           SIGKILL to its processes 0.2 s later
# Environment: PGDATA, PGPORT, PG_NAME (this node's name, for application_name),
# PG_BIN (default /usr/lib/postgresql/15/bin), PG_HOST (default 127.0.0.1),
# PG_OS_USER (default postgres: the commands run as that user when started as
# root), PG_LOG (default $PGDATA.log), PG_SOCKDIR (default /tmp).
set -eu
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
: "${PGDATA:?PGDATA must name the data directory}" "${PGPORT:?PGPORT must name the port}"
PG_HOST=${PG_HOST:-127.0.0.1}
PG_NAME=${PG_NAME:-$(hostname)_$PGPORT}
PG_LOG=${PG_LOG:-$PGDATA.log}
PG_SOCKDIR=${PG_SOCKDIR:-/tmp}
PG_OS_USER=${PG_OS_USER:-postgres}
cd /   # the agent's directory may be closed to PG_OS_USER

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u "$PG_OS_USER" -- "$@"; else "$@"; fi; }
die() { echo "$*" >&2; exit 1; }
NL='
'
# psql against host:port ($1), one statement ($2), unaligned, 2 s to connect
q() { PGCONNECT_TIMEOUT=2 "$PG_BIN/psql" -XAtq -v ON_ERROR_STOP=1 -h "${1%:*}" -p "${1##*:}" \
        -U postgres -d postgres -c "$2"; }
sql() { q "$PG_HOST:$PGPORT" "$1"; }
ready() { "$PG_BIN/pg_isready" -q -h "$PG_HOST" -p "$PGPORT" -t 2; }
# a process that has not ended: a zombie has (the one whose parent, pid 1 or a
# subreaper, has not reaped it yet: the postmaster's parent is not pg_ctl)
alive() { st=; read -r st 2>/dev/null </proc/"$1"/stat || return 1; st=${st##*) }; [ "${st%% *}" != Z ]; }
# the postmaster's pid into $pm while it runs; builtins only: health() runs
# this every second, and a process per step is what such a check costs
pm_pid() {
  pm=; p=; c=
  read -r p 2>/dev/null <"$PGDATA/postmaster.pid" || return 1
  case $p in ''|*[!0-9]*) return 1 ;; esac
  alive "$p" && read -r c 2>/dev/null </proc/"$p"/comm && [ "$c" = postgres ] || return 1
  pm=$p
}
running() { pm_pid; }
# a WAL position X/Y (hex) as a number of bytes, into $n
lsn_n() {
  case $1 in ''|*[!0-9A-Fa-f/]*|*/*/*|/*|*/) die "not a WAL position: '$1'" ;; esac
  n=$(( (0x${1%/*} << 32) + 0x${1#*/} ))
}
conninfo() { echo "host=${1%:*} port=${1##*:} user=postgres application_name=$PG_NAME"; }
start() {  # node-specific settings on the command line: pg_rewind copies the config files
  as_pg "$PG_BIN/pg_ctl" start -w -t 60 -D "$PGDATA" -l "$PG_LOG" \
    -o "-p $PGPORT -c listen_addresses=$PG_HOST -c unix_socket_directories=$PG_SOCKDIR -c cluster_name=$PG_NAME" >/dev/null
}
# centiseconds since boot (CLOCK_BOOTTIME, no fork): deadlines that the
# machine's load cannot stretch, as a count of sleeps would be
now_cs() { read -r up _ </proc/uptime; now=$(( ${up%.*} * 100 + 1${up#*.} - 100 )); }
stop() {  # a fast shutdown (SIGINT); an immediate one (SIGQUIT) after $1 tenths of a
          # second; 0.2 s later SIGKILL to the server's process group (pg_ctl starts the
          # postmaster in a session of its own): stopped within $1/10 + 0.2 s and a poll
  pm_pid || return 0; pid=$pm
  kill -INT "$pid" 2>/dev/null || return 0
  now_cs; quit=$((now + ${1:-50} * 10)); hard=$((quit + 20)); step=int
  while alive "$pid"; do         # the postmaster ends after its children
    now_cs
    if [ "$now" -ge "$hard" ]; then
      [ "$step" = kill ] && [ "$now" -ge $((hard + 100)) ] && return 1
      [ "$step" = kill ] || { kill -KILL "-$pid" 2>/dev/null; step=kill; }
    elif [ "$now" -ge "$quit" ] && [ "$step" = int ]; then
      kill -QUIT "$pid" 2>/dev/null; step=quit
    fi
    sleep 0.02
  done
  [ "$step" = kill ] && echo "the server did not stop in time: killed" >&2
  return 0
}
LSN_OF="SELECT CASE WHEN pg_is_in_recovery() THEN greatest(pg_last_wal_receive_lsn(),
          pg_last_wal_replay_lsn()) ELSE pg_current_wal_lsn() END"
lsn_of() { q "$1" "$LSN_OF"; }  # the furthest WAL position a server has (received or replayed, or written)
# rewind against the leader, then start as its standby (the server is stopped)
rewind_follow() {
  # pg_rewind's own crash recovery (single-user) refuses a standby.signal
  rm -f "$PGDATA/standby.signal"
  as_pg "$PG_BIN/pg_rewind" -D "$PGDATA" --source-server="$(conninfo "$1") dbname=postgres" \
    >>"$PG_LOG" 2>&1 || die "pg_rewind against $1 failed (see $PG_LOG)"
  as_pg sh -c 'touch "$1/standby.signal" && printf "primary_conninfo = '"'%s'"'\n" "$2" >>"$1/postgresql.auto.conf"' \
    sh "$PGDATA" "$(conninfo "$1")"
  rm -f "$PGDATA/zkelect.nostream"
  start
}

cmd=${1:-}; [ $# -gt 0 ] && shift
# every HOST:PORT argument ends up in a conninfo string and in SQL
for a in "$@"; do
  case $a in *[!A-Za-z0-9.:-]*) die "not a HOST:PORT (or a number): $a" ;; esac
done
case $cmd in
check-primary)
  r=$(sql 'SELECT pg_is_in_recovery()' 2>/dev/null) || die "not accepting connections"
  [ "$r" = f ] || die "in recovery: not a primary"
  ;;
follow)
  leader=${1:-}; max_lag=${2:?MAX_LAG}
  if ! running; then
    [ -n "$leader" ] || die "stopped, and no leader to follow"
    rewind_follow "$leader"
    die "rewound and started as a standby of $leader"
  fi
  # the local state, then the leader's WAL position, in one psql (a process
  # is what a check costs): one line each; fields split by builtins, the
  # conninfo last, as the one field that might hold a '|'
  out=$(PGCONNECT_TIMEOUT=2 "$PG_BIN/psql" -XAtq -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PGPORT" \
          -U postgres -d postgres -c "SELECT pg_is_in_recovery(), (SELECT count(*) FROM
            pg_stat_wal_receiver WHERE status = 'streaming'), coalesce(pg_last_wal_receive_lsn()::text,
            ''), coalesce(pg_last_wal_replay_lsn()::text, ''), current_setting('primary_conninfo')" \
          ${leader:+-c} ${leader:+"\\connect 'host=${leader%:*} port=${leader##*:} user=postgres dbname=postgres'"} \
          ${leader:+-c} ${leader:+"$LSN_OF"} 2>/dev/null) || :   # the leader may not answer
  row=${out%%"$NL"*}
  [ -n "$row" ] || die "starting"
  top=; case $out in *"$NL"*) top=${out#*"$NL"} ;; esac
  recovery=${row%%|*}; row=${row#*|}; streaming=${row%%|*}; row=${row#*|}
  received=${row%%|*}; row=${row#*|}; replayed=${row%%|*}; following=${row#*|}
  if [ "$recovery" != t ]; then
    stop 50; die "a primary while another leads: stopped (the next check rewinds it)"
  fi
  want="host=${leader%:*} port=${leader##*:} user=postgres application_name=$PG_NAME"  # conninfo, no fork
  if [ -n "$leader" ] && [ "$following" != "$want" ]; then
    sql "ALTER SYSTEM SET primary_conninfo = '$(conninfo "$leader")'" && sql "SELECT pg_reload_conf()" >/dev/null
    rm -f "$PGDATA/zkelect.nostream"
    die "now following $leader"
  fi
  if [ -n "$leader" ] && [ "$streaming" = 0 ]; then
    # a standby that cannot stream from a live leader has diverged (it was
    # ahead of the promoted one): after 5 checks, stop it and rewind
    n=$(( $(cat "$PGDATA/zkelect.nostream" 2>/dev/null || echo 0) + 1 ))
    if [ "$n" -ge 5 ] && [ -n "$(lsn_of "$leader" 2>/dev/null)" ]; then
      stop 50; rm -f "$PGDATA/zkelect.nostream"; die "not streaming from $leader: stopped, to rewind"
    fi
    as_pg sh -c 'echo "$1" >"$2"' sh "$n" "$PGDATA/zkelect.nostream"
  elif [ -e "$PGDATA/zkelect.nostream" ]; then
    rm -f "$PGDATA/zkelect.nostream"
  fi
  [ -n "$received" ] || die "has not streamed since it started"
  lsn_n "$received"; lag=$n; lsn_n "$replayed"; lag=$((lag - n)); mine=$n
  if [ -n "$leader" ] && [ -n "$top" ]; then
    lsn_n "$top"; [ $((n - mine)) -le "$lag" ] || lag=$((n - mine))
  fi
  [ "$lag" -le "$max_lag" ] || die "$lag bytes behind (max_lag_bytes $max_lag)"
  echo "streaming standby, $lag bytes behind"
  ;;
promote)
  epoch=${1:?EPOCH}; shift
  case $epoch in *[!0-9]*) die "EPOCH is a number" ;; esac
  ready || die "not accepting connections: not promoting"
  if [ "$(sql 'SELECT pg_is_in_recovery()')" = t ]; then
    mine=$(sql "SELECT greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())")
    [ -n "$(sql 'SELECT pg_last_wal_receive_lsn()')" ] || die "has not streamed since it started: not promoting"
    seen="$PG_NAME at $mine"
    for other in "$@"; do          # the fence: no reachable standby is ahead at all
      theirs=$(q "$other" "SELECT CASE WHEN pg_is_in_recovery() THEN greatest(pg_last_wal_receive_lsn(),
                 pg_last_wal_replay_lsn()) END" 2>/dev/null) || continue
      [ -n "$theirs" ] || continue  # a primary that does not lead: fenced by the epoch, not a source
      seen="$seen, $other at $theirs"
      # ours read after theirs: a standby still streaming from a live former
      # primary is not refused for bytes that arrived since
      ahead=$(sql "SELECT pg_wal_lsn_diff('$theirs', greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()))::bigint")
      [ "$ahead" -le 0 ] || die "$other is $ahead bytes ahead: not promoting"
    done
    [ "$(sql 'SELECT pg_promote(wait => true, wait_seconds => 30)')" = t ] || die "pg_promote failed"
    # the control file names the new timeline only after a checkpoint: without
    # one, a crash now would leave a data directory pg_rewind reads wrong
    sql "CHECKPOINT"
  fi
  # the epoch commits without waiting for a standby (synchronous_commit = local):
  # no write of this term is acknowledged before a standby has it anyway
  [ "$(sql "SET synchronous_commit = local; UPDATE zkelect_term SET epoch = $epoch, since = now()
            WHERE epoch <= $epoch RETURNING epoch")" = "$epoch" ] ||
    die "zkelect_term holds a newer epoch than $epoch: not taking writes"
  echo "primary at epoch $epoch, WAL at $(sql 'SELECT pg_current_wal_lsn()')${seen:+ (before the promotion: $seen)}"
  ;;
fence)
  stop "${1:-50}" || die "could not stop the server"
  ;;
*) die "usage: pgnode.sh check-primary | follow LEADER MAX_LAG | promote EPOCH [OTHER...] | fence [TENTHS]" ;;
esac
