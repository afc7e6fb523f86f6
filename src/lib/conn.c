/*
 * conn.c - see conn.h. One ZooKeeper session for one or more agents.
 *
 * Ownership: the conn owns its session object (which owns the handle), its
 * copies of the settings (the credentials are the session's, wiped at free)
 * and its log queue. Agents are borrowed: each one attaches when it is made
 * and detaches when it is freed; a shared conn may only be freed once none is
 * left (zke_conn_free refuses while a live agent is attached, and finishes
 * the job when the last one whose free was deferred goes away).
 */
#define _POSIX_C_SOURCE 200809L
#include "conn.h"
#include "guard.h"
#include "leasewatch.h"
#include "bootwait.h"
#include "probe.h"
#include "renewplan.h"
#include "rng.h"
#include "sessionfile.h"
#include "settings.h"
#include "touch.h"
#include "xstr.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

struct logline {
    struct logline *next;
    enum zke_log_level lvl;
    char msg[];
};

/* An agent on the conn, reached through its table. Members are allocated
 * one by one and stay where they are: the agent keeps its pointer. */
struct conn_member {
    zke_agent *a;
    const struct conn_agent_ops *ops;
    unsigned long order;        /* attach order: pumps of one iteration go by it */
    struct conn_member *prev, *next;    /* every member, in attach order */
    struct conn_member *hnext;  /* path index chain (running members only) */
    unsigned hash;              /* of the election path */
    unsigned pumped;            /* 1 + the loop iteration it was last pumped in */
    int lease_at;               /* index in c->leasers, -1 when not watched */
    enum conn_member_life life;
    unsigned due : 1;           /* in c->due (a fact of the pump's list, not of its life) */
    struct renew_demand rd;     /* its demand on the renewal stream (conn_agent_renew) */
    int renewer_at;             /* index in c->renewers, -1 when it asks nothing */
    int rider_at;               /* index in c->riders, -1 when it waits for no tick */
    int64_t ride_after;         /* the first tick after this (sess_now_ns) is its */
};

/* A growable array of member pointers. */
struct mvec {
    conn_member **v;
    int n, cap;
};

struct zke_conn {
    struct ev_loop *loop;
    session *sess;
    char *hosts, *session_file;
    int timeout_ms, connect_timeout_ms;
    zke_agent *owner;           /* private conn: its agent; NULL: shared */
    enum zke_log_level log_min; /* lines below it are not formatted */
    int session_file_password;  /* the session file holds the password too */
    const struct conn_agent_ops *owner_ops;
    conn_member *first, *last;  /* every member, in the order they were attached */
    int n;                      /* members attached */
    unsigned long next_order;
    conn_member **index;        /* running members by election path (chained) */
    unsigned index_size;        /* a power of two, or 0 */
    int nrunning;               /* members in the index */
    int wanting;                /* members started and not stopping */
    int close_owed;             /* nodes of stopped members that the handle's close releases
                                 * (conn_release_by_close): the handle may not be kept */
    struct mvec due;            /* members to pump (unsorted) */
    struct mvec leasers;        /* members whose lease is checked */
    struct mvec dead;           /* detached under a scan: freed when it ends */
    struct leasewatch lw;       /* when the leasers must be checked (leasewatch.h) */
    int64_t lease_armed;        /* when lease_to fires (INT64_MAX: not armed) */
    /* the session's one renewal stream (conn_agent_renew) */
    ev_timer renew;             /* its repeat is rp.repeat */
    struct renewplan rp;        /* the demand and the stream's decisions (renewplan.h) */
    struct mvec renewers;       /* members asking anything (their nodes name the requests) */
    struct mvec riders;         /* members whose next request goes with the next tick */
    zke_log_fn *log;            /* shared conn: the host's */
    void *ud;
    struct logline *lhead, *ltail;
    ev_prepare prepare;         /* unreferenced: pumps, flush, reopen, logs, deferred free */
    ev_check check;             /* unreferenced, top priority: the leasers' lease checks */
    ev_timer kick;              /* zero timer: agents due again turn the loop without blocking */
    struct bootwait lease_to;   /* the earliest lease end a leaser waits for (CLOCK_BOOTTIME) */
    struct clockstep step;      /* the wall clock set: time the boot clock may not have seen */
    int step_margin_ms;         /* the smallest lease margin of the agents, 0: none yet */
    zke_guard *guard;           /* the guard holding our lease base (conn_guard_base), or NULL */
    int guard_base;             /* its index there */
    int guard_users;            /* agents arming relative to it */
    int64_t guard_base_ns;      /* the base it holds, 0: none yet */
    unsigned guard_gen;         /* bumped when a new handle opens: the base froze (conn_open) */
    ev_timer reopen, disc_to;
    double reopen_delay;
    double auth_retry;          /* runtime authentication failures: 1 s doubling to 30 s */
    double auth_failed_at;      /* ev_now of the last one */
    uint64_t rng;
    uint64_t last_session;      /* id of the session the file was written for */
    uint64_t prev_session;      /* the file's session when the conn was made, or 0 */
    enum conn_life life;        /* conn.h */
    int in_cb;                  /* depth of the scans and callbacks under way: no destroy, no
                                 * free of a member until it is 0 again */
    int was_open;               /* the handle was open at the last flush (its close is seen once) */
    /* the tick probe (probe.h): once a conn, at its first open, where no
     * agent stated the servers' tick. The first SESS_S_CONNECTED waits for
     * its answer (the agents plan their lease with it), its deadline at most */
    struct probe *probe;        /* while ASKING, HOLDING or ANSWERED */
    enum conn_probe probe_state;
    char verr[512];             /* why the settings were refused, "" if they were not */
    char err[512];              /* the last error: that, or a refused zke_conn_free */
};

static void destroy(zke_conn *c);

static void clog_(zke_conn *c, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[600];
    va_list ap;
    if (lvl < c->log_min)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (c->owner != NULL) {
        if (c->owner_ops != NULL)
            c->owner_ops->log(c->owner, lvl, buf);
        return;
    }
    if (c->log == NULL || c->life == CONN_FREEING)
        return;
    size_t n = strlen(buf) + 1;
    struct logline *l = malloc(sizeof *l + n);
    if (l == NULL)
        return;
    l->next = NULL;
    l->lvl = lvl;
    memcpy(l->msg, buf, n);
    if (c->ltail != NULL)
        c->ltail->next = l;
    else
        c->lhead = l;
    c->ltail = l;
}

/* --- the conn's life ----------------------------------------------------- */

const char *conn_life_name(enum conn_life l)
{
    switch (l) {
    case CONN_LIVE:
        return "live";
    case CONN_IDLE_CLOSING:
        return "idle_closing";
    case CONN_AUTH_DEAD:
        return "auth_dead";
    case CONN_FREEING:
        return "freeing";
    }
    return "?";
}

const char *conn_probe_name(enum conn_probe p)
{
    switch (p) {
    case PROBE_UNASKED:
        return "unasked";
    case PROBE_ASKING:
        return "asking";
    case PROBE_HOLDING:
        return "holding";
    case PROBE_ANSWERED:
        return "answered";
    case PROBE_OVER:
        return "over";
    }
    return "?";
}

