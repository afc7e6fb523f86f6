/*
 * metrics.c - counters and history of one candidate, rendered as JSON
 * (cJSON) and as Prometheus text exposition format 0.0.4.
 */
#define _POSIX_C_SOURCE 200809L
#include "metrics.h"
#include "utf8.h"
#include "log.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#define RING 32             /* last transitions kept */
#define MAX_PAIRS 64        /* distinct (event, reason) counters; then "other" */
#define MAX_HOOKS 12

static const double buckets[] = { 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                  1, 2.5, 5, 10, 30, 60 };
#define NBUCKETS (sizeof buckets / sizeof buckets[0])

/* a file as stat() saw it: a change of any is a new file (or a rewrite) */
struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int ok;
};

/* --zk-tls-*: what the files say, read again when one changes */
struct tls_watch {
    const struct zke_tls *tls;   /* borrowed */
    struct file_id cert, key;
    int64_t not_after;           /* the certificate's end, Unix seconds; 0: unreadable */
    int checked;                 /* read at least once */
    int usable;                  /* zke_check_tls passed at the last reading */
};

struct transition {
    int64_t wall_ms;
    enum zke_event_type type;
    char reason[40];
    int64_t epoch;
    int position;
};

struct pair {
    enum zke_event_type type;
    char reason[40];
    uint64_t n;
};

struct hookstat {
    char name[32];
    uint64_t runs, outcome[4];
    uint64_t bucket[NBUCKETS];   /* not cumulative: count with le bucket[i], > bucket[i-1] */
    double sum, max, last;
    enum zke_hook_outcome last_outcome;
};

/* --notify's events and its calls' outcomes (notifier.h), in the order shown */
static const char *const notify_events[] = { "leader", "follower", "stepdown", "suspend", "resume" };
static const char *const notify_outcomes[] = { "ok", "failed", "timed_out", "preempted", "skipped",
                                               "error" };
#define NOTIFY_EVENTS (sizeof notify_events / sizeof notify_events[0])
#define NOTIFY_OUTCOMES (sizeof notify_outcomes / sizeof notify_outcomes[0])
static const char *const cmd_exits[] = { "ok", "failed", "not_started" };   /* metrics_cmd_exit */
#define CMD_EXITS (sizeof cmd_exits / sizeof cmd_exits[0])

struct metrics {
    char *id, *path;
    int64_t start_wall_ms;
    struct transition ring[RING];
    unsigned nring, ring_next;
    struct pair pairs[MAX_PAIRS];
    int npairs;
    uint64_t other_pairs[ZKE_EV_COUNT];
    struct hookstat hooks[MAX_HOOKS];
    int nhooks;
    const char *session_state;   /* static strings */
    uint64_t connects, reconnects, disconnects, expirations;
    uint64_t reloads_ok, reloads_failed;
    int candidates;
    int64_t role_since_ms;
    long long lua_bytes;         /* < 0: no script */
    int notify;                  /* --notify: its counters are shown */
    uint64_t notify_calls[NOTIFY_EVENTS][NOTIFY_OUTCOMES];
    int command;                 /* -- CMD: its counters are shown */
    uint64_t cmd_starts, cmd_restarts, cmd_kills, cmd_exits[CMD_EXITS];
    double process_start_s;      /* the process's start, seconds since the epoch; < 0 unknown */
    struct tls_watch *tls;       /* --zk-tls-*: NULL without */
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* /proc/self/stat's fields after the command name (which may hold spaces
 * and parentheses: it ends at the last ')'), from field 3 (state) on, in
 * buf. Returns a pointer to field 3, or NULL. */
static const char *proc_stat_fields(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/self/stat", "re");
    if (f == NULL)
        return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' ? p + 2 : NULL;
}

/* Field k (1-based, as in proc(5)) of /proc/self/stat as a number, given
 * the text from field 3 on; 0 when missing. */
static unsigned long long stat_field(const char *from3, int k)
{
    const char *p = from3;
    for (int i = 3; i < k && p != NULL; i++) {
        p = strchr(p, ' ');
        if (p != NULL)
            p++;
    }
    return p != NULL ? strtoull(p, NULL, 10) : 0;
}

/* When this process started: the boot time (/proc/stat btime) plus its
 * start in clock ticks after boot (/proc/self/stat field 22). -1 unknown. */
static double process_start_seconds(void)
{
    char buf[1024];
    const char *f = proc_stat_fields(buf, sizeof buf);
    long hz = sysconf(_SC_CLK_TCK);
    if (f == NULL || hz <= 0)
        return -1;
    unsigned long long ticks = stat_field(f, 22);
    FILE *st = fopen("/proc/stat", "re");
    if (st == NULL)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    double btime = -1;
    while (getline(&line, &cap, st) > 0)
        if (strncmp(line, "btime ", 6) == 0) {
            btime = strtod(line + 6, NULL);
            break;
        }
    free(line);
    fclose(st);
    return btime < 0 ? -1 : btime + (double)ticks / (double)hz;
}

