/*
 * many.c - bench_many: many elections in one process through zkelect's C
 * API, on ONE shared ZooKeeper session (the gateway case).
 *
 *   bench_many HOSTPORT PREFIX E SESSION_MS [SERVER_TICK_MS]
 *
 * One libev loop, one zke_conn, E agents (zke_agent_new_on), agent i on the
 * election path PREFIX/e<i>. C callbacks only. SERVER_TICK_MS states the
 * servers' tickTime (zke_settings.server_tick_ms; default: the library's,
 * learned from the servers, as bench/run's other zkelect candidates do).
 *
 * stdout, one write(2) per line:
 *   <mono_us> <i> leader|follower|stopped     per agent event
 *   <mono_us> <i> stepdown                    a term's end (on_stepdown: before
 *                                             the node goes, so before the
 *                                             successor's leader line)
 *   <mono_us> - joined <leaders> <followers>  once, when every agent has a role
 *   <mono_us> - stopped                       when every agent has stopped
 * mono_us is CLOCK_MONOTONIC in microseconds, taken first thing in the
 * callback. Everything else goes to stderr: the library's log lines of
 * level warn and up, or of the level named by $BENCH_MANY_LOG (debug, info,
 * warn, error) to see what the agents did, each after its mono_us.
 * stdin "quit", EOF, SIGTERM or SIGINT: zke_agent_stop every agent; each is
 * freed in its on_stopped; the loop ends when the last one has stopped (the
 * conn then holds no watcher), the conn is freed, exit 0.
 *
 * $BENCH_MANY_GUARD=1: every agent is guarded by one fail-stop guard for E
 * agents (zke_guard_new_for), whose watcher runs in a child process forked
 * first thing (its pid on stderr: "guard watcher <pid>"), as a gateway that
 * guards its elections does. The watcher's log lines go to stderr, each in
 * one write(2): "bench_many: <mono_us> guard <level>: <msg>" (once this
 * process is gone: its groups killed, then its session closed).
 *
 * Balanced group mode ($BENCH_MANY_GROUP=PATH, docs/embedding.md "Balanced
 * groups"): the E agents join one zke_group at PATH (its members under
 * PATH/members), so that the processes of the group spread the E
 * elections by their shares. The agents' id (the member's) is
 * "many-<pid>", or $BENCH_MANY_ID; $BENCH_MANY_WEIGHT (1..1000, default 1),
 * $BENCH_MANY_MAX (0: no limit), $BENCH_MANY_SETTLE_MS (default the
 * library's, 2000) are its settings. Then stdout also gets
 *   <mono_us> - group members=P leads=N target=T moving=M moved_out=K
 * whenever one of those values changes (T -1: not known yet), the epoch
 * after each agent's leader line ("<mono_us> <i> leader <epoch>"), and
 *   <mono_us> - left
 * when a graceful leave has ended: stdin "leave" or SIGTERM hand every
 * election this process leads to the other members (zke_group_leave), then
 * it says "left" and stops as for "quit" (exit 0); stdin "remove" takes
 * every agent out of the group (zke_group_remove), then stops as for
 * "quit" (hand-overs may be under way then). stdin "quit", EOF and
 * SIGINT stop at once (the leaders' elections fail over to the next in
 * line, as without a group).
 *
 * Threading: none; everything runs on the loop. The callbacks below are
 * called by the library from the loop, one at a time.
 * Ownership: the bench owns the conn and the agents (each freed in its
 * on_stopped, the conn after the loop ended); settings are copied by the
 * library.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include "zkelect.h"

enum role { R_NONE = 0, R_LEADER, R_FOLLOWER };

struct slot {
    zke_agent *a;            /* NULL once freed */
    int i;
    enum role role;
};