const char *conn_state_name_of(const zke_conn *c)
{
    return conn_life_name(c->life);
}

/* FREEING is the end: nothing leaves it. One debug line a move. */
static void conn_to(zke_conn *c, enum conn_life to)
{
    if (c->life == to || c->life == CONN_FREEING)
        return;
    clog_(c, ZKE_LOG_DEBUG, "the connection: %s -> %s", conn_life_name(c->life), conn_life_name(to));
    c->life = to;
}

/* --- a member's life ---------------------------------------------------- */

const char *conn_member_life_name(enum conn_member_life l)
{
    switch (l) {
    case CM_ATTACHED:
        return "attached";
    case CM_RUNNING:
        return "running";
    case CM_STOPPING:
        return "stopping";
    case CM_DONE:
        return "done";
    case CM_QUIET:
        return "quiet";
    case CM_DETACHED:
        return "detached";
    }
    return "?";
}

const char *conn_member_state_name(const conn_member *m)
{
    return conn_member_life_name(m->life);
}

/* In the path index and counted in nrunning: started, not done. */
static int life_runs(enum conn_member_life l)
{
    return l == CM_RUNNING || l == CM_STOPPING;
}

/* Counted in c->wanting: started, not stopping. */
static int life_wants(enum conn_member_life l)
{
    return l == CM_RUNNING;
}

/* Pumped when due, holding a reference on the loop: started, not quiet. */
static int life_pumped(enum conn_member_life l)
{
    return l == CM_RUNNING || l == CM_STOPPING || l == CM_DONE;
}

static int member_gone(const conn_member *m)
{
    return m->life == CM_DETACHED;
}

static void index_remove(zke_conn *c, conn_member *m);

/* Moves m to `to`, keeping what its life is counted in: c->wanting, the
 * path index (leaving it; conn_agent_start adds it before, as the add may
 * fail), the loop's reference. One debug line, but not for the last two
 * steps: the agent reports on_stopped right after going quiet, and is
 * being freed when it detaches. */
static void member_to(zke_conn *c, conn_member *m, enum conn_member_life to)
{
    enum conn_member_life from = m->life;
    if (from == to)
        return;
    if (life_wants(from) != life_wants(to))
        c->wanting += life_wants(to) ? 1 : -1;
    if (life_runs(from) && !life_runs(to))
        index_remove(c, m);
    if (life_pumped(from) && !life_pumped(to))
        ev_unref(c->loop);
    else if (!life_pumped(from) && life_pumped(to))
        ev_ref(c->loop);        /* a started agent keeps the loop alive until it is quiet */
    m->life = to;
    if (to != CM_QUIET && to != CM_DETACHED)
        clog_(c, ZKE_LOG_DEBUG, "agent %s on the connection: %s -> %s", m->ops->id(m->a),
              conn_member_life_name(from), conn_member_life_name(to));
}

/* --- session callbacks (inside the ZooKeeper library) ------------------ */

static int any_wanting(const zke_conn *c)
{
    for (const conn_member *m = c->first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->wants_session(m->a))
            return 1;
    return 0;
}

static int any_settled(const zke_conn *c)
{
    for (const conn_member *m = c->first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a) && m->ops->ever_settled(m->a))
            return 1;
    return 0;
}

static void reopen_later(zke_conn *c)
{
    c->reopen_delay = c->reopen_delay < 0.1 ? 0.1 : c->reopen_delay * 2;
    if (c->reopen_delay > 2.0)
        c->reopen_delay = 2.0;
    double jitter = c->reopen_delay * rng_unit(&c->rng) / 4.0;
    ev_timer_stop(c->loop, &c->reopen);
    ev_timer_set(&c->reopen, c->reopen_delay + jitter, 0.);
    ev_timer_start(c->loop, &c->reopen);
}

static void fan_state(zke_conn *c, enum sess_state st)
{
    c->in_cb++;
    for (conn_member *m = c->first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a))
            m->ops->session_state(m->a, st);
    c->in_cb--;
}

/* --- vectors of members ------------------------------------------------ */

static int mvec_push(struct mvec *v, conn_member *m)
{
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 16;
        conn_member **p = realloc(v->v, (size_t)cap * sizeof(conn_member *));
        if (p == NULL)
            return -1;
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = m;
    return 0;
}

static void mvec_free(struct mvec *v)
{
    free(v->v);
    v->v = NULL;
    v->n = v->cap = 0;
}

/* Takes m out of v, whose members keep their index in v in the int at
 * offset `at` (-1: not in v): the last member moves into its slot. Returns
 * the slot it had, -1 if it was in none. O(1). */
static int mvec_unlink(struct mvec *v, conn_member *m, size_t at)
{
    int *mine = (int *)(void *)((char *)m + at);
    int i = *mine;
    if (i < 0)
        return -1;
    conn_member *last = v->v[--v->n];
    v->v[i] = last;
    *(int *)(void *)((char *)last + at) = i;
    *mine = -1;
    return i;
}

