/*
 * api_host - a host program for tests/integration/test_api.py: one libev
 * loop, one shared zke_conn and any number of agents (on the shared conn or
 * on their own), driven by commands on stdin, one line per event on stdout.
 *
 *   api_host HOST:PORT SHARED_SESSION_FILE   (the shared session's id and password)
 *
 * Commands (one per line):
 *   add NAME shared|own PATH [TICK]
 *                              make and start agent NAME (id NAME) on PATH, stating
 *                              the servers' tick TICK ms (server_tick_ms; default none)
 *   arm NAME EVENT ACTION      at NAME's next EVENT (leader, follower, stepdown),
 *                              call ACTION (resign, stop, free) from inside the callback
 *   resign NAME | stop NAME | free NAME | status NAME
 *   view NAME                  status through zke_agent_view (a reader of the view)
 *   census MS                  agents added after it read the census every MS ms
 *                              (census_interval_ms; 0: none, the default)
 *   plan NAME                  its lease plan (zke_agent_plan): tick, renewal, lease
 *   guard NAME                 give NAME a fail-stop guard now (zke_agent_set_guard), its
 *                              watcher forked with ZKE_GUARD_KILL_AGENT (prints its pid)
 *   loglevel NAME|conn LEVEL   zke_agent_set_log_level / zke_conn_set_log_level (debug,
 *                              info, warn, error), counts of NAME's (conn's) lines reset
 *   logcount NAME|conn         the lines its log callback got since, by level
 *   conn_free                  try zke_conn_free (prints its result)
 *   write NAME N SIZE          N guarded writes at once (zke_agent_write in NAME's last
 *                              term: each sets PATH/data/state to SIZE bytes); prints how many
 *                              were accepted and the first refusal, then each answer
 *   writefree NAME N           the same (SIZE 1), and NAME freed inside the first answer
 *   quit                       stop every agent, free each in its on_stopped, free the
 *                              conn, print the counts, exit (0, or 1 after a violation)
 *
 * Output: "ev NAME TYPE key=value..." per callback, "action ...", "VIOLATION ...",
 * "count NAME TYPE N" at the end. The host checks what it can see itself:
 * events carry its agent's id and path, leader/stepdown alternate, nothing
 * after on_stopped, on_stopped exactly once.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>
#include "zkelect.h"

#define MAXA 32

struct rec {
    char name[64], path[256];
    zke_agent *a;
    int used, shared, leading, stopped, freed;
    int counts[ZKE_EV_COUNT];
    int logs[ZKE_LOG_ERROR + 1];    /* lines its log callback got, by level */
    enum zke_event_type arm_ev;
    char arm_action[64];
    int64_t epoch;                  /* of its last on_leader */
    int free_in_write;              /* writefree: free it inside the next answer */
};

static struct rec recs[MAXA];
static zke_guard *guard;                /* "guard": one for the host, freed at exit */
static struct rec prearm;               /* "arm" of a name not added yet */
static int census_ms;                   /* "census": census_interval_ms of agents added after */
static struct ev_loop *loop;
static zke_conn *conn;
static const char *hostport;
static int violations, quitting;
static ev_io in_w;
static char inbuf[4096];
static size_t inlen;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void violation(struct rec *r, const char *what)
{
    violations++;
    out("VIOLATION %s %s", r ? r->name : "-", what);
}

static struct rec *find(const char *name)
{
    for (int i = 0; i < MAXA; i++)
        if (recs[i].used && strcmp(recs[i].name, name) == 0)
            return &recs[i];
    return NULL;
}

static void do_action(struct rec *r, const char *action, const char *where)
{
    if (r->a == NULL) {
        out("action %s %s rc=-1 (freed) in=%s", r->name, action, where);
        return;
    }
    if (strcmp(action, "resign") == 0) {
        int rc = zke_agent_resign(r->a);
        out("action %s resign rc=%d in=%s", r->name, rc, where);
    } else if (strcmp(action, "stop") == 0) {
        zke_agent_stop(r->a);
        out("action %s stop in=%s", r->name, where);
    } else if (strcmp(action, "free") == 0) {
        zke_agent *a = r->a;
        r->a = NULL;
        r->freed = 1;
        zke_agent_free(a);      /* inside a callback: deferred until it returns */
        out("action %s free in=%s", r->name, where);
    }
}