static struct {
    struct ev_loop *loop;
    zke_conn *conn;
    struct slot *slots;
    int e;
    int with_role, leaders, followers, joined_said;
    int stopped, stopping;
    int log_level;              /* the library's lines at or above it go to stderr */
    ev_io in;
    ev_signal sigterm, sigint;
    zke_group *group;           /* group mode, until the stop */
    struct zke_group_status gs; /* the last one printed */
    int gs_said;
    int grouped;                /* group mode: leader lines carry the epoch */
    char inbuf[1024];
    size_t inlen;
} B;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One stdout line "<us> <i> <text>\n" in one write(2); i < 0: "-". */
static void emit_at(int64_t us, int i, const char *fmt, ...)
{
    char buf[256];
    int n = i >= 0 ? snprintf(buf, sizeof buf, "%" PRId64 " %d ", us, i)
                   : snprintf(buf, sizeof buf, "%" PRId64 " - ", us);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (int)w;
    }
}

/* Keeps the role counts; says `joined` the first time all have one. */
static void set_role(struct slot *s, enum role r)
{
    if (s->role == r)
        return;
    if (s->role == R_LEADER)
        B.leaders--;
    else if (s->role == R_FOLLOWER)
        B.followers--;
    else
        B.with_role++;
    if (r == R_LEADER)
        B.leaders++;
    else if (r == R_FOLLOWER)
        B.followers++;
    else
        B.with_role--;
    s->role = r;
    if (!B.joined_said && B.with_role == B.e) {
        B.joined_said = 1;
        emit_at(mono_us(), -1, "joined %d %d", B.leaders, B.followers);
    }
}

static void on_leader(zke_agent *a, const struct zke_event *ev, void *ud)
{
    int64_t now = mono_us();
    struct slot *s = ud;
    (void)a;
    if (B.grouped)
        emit_at(now, s->i, "leader %" PRId64, ev->epoch);
    else
        emit_at(now, s->i, "leader");
    set_role(s, R_LEADER);
}

static void on_follower(zke_agent *a, const struct zke_event *ev, void *ud)
{
    int64_t now = mono_us();
    struct slot *s = ud;
    (void)a;
    (void)ev;
    emit_at(now, s->i, "follower");
    set_role(s, R_FOLLOWER);
}

static void on_stepdown(zke_agent *a, const struct zke_event *ev, void *ud)
{
    int64_t now = mono_us();
    struct slot *s = ud;
    (void)a;
    (void)ev;
    emit_at(now, s->i, "stepdown");
    set_role(s, R_NONE);
}

static void on_stopped(zke_agent *a, const struct zke_event *ev, void *ud)
{
    int64_t now = mono_us();
    struct slot *s = ud;
    if (strcmp(ev->reason, "stop") != 0)
        fprintf(stderr, "bench_many: agent %d stopped: %s (%s)\n", s->i, ev->reason,
                zke_agent_errstr(a));
    emit_at(now, s->i, "stopped");
    set_role(s, R_NONE);
    zke_agent_free(a);       /* deferred by the library until we return */
    s->a = NULL;
    if (++B.stopped < B.e)
        return;
    emit_at(mono_us(), -1, "stopped");
    /* nothing of ours left on the loop: ev_run returns */
    ev_io_stop(B.loop, &B.in);
    ev_signal_stop(B.loop, &B.sigterm);
    ev_signal_stop(B.loop, &B.sigint);
}

static void on_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    if ((int)lvl >= B.log_level)
        fprintf(stderr, "bench_many: %" PRId64 " zkelect %s: %s\n", mono_us(), zke_log_level_name(lvl),
                msg);
}

/* The fail-stop watcher's log (a forked child of this single-threaded
 * process): every line, in one write(2), as the watcher logs only what it
 * did (a phase, a fence, the session's close). */
static void on_guard_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    char buf[1024];
    (void)ud;
    int n = snprintf(buf, sizeof buf, "bench_many: %" PRId64 " guard %s: %s\n", mono_us(),
                     zke_log_level_name(lvl), msg);
    if (n < 0)
        return;
    if (n > (int)sizeof buf - 1) {
        n = (int)sizeof buf - 1;
        buf[n - 1] = '\n';
    }
    for (int off = 0; off < n;) {
        ssize_t w = write(STDERR_FILENO, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += (int)w;
    }
}