metrics *metrics_new(const char *id, const char *path)
{
    metrics *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    /* valid UTF-8 for JSON strings and Prometheus labels */
    m->id = utf8_clean(id ? id : "", 1024);
    m->path = utf8_clean(path ? path : "", 2048);
    if (m->id == NULL || m->path == NULL) {
        metrics_free(m);
        return NULL;
    }
    m->start_wall_ms = wall_ms();
    m->role_since_ms = m->start_wall_ms;
    m->session_state = "none";
    m->candidates = -1;
    m->lua_bytes = -1;
    m->process_start_s = process_start_seconds();
    return m;
}

void metrics_free(metrics *m)
{
    if (m == NULL)
        return;
    free(m->id);
    free(m->path);
    free(m->tls);
    free(m);
}

static int is_transition(enum zke_event_type t)
{
    return t == ZKE_EV_LEADER || t == ZKE_EV_FOLLOWER || t == ZKE_EV_STEPDOWN ||
           t == ZKE_EV_SUSPEND || t == ZKE_EV_RESUME || t == ZKE_EV_JOINED;
}

static void count_pair(metrics *m, enum zke_event_type t, const char *reason)
{
    for (int i = 0; i < m->npairs; i++)
        if (m->pairs[i].type == t && strcmp(m->pairs[i].reason, reason) == 0) {
            m->pairs[i].n++;
            return;
        }
    if (m->npairs == MAX_PAIRS || strlen(reason) >= sizeof m->pairs[0].reason) {
        m->other_pairs[t]++;
        return;
    }
    struct pair *p = &m->pairs[m->npairs++];
    p->type = t;
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    p->n = 1;
}

void metrics_event(metrics *m, const struct zke_event *ev)
{
    if (m == NULL)
        return;
    const char *reason = ev->reason ? ev->reason : "";
    if (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_FOLLOWER)
        m->candidates = ev->candidates;
    if (ev->type == ZKE_EV_SESSION) {
        if (strcmp(reason, "connected") == 0) {
            m->connects++;
            m->session_state = "connected";
        } else if (strcmp(reason, "reconnected") == 0) {
            m->reconnects++;
            m->session_state = "connected";
        } else if (strcmp(reason, "disconnected") == 0) {
            m->disconnects++;
            m->session_state = "disconnected";
        } else if (strcmp(reason, "expired") == 0) {
            m->expirations++;
            m->session_state = "expired";
        } else if (strcmp(reason, "closed") == 0 || strcmp(reason, "auth_failed") == 0) {
            m->session_state = "closed";
        }
        return;
    }
    if (ev->type == ZKE_EV_STOPPED) {
        m->session_state = "closed";
        return;
    }
    if (!is_transition(ev->type))
        return;
    count_pair(m, ev->type, reason);
    struct transition *t = &m->ring[m->ring_next];
    m->ring_next = (m->ring_next + 1) % RING;
    if (m->nring < RING)
        m->nring++;
    t->wall_ms = wall_ms();
    t->type = ev->type;
    snprintf(t->reason, sizeof t->reason, "%s", reason);
    t->epoch = ev->epoch;
    t->position = ev->type == ZKE_EV_FOLLOWER ? ev->position : ev->type == ZKE_EV_LEADER ? 0 : -1;
    if (ev->type == ZKE_EV_LEADER || ev->type == ZKE_EV_FOLLOWER || ev->type == ZKE_EV_STEPDOWN)
        m->role_since_ms = t->wall_ms;
}

void metrics_hook(metrics *m, const char *hook, enum zke_hook_outcome o, double seconds)
{
    if (m == NULL || hook == NULL)
        return;
    struct hookstat *h = NULL;
    for (int i = 0; i < m->nhooks; i++)
        if (strcmp(m->hooks[i].name, hook) == 0)
            h = &m->hooks[i];
    if (h == NULL) {
        if (m->nhooks == MAX_HOOKS)
            return;
        h = &m->hooks[m->nhooks++];
        snprintf(h->name, sizeof h->name, "%s", hook);
    }
    if (seconds < 0)
        seconds = 0;
    h->runs++;
    h->outcome[o]++;
    h->sum += seconds;
    h->last = seconds;
    h->last_outcome = o;
    if (seconds > h->max)
        h->max = seconds;
    for (size_t i = 0; i < NBUCKETS; i++)
        if (seconds <= buckets[i]) {
            h->bucket[i]++;
            break;
        }
}