static void all_stopped_check(void);

static void on_event(zke_agent *a, const struct zke_event *ev, void *ud)
{
    struct rec *r = ud;
    if (zke_agent_userdata(a) != ud)
        violation(r, "userdata");
    if (r->stopped)
        violation(r, "callback after on_stopped");
    if (ev->id == NULL || strcmp(ev->id, r->name) != 0 || ev->path == NULL ||
        strcmp(ev->path, r->path) != 0)
        violation(r, "event of another agent");
    r->counts[ev->type]++;
    if (ev->type == ZKE_EV_LEADER) {
        if (r->leading)
            violation(r, "on_leader while leading");
        r->leading = 1;
        r->epoch = ev->epoch;
    } else if (ev->type == ZKE_EV_STEPDOWN) {
        if (!r->leading)
            violation(r, "on_stepdown while not leading");
        r->leading = 0;
    } else if (ev->type == ZKE_EV_STOPPED) {
        if (r->counts[ZKE_EV_STOPPED] > 1)
            violation(r, "on_stopped twice");
        if (r->leading)
            violation(r, "on_stopped while leading");
        r->stopped = 1;
    }
    out("ev %s %s path=%s id=%s reason=%s epoch=%" PRId64 " leader=%s previous=%s session=0x%" PRIx64
        " node=%s position=%d pred=%s old=%s new=%s",
        r->name, zke_event_name(ev->type), ev->path, ev->id, ev->reason ? ev->reason : "-",
        ev->epoch, ev->leader ? ev->leader : "-", ev->previous ? ev->previous : "-", ev->session,
        ev->node ? ev->node : "-", ev->position, ev->predecessor ? ev->predecessor : "-",
        ev->old_pred ? ev->old_pred : "-", ev->new_pred ? ev->new_pred : "-");
    if (r->arm_action[0] != '\0' && ev->type == r->arm_ev) {
        char action[64];
        snprintf(action, sizeof action, "%s", r->arm_action);
        r->arm_action[0] = '\0';
        do_action(r, action, zke_event_name(ev->type));
    }
    if (ev->type == ZKE_EV_STOPPED) {
        if (quitting && r->a != NULL) {
            zke_agent *x = r->a;        /* free inside on_stopped */
            r->a = NULL;
            r->freed = 1;
            zke_agent_free(x);
        }
        all_stopped_check();
    }
}

static int conn_logs[ZKE_LOG_ERROR + 1];     /* the shared conn's lines, by level */

static void on_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    struct rec *r = ud;
    if ((unsigned)lvl <= ZKE_LOG_ERROR)
        (r ? r->logs : conn_logs)[lvl]++;
    if (lvl >= ZKE_LOG_WARN)
        out("log %s %s %s", r ? r->name : "conn", zke_log_level_name(lvl), msg);
}

static void conn_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    on_log(NULL, lvl, msg);
}

static const struct zke_callbacks cbs = {
    .on_leader = on_event, .on_follower = on_event, .on_predecessor_change = on_event,
    .on_stepdown = on_event, .on_session = on_event, .on_joined = on_event,
    .on_stopped = on_event, .log = on_log, .on_suspend = on_event, .on_resume = on_event,
};

static void add(const char *name, const char *kind, const char *path, int tick)
{
    struct rec *r = NULL;
    for (int i = 0; i < MAXA && r == NULL; i++)
        if (!recs[i].used)
            r = &recs[i];
    if (r == NULL || find(name) != NULL) {
        out("error add %s: no slot or name taken", name);
        return;
    }
    memset(r, 0, sizeof *r);
    r->used = 1;
    if (prearm.used && strcmp(prearm.name, name) == 0) {
        r->arm_ev = prearm.arm_ev;
        snprintf(r->arm_action, sizeof r->arm_action, "%s", prearm.arm_action);
        prearm.used = 0;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->path, sizeof r->path, "%s", path);
    struct zke_settings s = { .path = r->path, .id = r->name, .server_tick_ms = tick,
                              .census_interval_ms = census_ms };
    if (strcmp(kind, "shared") == 0) {
        r->shared = 1;
        r->a = zke_agent_new_on(conn, &s, &cbs, r);
    } else {
        s.zk = hostport;
        s.session_timeout_ms = 4000;
        r->a = zke_agent_new(loop, &s, &cbs, r);
    }
    if (r->a == NULL || zke_agent_start(r->a) != 0) {
        out("error add %s: %s", name, r->a ? zke_agent_errstr(r->a) : "out of memory");
        zke_agent_free(r->a);
        r->used = 0;
        return;
    }
    out("added %s %s %s", name, kind, path);
}