static int by_order(const void *x, const void *y)
{
    const conn_member *a = *(conn_member *const *)x, *b = *(conn_member *const *)y;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* Frees the detached members that nothing refers to any more: none while a
 * scan runs (c->in_cb), and none still in the due list (pump_agents drops
 * them from it). O(detached members kept). */
static void bury(zke_conn *c)
{
    if (c->in_cb > 0)
        return;
    int keep = 0;
    for (int i = 0; i < c->dead.n; i++) {
        if (c->dead.v[i]->due)
            c->dead.v[keep++] = c->dead.v[i];
        else
            free(c->dead.v[i]);
    }
    c->dead.n = keep;
}

/* --- pumps: only the agents that are due ------------------------------- */

/* Pumps the members that are due, each at most once in this loop
 * iteration, those due together in the order they were attached: so one
 * session event reaches the agents' callbacks in a defined order. A member
 * made due by another's pump is pumped in this iteration still (a later
 * batch); one pumped already stays due for the next iteration, which the
 * kick timer starts without blocking. Agents may be freed (detached) or
 * started meanwhile. */
static void pump_agents(zke_conn *c)
{
    unsigned iter = ev_iteration(c->loop) + 1;
    struct mvec batch = { NULL, 0, 0 };
    c->in_cb++;                 /* no destroy, no free of a member, under our feet */
    for (;;) {
        /* the due members not pumped in this iteration yet */
        batch.n = 0;
        int later = 0;
        for (int i = 0; i < c->due.n; i++) {
            conn_member *m = c->due.v[i];
            if (member_gone(m) || !life_pumped(m->life)) {
                m->due = 0;
            } else if (m->pumped == iter) {
                c->due.v[later++] = m;          /* next iteration */
            } else {
                m->due = 0;
                if (mvec_push(&batch, m) != 0) {
                    m->due = 1;                 /* no memory: next iteration */
                    c->due.v[later++] = m;
                }
            }
        }
        c->due.n = later;
        if (batch.n == 0)
            break;
        if (batch.n > 1)
            qsort(batch.v, (size_t)batch.n, sizeof(conn_member *), by_order);
        for (int i = 0; i < batch.n; i++) {
            conn_member *m = batch.v[i];
            if (member_gone(m) || !life_pumped(m->life) || m->pumped == iter)
                continue;
            m->pumped = iter;
            m->ops->pump(m->a);
        }
    }
    free(batch.v);
    c->in_cb--;
    bury(c);
    if (c->due.n > 0 && !ev_is_active(&c->kick))
        ev_timer_start(c->loop, &c->kick);      /* due again: turn without blocking */
}

void conn_agent_due(zke_conn *c, conn_member *m)
{
    if (m->due || member_gone(m))
        return;
    if (mvec_push(&c->due, m) != 0) {
        /* no memory for the list: the kick makes the loop turn, and a
         * later conn_agent_due (every kick is one) tries again */
        if (!ev_is_active(&c->kick))
            ev_timer_start(c->loop, &c->kick);
        return;
    }
    m->due = 1;
}

/* Every member still pumped is due (the handle closed: done agents may
 * report on_stopped now). */
void conn_pump_all(zke_conn *c)
{
    for (conn_member *m = c->first; m != NULL; m = m->next)
        if (!member_gone(m) && life_pumped(m->life))
            conn_agent_due(c, m);
}

/* --- the lease checks: one ev_check for the conn ---------------------- */

static void leaser_drop(zke_conn *c, conn_member *m)
{
    int i = mvec_unlink(&c->leasers, m, offsetof(conn_member, lease_at));
    if (i >= 0)
        leasewatch_dropped(&c->lw, i, c->leasers.n, c->in_cb > 0);
}

/* (A member dropped under check_cb's walk may make it skip one other this
 * time: leasewatch_dropped has them all checked again in the next iteration.) */
void conn_agent_lease_watch(zke_conn *c, conn_member *m)
{
    if (m->lease_at >= 0 || member_gone(m))
        return;
    if (mvec_push(&c->leasers, m) != 0)
        return;         /* no memory: the agent's own checks (on_leader, its term) still run */
    m->lease_at = c->leasers.n - 1;     /* beyond new_from: checked next iteration */
}

void conn_lease_recheck(zke_conn *c)
{
    leasewatch_recheck(&c->lw);
}

void conn_agent_lease_wait(zke_conn *c, conn_member *m)
{
    if (member_gone(m))
        return;
    if (m->lease_at < 0)
        conn_agent_lease_watch(c, m);   /* ticked next iteration: a waiter then */
    else
        leasewatch_wait(&c->lw);
}

/* lease_tick of leasers[from..], the base at `base`, folded into t. */
static void leasers_tick(zke_conn *c, int from, int64_t base, struct leasewatch_sum *t)
{
    leasewatch_sum_init(t);
    c->in_cb++;
    for (int i = from; i < c->leasers.n;) {
        conn_member *m = c->leasers.v[i];
        int follows = 0;
        int64_t at = member_gone(m) ? 0 : m->ops->lease_tick(m->a, &follows);
        if (at == 0) {
            leaser_drop(c, m);      /* the last one moved into slot i */
            continue;
        }
        leasewatch_sum_add(t, at, follows, base);
        i++;
    }
    c->in_cb--;
}

static void lease_arm(zke_conn *c, int64_t due)
{
    if (due == c->lease_armed && (due == INT64_MAX || bootwait_armed(&c->lease_to)))
        return;
    c->lease_armed = due;
    /* an absolute time on the boot clock: an end that passed while the
     * host was suspended wakes the loop as soon as it runs again */
    if (due != INT64_MAX)
        bootwait_at(&c->lease_to, due + 500000);
    else
        bootwait_stop(&c->lease_to);
}

/* First thing after a poll (top priority): what leasewatch_begin says
 * (nothing, the new leasers, or all), then the timer at the next time a
 * check is due. */
static void check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    (void)conn_guard_push(c);       /* the guarded agents' ends follow the base: one store */
    if (c->leasers.n == 0)
        return;
    int64_t base = session_lease_base_ns(c->sess), now = sess_now_ns();
    /* the watcher's heartbeat stopped: every leaser checks once (a leader
     * has no lease without it: agent_guard_watching) */
    int silent = c->guard != NULL && !guard_watcher_live(c->guard, now);
    int from;
    const char *why;
    enum leasewatch_pass pass = leasewatch_begin(&c->lw, base, now, silent, c->leasers.n, &from, &why);
    if (pass == LEASEWATCH_ALL)
        clog_(c, ZKE_LOG_DEBUG, "lease check of all %d leasers: %s", c->leasers.n, why);
    if (pass != LEASEWATCH_NONE) {
        struct leasewatch_sum t;
        leasers_tick(c, from, base, &t);
        leasewatch_end(&c->lw, pass, &t, c->leasers.n);
        bury(c);
    }
    int64_t pend = c->guard != NULL && c->lw.guard == LEASEWATCH_GUARD_HEARD
                       ? guard_watcher_pending(c->guard) : 0;
    lease_arm(c, leasewatch_next(&c->lw, base, pend));
}

static void wake_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;      /* only wakes the loop: the prepare and check watchers do the work */
}

static void lease_due_cb(struct bootwait *w)
{
    (void)w;            /* the same: the check after this poll checks the leasers */
}

/* The session's id, password and servers in the guard (guard.h), so that
 * its watcher closes the session once the agent's process is gone and its
 * terms are over; wiped (guard_unpublish) as soon as the session ends or
 * we close it ourselves. */
static void guard_publish(zke_conn *c)
{
    if (c->guard == NULL)
        return;
    if (c->guard_users != c->n || session_closing(c->sess)) {
        /* an agent of the session is not guarded by it (the watcher knows
         * nothing of that agent's terms, so it must not end the session),
         * or we close it ourselves */
        guard_session_clear(c->guard, c->guard_base);
        return;
    }
    struct closer_addr a[GUARD_SESSION_ADDRS], more[GUARD_SESSION_ADDRS];
    unsigned char pw[16];
    uint64_t id = 0;
    if (session_credentials(c->sess, &id, pw, &a[0].sa, &a[0].len) != 0) {
        guard_session_clear(c->guard, c->guard_base);
        return;
    }
    int n = a[0].len > 0;       /* the connected server first */
    int m = closer_hosts(c->hosts, more, GUARD_SESSION_ADDRS);
    for (int i = 0; i < m && n < GUARD_SESSION_ADDRS; i++)
        if (a[0].len == 0 || more[i].len != a[0].len || memcmp(&more[i].sa, &a[0].sa, a[0].len) != 0)
            a[n++] = more[i];
    guard_session_set(c->guard, c->guard_base, id, pw, session_timeout_ms(c->sess), a, n);
    volatile unsigned char *v = pw;     /* (our copy of the secret) */
    for (size_t i = 0; i < sizeof pw; i++)
        v[i] = 0;
}

static void guard_unpublish(zke_conn *c)
{
    if (c->guard != NULL)
        guard_session_clear(c->guard, c->guard_base);
}