static int index_of(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; name != NULL && i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    return -1;
}

void metrics_notify_enable(metrics *m)
{
    if (m != NULL)
        m->notify = 1;
}

void metrics_notify(metrics *m, const char *event, const char *outcome)
{
    if (m == NULL)
        return;
    int e = index_of(notify_events, NOTIFY_EVENTS, event);
    int o = index_of(notify_outcomes, NOTIFY_OUTCOMES, outcome);
    if (e >= 0 && o >= 0)
        m->notify_calls[e][o]++;
}

void metrics_command_enable(metrics *m)
{
    if (m != NULL)
        m->command = 1;
}

void metrics_command_start(metrics *m)
{
    if (m != NULL)
        m->cmd_starts++;
}

void metrics_command_restart(metrics *m)
{
    if (m != NULL)
        m->cmd_restarts++;
}

void metrics_command_exit(metrics *m, enum metrics_cmd_exit how)
{
    if (m != NULL && (size_t)how < CMD_EXITS)
        m->cmd_exits[how]++;
}

void metrics_command_kill(metrics *m)
{
    if (m != NULL)
        m->cmd_kills++;
}

void metrics_reload(metrics *m, int ok)
{
    if (m == NULL)
        return;
    if (ok)
        m->reloads_ok++;
    else
        m->reloads_failed++;
}

static const char *outcome_name(enum zke_hook_outcome o)
{
    switch (o) {
    case ZKE_HOOK_OK: return "ok";
    case ZKE_HOOK_FAILED: return "failed";
    case ZKE_HOOK_TIMEOUT: return "timed_out";
    case ZKE_HOOK_PREEMPTED: return "preempted";
    }
    return "?";
}

static void iso8601(int64_t ms, char *buf, size_t len)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
}

/* --- /status ------------------------------------------------------------ */

#define STATUS_STR_MAX 4096

static void add_str_or_null(cJSON *o, const char *k, const char *v)
{
    char *c = v != NULL ? utf8_clean(v, STATUS_STR_MAX) : NULL;
    if (c != NULL)
        cJSON_AddStringToObject(o, k, c);
    else
        cJSON_AddNullToObject(o, k);
    free(c);
}

void metrics_set_lua_bytes(metrics *m, long long bytes)
{
    if (m != NULL)
        m->lua_bytes = bytes;
}

void metrics_set_tls(metrics *m, const struct zke_tls *tls)
{
    if (m == NULL)
        return;
    free(m->tls);
    m->tls = NULL;
    if (tls == NULL)
        return;
    m->tls = calloc(1, sizeof *m->tls);
    if (m->tls != NULL)
        m->tls->tls = tls;
}

static struct file_id file_id_of(const char *path)
{
    struct stat st;
    struct file_id f;
    memset(&f, 0, sizeof f);
    if (path == NULL || stat(path, &st) != 0)
        return f;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.size = st.st_size;
    f.mtime = st.st_mtim;
    f.ok = 1;
    return f;
}