/* Graceful stop of every agent (idempotent); from the loop. */
static void stop_all(void)
{
    if (B.stopping)
        return;
    B.stopping = 1;
    zke_group_free(B.group);        /* (inside its callbacks: when they return) */
    B.group = NULL;
    for (int i = 0; i < B.e; i++)
        if (B.slots[i].a != NULL)
            zke_agent_stop(B.slots[i].a);
    if (B.e == 0) {
        emit_at(mono_us(), -1, "stopped");
        ev_io_stop(B.loop, &B.in);
        ev_signal_stop(B.loop, &B.sigterm);
        ev_signal_stop(B.loop, &B.sigint);
    }
}

/* The group line, when a value of it changed. */
static void on_group_change(zke_group *g, void *ud)
{
    struct zke_group_status st;
    (void)ud;
    if (zke_group_status(g, &st) != 0)
        return;
    if (B.gs_said && st.members == B.gs.members && st.leads == B.gs.leads &&
        st.target == B.gs.target && st.moving == B.gs.moving && st.moved_out == B.gs.moved_out)
        return;
    B.gs = st;
    B.gs_said = 1;
    emit_at(mono_us(), -1, "group members=%d leads=%d target=%d moving=%d moved_out=%" PRId64,
            st.members, st.leads, st.target, st.moving, st.moved_out);
}

static void on_left(zke_group *g, int left, void *ud)
{
    (void)g;
    (void)ud;
    if (!left)
        fprintf(stderr, "bench_many: the leave ended with elections not handed over\n");
    on_group_change(g, NULL);
    emit_at(mono_us(), -1, "left");
    stop_all();
}

/* The graceful leave in group mode (then the stop); a stop otherwise. */
static void leave_or_stop(void)
{
    if (B.group == NULL || B.stopping) {
        stop_all();
        return;
    }
    struct zke_group_status st;
    if (zke_group_status(B.group, &st) == 0 && st.state >= ZKE_GROUP_LEAVING)
        return;             /* leaving already */
    if (zke_group_leave(B.group, on_left, NULL) != 0) {
        fprintf(stderr, "bench_many: leave: %s\n", zke_group_errstr(B.group));
        stop_all();
    }
}

/* stdin "remove": every agent taken out of the group (hand-overs under
 * way go on without it), then the stop (which frees the group first). */
static void remove_and_stop(void)
{
    for (int i = 0; B.group != NULL && i < B.e; i++)
        if (B.slots[i].a != NULL)
            (void)zke_group_remove(B.group, B.slots[i].a);
    stop_all();
}

static void stdin_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)revents;
    for (;;) {
        ssize_t r = read(STDIN_FILENO, B.inbuf + B.inlen, sizeof B.inbuf - 1 - B.inlen);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return;          /* EAGAIN */
        if (r == 0) {
            ev_io_stop(loop, w);
            stop_all();
            return;
        }
        B.inlen += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < B.inlen; i++) {
            if (B.inbuf[i] != '\n')
                continue;
            B.inbuf[i] = '\0';
            if (i > start && B.inbuf[i - 1] == '\r')
                B.inbuf[i - 1] = '\0';
            if (strcmp(B.inbuf + start, "quit") == 0)
                stop_all();
            else if (strcmp(B.inbuf + start, "leave") == 0)
                leave_or_stop();
            else if (strcmp(B.inbuf + start, "remove") == 0)
                remove_and_stop();
            else if (B.inbuf[start] != '\0')
                fprintf(stderr, "bench_many: unknown command '%s'\n", B.inbuf + start);
            start = i + 1;
        }
        memmove(B.inbuf, B.inbuf + start, B.inlen - start);
        B.inlen -= start;
        if (B.inlen == sizeof B.inbuf - 1)
            B.inlen = 0;
    }
}

static void signal_cb(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop;
    (void)revents;
    if (w->signum == SIGTERM)
        leave_or_stop();        /* group mode: leave first */
    else
        stop_all();
}