int conn_guard_base(zke_conn *c, zke_guard *g)
{
    if (g == NULL || (c->guard != NULL && c->guard != g))
        return 0;
    if (c->guard == NULL) {
        int b = guard_base_take(g);
        if (b == 0)
            return 0;
        c->guard = g;
        c->guard_base = b;
        c->guard_base_ns = 0;
        guard_publish(c);
    }
    c->guard_users++;
    (void)conn_guard_push(c);
    return c->guard_base;
}

void conn_guard_release(zke_conn *c)
{
    if (c->guard == NULL)
        return;
    if (--c->guard_users > 0) {
        guard_publish(c);       /* (an unguarded agent may remain) */
        return;
    }
    guard_base_release(c->guard, c->guard_base);
    c->guard = NULL;
    c->guard_base = 0;
    c->guard_base_ns = 0;
}

unsigned conn_guard_gen(const zke_conn *c)
{
    return c->guard_gen;
}

int64_t conn_guard_push(zke_conn *c)
{
    if (c->guard == NULL)
        return 0;
    int64_t base = session_lease_base_ns(c->sess);
    if (base > 0 && base != c->guard_base_ns) {
        guard_base_set(c->guard, c->guard_base, base);
        c->guard_base_ns = base;
    }
    return c->guard_base_ns;
}

#define STEP_MARGIN_MS 50    /* before an agent said its margin: the smallest default */

void conn_note_margin(zke_conn *c, int margin_ms)
{
    if (margin_ms > 0 && (c->step_margin_ms == 0 || margin_ms < c->step_margin_ms))
        c->step_margin_ms = margin_ms;
}

/* The wall clock was set: a step ahead of the boot clock beyond the
 * margin is time the session's lease did not count (a paused VM whose
 * clock time sync stepped on resume): the lease loses it, and every leaser
 * is checked at once. */
static void step_cb(struct clockstep *w, int64_t step_ns)
{
    zke_conn *c = (zke_conn *)((char *)w - offsetof(zke_conn, step));
    int64_t lost = touch_clock_lost(0, step_ns, (int64_t)(c->step_margin_ms > 0
                                                              ? c->step_margin_ms
                                                              : STEP_MARGIN_MS) * 1000000);
    if (lost == 0 || c->sess == NULL)
        return;
    clog_(c, ZKE_LOG_WARN, "the wall clock stepped %" PRId64 " ms ahead of the boot clock (time "
          "sync after a pause of the whole machine?): the lease counts it as lost time",
          lost / 1000000);
    session_lose_time(c->sess, lost);
    (void)conn_guard_push(c);               /* the guard's ends move back with it, now */
    leasewatch_recheck(&c->lw);
    /* every leaser checked now, before the callbacks of lower priority of
     * this iteration (answers, the terms' timers and hooks): this
     * iteration's check ran before this callback */
    check_cb(c->loop, &c->check, 0);
}

/* --- the session's renewal stream -------------------------------------- */

/* What the planner reads of the session and the timer, now. */
static struct renew_now renew_facts(zke_conn *c)
{
    struct renew_now t = { 0 };
    t.now = sess_now_ns();
    if (c->sess != NULL) {
        t.base = session_lease_base_ns(c->sess);
        t.pair_gap_ns = session_pair_gap_ns(c->sess);
        t.timeout_ms = session_timeout_ms(c->sess);
    }
    t.active = ev_is_active(&c->renew);
    t.remaining = t.active ? ev_timer_remaining(c->loop, &c->renew) : 0.;
    return t;
}

static void renew_arm(zke_conn *c, double after)
{
    ev_timer_stop(c->loop, &c->renew);
    ev_timer_set(&c->renew, after > 0 ? after : 0., c->rp.repeat);
    ev_timer_start(c->loop, &c->renew);
}

static void renew_send(zke_conn *c);

/* Does what the planner decided. */
static void renew_apply(zke_conn *c, struct renew_step s)
{
    switch (s.act) {
    case RENEW_KEEP:
        break;
    case RENEW_ARM:
        renew_arm(c, s.after);
        break;
    case RENEW_STOP:
        ev_timer_stop(c->loop, &c->renew);
        break;
    case RENEW_SEND:
        renew_send(c);
        break;
    }
}

static void renew_done(void *arg, const struct sess_result *r)
{
    zke_conn *c = arg;
    if (r->rc == SESS_CLOSING) {
        renewplan_unanswered(&c->rp);
        return;
    }
    struct renew_now t = renew_facts(c);
    clog_(c, ZKE_LOG_DEBUG, "renewal answered in %" PRId64 " us; the lease base is %" PRId64 " ms old",
          (t.now - r->sent_ns) / 1000, t.base > 0 ? (t.now - t.base) / 1000000 : -1);
    renew_apply(c, renewplan_answered(&c->rp, &t, r->sent_ns));
}

/* A renewal (or, further back, a read) on the session, naming a node of
 * one of the agents asking (a commit needs one that exists: the stream
 * tries the next agent's node the next time). */
static void renew_send(zke_conn *c)
{
    enum renew_send kind = renewplan_send(&c->rp);
    if (kind == RENEW_SEND_LATER)
        return;     /* on the answer of the one in flight */
    if (!session_connected(c->sess) || c->renewers.n == 0)
        return;
    char *path = NULL;
    for (int i = 0; i < c->renewers.n && path == NULL; i++) {
        /* start where the last one left: a node that is gone is not asked again */
        int k = (int)((c->rng >> 33) % (uint64_t)c->renewers.n + (uint64_t)i) % c->renewers.n;
        conn_member *m = c->renewers.v[k];
        if (!member_gone(m))
            path = m->ops->node_path(m->a);
    }
    c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
    if (path == NULL)
        return;
    /* a sync, or a write that changes nothing, goes through the quorum
     * leader: its answer confirms what this connection sent at least a
     * server tick before it (touch.h); the write's also that the leader
     * still had its quorum. Further back, a plain read: an answer for the
     * first renewal after a promotion to confirm. Ahead of queued requests. */
    session_priority(c->sess);
    int rc = kind == RENEW_SEND_READ ? session_exists(c->sess, path, 0, renew_done, c)
             : kind == RENEW_SEND_WRITE ? session_commit(c->sess, path, renew_done, c)
                                        : session_sync(c->sess, path, renew_done, c);
    free(path);
    if (rc == 0)
        renewplan_sent(&c->rp);
}

int conn_agent_ride(zke_conn *c, conn_member *m, int64_t after_ns, int within_ms)
{
    if (member_gone(m) || !ev_is_active(&c->renew) || !session_connected(c->sess))
        return -1;
    struct renew_now t = renew_facts(c);
    if (!renewplan_ride_ok(&c->rp, &t, after_ns, within_ms))
        return -1;
    if (m->rider_at < 0) {
        if (mvec_push(&c->riders, m) != 0)
            return -1;
        m->rider_at = c->riders.n - 1;
    }
    m->ride_after = after_ns;
    return 0;
}