static int file_id_same(const struct file_id *a, const struct file_id *b)
{
    return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* The files read again when either changed since the last reading: what
 * the next connection will use. Usable: they pass the checks (readable, the
 * key the certificate's) and the certificate has not expired since. */
static int tls_refresh(struct tls_watch *w)
{
    struct file_id c = file_id_of(w->tls->cert), k = file_id_of(w->tls->key);
    if (!w->checked || !file_id_same(&c, &w->cert) || !file_id_same(&k, &w->key)) {
        char err[512];
        w->usable = zke_check_tls(w->tls, &w->not_after, err, sizeof err) == 0;
        w->cert = c;
        w->key = k;
        w->checked = 1;
    }
    return w->usable && w->not_after > (int64_t)time(NULL);
}

/* /status: "tls": the client certificate, its end, usable now; null without TLS */
static void add_tls_json(cJSON *o, const metrics *m)
{
    if (m->tls == NULL) {
        cJSON_AddNullToObject(o, "tls");
        return;
    }
    int usable = tls_refresh(m->tls);
    cJSON *t = cJSON_AddObjectToObject(o, "tls");
    add_str_or_null(t, "cert", m->tls->tls->cert);
    cJSON_AddNumberToObject(t, "cert_expires", (double)m->tls->not_after);
    cJSON_AddBoolToObject(t, "usable", usable);
}

/* /status: the election's size (the census, nodes under the path, foreign
 * ones included, when there is one, else our last listing, which ages),
 * our predecessor, and our term. have: st is the agent's status. */
static void add_place_json(cJSON *o, const metrics *m, int have, const struct zke_status *st)
{
    int cand = have && st->election_size >= 0 ? st->election_size
               : have && st->candidates > 0   ? st->candidates : m->candidates;
    if (cand >= 0)
        cJSON_AddNumberToObject(o, "candidates", cand);
    else
        cJSON_AddNullToObject(o, "candidates");
    add_str_or_null(o, "predecessor", have ? st->predecessor : NULL);
    if (have && st->role == ZKE_ROLE_LEADER) {
        cJSON_AddNumberToObject(o, "epoch", (double)st->epoch);
        cJSON_AddNumberToObject(o, "lease_remaining_ms", (double)st->lease_ms);
    } else {
        cJSON_AddNullToObject(o, "epoch");
        cJSON_AddNullToObject(o, "lease_remaining_ms");
    }
}

/* /status: the leader we know of, or null. */
static void add_leader_json(cJSON *o, int have, const struct zke_status *st)
{
    if (have && (st->leader != NULL || st->leader_node != NULL)) {
        cJSON *l = cJSON_AddObjectToObject(o, "leader");
        add_str_or_null(l, "id", st->leader);
        add_str_or_null(l, "node", st->leader_node);
        add_str_or_null(l, "data", st->leader_data);
        if (st->leader_epoch > 0)
            cJSON_AddNumberToObject(l, "epoch", (double)st->leader_epoch);
        else
            cJSON_AddNullToObject(l, "epoch");
    } else {
        cJSON_AddNullToObject(o, "leader");
    }
}

/* /status: our session and its counters. */
static void add_session_json(cJSON *o, const metrics *m, int have, const struct zke_status *st)
{
    char buf[48];
    cJSON *s = cJSON_AddObjectToObject(o, "session");
    if (have && st->session != 0) {
        snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)st->session);
        cJSON_AddStringToObject(s, "id", buf);
    } else {
        cJSON_AddNullToObject(s, "id");
    }
    cJSON_AddStringToObject(s, "state", have && st->connected ? "connected" : m->session_state);
    cJSON_AddNumberToObject(s, "connects", (double)m->connects);
    cJSON_AddNumberToObject(s, "reconnects", (double)m->reconnects);
    cJSON_AddNumberToObject(s, "disconnects", (double)m->disconnects);
    cJSON_AddNumberToObject(s, "expirations", (double)m->expirations);
}

/* /status: the last transitions (the ring), oldest first. */
static void add_transitions_json(cJSON *o, const metrics *m)
{
    char buf[48];
    cJSON *tr = cJSON_AddArrayToObject(o, "transitions");
    for (unsigned i = 0; i < m->nring; i++) {
        const struct transition *t = &m->ring[(m->ring_next + RING - m->nring + i) % RING];
        cJSON *x = cJSON_CreateObject();
        iso8601(t->wall_ms, buf, sizeof buf);
        cJSON_AddStringToObject(x, "at", buf);
        cJSON_AddNumberToObject(x, "at_ms", (double)t->wall_ms);
        cJSON_AddStringToObject(x, "event", zke_event_name(t->type));
        cJSON_AddStringToObject(x, "reason", t->reason);
        if (t->type == ZKE_EV_LEADER || t->type == ZKE_EV_STEPDOWN || t->type == ZKE_EV_SUSPEND ||
            t->type == ZKE_EV_RESUME)
            cJSON_AddNumberToObject(x, "epoch", (double)t->epoch);
        if (t->position >= 0)
            cJSON_AddNumberToObject(x, "position", t->position);
        cJSON_AddItemToArray(tr, x);
    }
}

/* /status: each hook's runs, outcomes and durations. */
static void add_hooks_json(cJSON *o, const metrics *m)
{
    cJSON *hk = cJSON_AddObjectToObject(o, "hooks");
    for (int i = 0; i < m->nhooks; i++) {
        const struct hookstat *h = &m->hooks[i];
        cJSON *x = cJSON_AddObjectToObject(hk, h->name);
        cJSON_AddNumberToObject(x, "runs", (double)h->runs);
        cJSON_AddNumberToObject(x, "ok", (double)h->outcome[ZKE_HOOK_OK]);
        cJSON_AddNumberToObject(x, "failed", (double)h->outcome[ZKE_HOOK_FAILED]);
        cJSON_AddNumberToObject(x, "timed_out", (double)h->outcome[ZKE_HOOK_TIMEOUT]);
        cJSON_AddNumberToObject(x, "preempted", (double)h->outcome[ZKE_HOOK_PREEMPTED]);
        cJSON_AddNumberToObject(x, "seconds_total", h->sum);
        cJSON_AddNumberToObject(x, "seconds_max", h->max);
        cJSON_AddNumberToObject(x, "last_seconds", h->last);
        cJSON_AddStringToObject(x, "last_outcome", outcome_name(h->last_outcome));
    }
}

