/*
 * metrics.h - what a running candidate has been through, for operators:
 * counters, the last transitions, hook statistics, rendered on demand as
 * the /status JSON document and the /metrics Prometheus text.
 *
 * The owner feeds it: every agent event (metrics_event), every finished hook
 * run (metrics_hook), every reload (metrics_reload). Rendering also reads the
 * agent's live state (role, lease, leader) with zke_agent_view() (a reader:
 * the census keeps the leader of a follower further back fresh), so it must
 * be called from the loop, not from inside an agent callback's caller chain
 * that is freeing the agent. The only I/O: /proc/self/stat and /proc/stat
 * once in metrics_new (the process's start time), and /proc/self/stat and a
 * listing of /proc/self/fd at each metrics_prometheus (the process_*
 * metrics, left out when /proc cannot be read); with metrics_set_tls, a
 * stat() of the certificate and key files at each rendering, and a reading
 * of them (zke_check_tls) when either changed.
 */
#ifndef ZKELECT_METRICS_H
#define ZKELECT_METRICS_H

#include <stddef.h>
#include "zkelect.h"

typedef struct metrics metrics;

/* id and path are copied. NULL when out of memory. */
metrics *metrics_new(const char *id, const char *path);
void metrics_free(metrics *m);

/* Records one agent event (transitions, session state, candidates). */
void metrics_event(metrics *m, const struct zke_event *ev);
/* Records one finished hook run. */
void metrics_hook(metrics *m, const char *hook, enum zke_hook_outcome o, double seconds);
/* Records a script reload: ok 1 loaded, 0 refused. */
void metrics_reload(metrics *m, int ok);

/* --notify: its calls are counted and shown (zkelect_notify_calls_total,
 * every event and outcome from 0). One more call of event (leader,
 * follower, stepdown, suspend, resume) ended with outcome (notifier.h's
 * names: ok, failed, timed_out, preempted, skipped, error); others are
 * ignored. */
void metrics_notify_enable(metrics *m);
void metrics_notify(metrics *m, const char *event, const char *outcome);

/* -- CMD: its runs are counted and shown (zkelect_command_*, from 0). */
enum metrics_cmd_exit { METRICS_CMD_OK = 0, METRICS_CMD_FAILED, METRICS_CMD_NOT_STARTED };
void metrics_command_enable(metrics *m);
/* A run began; one that --restart began is also a restart. */
void metrics_command_start(metrics *m);
void metrics_command_restart(metrics *m);
/* It ended during its term, not stopped by the step-down. */
void metrics_command_exit(metrics *m, enum metrics_cmd_exit how);
/* The step-down SIGKILLed it (its grace after SIGTERM ran out). */
void metrics_command_kill(metrics *m);

/* The policy's Lua memory in bytes, shown as lua_bytes / zkelect_lua_memory_bytes;
 * negative (the default): no script, not shown. */
void metrics_set_lua_bytes(metrics *m, long long bytes);

/* --zk-tls-*: the client certificate's end and whether the files would
 * pass the start's checks now, shown as /status's "tls" and the
 * zkelect_tls_cert_* gauges. The files are read again when they change
 * (stat: inode, size, mtime), as the client reads them again at every
 * connection. tls is borrowed: it outlives m. NULL: no TLS (not shown). */
void metrics_set_tls(metrics *m, const struct zke_tls *tls);

/* Rendered documents, malloc'd (the caller frees), NULL when out of memory.
 * a may be NULL (the agent is gone): only what was recorded is shown (the
 * ZooKeeper request counters, read from the agent's session, as 0). */
char *metrics_status_json(const metrics *m, zke_agent *a, size_t *len);
char *metrics_prometheus(const metrics *m, zke_agent *a, size_t *len);

#endif