void conn_agent_unride(zke_conn *c, conn_member *m)
{
    (void)mvec_unlink(&c->riders, m, offsetof(conn_member, rider_at));
}

/* The riders' turn, right after the tick's own request: theirs are sent
 * in the same loop iteration, behind it, and (the server answers a
 * session in order, a read after a write once the write is done) their
 * answers come right after its answer, read in the same wake-up. A rider
 * goes at the tick nearest its time (renewplan_ride_by). Those that go
 * leave the list first: a rider may ask again from its call. */
static void riders_go(zke_conn *c)
{
    if (c->riders.n == 0)
        return;
    int64_t by = renewplan_ride_by(&c->rp, sess_now_ns());
    struct mvec go = { NULL, 0, 0 };
    for (int i = 0; i < c->riders.n;) {
        conn_member *m = c->riders.v[i];
        if (m->ride_after > by) {
            i++;
            continue;
        }
        conn_agent_unride(c, m);        /* the last one moved into slot i */
        /* no memory: it does not ride (its own timer sends it) */
        (void)mvec_push(&go, m);
    }
    c->in_cb++;
    for (int i = 0; i < go.n; i++)
        if (!member_gone(go.v[i]))
            go.v[i]->ops->ride(go.v[i]->a);
    c->in_cb--;
    mvec_free(&go);
    bury(c);
}

static void renew_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    renew_send(c);
    riders_go(c);
}

/* The stream's period after a change of demand (renewplan_replan). */
static void renew_plan(zke_conn *c, int urgent)
{
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_replan(&c->rp, urgent, &t));
}

static void renew_drop(zke_conn *c, conn_member *m)
{
    renewplan_drop(&c->rp, &m->rd);
    (void)mvec_unlink(&c->renewers, m, offsetof(conn_member, renewer_at));
}

void conn_agent_renew(zke_conn *c, conn_member *m, enum renew_level level, int period_ms,
                      int read_ms, int lease_ms, int by_sync)
{
    if (member_gone(m))
        return;
    struct renew_demand d = renew_demand_of(level, period_ms, read_ms, lease_ms, by_sync);
    if (renew_demand_same(&m->rd, &d, level))
        return;
    renew_drop(c, m);
    m->rd = d;
    if (level != RENEW_NONE && mvec_push(&c->renewers, m) == 0) {
        m->renewer_at = c->renewers.n - 1;
        renewplan_add(&c->rp, &m->rd, level);
    }
    /* a promotion from reads keeps the phase (renew_plan): no write of its
     * own; a term that needs a confirmed lease at once asks (conn_renew_now) */
    renew_plan(c, 0);
}

void conn_renew_now(zke_conn *c)
{
    if (renewplan_leasing(&c->rp))
        renew_plan(c, 1);
}

void conn_renew_soon(zke_conn *c)
{
    if (!renewplan_leasing(&c->rp))
        return;
    renew_plan(c, 0);
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_soon(&c->rp, &t, session_last_renewal_ns(c->sess)));
}

void conn_lose(zke_conn *c, const char *event_reason, const char *why)
{
    ev_timer_stop(c->loop, &c->disc_to);
    c->in_cb++;
    for (conn_member *m = c->first; m != NULL; m = m->next)
        if (!member_gone(m) && m->ops->running(m->a))
            m->ops->session_lost(m->a, event_reason, why);
    c->in_cb--;
    guard_unpublish(c);
    session_request_close(c->sess);
    if (c->life == CONN_IDLE_CLOSING)
        conn_to(c, CONN_LIVE);
    if (any_wanting(c))
        reopen_later(c);
}

/* The session file for the session just connected (sessionfile.h). */
static int write_session_file(const zke_conn *c)
{
    struct sockaddr_storage peer;
    socklen_t peer_len;
    unsigned char pw[16];
    uint64_t id = 0;
    if (session_credentials(c->sess, &id, pw, &peer, &peer_len) != 0)
        return -1;
    int rc = sessionfile_write(c->session_file, id, pw, c->session_file_password);
    volatile unsigned char *v = pw;     /* (our copy of the secret) */
    for (size_t i = 0; i < sizeof pw; i++)
        v[i] = 0;
    return rc;
}

static void sess_state_cb(void *ud, enum sess_state st)
{
    zke_conn *c = ud;
    if (st == SESS_S_CONNECTED &&
        (c->probe_state == PROBE_ASKING || c->probe_state == PROBE_HOLDING)) {
        c->probe_state = PROBE_HOLDING;     /* passed on when the probe is done (probe_done) */
        return;
    }
    if (st == SESS_S_DISCONNECTED && c->probe_state == PROBE_HOLDING) {
        c->probe_state = PROBE_ASKING;      /* the agents were not told of the connection */
        return;
    }
    if (c->probe_state == PROBE_HOLDING)
        c->probe_state = PROBE_ASKING;
    if (st == SESS_S_CONNECTED) {
        uint64_t sid = session_id(c->sess);
        c->reopen_delay = 0;
        ev_timer_stop(c->loop, &c->disc_to);
        if (sid != c->last_session && c->session_file != NULL && write_session_file(c) != 0)
            clog_(c, ZKE_LOG_WARN, "cannot write session file %s", c->session_file);
        c->last_session = sid;
        guard_publish(c);       /* (again at each connection: the server may have changed) */
        fan_state(c, st);
        /* a reconnected session's lease moves with the first renewal on the
         * new connection (touch.h): send it now, not a period on */
        conn_renew_now(c);
    } else if (st == SESS_S_DISCONNECTED) {
        fan_state(c, st);
        /* The client notices a dead connection up to 2/3 of the timeout
         * after the server last heard from us, and the server may expire us
         * one timeout after that last contact: one more timeout from here
         * is past that, so the session is as good as gone by then. */
        ev_timer_stop(c->loop, &c->disc_to);
        ev_timer_set(&c->disc_to, session_timeout_ms(c->sess) / 1000.0, 0.);
        ev_timer_start(c->loop, &c->disc_to);
    } else if (st == SESS_S_EXPIRED) {
        conn_lose(c, "expired", "expired");
    } else if (any_settled(c)) {
        /* After a role was taken, one server rejecting us (a rolling change
         * of enforce.auth, say) is not worth stopping for good: the session
         * is lost like an expiry and a new one is tried, slowly (1 s
         * doubling to 30 s, from 1 s again after 5 quiet minutes), on the
         * next servers of the connect string. */
        double now = ev_now(c->loop);
        if (now - c->auth_failed_at > 300.0)
            c->auth_retry = 0;
        c->auth_failed_at = now;
        c->auth_retry = c->auth_retry < 1.0 ? 1.0 : c->auth_retry * 2;
        if (c->auth_retry > 30.0)
            c->auth_retry = 30.0;
        clog_(c, ZKE_LOG_ERROR, "%s (after the first role: retrying in %.0f s)",
              session_auth_error(c->sess), c->auth_retry);
        conn_lose(c, "auth_failed", "is dead: authentication failed");
        if (ev_is_active(&c->reopen)) {
            ev_timer_stop(c->loop, &c->reopen);
            ev_timer_set(&c->reopen, c->auth_retry * (1.0 + rng_unit(&c->rng) / 4.0), 0.);
            ev_timer_start(c->loop, &c->reopen);
        }
    } else {
        /* before the first role: a configuration error, and a new handle
         * would be refused the same way: no reopen */
        ev_timer_stop(c->loop, &c->disc_to);
        ev_timer_stop(c->loop, &c->reopen);
        conn_to(c, CONN_AUTH_DEAD);
        fan_state(c, st);
        guard_unpublish(c);
        session_request_close(c->sess);
    }
}