struct wr {
    struct rec *r;
    zke_agent *a;
    int i, done;
};

static void on_write(zke_agent *a, const struct zke_write_result *res, void *ud)
{
    struct wr *w = ud;
    if (a != w->a || w->done++)
        violation(w->r, "write answered twice or for another agent");
    out("wrote %s %d reason=%s applied=%d nops=%d error=%s", w->r->name, w->i,
        res->reason ? res->reason : "-", res->applied, res->nops,
        res->nops == 1 && res->ops[0].error ? res->ops[0].error : "-");
    if (w->r->free_in_write && w->r->a != NULL) {
        w->r->free_in_write = 0;
        do_action(w->r, "free", "write");
    }
    free(w);
}

/* "write"/"writefree": n writes of size bytes each in r's last term. */
static void writes(struct rec *r, long n, long size, int free_in_write)
{
    static char data[600 * 1024];
    char path[300];
    memset(data, 'w', sizeof data);
    snprintf(path, sizeof path, "%s/data/state", r->path); /* below a child: never a direct child */
    struct zke_write_op op = { .type = ZKE_WRITE_SET, .path = path, .data = data,
                               .len = (size_t)size, .version = -1 };
    int ok = 0;
    char first[512] = "-";
    for (long i = 0; i < n; i++) {
        struct wr *w = calloc(1, sizeof *w);
        if (w == NULL)
            return;
        w->r = r;
        w->a = r->a;
        w->i = (int)i;
        if (zke_agent_write(r->a, r->epoch, &op, 1, on_write, w) == 0) {
            ok++;
        } else {
            if (first[0] == '-')
                snprintf(first, sizeof first, "%s", zke_agent_errstr(r->a));
            free(w);
        }
    }
    r->free_in_write = free_in_write && ok > 0;
    out("write %s accepted=%d refused=%ld first=%s", r->name, ok, n - ok, first);
}

static void finish(void)
{
    int rc = zke_conn_free(conn);
    out("conn_free rc=%d%s%s", rc, rc ? " " : "", rc ? zke_conn_errstr(conn) : "");
    if (rc == 0)
        conn = NULL;
    ev_io_stop(loop, &in_w);
}

static void all_stopped_check(void)
{
    if (!quitting)
        return;
    for (int i = 0; i < MAXA; i++)
        if (recs[i].used && !recs[i].stopped && !recs[i].freed)
            return;
    if (conn != NULL)
        finish();
}