char *metrics_status_json(const metrics *m, zke_agent *a, size_t *len)
{
    struct zke_status st;
    int have = a != NULL && zke_agent_view(a, &st) == 0;
    int64_t now = wall_ms();
    char buf[48];
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    cJSON_AddStringToObject(o, "version", ZKELECT_VERSION);
    cJSON_AddStringToObject(o, "id", m->id);
    cJSON_AddStringToObject(o, "path", m->path);
    cJSON_AddNumberToObject(o, "uptime_s", (double)(now - m->start_wall_ms) / 1000.0);
    cJSON_AddStringToObject(o, "role", have ? zke_role_name(st.role) : "stopped");
    iso8601(m->role_since_ms, buf, sizeof buf);
    cJSON_AddStringToObject(o, "role_since", buf);
    add_str_or_null(o, "node", have ? st.node : NULL);
    if (have && st.node != NULL)
        cJSON_AddNumberToObject(o, "seq", st.seq);
    else
        cJSON_AddNullToObject(o, "seq");
    if (have && st.position >= 0)
        cJSON_AddNumberToObject(o, "position", st.position);
    else
        cJSON_AddNullToObject(o, "position");
    add_place_json(o, m, have, &st);
    cJSON_AddBoolToObject(o, "suspended", have && st.suspended);
    cJSON_AddBoolToObject(o, "withdrawn", have && st.withdrawn);
    cJSON_AddNumberToObject(o, "short_terms", have ? (double)st.short_terms : 0.0);
    add_leader_json(o, have, &st);
    add_session_json(o, m, have, &st);
    add_transitions_json(o, m);
    add_hooks_json(o, m);
    cJSON *rl = cJSON_AddObjectToObject(o, "reloads");
    cJSON_AddNumberToObject(rl, "ok", (double)m->reloads_ok);
    cJSON_AddNumberToObject(rl, "failed", (double)m->reloads_failed);
    if (m->lua_bytes >= 0)
        cJSON_AddNumberToObject(o, "lua_bytes", (double)m->lua_bytes);
    add_tls_json(o, m);

    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (txt != NULL && len != NULL)
        *len = strlen(txt);
    return txt;
}

/* --- /metrics ----------------------------------------------------------- */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    if (b->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)n;
        char *q = realloc(b->p, cap);
        if (q == NULL) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

/* A label value escaped per the exposition format: \\ \" \n. */
static void put_label(struct sbuf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            put(b, "\\\\");
        else if (*v == '"')
            put(b, "\\\"");
        else if (*v == '\n')
            put(b, "\\n");
        else
            put(b, "%c", *v);
    }
}