/* --- the path index: running members by election path ----------------- */

static unsigned path_hash(const char *p, size_t n)
{
    unsigned h = 2166136261u;           /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 16777619u;
    }
    return h;
}

/* The running member whose election path is p[0..n), or NULL. */
static conn_member *index_find(const zke_conn *c, const char *p, size_t n, unsigned h)
{
    if (c->index_size == 0)
        return NULL;
    for (conn_member *m = c->index[h & (c->index_size - 1)]; m != NULL; m = m->hnext) {
        const char *mp = m->ops->path(m->a);
        if (m->hash == h && strncmp(mp, p, n) == 0 && mp[n] == '\0')
            return m;
    }
    return NULL;
}

/* -1: no memory to grow the index */
static int index_add(zke_conn *c, conn_member *m)
{
    if ((unsigned)c->nrunning + 1 > c->index_size / 2) {
        unsigned size = c->index_size ? c->index_size * 2 : 64;
        conn_member **t = calloc(size, sizeof(conn_member *));
        if (t == NULL)
            return -1;
        for (unsigned i = 0; i < c->index_size; i++) {
            for (conn_member *x = c->index[i], *nx; x != NULL; x = nx) {
                nx = x->hnext;
                x->hnext = t[x->hash & (size - 1)];
                t[x->hash & (size - 1)] = x;
            }
        }
        free(c->index);
        c->index = t;
        c->index_size = size;
    }
    conn_member **slot = &c->index[m->hash & (c->index_size - 1)];
    m->hnext = *slot;
    *slot = m;
    c->nrunning++;
    return 0;
}

static void index_remove(zke_conn *c, conn_member *m)
{
    for (conn_member **p = &c->index[m->hash & (c->index_size - 1)]; *p != NULL; p = &(*p)->hnext) {
        if (*p == m) {
            *p = m->hnext;
            break;
        }
    }
    m->hnext = NULL;
    c->nrunning--;
}

static void sess_watch_cb(void *ud, enum sess_watch type, const char *path)
{
    zke_conn *c = ud;
    const char *slash = strrchr(path, '/');
    if (slash == NULL || slash == path)
        return;
    size_t plen = (size_t)(slash - path);
    /* election paths are unique among the running agents of a conn */
    conn_member *m = index_find(c, path, plen, path_hash(path, plen));
    if (m != NULL && !member_gone(m) && m->ops->running(m->a))
        m->ops->session_watch(m->a, type, path);
}

static void sess_log_cb(void *ud, enum zke_log_level lvl, const char *msg)
{
    clog_(ud, lvl, "%s", msg);
}

/* --- loop glue ---------------------------------------------------------- */

static void sess_state_cb(void *ud, enum sess_state st);

/* What the probe asks for: a quarter of the timeout, so that a grant below
 * half of it bounds the tick tighter than the main session's grant (the
 * library's connect timeout is two thirds of the asked timeout). */
static int probe_ask_ms(const zke_conn *c)
{
    return c->timeout_ms / 4;
}

static void probe_done(void *ud, int granted_ms)
{
    zke_conn *c = ud;
    if (c->probe == NULL)
        return;         /* the conn's teardown */
    int held = c->probe_state == PROBE_HOLDING;
    c->probe_state = PROBE_ANSWERED;    /* freed at the next prepare */
    int half = session_timeout_ms(c->sess) / 2, tick = granted_ms / 2;
    if (tick > 0 && tick < half) {
        session_set_tick_bound(c->sess, tick);
        clog_(c, ZKE_LOG_INFO, "the servers' tick is at most %d ms: a session that asked for "
              "%d ms was granted %d ms", tick, probe_ask_ms(c), granted_ms);
    } else {
        clog_(c, ZKE_LOG_DEBUG, "no shorter server tick learned (a session that asked for "
              "%d ms was granted %d ms)", probe_ask_ms(c), granted_ms);
    }
    if (held) {
        if (session_connected(c->sess))
            sess_state_cb(c, SESS_S_CONNECTED);
    }
}

static void conn_open(zke_conn *c)
{
    ev_timer_stop(c->loop, &c->reopen);
    if (c->life == CONN_IDLE_CLOSING)
        conn_to(c, CONN_LIVE);
    /* the terms of the session that ended keep the ends they have: the
     * new session's base must not move them later (agents armed with
     * absolute ends see the generation and keep theirs) */
    if (c->guard != NULL && c->guard_base_ns != 0) {
        guard_base_freeze(c->guard, c->guard_base);
        c->guard_base_ns = 0;
    }
    c->guard_gen++;
    guard_unpublish(c);         /* the session that ended (published again once connected) */
    if (session_open(c->sess) != 0) {
        clog_(c, ZKE_LOG_WARN, "%s; retrying", session_error(c->sess));
        reopen_later(c);
        return;
    }
    if (c->probe_state == PROBE_UNASKED && session_tick_unstated(c->sess)) {
        int ask = probe_ask_ms(c);
        c->probe_state = PROBE_OVER;
        if (ask >= 10)
            c->probe = probe_start(c->loop, c->hosts, ask, ask > 250 ? ask : 250, probe_done, c);
        if (c->probe != NULL)
            c->probe_state = PROBE_ASKING;
    }
}

static void destroy(zke_conn *c)
{
    guard_unpublish(c);
    if (ev_is_active(&c->prepare)) {
        ev_ref(c->loop);
        ev_prepare_stop(c->loop, &c->prepare);
    }
    if (ev_is_active(&c->check)) {
        ev_ref(c->loop);        /* started unreferenced: its stop gives the count back */
        ev_check_stop(c->loop, &c->check);
    }
    ev_timer_stop(c->loop, &c->kick);
    bootwait_close(&c->lease_to);
    clockstep_close(&c->step);
    ev_timer_stop(c->loop, &c->renew);
    ev_timer_stop(c->loop, &c->reopen);
    ev_timer_stop(c->loop, &c->disc_to);
    struct probe *p = c->probe;
    c->probe = NULL;
    c->probe_state = PROBE_OVER;
    probe_free(p);
    /* completions of the close reach no agent through us (none is left:
     * a shared conn is destroyed once its last agent went, a private one
     * when its owner detached) */
    for (conn_member *m = c->first, *nx; m != NULL; m = nx) {
        nx = m->next;
        free(m);
    }
    c->first = c->last = NULL;
    c->n = 0;
    session_free(c->sess);
    while (c->lhead != NULL) {
        struct logline *l = c->lhead;
        c->lhead = l->next;
        free(l);
    }
    for (int i = 0; i < c->dead.n; i++)
        free(c->dead.v[i]);
    mvec_free(&c->dead);
    mvec_free(&c->due);
    mvec_free(&c->leasers);
    mvec_free(&c->renewers);
    mvec_free(&c->riders);
    free(c->index);
    free(c->hosts);
    free(c->session_file);
    free(c);
}