static void command(char *line)
{
    char a[64] = "", b[64] = "", c[256] = "", d[64] = "", e[16] = "";
    int n = sscanf(line, "%63s %63s %255s %63s %15s", a, b, c, d, e);
    char *end = NULL;
    long tick = n == 5 ? strtol(e, &end, 10) : 0;
    if (n == 5 && (end == e || *end != '\0' || tick < 0 || tick > 300000)) {
        out("error %s %s: tick '%s' is not a whole number of ms in 0..300000", a, b, e);
        return;
    }
    struct rec *r = n >= 2 ? find(b) : NULL;
    if (n <= 0)
        return;
    if (strcmp(a, "add") == 0 && (n == 4 || n == 5)) {
        add(b, c, d, (int)tick);
    } else if (strcmp(a, "arm") == 0 && n == 4) {
        if (r == NULL) {
            r = &prearm;
            memset(r, 0, sizeof *r);
            r->used = 1;
            snprintf(r->name, sizeof r->name, "%s", b);
        }
        static const char *evs[] = { "leader", "follower", "stepdown", NULL };
        static const enum zke_event_type t[] = { ZKE_EV_LEADER, ZKE_EV_FOLLOWER, ZKE_EV_STEPDOWN };
        for (int i = 0; evs[i]; i++)
            if (strcmp(c, evs[i]) == 0)
                r->arm_ev = t[i];
        snprintf(r->arm_action, sizeof r->arm_action, "%s", d);
        out("armed %s %s %s", b, c, d);
    } else if ((strcmp(a, "resign") == 0 || strcmp(a, "stop") == 0 || strcmp(a, "free") == 0) &&
               r != NULL) {
        do_action(r, a, "host");
    } else if (strcmp(a, "plan") == 0 && r != NULL && r->a != NULL) {
        struct zke_lease_plan p;
        if (zke_agent_plan(r->a, &p) != 0)
            out("error plan %s", b);
        else
            out("plan %s tick=%d renew=%d lease=%d confirm=%d session=%d", b, p.server_tick_ms,
                p.renew_ms, p.lease_ms, p.confirm_ms, p.session_ms);
    } else if ((strcmp(a, "status") == 0 || strcmp(a, "view") == 0) && r != NULL && r->a != NULL) {
        struct zke_status st;
        struct zke_requests rq;
        if (a[0] == 'v')
            (void)zke_agent_view(r->a, &st);
        else
            (void)zke_agent_status(r->a, &st);
        if (zke_agent_requests(r->a, &rq) != 0)
            memset(&rq, 0, sizeof rq);
        uint64_t ex = 0, get = 0, list = 0;
        for (int i = 0; zke_request_op_name(i) != NULL; i++) {
            const char *op = zke_request_op_name(i);
            if (strcmp(op, "exists") == 0)
                ex = rq.sent[i];
            else if (strcmp(op, "get") == 0)
                get = rq.sent[i];
            else if (strcmp(op, "list") == 0)
                list = rq.sent[i];
        }
        out("%s %s role=%s leader=%s session=0x%" PRIx64 " connected=%d lease=%" PRId64
            " position=%d size=%d exists=%" PRIu64 " get=%" PRIu64 " list=%" PRIu64, a, b,
            zke_role_name(st.role), st.leader ? st.leader : "-", st.session, st.connected,
            st.lease_ms, st.position, st.election_size, ex, get, list);
    } else if (strcmp(a, "census") == 0 && n == 2) {
        long ms = strtol(b, &end, 10);
        if (end == b || *end != '\0' || ms < 0 || ms > 300000) {
            out("error census: '%s' is not a whole number of ms in 0..300000", b);
            return;
        }
        census_ms = (int)ms;
        out("census %d", census_ms);
    } else if (strcmp(a, "guard") == 0 && r != NULL && r->a != NULL) {
        char err[256];
        if (guard == NULL && (guard = zke_guard_new(err, sizeof err)) == NULL) {
            out("error guard %s: %s", b, err);
            return;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(zke_guard_watch(guard, ZKE_GUARD_KILL_AGENT, conn_log, NULL) == 0 ? 0 : 3);
        if (pid < 0 || zke_agent_set_guard(r->a, guard) != 0)
            out("error guard %s: %s", b, pid < 0 ? "fork failed" : zke_agent_errstr(r->a));
        else
            out("guard %s watcher=%d", b, (int)pid);
    } else if (strcmp(a, "loglevel") == 0 && n == 3 && (r != NULL || strcmp(b, "conn") == 0)) {
        int lvl = -1;
        for (int i = ZKE_LOG_DEBUG; i <= ZKE_LOG_ERROR; i++)
            if (strcmp(c, zke_log_level_name((enum zke_log_level)i)) == 0)
                lvl = i;
        int rc = r != NULL ? (r->a != NULL ? zke_agent_set_log_level(r->a, (enum zke_log_level)lvl) : -1)
                           : zke_conn_set_log_level(conn, (enum zke_log_level)lvl);
        memset(r != NULL ? r->logs : conn_logs, 0, sizeof conn_logs);
        const char *why = rc == 0 ? "" : r == NULL ? zke_conn_errstr(conn)
                                     : r->a != NULL ? zke_agent_errstr(r->a) : "no agent";
        out("loglevel %s %s rc=%d%s%s", b, c, rc, rc ? " " : "", why);
    } else if (strcmp(a, "logcount") == 0 && (r != NULL || strcmp(b, "conn") == 0)) {
        const int *l = r != NULL ? r->logs : conn_logs;
        out("logcount %s debug=%d info=%d warn=%d error=%d", b, l[0], l[1], l[2], l[3]);
    } else if ((strcmp(a, "write") == 0 && n == 4) || (strcmp(a, "writefree") == 0 && n == 3)) {
        long cnt = strtol(c, NULL, 10), size = n == 4 ? strtol(d, NULL, 10) : 1;
        if (r == NULL || r->a == NULL || cnt < 1 || cnt > 100 || size < 0 || size > 600L * 1024)
            out("error %s %s: no such agent, or N not in 1..100, SIZE not in 0..614400", a, b);
        else
            writes(r, cnt, size, a[5] == 'f');
    } else if (strcmp(a, "conn_free") == 0) {
        int rc = zke_conn_free(conn);
        out("conn_free rc=%d %s", rc, rc ? zke_conn_errstr(conn) : "");
        if (rc == 0)
            conn = NULL;
    } else if (strcmp(a, "conn") == 0) {
        out("conn session=0x%" PRIx64 " connected=%d", zke_conn_session(conn),
            zke_conn_connected(conn));
    } else if (strcmp(a, "quit") == 0) {
        quitting = 1;
        for (int i = 0; i < MAXA; i++) {
            struct rec *x = &recs[i];
            if (!x->used || x->a == NULL)
                continue;
            if (x->stopped) {
                zke_agent *ag = x->a;
                x->a = NULL;
                x->freed = 1;
                zke_agent_free(ag);
            } else {
                zke_agent_stop(x->a);
            }
        }
        all_stopped_check();
    } else {
        out("error unknown command: %s", line);
    }
}

static void in_cb(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    ssize_t n = read(w->fd, inbuf + inlen, sizeof inbuf - 1 - inlen);
    if (n <= 0) {
        ev_io_stop(loop, w);
        if (!quitting) {
            char q[] = "quit";
            command(q);
        }
        return;
    }
    inlen += (size_t)n;
    inbuf[inlen] = '\0';
    char *nl;
    while ((nl = strchr(inbuf, '\n')) != NULL) {
        *nl = '\0';
        command(inbuf);
        size_t used = (size_t)(nl + 1 - inbuf);
        memmove(inbuf, nl + 1, inlen - used + 1);
        inlen -= used;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s HOST:PORT SHARED_SESSION_FILE\n", argv[0]);
        return 64;
    }
    hostport = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    loop = ev_default_loop(0);
    /* the password too: the test expires the shared session with zke_expire */
    struct zke_conn_settings cs = { .zk = argv[1], .session_timeout_ms = 4000,
                                    .session_file = argv[2], .session_file_password = 1 };
    conn = zke_conn_new(loop, &cs, conn_log, NULL);
    if (conn == NULL || zke_conn_errstr(conn)[0] != '\0') {
        fprintf(stderr, "conn: %s\n", conn ? zke_conn_errstr(conn) : "out of memory");
        return 78;
    }
    ev_io_init(&in_w, in_cb, 0, EV_READ);
    ev_io_start(loop, &in_w);
    out("ready");
    ev_run(loop, 0);
    for (int i = 0; i < MAXA; i++) {
        if (!recs[i].used)
            continue;
        for (int t = 0; t < ZKE_EV_COUNT; t++)
            if (recs[i].counts[t] > 0)
                out("count %s %s %d", recs[i].name, zke_event_name((enum zke_event_type)t),
                    recs[i].counts[t]);
        if (recs[i].counts[ZKE_EV_STOPPED] != 1)
            violation(&recs[i], "on_stopped not exactly once");
        if (recs[i].a != NULL)
            zke_agent_free(recs[i].a);
    }
    if (conn != NULL && zke_conn_free(conn) != 0)
        violation(NULL, "conn not freed");
    zke_guard_free(guard);              /* its watcher ends with us */
    ev_loop_destroy(loop);
    out("exit violations=%d", violations);
    return violations ? 1 : 0;
}