/* A whole number in [lo, hi], or -1. */
static int number(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && v >= lo && v <= hi ? (int)v : -1;
}

/* The group of $BENCH_MANY_GROUP, with the member's id (id: "many-<pid>",
 * replaced by $BENCH_MANY_ID) and settings from the environment. */
static int make_group(const char *path, char *id, size_t idlen)
{
    const char *v;
    struct zke_group_settings gs = { .path = path, .id = id };
    if ((v = getenv("BENCH_MANY_ID")) != NULL && v[0] != '\0')
        snprintf(id, idlen, "%s", v);
    if ((v = getenv("BENCH_MANY_WEIGHT")) != NULL && (gs.weight = number(v, 1, 1000)) < 0) {
        fprintf(stderr, "bench_many: BENCH_MANY_WEIGHT '%.32s': expected 1..1000\n", v);
        return -1;
    }
    if ((v = getenv("BENCH_MANY_MAX")) != NULL && (gs.max = number(v, 0, 1000000)) < 0) {
        fprintf(stderr, "bench_many: BENCH_MANY_MAX '%.32s': expected 0..1000000\n", v);
        return -1;
    }
    if ((v = getenv("BENCH_MANY_SETTLE_MS")) != NULL && (gs.settle_ms = number(v, 1, 3600000)) < 0) {
        fprintf(stderr, "bench_many: BENCH_MANY_SETTLE_MS '%.32s': expected 1..3600000\n", v);
        return -1;
    }
    char err[256];
    B.group = zke_group_new(B.conn, &gs, on_log, NULL, err, sizeof err);
    if (B.group == NULL) {
        fprintf(stderr, "bench_many: %s\n", err);
        return -1;
    }
    (void)zke_group_on_change(B.group, on_group_change, NULL);
    return 0;
}