static void prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    pump_agents(c);
    if (c->life == CONN_FREEING && c->n == 0 && c->in_cb == 0) {
        destroy(c);
        return;
    }
    if (c->probe != NULL && (c->probe_state == PROBE_ANSWERED || !any_wanting(c))) {
        /* done, or of no more use (its timers would hold a host's loop):
         * done() comes first if it had not, and passes a held connect on */
        probe_free(c->probe);
        c->probe = NULL;
        c->probe_state = PROBE_OVER;
    }
    session_flush(c->sess);
    int open = session_is_open(c->sess);
    if (c->was_open && !open) {
        conn_pump_all(c);       /* done agents wait for the close to report on_stopped */
        c->close_owed = 0;      /* the close released their nodes */
    }
    c->was_open = open;
    if (!open && c->life != CONN_AUTH_DEAD && !ev_is_active(&c->reopen) && any_wanting(c))
        conn_open(c);
    while (c->lhead != NULL && c->life != CONN_FREEING) {
        struct logline *l = c->lhead;
        c->lhead = l->next;
        if (c->lhead == NULL)
            c->ltail = NULL;
        c->in_cb++;
        if (l->lvl >= c->log_min)       /* else queued before the level rose */
            c->log(c->ud, l->lvl, l->msg);
        c->in_cb--;
        free(l);
    }
    if (c->life == CONN_FREEING && c->n == 0 && c->in_cb == 0)
        destroy(c);
    else if ((c->due.n > 0 ||
              leasewatch_pending(&c->lw, session_lease_base_ns(c->sess), c->leasers.n)) &&
             !ev_is_active(&c->kick))
        /* made due after the pumps, or the lease base moved after this
         * iteration's check (which runs first after a poll, before the
         * answers are read), or a leaser changed: turn without blocking,
         * so that an agent waiting for its lease starts now, not at the
         * next timer, and the check sees what changed */
        ev_timer_start(c->loop, &c->kick);
}

static void reopen_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    if (session_is_open(c->sess) || c->life == CONN_AUTH_DEAD || !any_wanting(c))
        return;
    conn_open(c);
}

static void disc_to_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    zke_conn *c = w->data;
    (void)loop;
    (void)revents;
    if (session_connected(c->sess) || !session_is_open(c->sess))
        return;
    conn_lose(c, "expired", "lost: no contact with ZooKeeper for a whole session timeout");
}

uint64_t conn_previous_session(const zke_conn *c)
{
    return c->prev_session;
}

/* Validates and copies; on a validation error c->err is set (c is kept so
 * that the caller can read it). */
static zke_conn *make_body(struct ev_loop *loop, const struct zke_conn_settings *s, zke_agent *owner,
                           zke_log_fn *log, void *ud)
{
    zke_conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->loop = loop;
    c->owner = owner;
    c->log = log;
    c->ud = ud;
    c->timeout_ms = s->session_timeout_ms > 0 ? s->session_timeout_ms
                                              : ZKE_DEFAULT_SESSION_TIMEOUT_MS;
    c->connect_timeout_ms = s->connect_timeout_ms != 0 ? s->connect_timeout_ms
                                                       : ZKE_DEFAULT_CONNECT_TIMEOUT_MS;
    c->hosts = xstrdup(s->zk ? s->zk : "");
    c->session_file = xstrdup(s->session_file);
    c->session_file_password = s->session_file_password != 0;
    ev_prepare_init(&c->prepare, prepare_cb);
    c->prepare.data = c;
    ev_check_init(&c->check, check_cb);
    ev_set_priority(&c->check, EV_MAXPRI);
    c->check.data = c;
    ev_timer_init(&c->kick, wake_cb, 0., 0.);
    bootwait_init(&c->lease_to, loop, lease_due_cb);
    clockstep_init(&c->step, loop, step_cb);
    ev_timer_init(&c->renew, renew_cb, 0., 0.);
    c->renew.data = c;
    leasewatch_init(&c->lw);
    c->lease_armed = INT64_MAX;
    ev_timer_init(&c->reopen, reopen_cb, 0., 0.);
    ev_timer_init(&c->disc_to, disc_to_cb, 0., 0.);
    c->reopen.data = c->disc_to.data = c;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    c->rng = (((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c) | 1;
    if (c->hosts == NULL || (s->session_file != NULL && c->session_file == NULL)) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return c;
    }
    c->prev_session = sessionfile_read(c->session_file);
    if (settings_check_conn(s, c->err, sizeof c->err) != 0)
        return c;
    struct sess_cbs scb = { sess_state_cb, sess_watch_cb, sess_log_cb };
    c->sess = session_new(loop, c->hosts, c->timeout_ms, &scb, c);
    if (c->sess == NULL || session_set_auth(c->sess, s->auth_scheme, s->auth_credentials) != 0) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return c;
    }
    session_set_acl(c->sess, s->acl);
    ev_prepare_start(loop, &c->prepare);
    ev_unref(loop);             /* the agents keep the loop alive, not the conn */
    ev_check_start(loop, &c->check);
    ev_unref(loop);
    return c;
}

static zke_conn *make(struct ev_loop *loop, const struct zke_conn_settings *s, zke_agent *owner,
                      zke_log_fn *log, void *ud)
{
    zke_conn *c = make_body(loop, s, owner, log, ud);
    if (c != NULL)
        snprintf(c->verr, sizeof c->verr, "%s", c->err);
    return c;
}

zke_conn *conn_new_private(struct ev_loop *loop, const struct zke_settings *s, zke_agent *owner)
{
    struct zke_conn_settings cs;
    settings_conn_of(s, &cs);
    return make(loop, &cs, owner, NULL, NULL);
}

const char *conn_error(const zke_conn *c) { return c->verr; }
session *conn_session(zke_conn *c) { return c->sess; }
struct ev_loop *conn_loop(const zke_conn *c) { return c->loop; }
const char *conn_hosts(const zke_conn *c) { return c->hosts; }
int conn_requested_timeout_ms(const zke_conn *c) { return c->timeout_ms; }
int conn_connect_timeout_ms(const zke_conn *c) { return c->connect_timeout_ms; }
int conn_is_private(const zke_conn *c) { return c->owner != NULL; }

conn_member *conn_attach(zke_conn *c, zke_agent *a, const struct conn_agent_ops *ops)
{
    conn_member *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->a = a;
    m->ops = ops;
    m->order = c->next_order++;
    m->lease_at = -1;
    m->renewer_at = -1;
    m->rider_at = -1;
    m->prev = c->last;
    if (c->last != NULL)
        c->last->next = m;
    else
        c->first = m;
    c->last = m;
    c->n++;
    if (a == c->owner)
        c->owner_ops = ops;
    guard_publish(c);           /* (withdrawn until the newcomer is guarded too) */
    return m;
}