static void head(struct sbuf *b, const char *name, const char *type, const char *help)
{
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* /metrics: our role, term, lease and place in the election. */
static void prom_role(struct sbuf *b, const metrics *m, const zke_agent *a, int have,
                      const struct zke_status *st)
{
    head(b, "zkelect_is_leader", "gauge", "1 while this candidate leads.");
    put(b, "zkelect_is_leader %d\n", have && st->role == ZKE_ROLE_LEADER);
    head(b, "leader_election_master_status", "gauge",
         "1 while this candidate leads the election named (client-go's metric: the sum over "
         "the candidates above 1 is two leaders).");
    put(b, "leader_election_master_status{name=\"");
    put_label(b, m->path);
    put(b, "\"} %d\n", have && st->role == ZKE_ROLE_LEADER);
    head(b, "zkelect_role", "gauge", "The candidate's role (one of them is 1).");
    static const char *const roles[] = { "idle", "follower", "leader", "stopped" };
    int role = have ? (int)st->role : 3;
    for (int i = 0; i < 4; i++)
        put(b, "zkelect_role{role=\"%s\"} %d\n", roles[i], role == i);
    head(b, "zkelect_epoch", "gauge", "Fencing epoch of our current term, 0 when not leading.");
    put(b, "zkelect_epoch %lld\n", have && st->role == ZKE_ROLE_LEADER ? (long long)st->epoch : 0LL);
    head(b, "zkelect_leader_epoch", "gauge", "Epoch the election's leader published, 0 if unknown.");
    put(b, "zkelect_leader_epoch %lld\n",
        have ? (long long)(st->role == ZKE_ROLE_LEADER ? st->epoch : st->leader_epoch) : 0LL);
    head(b, "zkelect_lease_remaining_seconds", "gauge",
         "Lease left while leading (may be negative just before a step-down); 0 otherwise.");
    put(b, "zkelect_lease_remaining_seconds %.3f\n",
        have && st->role == ZKE_ROLE_LEADER ? (double)st->lease_ms / 1000.0 : 0.0);
    struct zke_lease_plan plan;
    head(b, "zkelect_lease_duration_seconds", "gauge",
         "The lease a renewal gives (planned for the session timeout, the smallest one granted "
         "once connected); 0 when the agent is gone.");
    put(b, "zkelect_lease_duration_seconds %.3f\n",
        a != NULL && zke_agent_plan(a, &plan) == 0 ? (double)plan.lease_ms / 1000.0 : 0.0);
    head(b, "zkelect_suspended", "gauge", "1 while a leader is disconnected inside its lease.");
    put(b, "zkelect_suspended %d\n", have && st->suspended);
    head(b, "zkelect_withdrawn", "gauge", "1 while out of the election (failed health checks).");
    put(b, "zkelect_withdrawn %d\n", have && st->withdrawn);
    head(b, "zkelect_short_terms_total", "counter",
         "Terms whose on_leader failed soon after they began (each one more in a row rejoins "
         "twice as late).");
    put(b, "zkelect_short_terms_total %llu\n", have ? st->short_terms : 0ULL);
    head(b, "zkelect_sequence_wrap", "gauge",
         "1 once a listing showed the election's sequence at the 2^31 wrap: rotate the path.");
    put(b, "zkelect_sequence_wrap %d\n", a != NULL && zke_agent_sequence_wrap(a));
    head(b, "zkelect_position", "gauge", "Place in line: 0 leads, 1 next; -1 unknown.");
    put(b, "zkelect_position %d\n", have ? st->position : -1);
    head(b, "zkelect_candidates", "gauge",
         "Nodes in the election (census every few seconds; else our last listing).");
    put(b, "zkelect_candidates %d\n", have && st->election_size >= 0 ? st->election_size
                                       : have && st->candidates > 0 ? st->candidates : m->candidates);
}

/* /metrics: role transitions by event and reason. */
static void prom_transitions(struct sbuf *b, const metrics *m)
{
    head(b, "zkelect_transitions_total", "counter", "Role transitions by event and reason.");
    for (int i = 0; i < m->npairs; i++) {
        put(b, "zkelect_transitions_total{event=\"%s\",reason=\"", zke_event_name(m->pairs[i].type));
        put_label(b, m->pairs[i].reason);
        put(b, "\"} %llu\n", (unsigned long long)m->pairs[i].n);
    }
    for (int t = 0; t < ZKE_EV_COUNT; t++)
        if (m->other_pairs[t] > 0)
            put(b, "zkelect_transitions_total{event=\"%s\",reason=\"other\"} %llu\n",
                zke_event_name((enum zke_event_type)t), (unsigned long long)m->other_pairs[t]);
}

/* /metrics: the session's state and counters. */
static void prom_session(struct sbuf *b, const metrics *m, int have, const struct zke_status *st)
{
    head(b, "zkelect_session_state", "gauge", "ZooKeeper session state (one of them is 1).");
    static const char *const states[] = { "none", "connected", "disconnected", "expired", "closed" };
    const char *cur = have && st->connected ? "connected" : m->session_state;
    for (int i = 0; i < 5; i++)
        put(b, "zkelect_session_state{state=\"%s\"} %d\n", states[i], strcmp(cur, states[i]) == 0);
    head(b, "zkelect_session_connects_total", "counter", "New sessions established.");
    put(b, "zkelect_session_connects_total %llu\n", (unsigned long long)m->connects);
    head(b, "zkelect_session_reconnects_total", "counter", "Reconnections of the same session.");
    put(b, "zkelect_session_reconnects_total %llu\n", (unsigned long long)m->reconnects);
    head(b, "zkelect_session_disconnects_total", "counter", "Connections lost.");
    put(b, "zkelect_session_disconnects_total %llu\n", (unsigned long long)m->disconnects);
    head(b, "zkelect_session_expirations_total", "counter", "Sessions expired by the server.");
    put(b, "zkelect_session_expirations_total %llu\n", (unsigned long long)m->expirations);
}

/* /metrics: hook runs, failures, timeouts and durations. */
static void prom_hooks(struct sbuf *b, const metrics *m)
{
    head(b, "zkelect_hook_runs_total", "counter", "Hook runs by hook and outcome.");
    for (int i = 0; i < m->nhooks; i++)
        for (int o = 0; o < 4; o++)
            put(b, "zkelect_hook_runs_total{hook=\"%s\",outcome=\"%s\"} %llu\n", m->hooks[i].name,
                outcome_name((enum zke_hook_outcome)o), (unsigned long long)m->hooks[i].outcome[o]);
    head(b, "zkelect_hook_duration_seconds", "histogram", "Hook run time, waits included.");
    for (int i = 0; i < m->nhooks; i++) {
        const struct hookstat *h = &m->hooks[i];
        uint64_t cum = 0;
        for (size_t k = 0; k < NBUCKETS; k++) {
            cum += h->bucket[k];
            put(b, "zkelect_hook_duration_seconds_bucket{hook=\"%s\",le=\"%g\"} %llu\n", h->name,
                buckets[k], (unsigned long long)cum);
        }
        put(b, "zkelect_hook_duration_seconds_bucket{hook=\"%s\",le=\"+Inf\"} %llu\n", h->name,
            (unsigned long long)h->runs);
        put(b, "zkelect_hook_duration_seconds_sum{hook=\"%s\"} %.6f\n", h->name, h->sum);
        put(b, "zkelect_hook_duration_seconds_count{hook=\"%s\"} %llu\n", h->name,
            (unsigned long long)h->runs);
    }
}

/* /metrics: --notify's calls by event and outcome (with --notify). */
static void prom_notify(struct sbuf *b, const metrics *m)
{
    if (!m->notify)
        return;
    head(b, "zkelect_notify_calls_total", "counter",
         "--notify calls by event and outcome: ok (exit 0), failed (another code or a signal), "
         "timed_out (ended by --notify-timeout), preempted (a leader-side call ended by its "
         "term's step-down), skipped (its term ended before it started), error (not started).");
    for (size_t e = 0; e < NOTIFY_EVENTS; e++)
        for (size_t o = 0; o < NOTIFY_OUTCOMES; o++)
            put(b, "zkelect_notify_calls_total{event=\"%s\",outcome=\"%s\"} %llu\n",
                notify_events[e], notify_outcomes[o], (unsigned long long)m->notify_calls[e][o]);
}

/* /metrics: the -- CMD command's runs, exits and kills (with a command). */
static void prom_command(struct sbuf *b, const metrics *m)
{
    if (!m->command)
        return;
    head(b, "zkelect_command_starts_total", "counter",
         "Runs of the -- CMD command begun: a term's first and its restarts.");
    put(b, "zkelect_command_starts_total %llu\n", (unsigned long long)m->cmd_starts);
    head(b, "zkelect_command_restarts_total", "counter",
         "Runs of the -- CMD command begun by --restart after it exited during its term.");
    put(b, "zkelect_command_restarts_total %llu\n", (unsigned long long)m->cmd_restarts);
    head(b, "zkelect_command_exits_total", "counter",
         "Exits of the -- CMD command during its term (not stopped by a step-down): ok (code 0), "
         "failed (another code or a signal), not_started (it could not be executed).");
    for (size_t i = 0; i < CMD_EXITS; i++)
        put(b, "zkelect_command_exits_total{outcome=\"%s\"} %llu\n", cmd_exits[i],
            (unsigned long long)m->cmd_exits[i]);
    head(b, "zkelect_command_kills_total", "counter",
         "Step-downs that SIGKILLed the -- CMD command (or what it left in the term's cgroup): "
         "it did not end within its grace after SIGTERM.");
    put(b, "zkelect_command_kills_total %llu\n", (unsigned long long)m->cmd_kills);
}

/* /metrics: ZooKeeper requests sent on the agent's session (zeros without
 * an agent or a session). */
static void prom_requests(struct sbuf *b, const zke_agent *a)
{
    struct zke_requests r;
    if (a == NULL || zke_agent_requests(a, &r) != 0)
        memset(&r, 0, sizeof r);
    head(b, "zkelect_zk_requests_total", "counter", "ZooKeeper requests sent, by operation.");
    for (int i = 0; i < ZKE_REQUEST_OPS; i++)
        put(b, "zkelect_zk_requests_total{op=\"%s\"} %llu\n", zke_request_op_name(i),
            (unsigned long long)r.sent[i]);
    head(b, "zkelect_zk_listed_children_total", "counter", "Names received in children listings.");
    put(b, "zkelect_zk_listed_children_total %llu\n", (unsigned long long)r.listed_names);
}

/* /metrics: the policy's guarded writes (zkelect.zk) by outcome. */
static void prom_writes(struct sbuf *b, const zke_agent *a)
{
    struct zke_write_counts c;
    memset(&c, 0, sizeof c);
    if (a != NULL)
        zke_agent_write_counts(a, &c);
    head(b, "zkelect_guarded_writes_total", "counter",
         "Leader-guarded writes (zkelect.zk) by outcome: applied, a reason ZooKeeper or the "
         "agent gave, or a call refused (refused_term, busy, invalid).");
    for (int i = 0; i < ZKE_WRITE_OUTCOMES; i++)
        put(b, "zkelect_guarded_writes_total{result=\"%s\"} %llu\n", zke_write_outcome_name(i),
            (unsigned long long)c.count[i]);
}

/* Open descriptors: the entries of /proc/self/fd but the directory's own. -1 unknown. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    long n = 0;
    int self = dirfd(d);
    const struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.' && strtol(e->d_name, NULL, 10) != self)
            n++;
    closedir(d);
    return n;
}

/* /metrics: the standard process_* metrics of Prometheus's client
 * libraries, read at scrape time (one read of /proc/self/stat, one listing
 * of /proc/self/fd). A value that cannot be read is left out. */
static void prom_process(struct sbuf *b, const metrics *m)
{
    char buf[1024];
    const char *f = proc_stat_fields(buf, sizeof buf);
    long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    if (f != NULL && hz > 0 && page > 0) {
        head(b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
        put(b, "process_cpu_seconds_total %.2f\n",
            (double)(stat_field(f, 14) + stat_field(f, 15)) / (double)hz);
        head(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
        put(b, "process_virtual_memory_bytes %llu\n", stat_field(f, 23));
        head(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
        put(b, "process_resident_memory_bytes %llu\n", stat_field(f, 24) * (unsigned long long)page);
    }
    long fds = open_fds();
    if (fds >= 0) {
        head(b, "process_open_fds", "gauge", "Number of open file descriptors.");
        put(b, "process_open_fds %ld\n", fds);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        head(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        if (rl.rlim_cur == RLIM_INFINITY)
            put(b, "process_max_fds +Inf\n");
        else
            put(b, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
    head(b, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.");
    put(b, "process_start_time_seconds %.2f\n",
        m->process_start_s >= 0 ? m->process_start_s : (double)m->start_wall_ms / 1000.0);
}

/* /metrics: the client certificate (--zk-tls-*), when there is one */
static void prom_tls(struct sbuf *b, const metrics *m)
{
    if (m->tls == NULL)
        return;
    int usable = tls_refresh(m->tls);
    head(b, "zkelect_tls_cert_expiry_timestamp_seconds", "gauge",
         "When the client certificate (--zk-tls-cert) expires, Unix seconds (0: unreadable); "
         "read again when its file changes.");
    put(b, "zkelect_tls_cert_expiry_timestamp_seconds %lld\n", (long long)m->tls->not_after);
    head(b, "zkelect_tls_cert_usable", "gauge",
         "1 while the TLS files pass the start's checks (readable, the key the certificate's, "
         "not expired): the next connection can use them.");
    put(b, "zkelect_tls_cert_usable %d\n", usable);
}

char *metrics_prometheus(const metrics *m, zke_agent *a, size_t *len)
{
    struct zke_status st;
    int have = a != NULL && zke_agent_view(a, &st) == 0;
    struct sbuf b = { malloc(8192), 0, 8192, 0 };
    if (b.p == NULL)
        return NULL;
    b.p[0] = '\0';

    head(&b, "zkelect_info", "gauge", "Static facts about this candidate.");
    put(&b, "zkelect_info{version=\"%s\",id=\"", ZKELECT_VERSION);
    put_label(&b, m->id);
    put(&b, "\",path=\"");
    put_label(&b, m->path);
    put(&b, "\"} 1\n");
    head(&b, "zkelect_log_dropped_lines_total", "counter",
         "Log lines lost to write errors on stderr (disk full, closed pipe).");
    put(&b, "zkelect_log_dropped_lines_total %llu\n", (unsigned long long)log_dropped());
    prom_role(&b, m, a, have, &st);
    prom_transitions(&b, m);
    prom_session(&b, m, have, &st);
    prom_hooks(&b, m);
    prom_notify(&b, m);
    prom_command(&b, m);
    head(&b, "zkelect_reloads_total", "counter", "Script reloads by result.");
    put(&b, "zkelect_reloads_total{result=\"ok\"} %llu\n", (unsigned long long)m->reloads_ok);
    put(&b, "zkelect_reloads_total{result=\"failed\"} %llu\n", (unsigned long long)m->reloads_failed);
    prom_requests(&b, a);
    prom_writes(&b, a);
    prom_process(&b, m);
    prom_tls(&b, m);
    if (m->lua_bytes >= 0) {
        head(&b, "zkelect_lua_memory_bytes", "gauge", "Memory held by the policy's Lua state.");
        put(&b, "zkelect_lua_memory_bytes %lld\n", m->lua_bytes);
    }

    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len != NULL)
        *len = b.len;
    return b.p;
}