int main(int argc, char **argv)
{
    char path[1024], id[64];
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: %s HOSTPORT PREFIX E SESSION_MS [SERVER_TICK_MS]\n", argv[0]);
        return 64;
    }
    B.e = number(argv[3], 0, 1000000);
    int session_ms = number(argv[4], 1, 3600000);
    int tick_ms = argc == 6 ? number(argv[5], 0, 3600000) : 0;
    if (B.e < 0 || session_ms < 0 || tick_ms < 0 || strlen(argv[2]) > 900) {
        fprintf(stderr, "bench_many: bad E, SESSION_MS or PREFIX\n");
        return 64;
    }
    signal(SIGPIPE, SIG_IGN);
    B.log_level = -1;
    const char *lv = getenv("BENCH_MANY_LOG");
    for (int l = ZKE_LOG_DEBUG; lv != NULL && l <= ZKE_LOG_ERROR; l++)
        if (strcmp(lv, zke_log_level_name((enum zke_log_level)l)) == 0)
            B.log_level = l;
    if (lv == NULL) {
        B.log_level = ZKE_LOG_WARN;
    } else if (B.log_level < 0) {
        fprintf(stderr, "bench_many: BENCH_MANY_LOG '%.64s': expected debug, info, warn or error\n", lv);
        return 64;
    }
    zke_guard *guard = NULL;
    const char *gv = getenv("BENCH_MANY_GUARD");
    if (gv != NULL && strcmp(gv, "1") == 0 && B.e > 0) {
        char gerr[256];
        if ((guard = zke_guard_new_for(B.e, gerr, sizeof gerr)) == NULL) {
            fprintf(stderr, "bench_many: %s\n", gerr);
            return 70;
        }
        pid_t w = fork();
        if (w == 0)
            _exit(zke_guard_watch(guard, ZKE_GUARD_KILL_AGENT, on_guard_log, NULL) == 0 ? 0 : 70);
        fprintf(stderr, "guard watcher %ld\n", (long)w);
    }
    B.loop = ev_default_loop(0);
    struct zke_conn_settings cs = { .zk = argv[1], .session_timeout_ms = session_ms };
    B.conn = zke_conn_new(B.loop, &cs, on_log, NULL);
    if (B.conn == NULL || zke_conn_errstr(B.conn)[0] != '\0') {
        fprintf(stderr, "bench_many: %s\n", B.conn ? zke_conn_errstr(B.conn) : "out of memory");
        return 78;
    }
    /* what on_log would drop is never made: a gateway's E takeovers and
     * the renewals cost no line each */
    (void)zke_conn_set_log_level(B.conn, (enum zke_log_level)B.log_level);
    B.slots = calloc(B.e > 0 ? (size_t)B.e : 1, sizeof *B.slots);
    if (B.slots == NULL) {
        fprintf(stderr, "bench_many: out of memory\n");
        return 70;
    }
    struct zke_callbacks cb = {
        .on_leader = on_leader, .on_follower = on_follower, .on_stepdown = on_stepdown,
        .on_stopped = on_stopped, .log = on_log,
    };
    snprintf(id, sizeof id, "many-%ld", (long)getpid());
    const char *gpath = getenv("BENCH_MANY_GROUP");
    if (gpath != NULL && gpath[0] != '\0' && make_group(gpath, id, sizeof id) != 0)
        return 64;
    B.grouped = B.group != NULL;
    for (int i = 0; i < B.e; i++) {
        /* census_interval_ms stays 0 (no census): a census is one exists()
         * per agent per interval, E/interval requests a second for a number
         * (zke_status.election_size) a gateway never reads; at E = 5000 and
         * 1 s that alone would be 5000 requests/s, idle. The other periodic
         * request is the conn's one renewal stream, whatever E. */
        struct zke_settings s = { .path = path, .id = id, .server_tick_ms = tick_ms };
        snprintf(path, sizeof path, "%s/e%d", argv[2], i);
        B.slots[i].i = i;
        zke_agent *a = zke_agent_new_on(B.conn, &s, &cb, &B.slots[i]);
        if (a != NULL)
            (void)zke_agent_set_log_level(a, (enum zke_log_level)B.log_level);
        if (a != NULL && guard != NULL && zke_agent_set_guard(a, guard) != 0) {
            fprintf(stderr, "bench_many: %s\n", zke_agent_errstr(a));
            return 70;
        }
        if (a == NULL || zke_agent_start(a) != 0) {
            fprintf(stderr, "bench_many: cannot start %s: %s\n", path,
                    a ? zke_agent_errstr(a) : "out of memory");
            return 70;
        }
        B.slots[i].a = a;
        if (B.group != NULL && zke_group_add(B.group, a) != 0) {
            fprintf(stderr, "bench_many: %s\n", zke_group_errstr(B.group));
            return 70;
        }
    }
    if (B.group != NULL && zke_group_start(B.group) != 0) {
        fprintf(stderr, "bench_many: %s\n", zke_group_errstr(B.group));
        return 70;
    }
    int fl = fcntl(STDIN_FILENO, F_GETFL);
    if (fl >= 0)
        (void)fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
    ev_io_init(&B.in, stdin_cb, STDIN_FILENO, EV_READ);
    ev_signal_init(&B.sigterm, signal_cb, SIGTERM);
    ev_signal_init(&B.sigint, signal_cb, SIGINT);
    ev_io_start(B.loop, &B.in);
    ev_signal_start(B.loop, &B.sigterm);
    ev_signal_start(B.loop, &B.sigint);

    ev_run(B.loop, 0);        /* returns when every agent stopped */
    zke_group_free(B.group);  /* (freed by the stop already) */
    for (int i = 0; i < B.e; i++)
        zke_agent_free(B.slots[i].a);        /* none left after a clean run */
    if (zke_conn_free(B.conn) != 0)
        fprintf(stderr, "bench_many: zke_conn_free: %s\n", zke_conn_errstr(B.conn));
    free(B.slots);
    ev_loop_destroy(B.loop);
    zke_guard_free(guard);      /* after the agents (the watcher ends with us) */
    return 0;
}