int conn_agent_start(zke_conn *c, conn_member *m, char *err, size_t errlen)
{
    zke_agent *a = m->a;
    const char *path = m->ops->path(a);
    size_t plen = strlen(path);
    m->hash = path_hash(path, plen);
    conn_member *o = life_runs(m->life) ? NULL : index_find(c, path, plen, m->hash);
    if (o != NULL && o != m) {
        snprintf(err, errlen, "another agent on this connection ('%s') runs the election "
                 "'%s': one candidate per election path and session", o->ops->id(o->a),
                 o->ops->path(o->a));
        return -1;
    }
    if (!life_runs(m->life) && index_add(c, m) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    member_to(c, m, CM_RUNNING);
    conn_agent_due(c, m);       /* a pump running now reaches it in this iteration */
    if (c->life == CONN_AUTH_DEAD)
        conn_to(c, CONN_LIVE);  /* an agent started again: try again */
    /* a close under way is taken back, unless nodes are left for it to
     * release: then a new handle follows it */
    if (session_is_open(c->sess) && c->life == CONN_IDLE_CLOSING && c->close_owed == 0 &&
        session_keep(c->sess) == 0) {
        conn_to(c, CONN_LIVE);
        guard_publish(c);       /* ours again */
    }
    if (!session_is_open(c->sess)) {
        if (!ev_is_active(&c->reopen))
            conn_open(c);
    } else if (session_connected(c->sess) && c->probe_state != PROBE_HOLDING) {
        m->ops->session_state(a, SESS_S_CONNECTED);
    }
    return 0;
}

void conn_agent_stopping(zke_conn *c, conn_member *m)
{
    if (m->life == CM_RUNNING)
        member_to(c, m, CM_STOPPING);
}

int conn_release_by_close(zke_conn *c, conn_member *m)
{
    if (life_wants(m->life) || c->wanting > 0 || !session_is_open(c->sess))
        return 0;
    c->close_owed++;
    return 1;
}

int conn_others_running(const zke_conn *c, const conn_member *m)
{
    return c->nrunning - (m != NULL && life_runs(m->life) ? 1 : 0) > 0;
}

void conn_agent_done(zke_conn *c, conn_member *m)
{
    if (life_runs(m->life))
        member_to(c, m, CM_DONE);
    if (c->nrunning > 0 || !session_is_open(c->sess))
        return;
    guard_unpublish(c);         /* we close it ourselves */
    session_request_close(c->sess);
    if (c->life == CONN_LIVE)
        conn_to(c, CONN_IDLE_CLOSING);
    ev_timer_stop(c->loop, &c->reopen);
    ev_timer_stop(c->loop, &c->disc_to);
}

void conn_agent_quiet(zke_conn *c, conn_member *m)
{
    /* (after conn_agent_done, as the agent does it: one still running
     * would also leave the path index and stop wanting the session) */
    if (m != NULL && life_pumped(m->life))
        member_to(c, m, CM_QUIET);
}

void conn_detach(zke_conn *c, conn_member *m)
{
    member_to(c, m, CM_DETACHED);
    leaser_drop(c, m);
    renew_drop(c, m);
    conn_agent_unride(c, m);
    renew_plan(c, 0);
    /* out of the list now; the due list drops it when it comes to it */
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        c->first = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    else
        c->last = m->prev;
    c->n--;
    guard_publish(c);
    zke_agent *a = m->a;
    /* a pump or a check running may hold it, and the due list until the
     * next pump: freed then (bury); else now */
    if (c->in_cb == 0 && !m->due)
        free(m);
    else if (mvec_push(&c->dead, m) != 0)
        leasewatch_recheck(&c->lw);     /* no memory: leaked, never touched again (detached) */
    if (c->owner == a) {
        c->owner = NULL;        /* its log is gone */
        c->owner_ops = NULL;
        c->log = NULL;
        conn_to(c, CONN_FREEING);
        if (c->in_cb == 0)
            destroy(c);         /* else when pump_agents returns */
        return;
    }
    if (c->sess != NULL && c->nrunning == 0 && session_is_open(c->sess)) {
        guard_unpublish(c);
        session_request_close(c->sess);
        if (c->life == CONN_LIVE)
            conn_to(c, CONN_IDLE_CLOSING);
    }
    if (c->life == CONN_FREEING && c->n == 0 && c->in_cb == 0)
        destroy(c);
}

void conn_free_unattached(zke_conn *c)
{
    if (c != NULL && c->n == 0)
        destroy(c);
}

/* --- public API ------------------------------------------------------- */

zke_conn *zke_conn_new(struct ev_loop *loop, const struct zke_conn_settings *s, zke_log_fn *log,
                       void *ud)
{
    return make(loop, s, NULL, log, ud);
}

const char *zke_conn_errstr(const zke_conn *c)
{
    return c->err;
}

uint64_t zke_conn_session(const zke_conn *c)
{
    return c->sess != NULL ? session_id(c->sess) : 0;
}

int zke_conn_connected(const zke_conn *c)
{
    return c->sess != NULL && session_connected(c->sess);
}

void conn_set_log_level(zke_conn *c, enum zke_log_level min)
{
    c->log_min = min;
    if (c->sess != NULL)
        session_set_log_level(c->sess, min);
}

int zke_conn_set_log_level(zke_conn *c, enum zke_log_level min)
{
    if (c == NULL)
        return -1;
    if (c->owner != NULL) {
        snprintf(c->err, sizeof c->err, "this connection belongs to its agent (zke_agent_new): "
                 "set the agent's level");
        return -1;
    }
    if ((unsigned)min > (unsigned)ZKE_LOG_ERROR) {
        snprintf(c->err, sizeof c->err, "log level %d is none of ZKE_LOG_DEBUG (%d) to ZKE_LOG_ERROR (%d)",
                 (int)min, (int)ZKE_LOG_DEBUG, (int)ZKE_LOG_ERROR);
        return -1;
    }
    conn_set_log_level(c, min);
    return 0;
}

int zke_conn_free(zke_conn *c)
{
    if (c == NULL || c->life == CONN_FREEING)
        return 0;
    if (c->owner != NULL) {
        snprintf(c->err, sizeof c->err, "this connection belongs to its agent (zke_agent_new): "
                 "free the agent");
        return -1;
    }
    int live = 0;
    for (const conn_member *m = c->first; m != NULL; m = m->next)
        if (!member_gone(m) && !m->ops->free_requested(m->a))
            live++;
    if (live > 0) {
        snprintf(c->err, sizeof c->err, "%d agent%s still on this connection: zke_agent_free "
                 "%s first", live, live == 1 ? " is" : "s are", live == 1 ? "it" : "them");
        return -1;
    }
    conn_to(c, CONN_FREEING);
    if (c->n == 0 && c->in_cb == 0)
        destroy(c);             /* else: when the last deferred agent free ends, or the log
                                 * callback returns (prepare_cb) */
    return 0;
}
