/*
 * test_sim.c - a seeded simulation of the promise (docs/design.md "The
 * promise"), in the spirit of FoundationDB's: N candidates, each driving
 * the REAL election (election.c), term (term.c), touch (touch.c), renewal
 * planner (renewplan.c) and lease plan (settings.c) code, against a model
 * of the ZooKeeper servers as the proof states them, in virtual time,
 * with random delays, stalls, cuts, reconnects, expiries, crashes and
 * resigns. It complements the tests
 * against real ZooKeeper servers (tests/integration, tests/chaos); it never
 * replaces them: what the model leaves out, they cover.
 *
 * Usage: test_sim [--seeds N] [--from S] [--trace] [--quiet]
 *        (or ZKELECT_SIM_SEEDS=N, ZKELECT_SIM_FROM=S). The suite (unit.sim)
 *        runs the default 2000 seeds from 1 (500 under ASan). A failing seed prints itself,
 *        the broken invariant and the run's trace (the last lines; --trace
 *        --seeds 1 --from S: all of it); `test_sim --seeds 1 --from S`
 *        replays it exactly (one RNG per seed, nothing else random).
 *
 * What is modelled (true time in ns; servers at rate 1):
 *  - An ensemble of one quorum leader (server 0) and two followers, each
 *    with its own copy of the tree, applied in zxid order as commits
 *    arrive (reads are answered from the server's own copy: a follower's
 *    reads may lag). Every request a server gets from a client touches the
 *    session there (F1); a follower reports its touches only in its reply
 *    to the leader's ping, which the leader sends every tick/2 and which
 *    reaches a following follower within tick/2 (assumption Z) unless the
 *    leader-to-follower direction stalls (below). Writes
 *    and syncs go to the leader on the follower's ordered channel, behind
 *    the ping replies sent before them (F3); a forwarded request does not
 *    touch the session at the leader (F2); the leader touches it on its
 *    clients' own requests, on a ping reply and on a revalidation (F4).
 *    The leader expires a session in the first tick bucket after the last
 *    touch it read + T (ZooKeeper's ExpiryQueue) or, in most seeds, at the
 *    earliest moment the proof allows: T after the follower heard the last
 *    request whose touch reached the leader; it deletes its ephemerals, and
 *    every server fires the deletion's watches as it applies it, ahead of
 *    any later answer on the connection (FIFO channels).
 *  - A follower cut from the leader: every message between them is lost;
 *    it answers reads and pings for syncLimit ticks, then stops following
 *    and closes its clients' connections (F4), and rejoins (a snapshot of
 *    the leader's tree) when the cut ends.
 *  - A client connection: FIFO both ways, random delays (some long), held
 *    while the candidate is cut off; the client library's pings every T/3,
 *    its disconnect after 2T/3 of silence, reconnects to a random server
 *    that has seen the client's last zxid, the revalidation through the
 *    leader, SESSIONEXPIRED on a reconnect after the expiry, and the
 *    agent's giving up of a session T after the disconnect. Requests in
 *    flight at a disconnect complete with CONNLOSS.
 *  - Each candidate: a clock of its own (rate within the drift of the
 *    plan, any offset), the agent's FIFO of events and requests with the
 *    term's gate (term_gate, term_wait: a won term waits for a fresh
 *    lease; the publish goes ahead of it and confirms like a renewal), the
 *    lease check first in every loop iteration (agent_lease_tick's logic
 *    over touch.c's base and the plan's lease), on_leader's check of the
 *    lease left, the revoke, the drain of the term's processes (at most
 *    half the step-down budget), on_stepdown and its holds (term_hold: the
 *    node's release waits, at most half the budget), the fail-stop guard
 *    holding term_ends_for's hard end on the candidate's clock (a frozen
 *    loop is killed then); the session's renewal stream is renewplan.c's
 *    decisions, applied as conn.c applies them, with agent_lease.c's
 *    periods and levels (a renewal is the version-check write).
 *  - Faults, at random: a candidate's loop frozen (short, or past its
 *    lease), a candidate cut from the servers, a follower cut from the
 *    leader, slow answers, a crash (the session left to expire) and a
 *    restart, a leader's resign; and, aimed at the proof's tight case, a
 *    leader's confirmed renewal followed at once by its follower's cut
 *    (the report of that renewal's touch lost) and the leader frozen or
 *    cut off; a late ping: the leader-to-follower direction of the
 *    leader's server stalls from a write's answer for up to syncLimit
 *    ticks (everything on it read late, in order: TCP's retransmission),
 *    often followed by that cut at the first write answered after it (the
 *    ping replies the stall held, sent behind the renewal, lost; a renewal
 *    paired with one tick and counted at its own answer fails here).
 *    Settings: T 1-6 s, the server tick T/20-T/6 (stated), the
 *    defaults or an operator's margin, drift and step-down budget that the
 *    lease plan accepts; clocks often at the drift's edges; the term's
 *    processes and on_stepdown's holds often use their whole half budget.
 *
 * Invariants, checked as the run goes:
 *  - no two terms act at once: a term acts from on_leader until its
 *    step-down has finished (drain, on_stepdown, holds) or the guard
 *    killed it; on_leader while another candidate's term acts fails;
 *  - no term acts at the moment the leader expires the session it was won
 *    in (its end is margin/2 before the earliest expiry: the bound);
 *  - a term never acts past its lease: after the check, an acting term's
 *    lease (by its own clock) has not ended;
 *  - epochs strictly increase from one on_leader to the next;
 *  - on_leader's node is the smallest live node at the quorum leader.
 *
 * Assumed, as design.md assumes: (Z) with the stated tick; clock rates
 * within the drift; hooks and processes within their budgets; nobody
 * deletes our node or closes our session from outside; one quorum leader.
 *
 * Not modelled: a new quorum leader (F5, its fresh countdowns), the
 * `--renew-by sync` gap (a), the touch-table race (b), local sessions (c),
 * observers; a shared session (one agent per session here: the conn's
 * fan-out and leasewatch.c, its check of many leasers, are not driven; the
 * lease check is agent_lease_tick's, run first in every step); the C
 * client's re-registration of watches on a reconnect (the recipe asks
 * again); host suspends and wall-clock steps (touch_lost); the Lua layer,
 * libev, the session file, the watcher's session close after a crash (the
 * session expires); the time hooks take (on_leader and on_stepdown's own
 * call are instants; its holds and the term's processes take time).
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "election.h"
#include "renewplan.h"
#include "settings.h"
#include "term.h"
#include "touch.h"
#include "zkelect.h"

typedef int64_t ns_t;
#define MS INT64_C(1000000)
#define NSRV 3                  /* server 0 leads the ensemble */
#define MAXC 5
#define MAXNODES 64
#define MAXWATCH 128
#define MAXSESS 256
#define MAXREQ 64
#define MAXFIFO 128
#define MAXTERMS 512
#define NAMELEN 64
#define DATALEN 256
#define SYNC_LIMIT 2

/* ------------------------------------------------------------------ */
/* the run's randomness and trace                                      */

struct sim;
static struct sim *S;           /* the run (one at a time) */

static uint64_t rnd64(void);
static int64_t rrange(int64_t lo, int64_t hi)   /* uniform in [lo, hi] */
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(rnd64() % (uint64_t)(hi - lo + 1));
}
static int chance(int pct) { return (int)(rnd64() % 100) < pct; }

/* ------------------------------------------------------------------ */
/* servers                                                              */

struct znode {
    int used;
    char name[NAMELEN];
    int32_t seq;
    uint64_t owner;
    int64_t czxid, mzxid;
    int version;
    char data[DATALEN];
    int datalen;
};

enum txn_type { TX_NOOP, TX_CREATE, TX_DELETE, TX_SET, TX_CLOSE };

struct txn {
    enum txn_type type;
    int64_t zxid;
    struct znode n;             /* CREATE: the node; DELETE/SET: name (and data) */
    uint64_t sid;               /* CLOSE */
};

struct watch { uint64_t sid; char name[NAMELEN]; };

struct server {
    struct znode tree[MAXNODES];
    int64_t zxid;               /* applied */
    struct watch w[MAXWATCH];
    int nw;
    /* each candidate's connection here: its generation (0: none), session */
    unsigned att_gen[MAXC];
    uint64_t att_sid[MAXC];
    uint64_t touched[MAXSESS];  /* a follower's touches not reported yet */
    ns_t touched_at[MAXSESS];   /* ... and when it heard each last */
    int ntouched;
    int following;              /* a follower: 1 while it follows the leader */
    ns_t cut_until;             /* its link to the leader is cut until then */
    ns_t stall_until;           /* the leader-to-it direction stalls until then (TCP's
                                 * retransmission: delivered late, in order) */
    int stall_tight;            /* the first write answered after the stall: tight_cut */
    ns_t stall_arm;             /* a stall this long starts at the next write it answers */
    unsigned link_gen;          /* its link's generation (a rejoin starts another) */
    ns_t up_last, down_last;    /* FIFO: last delivery on the link, each way */
};

struct zsession { uint64_t id; int alive; ns_t expire_at; int cand; };

/* ------------------------------------------------------------------ */
/* messages                                                             */

enum op {
    OP_CREATE, OP_ENSURE, OP_LIST, OP_EXISTS, OP_EXISTS_W, OP_GET, OP_GET_W, OP_DELETE,
    OP_SET, OP_CHECK, OP_SYNC
};
static int op_write(enum op o)
{
    return o == OP_CREATE || o == OP_ENSURE || o == OP_DELETE || o == OP_SET || o == OP_CHECK;
}

enum mtype {
    /* client -> server */
    M_CONNECT, M_REQ, M_PING,
    /* server -> client */
    M_CONNECTED, M_SESS_EXPIRED, M_CLOSE, M_ANS, M_NOTIFY, M_PONG,
    /* follower <-> leader */
    M_FWD_CONNECT, M_FWD_REQ, M_PING_REPLY, M_CONNECT_OK, M_COMMIT, M_SYNC_OK, M_LPING
};

struct msg {
    enum mtype type;
    int cand, srv;              /* the client, the server (the follower on a link) */
    unsigned gen;               /* the client connection's generation */
    unsigned lgen;              /* on a follower's link: the link's generation */
    uint64_t sid;
    int64_t zxid;               /* CONNECT: the client's last seen; answers: the server's */
    int reqid;
    enum op op;
    char node[NAMELEN];
    char data[DATALEN];
    int datalen, version, watch_deleted;
    /* answers */
    int rc;
    struct znode stat;
    char (*children)[NAMELEN];
    int nchildren;
    int32_t cversion;
    int created;                /* CONNECTED: a new session */
    struct txn tx;              /* COMMIT */
    uint64_t touched[MAXSESS];  /* PING_REPLY */
    ns_t touched_at[MAXSESS];
    int ntouched;
};

/* ------------------------------------------------------------------ */
/* candidates                                                           */

enum ctimer { T_RENEW, T_BACKOFF, T_LEASE, T_DRAIN, T_HOLDREL, T_HOLDTO, T_PING, T_RECV,
              T_CONNECT, T_GIVEUP, T_KICK, NTIMERS };
static const char *const timer_names[NTIMERS] = {
    "renew", "backoff", "lease", "drain", "hold-release", "hold-timeout", "ping", "recv-timeout",
    "connect-timeout", "give-up", "kick"
};

enum rkind { RK_EL, RK_RENEW, RK_READ };

struct creq {
    int used, id;
    enum rkind kind;
    enum el_req_type type;
    uint32_t token;
    ns_t sent;                  /* local */
    int confirms;
};

struct item {
    int is_event;
    enum zke_event_type type;
    int64_t epoch;
    const char *reason;
    char node[NAMELEN];
    struct el_req req;
    char rnode[NAMELEN];
    char *data;
};

enum cstate { CS_DISCONNECTED, CS_CONNECTING, CS_CONNECTED };

struct cand {
    int idx, alive;
    double rate;
    ns_t off;
    election *el;
    struct term term;
    /* the session (the handle) */
    uint64_t sid;
    int handle_connected;
    ns_t opened;                /* local */
    enum cstate st;
    int srv;
    unsigned gen;
    ns_t last_recv;             /* local */
    ns_t last_send;             /* local: the client library pings after T/3 idle */
    int procs, holding;         /* the host's duty: the term's processes run; on_stepdown
                                 * holds (ground truth, whatever term.c says) */
    int64_t seen_zxid;
    struct touch_log touch;
    unsigned zkc_gen;
    struct creq reqs[MAXREQ];
    int next_reqid;
    /* the agent */
    struct item fifo[MAXFIFO];
    int fhead, fn;
    int in_el;                  /* inside an el_* call: requests are queued */
    struct el_req pend[32];
    char pend_node[32][NAMELEN];
    char *pend_data[32];
    int npend;
    int pub_epoch;
    ns_t armed_end;
    struct renewplan rp;        /* the session's renewal stream (conn.c's, one agent) */
    struct renew_demand rd;     /* the agent's demand in it */
    ns_t last_renewal;          /* local: the last confirming request sent on this connection */
    int hold_token;
    ns_t timer_at[NTIMERS];     /* local; 0: off */
    unsigned timer_gen[NTIMERS];
    unsigned guard_gen;
    ns_t stall_until, cut_until;
    ns_t stall_next;            /* K_STALL: the freeze to start then, this long */
    ns_t cdelay_max;            /* this candidate's connection: its slowest answer */
    int cur_term;               /* the term whose duty is open, or -1 */
};

struct termrec {
    int cand;
    int64_t epoch;
    uint64_t sid;
    ns_t start, end;            /* true; end -1 while it acts */
    const char *how;
};

/* what the runs saw, over all seeds (the summary) */
static struct {
    const char *how[24];
    long n[24];
    int k;
    ns_t min_gap, min_slack;    /* handover: successor's start - end; expiry - end */
    long handovers, expiries_after_term;
} stats = {{NULL}, {0}, 0, INT64_MAX, INT64_MAX, 0, 0};

static void stat_end(const char *how)
{
    for (int i = 0; i < stats.k; i++)
        if (strcmp(stats.how[i], how) == 0) {
            stats.n[i]++;
            return;
        }
    if (stats.k < 24) {
        stats.how[stats.k] = how;
        stats.n[stats.k++] = 1;
    }
}

/* ------------------------------------------------------------------ */
/* the event queue                                                      */

enum ekind { K_MSG, K_TIMER, K_GUARD, K_LPING, K_LTICK, K_FAULT, K_LEAVE, K_REJOIN, K_RESTART,
             K_STALL };

struct event {
    ns_t at;
    uint64_t seq;
    enum ekind kind;
    int a, b;
    unsigned gen;
    struct msg *m;
};

struct sim {
    uint64_t seed, rng;
    ns_t now, end;
    uint64_t seq;
    struct event *heap;
    int nheap, capheap;
    /* the plan */
    int T, tick_ms, nc;
    struct zke_lease_plan plan;
    int64_t gap_ns;             /* the pairing gap: tick x (1 + drift) */
    int sharp;                  /* the server expires at the earliest moment the proof allows */
    int tight_pct;              /* % of a leader's confirmed renewals followed by a cut */
    struct server srv[NSRV];
    struct zsession sess[MAXSESS];
    int nsess;
    int32_t cversion;
    struct cand c[MAXC];
    struct termrec terms[MAXTERMS];
    int nterms;
    int64_t last_epoch;
    /* the verdict */
    int failed;
    char why[512];
    /* trace */
    int tracing;
    char *tr;
    size_t trlen, trcap;
    long events;
};

static uint64_t rnd64(void)
{
    uint64_t z = (S->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void tr(const char *fmt, ...)
{
    if (!S->tracing)
        return;
    char line[600];
    int n = snprintf(line, sizeof line, "%10.3f ", (double)S->now / 1e6);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    if (S->trlen + (size_t)n + 2 > S->trcap) {
        size_t cap = S->trcap ? S->trcap * 2 : 1 << 16;
        while (cap < S->trlen + (size_t)n + 2)
            cap *= 2;
        char *p = realloc(S->tr, cap);
        if (p == NULL)
            return;
        S->tr = p;
        S->trcap = cap;
    }
    memcpy(S->tr + S->trlen, line, (size_t)n);
    S->trlen += (size_t)n;
    S->tr[S->trlen++] = '\n';
    S->tr[S->trlen] = '\0';
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void violation(const char *fmt, ...)
{
    if (S->failed)
        return;
    S->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(S->why, sizeof S->why, fmt, ap);
    va_end(ap);
    tr("VIOLATION: %s", S->why);
}

static void push(ns_t at, enum ekind k, int a, int b, unsigned gen, struct msg *m)
{
    if (S->nheap == S->capheap) {
        int cap = S->capheap ? S->capheap * 2 : 1024;
        struct event *h = realloc(S->heap, (size_t)cap * sizeof *h);
        if (h == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
        S->heap = h;
        S->capheap = cap;
    }
    struct event e = {at < S->now ? S->now : at, S->seq++, k, a, b, gen, m};
    int i = S->nheap++;
    while (i > 0) {
        int p = (i - 1) / 2;
        struct event *q = &S->heap[p];
        if (q->at < e.at || (q->at == e.at && q->seq < e.seq))
            break;
        S->heap[i] = *q;
        i = p;
    }
    S->heap[i] = e;
}

static struct event pop(void)
{
    struct event top = S->heap[0], last = S->heap[--S->nheap];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        struct event *best = &last;
        if (l < S->nheap && (S->heap[l].at < best->at ||
                             (S->heap[l].at == best->at && S->heap[l].seq < best->seq))) {
            m = l;
            best = &S->heap[l];
        }
        if (r < S->nheap && (S->heap[r].at < best->at ||
                             (S->heap[r].at == best->at && S->heap[r].seq < best->seq)))
            m = r;
        if (m == i)
            break;
        S->heap[i] = S->heap[m];
        i = m;
    }
    if (S->nheap > 0)
        S->heap[i] = last;
    return top;
}

static void msg_free(struct msg *m)
{
    if (m != NULL)
        free(m->children);
    free(m);
}

static struct msg *msg_new(enum mtype t)
{
    struct msg *m = calloc(1, sizeof *m);
    if (m == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    m->type = t;
    return m;
}

/* ------------------------------------------------------------------ */
/* clocks                                                               */

static ns_t local_of(const struct cand *c, ns_t t)
{
    return c->off + (ns_t)floor((double)t * c->rate);
}

static ns_t true_of(const struct cand *c, ns_t l)
{
    ns_t t = (ns_t)ceil((double)(l - c->off) / c->rate);
    while (local_of(c, t) < l)
        t++;
    return t;
}

static ns_t lnow(const struct cand *c) { return local_of(c, S->now); }

static void timer_set(struct cand *c, enum ctimer w, ns_t local_at)
{
    c->timer_gen[w]++;
    c->timer_at[w] = local_at;
    if (local_at > 0)
        push(true_of(c, local_at), K_TIMER, c->idx, (int)w, c->timer_gen[w], NULL);
}

static void timer_after(struct cand *c, enum ctimer w, ns_t d)
{
    timer_set(c, w, lnow(c) + (d > 0 ? d : 1));
}

static void timer_keep(struct cand *c, enum ctimer w, ns_t local_at)
{
    if (c->timer_at[w] != local_at && local_at > lnow(c))
        timer_set(c, w, local_at);
}

static void timer_stop(struct cand *c, enum ctimer w)
{
    c->timer_gen[w]++;
    c->timer_at[w] = 0;
}

/* ------------------------------------------------------------------ */
/* channels                                                             */

/* to a client, from its server, or to a server, from a client */
static ns_t client_send(struct cand *c, struct msg *m, int to_client)
{
    ns_t d = rrange(50000, c->cdelay_max);
    if (chance(2))
        d += rrange(0, (ns_t)S->T * MS / 4);     /* a slow answer */
    ns_t at = S->now + d;
    if (at < c->cut_until)
        at = c->cut_until + rrange(0, MS);
    m->cand = c->idx;
    push(at, K_MSG, to_client, 0, 0, m);
    return at;
}

/* on the follower's link (up: to the leader) */
static void link_send(int f, struct msg *m, int up)
{
    struct server *s = &S->srv[f];
    if (!s->following || S->now < s->cut_until) {
        msg_free(m);
        return;
    }
    ns_t tick = (ns_t)S->tick_ms * MS;
    ns_t d = up ? rrange(20000, tick / 4) : rrange(20000, tick / 2 - 1);
    ns_t *last = up ? &s->up_last : &s->down_last;
    ns_t at = S->now + d > *last ? S->now + d : *last;     /* (down: still < now + tick/2) */
    if (!up && S->now < s->stall_until && at <= s->stall_until)
        at = s->stall_until + 1;        /* stalled: after what is held (follower_from_link) */
    *last = at;
    m->srv = f;
    m->lgen = s->link_gen;
    push(at, K_MSG, up ? 2 : 3, 0, 0, m);
}

/* ------------------------------------------------------------------ */
/* the tree                                                             */

static struct znode *find_node(struct server *s, const char *name)
{
    for (int i = 0; i < MAXNODES; i++)
        if (s->tree[i].used && strcmp(s->tree[i].name, name) == 0)
            return &s->tree[i];
    return NULL;
}

static void add_watch(struct server *s, uint64_t sid, const char *name)
{
    for (int i = 0; i < s->nw; i++)
        if (s->w[i].sid == sid && strcmp(s->w[i].name, name) == 0)
            return;
    if (s->nw < MAXWATCH) {
        s->w[s->nw].sid = sid;
        snprintf(s->w[s->nw].name, NAMELEN, "%s", name);
        s->nw++;
    }
}

static int attached_cand(const struct server *s, uint64_t sid)
{
    for (int c = 0; c < S->nc; c++)
        if (s->att_gen[c] != 0 && s->att_sid[c] == sid)
            return c;
    return -1;
}

static void fire(int si, const char *name, int deleted)
{
    struct server *s = &S->srv[si];
    for (int i = 0; i < s->nw;) {
        if (strcmp(s->w[i].name, name) != 0) {
            i++;
            continue;
        }
        int c = attached_cand(s, s->w[i].sid);
        if (c >= 0) {
            struct msg *m = msg_new(M_NOTIFY);
            m->gen = s->att_gen[c];
            m->srv = si;
            snprintf(m->node, NAMELEN, "%s", name);
            m->watch_deleted = deleted;
            client_send(&S->c[c], m, 1);
        }
        s->w[i] = s->w[--s->nw];
    }
}

static void close_conn(int si, int c)
{
    struct server *s = &S->srv[si];
    if (s->att_gen[c] == 0)
        return;
    struct msg *m = msg_new(M_CLOSE);
    m->gen = s->att_gen[c];
    m->srv = si;
    client_send(&S->c[c], m, 1);
    uint64_t sid = s->att_sid[c];
    s->att_gen[c] = 0;
    for (int i = 0; i < s->nw;)
        if (s->w[i].sid == sid)
            s->w[i] = s->w[--s->nw];
        else
            i++;
}

static void apply(int si, const struct txn *t)
{
    struct server *s = &S->srv[si];
    s->zxid = t->zxid;
    struct znode *n;
    switch (t->type) {
    case TX_CREATE:
        for (int i = 0; i < MAXNODES; i++)
            if (!s->tree[i].used) {
                s->tree[i] = t->n;
                s->tree[i].used = 1;
                break;
            }
        break;
    case TX_DELETE:
        if ((n = find_node(s, t->n.name)) != NULL) {
            n->used = 0;
            fire(si, t->n.name, 1);
        }
        break;
    case TX_SET:
        if ((n = find_node(s, t->n.name)) != NULL) {
            memcpy(n->data, t->n.data, DATALEN);
            n->datalen = t->n.datalen;
            n->version++;
            n->mzxid = t->zxid;
            fire(si, t->n.name, 0);
        }
        break;
    case TX_CLOSE:
        for (int i = 0; i < MAXNODES; i++)
            if (s->tree[i].used && s->tree[i].owner == t->sid) {
                s->tree[i].used = 0;
                fire(si, s->tree[i].name, 1);
            }
        for (int c = 0; c < S->nc; c++)
            if (s->att_gen[c] != 0 && s->att_sid[c] == t->sid)
                close_conn(si, c);
        break;
    case TX_NOOP:
        break;
    }
}

/* ------------------------------------------------------------------ */
/* the quorum leader's sessions                                         */

static struct zsession *zsess(uint64_t sid)
{
    if (sid < 0x100 || sid - 0x100 >= (uint64_t)S->nsess)
        return NULL;
    return &S->sess[sid - 0x100];
}

static ns_t bucket(ns_t t)
{
    ns_t tick = (ns_t)S->tick_ms * MS;
    return (t / tick + 1) * tick;
}

/* The leader's countdown from a touch heard at `at`: ZooKeeper's (the
 * first tick bucket after at + T, at counted when the leader reads the
 * touch), or, in the seeds that run the sharp server, exactly T after the
 * follower heard the request: the earliest expiry the proof allows (F2). */
static void leader_touch_at(uint64_t sid, ns_t at)
{
    struct zsession *z = zsess(sid);
    if (z != NULL && z->alive) {
        ns_t e = S->sharp ? at + (ns_t)S->T * MS : bucket(S->now + (ns_t)S->T * MS);
        if (e > z->expire_at) {
            z->expire_at = e;
            push(e, K_LTICK, 0, 0, 0, NULL);
        }
    }
}

static void leader_touch(uint64_t sid) { leader_touch_at(sid, S->now); }

static void check_expiry_invariant(uint64_t sid);

static int64_t commit(struct txn *t)
{
    t->zxid = S->srv[0].zxid + 1;
    apply(0, t);
    for (int f = 1; f < NSRV; f++) {
        struct msg *m = msg_new(M_COMMIT);
        m->tx = *t;
        m->reqid = -1;
        link_send(f, m, 0);
    }
    return t->zxid;
}

static void leader_tick(void)
{
    for (int i = 0; i < S->nsess; i++) {
        struct zsession *z = &S->sess[i];
        if (z->alive && z->expire_at <= S->now) {
            z->alive = 0;
            tr("leader: session 0x%" PRIx64 " (c%d) expires", z->id, z->cand);
            check_expiry_invariant(z->id);
            struct txn t;
            memset(&t, 0, sizeof t);
            t.type = TX_CLOSE;
            t.sid = z->id;
            commit(&t);
        }
    }
}

static void leader_pings(void)
{
    for (int f = 1; f < NSRV; f++)
        link_send(f, msg_new(M_LPING), 0);
    push(S->now + (ns_t)S->tick_ms * MS / 2, K_LPING, 0, 0, 0, NULL);
}

/* ------------------------------------------------------------------ */
/* a server's handling of requests                                      */

static void answer(int si, struct msg *req, struct msg *ans)
{
    ans->gen = req->gen;
    ans->reqid = req->reqid;
    ans->srv = si;
    ans->zxid = S->srv[si].zxid;
    client_send(&S->c[req->cand], ans, 1);
}

/* The write (or sync) at the leader; the answer, for a client of the
 * leader, at once, else to the follower behind the commit. */
static void leader_write(struct msg *req, int origin)
{
    struct msg *ans = msg_new(M_ANS);
    struct txn t;
    memset(&t, 0, sizeof t);
    struct zsession *z = zsess(req->sid);
    struct server *L = &S->srv[0];
    ans->rc = EL_OK;
    if (z == NULL || !z->alive) {
        ans->rc = EL_EXPIRED;
    } else if (req->op == OP_SYNC) {
        /* nothing to commit */
    } else if (req->op == OP_ENSURE) {
        ans->rc = EL_NODEEXISTS;
    } else if (req->op == OP_CREATE) {
        t.type = TX_CREATE;
        char seq[16];
        snprintf(seq, sizeof seq, "%010d", (int)S->cversion);
        snprintf(t.n.name, NAMELEN, "%.40s%s", req->node, seq);
        t.n.seq = S->cversion++;
        t.n.owner = req->sid;
        memcpy(t.n.data, req->data, DATALEN);
        t.n.datalen = req->datalen;
        t.n.czxid = t.n.mzxid = L->zxid + 1;
        snprintf(ans->stat.name, NAMELEN, "%s", t.n.name);
        ans->stat.czxid = t.n.czxid;
        ans->stat.owner = req->sid;
    } else {
        struct znode *n = find_node(L, req->node);
        if (n == NULL)
            ans->rc = EL_NONODE;
        else if (req->op == OP_SET && req->version >= 0 && req->version != n->version)
            ans->rc = EL_FAILED;        /* bad version */
        else if (req->op == OP_DELETE) {
            t.type = TX_DELETE;
            snprintf(t.n.name, NAMELEN, "%s", req->node);
        } else if (req->op == OP_SET) {
            t.type = TX_SET;
            snprintf(t.n.name, NAMELEN, "%s", req->node);
            memcpy(t.n.data, req->data, DATALEN);
            t.n.datalen = req->datalen;
            ans->stat.mzxid = L->zxid + 1;
        } else {
            t.type = TX_NOOP;           /* the renewal's version check: a txn, no change */
        }
    }
    int txn = ans->rc == EL_OK && req->op != OP_SYNC;
    if (txn)
        commit(&t);
    if (origin == 0) {
        answer(0, req, ans);
        return;
    }
    /* to the follower, on its ordered link: after the commit (if any) */
    struct msg *m = msg_new(M_SYNC_OK);
    m->cand = req->cand;
    m->gen = req->gen;
    m->reqid = req->reqid;
    m->op = req->op;
    m->rc = ans->rc;
    m->stat = ans->stat;
    msg_free(ans);
    link_send(origin, m, 0);
}

static void server_read(int si, struct msg *req)
{
    struct server *s = &S->srv[si];
    struct msg *ans = msg_new(M_ANS);
    ans->rc = EL_OK;
    if (req->op == OP_LIST) {
        int n = 0;
        ans->children = calloc(MAXNODES, NAMELEN);
        if (ans->children == NULL)
            exit(2);
        for (int i = 0; i < MAXNODES; i++)
            if (s->tree[i].used)
                snprintf(ans->children[n++], NAMELEN, "%s", s->tree[i].name);
        ans->nchildren = n;
        ans->cversion = S->cversion;    /* (only for the wrap warning) */
    } else {
        struct znode *n = find_node(s, req->node);
        if (n == NULL) {
            ans->rc = EL_NONODE;
            if (req->op == OP_EXISTS_W)
                add_watch(s, req->sid, req->node);
        } else {
            ans->stat = *n;
            if (req->op == OP_EXISTS_W || req->op == OP_GET_W)
                add_watch(s, req->sid, req->node);
        }
    }
    answer(si, req, ans);
}

static void server_touch(int si, uint64_t sid)
{
    if (si == 0) {
        leader_touch(sid);
        return;
    }
    struct server *s = &S->srv[si];
    for (int i = 0; i < s->ntouched; i++)
        if (s->touched[i] == sid) {
            s->touched_at[i] = S->now;
            return;
        }
    if (s->ntouched < MAXSESS) {
        s->touched_at[s->ntouched] = S->now;
        s->touched[s->ntouched++] = sid;
    }
}

static void leader_connect(struct msg *m, int origin);

static void server_from_client(int si, struct msg *m)
{
    struct server *s = &S->srv[si];
    struct cand *c = &S->c[m->cand];
    if (m->type == M_CONNECT) {
        if (si != 0 && (!s->following || s->zxid < m->zxid)) {
            struct msg *x = msg_new(M_CLOSE);
            x->gen = m->gen;
            x->srv = si;
            client_send(c, x, 1);
            msg_free(m);
            return;
        }
        if (si == 0 && s->zxid < m->zxid) {
            msg_free(m);
            return;
        }
        if (si == 0) {
            leader_connect(m, 0);
            msg_free(m);
        } else {
            link_send(si, m, 1);        /* the leader creates or revalidates it */
        }
        return;
    }
    if (s->att_gen[m->cand] != m->gen) {
        msg_free(m);                    /* a connection this server does not hold */
        return;
    }
    server_touch(si, m->sid);
    if (m->type == M_PING) {
        struct msg *p = msg_new(M_PONG);
        answer(si, m, p);
        msg_free(m);
        return;
    }
    if (op_write(m->op) || m->op == OP_SYNC) {
        if (si == 0) {
            leader_write(m, 0);
            msg_free(m);
        } else {
            link_send(si, m, 1);
        }
        return;
    }
    server_read(si, m);
    msg_free(m);
}

static void attach(int si, struct msg *m, uint64_t sid, int created)
{
    struct server *s = &S->srv[si];
    if (s->att_gen[m->cand] != 0)
        close_conn(si, m->cand);
    s->att_gen[m->cand] = m->gen;
    s->att_sid[m->cand] = sid;
    struct msg *a = msg_new(M_CONNECTED);
    a->sid = sid;
    a->created = created;
    a->gen = m->gen;
    a->srv = si;
    a->zxid = s->zxid;
    client_send(&S->c[m->cand], a, 1);
}

/* The leader creates a session, or revalidates one (touching it). */
static void leader_connect(struct msg *m, int origin)
{
    uint64_t sid = m->sid;
    int created = 0;
    if (sid == 0) {
        if (S->nsess == MAXSESS) {
            violation("model: out of sessions");
            return;
        }
        struct zsession *z = &S->sess[S->nsess];
        z->id = 0x100 + (uint64_t)S->nsess++;
        z->alive = 1;
        z->cand = m->cand;
        z->expire_at = 0;
        sid = z->id;
        created = 1;
        leader_touch(sid);
        tr("leader: session 0x%" PRIx64 " created for c%d", sid, m->cand);
    } else {
        struct zsession *z = zsess(sid);
        if (z == NULL || !z->alive) {
            struct msg *x = msg_new(M_SESS_EXPIRED);
            x->gen = m->gen;
            x->sid = sid;
            if (origin == 0) {
                x->srv = 0;
                client_send(&S->c[m->cand], x, 1);
            } else {
                x->cand = m->cand;
                x->type = M_CONNECT_OK;
                x->rc = EL_EXPIRED;
                link_send(origin, x, 0);
            }
            return;
        }
        leader_touch(sid);
    }
    if (origin == 0) {
        attach(0, m, sid, created);
        return;
    }
    struct msg *x = msg_new(M_CONNECT_OK);
    x->cand = m->cand;
    x->gen = m->gen;
    x->sid = sid;
    x->created = created;
    x->rc = EL_OK;
    link_send(origin, x, 0);
}

/* the leader reads its follower's link */
static void leader_from_link(struct msg *m)
{
    struct server *f = &S->srv[m->srv];
    if (!f->following || m->lgen != f->link_gen || S->now < f->cut_until) {
        msg_free(m);
        return;
    }
    if (m->type == M_PING_REPLY) {
        for (int i = 0; i < m->ntouched; i++)
            leader_touch_at(m->touched[i], m->touched_at[i]);
    } else if (m->type == M_CONNECT) {
        leader_connect(m, m->srv);
    } else if (m->type == M_REQ) {
        leader_write(m, m->srv);
    }
    msg_free(m);
}

static void isolate(int f, ns_t lo, ns_t hi)
{
    struct server *s = &S->srv[f];
    if (!s->following || s->cut_until > S->now)
        return;
    ns_t lim = (ns_t)SYNC_LIMIT * S->tick_ms * MS;
    s->cut_until = S->now + rrange(lo > lim ? lo : lim, hi > lim ? hi : lim);
    tr("FAULT server %d cut from the leader for %.3f ms", f, (double)(s->cut_until - S->now) / 1e6);
    push(S->now + lim, K_LEAVE, f, 0, s->link_gen, NULL);
    push(s->cut_until, K_REJOIN, f, 0, 0, NULL);
}

/* The case the proof is about: a leader's renewal was just confirmed
 * through this follower; the follower's report of that renewal's own touch
 * is lost (cut from the leader now), and the leader, frozen or cut off
 * from the servers, cannot revalidate its session elsewhere: the session's
 * countdown runs from the touches the leader heard before the renewal. */
static void tight_cut(int f, struct cand *c, const struct msg *m, ns_t delivered)
{
    struct server *s = &S->srv[f];
    if (m->rc != EL_OK || (m->op != OP_CHECK && m->op != OP_SET) || !term_leads(&c->term))
        return;
    /* after a stall of the leader-to-follower direction: the ping replies
     * the follower sent at its end (S1's touch) are lost now */
    int forced = s->stall_tight && s->stall_until > 0 && S->now >= s->stall_until;
    if (forced)
        s->stall_tight = 0;
    if (!forced && !chance(S->tight_pct))
        return;
    if (forced)
        tr("FAULT server %d cut at the first write it answers after the stall", f);
    ns_t T = (ns_t)S->T * MS;
    isolate(f, 0, T);
    if (chance(50)) {
        c->stall_next = rrange(T / 2, 2 * T);
        push(delivered + 1, K_STALL, c->idx, 0, 0, NULL);
    } else {
        c->cut_until = S->now + rrange(T / 2, 2 * T);
        tr("FAULT c%d cut from the servers for %.3f ms", c->idx,
           (double)(c->cut_until - S->now) / 1e6);
    }
}

/* a follower reads its link */
static void follower_from_link(struct msg *m)
{
    int si = m->srv;
    struct server *s = &S->srv[si];
    if (!s->following || m->lgen != s->link_gen || S->now < s->cut_until) {
        msg_free(m);
        return;
    }
    if (S->now < s->stall_until) {
        /* the direction stalls: what arrives is read at its end, in order */
        push(s->stall_until, K_MSG, 3, 0, 0, m);
        return;
    }
    if (m->type == M_LPING) {
        struct msg *r = msg_new(M_PING_REPLY);
        memcpy(r->touched, s->touched, sizeof s->touched);
        memcpy(r->touched_at, s->touched_at, sizeof s->touched_at);
        r->ntouched = s->ntouched;
        s->ntouched = 0;
        link_send(si, r, 1);
    } else if (m->type == M_COMMIT) {
        apply(si, &m->tx);
    } else if (m->type == M_SYNC_OK) {
        if (s->att_gen[m->cand] == m->gen) {
            struct msg *a = msg_new(M_ANS);
            a->rc = m->rc;
            a->stat = m->stat;
            a->gen = m->gen;
            a->reqid = m->reqid;
            a->srv = si;
            a->zxid = s->zxid;
            ns_t at = client_send(&S->c[m->cand], a, 1);
            tight_cut(si, &S->c[m->cand], m, at);
            if (s->stall_arm > 0 && m->rc == EL_OK && (m->op == OP_CHECK || m->op == OP_SET) &&
                s->cut_until <= S->now) {
                /* from the answer of a write: the pings on their way are
                 * held too, so the stall may hide that write's touch */
                s->stall_until = S->now + s->stall_arm;
                s->stall_arm = 0;
                tr("FAULT the leader's link to server %d stalls for %.3f ms", si,
                   (double)(s->stall_until - S->now) / 1e6);
            }
        }
    } else if (m->type == M_CONNECT_OK) {
        if (m->rc == EL_EXPIRED) {
            struct msg *x = msg_new(M_SESS_EXPIRED);
            x->gen = m->gen;
            x->sid = m->sid;
            x->srv = si;
            client_send(&S->c[m->cand], x, 1);
        } else {
            attach(si, m, m->sid, m->created);
        }
    }
    msg_free(m);
}

static void follower_leave(int si)
{
    struct server *s = &S->srv[si];
    if (!s->following)
        return;
    tr("server %d stops following (cut from the leader for %d ticks): closes its clients",
       si, SYNC_LIMIT);
    s->following = 0;
    s->ntouched = 0;
    s->stall_until = s->stall_arm = 0;
    s->stall_tight = 0;
    for (int c = 0; c < S->nc; c++)
        close_conn(si, c);
    s->nw = 0;
}

static void follower_rejoin(int si)
{
    struct server *s = &S->srv[si];
    s->following = 1;
    s->link_gen++;
    s->cut_until = 0;
    s->up_last = s->down_last = S->now;
    memcpy(s->tree, S->srv[0].tree, sizeof s->tree);
    s->zxid = S->srv[0].zxid;
    tr("server %d follows again (zxid %" PRId64 ")", si, s->zxid);
}

/* ------------------------------------------------------------------ */
/* invariants                                                           */

static int term_open(const struct cand *c) { return c->cur_term >= 0; }

static void duty_end(struct cand *c, const char *how)
{
    if (c->cur_term < 0)
        return;
    if (c->alive && (term_armed(&c->term) || c->procs || c->holding))
        return;         /* something of it still runs */
    struct termrec *r = &S->terms[c->cur_term];
    r->end = S->now;
    r->how = how;
    stat_end(how);
    tr("c%d: term of epoch %" PRId64 " over (%s): acted %.3f ms", c->idx, r->epoch, how,
       (double)(r->end - r->start) / 1e6);
    c->cur_term = -1;
}

static void check_expiry_invariant(uint64_t sid)
{
    for (int i = S->nterms - 1; i >= 0; i--)
        if (S->terms[i].sid == sid && S->terms[i].end >= 0) {
            stats.expiries_after_term++;
            if (S->now - S->terms[i].end < stats.min_slack)
                stats.min_slack = S->now - S->terms[i].end;
            break;
        }
    for (int i = 0; i < S->nc; i++) {
        struct cand *c = &S->c[i];
        if (term_open(c) && S->terms[c->cur_term].sid == sid)
            violation("c%d's term of epoch %" PRId64 " (session 0x%" PRIx64 ") still acts (%s) "
                      "when the leader expires its session", i, S->terms[c->cur_term].epoch, sid,
                      term_life_name(c->term.life));
    }
}

static void check_begin(struct cand *c, int64_t epoch, const char *node)
{
    for (int i = 0; i < S->nc; i++)
        if (i != c->idx && term_open(&S->c[i]))
            violation("two terms act at once: c%d begins epoch %" PRId64 " while c%d's epoch %"
                      PRId64 " acts (%s)", c->idx, epoch, i, S->terms[S->c[i].cur_term].epoch,
                      term_life_name(S->c[i].term.life));
    if (S->nterms > 0 && !S->failed) {
        ns_t last = 0;
        for (int i = 0; i < S->nterms; i++)
            if (S->terms[i].end > last)
                last = S->terms[i].end;
        stats.handovers++;
        if (S->now - last < stats.min_gap)
            stats.min_gap = S->now - last;
    }
    if (epoch <= S->last_epoch)
        violation("epoch %" PRId64 " of c%d after epoch %" PRId64, epoch, c->idx, S->last_epoch);
    S->last_epoch = epoch;
    struct server *L = &S->srv[0];
    struct znode *n = find_node(L, node);
    if (n == NULL || n->owner != c->sid)
        violation("c%d begins a term on node %s, which the quorum leader does not hold for its "
                  "session", c->idx, node);
    else
        for (int i = 0; i < MAXNODES; i++)
            if (L->tree[i].used && L->tree[i].seq < n->seq)
                violation("c%d begins a term on %s while %s is smaller", c->idx, node,
                          L->tree[i].name);
}

/* ------------------------------------------------------------------ */
/* a candidate: the session                                             */

static int64_t lease_end(const struct cand *c)
{
    return c->touch.confirmed > 0 ? c->touch.confirmed + (int64_t)S->plan.lease_ms * MS : 0;
}

static void guard_sync(struct cand *c)
{
    struct term_lease l = {S->plan.lease_ms, S->plan.stepdown_budget_ms, S->plan.margin_ms, 0, 0};
    if (term_armed(&c->term) && !c->term.frozen)
        l.end_ns = lease_end(c);
    if (term_needs_freeze(&c->term, c->zkc_gen))
        term_freeze(&c->term, c->term.armed.hard_ns, c->term.armed.soft_ns);
    struct term_ends e = term_ends_for(&c->term, &l);
    if (term_arm(&c->term, &e, c->zkc_gen)) {
        c->guard_gen++;
        if (e.hard_ns > 0)
            push(true_of(c, e.hard_ns), K_GUARD, c->idx, 0, c->guard_gen, NULL);
    }
}

static void el_call_begin(struct cand *c) { c->in_el++; }
static void flush_requests(struct cand *c);
static void el_call_end(struct cand *c)
{
    if (--c->in_el == 0)
        flush_requests(c);
}

static void send_req(struct cand *c, enum rkind kind, enum el_req_type type, uint32_t token,
                     enum op op, const char *node, const char *data, size_t datalen, int version)
{
    int slot = -1;
    for (int i = 0; i < MAXREQ; i++)
        if (!c->reqs[i].used) {
            slot = i;
            break;
        }
    if (slot < 0) {
        violation("model: c%d has too many requests in flight", c->idx);
        return;
    }
    struct creq *r = &c->reqs[slot];
    r->used = 1;
    r->id = ++c->next_reqid;
    r->kind = kind;
    r->type = type;
    r->token = token;
    r->sent = lnow(c);
    r->confirms = op == OP_SET || op == OP_CHECK || op == OP_SYNC;
    struct msg *m = msg_new(M_REQ);
    m->reqid = r->id;
    m->op = op;
    m->sid = c->sid;
    m->gen = c->gen;
    m->srv = c->srv;
    if (node != NULL)
        snprintf(m->node, NAMELEN, "%s", node);
    if (data != NULL) {
        size_t n = datalen < DATALEN ? datalen : DATALEN - 1;
        memcpy(m->data, data, n);
        m->datalen = (int)n;
    }
    m->version = version;
    if (c->st != CS_CONNECTED) {
        /* the client library fails it: CONNLOSS, after this call */
        m->type = M_ANS;
        m->rc = EL_CONNLOSS;
        m->gen = c->gen;
        m->cand = c->idx;
        push(S->now + 1, K_MSG, 1, 1, 0, m);
        return;
    }
    c->last_send = lnow(c);
    client_send(c, m, 0);
}

static enum op op_of(enum el_req_type t)
{
    switch (t) {
    case EL_REQ_CREATE: return OP_CREATE;
    case EL_REQ_ENSURE: return OP_ENSURE;
    case EL_REQ_LIST: return OP_LIST;
    case EL_REQ_CONFIRM:
    case EL_REQ_ADOPT_STAT: return OP_EXISTS;
    case EL_REQ_WATCH: return OP_GET_W;
    case EL_REQ_GET_LEADER: return OP_GET;
    case EL_REQ_WATCH_SELF: return OP_EXISTS_W;
    case EL_REQ_DELETE:
    case EL_REQ_DELETE_STALE: return OP_DELETE;
    case EL_REQ_PUBLISH: return OP_SET;
    default: return OP_SYNC;
    }
}

/* agent_submit */
static void submit(struct cand *c, const struct el_req *r)
{
    if (r->type == EL_REQ_BACKOFF) {
        timer_after(c, T_BACKOFF, (ns_t)r->delay_ms * MS);
        return;
    }
    if (r->type == EL_REQ_DONE)
        return;
    tr("c%d: request %d %s token %u", c->idx, (int)r->type, r->node ? r->node : "-", r->token);
    send_req(c, RK_EL, r->type, r->token, op_of(r->type), r->node, r->data, r->datalen,
             r->type == EL_REQ_PUBLISH ? r->version : -1);
}

/* ------------------------------------------------------------------ */
/* a candidate: the agent's FIFO, term and lease                        */

static void fifo_push(struct cand *c, const struct item *it)
{
    if (c->fn == MAXFIFO) {
        violation("model: c%d's FIFO is full", c->idx);
        return;
    }
    c->fifo[(c->fhead + c->fn++) % MAXFIFO] = *it;
}

static struct item *fifo_head(struct cand *c)
{
    return c->fn > 0 ? &c->fifo[c->fhead] : NULL;
}

static void fifo_drop_head(struct cand *c)
{
    free(c->fifo[c->fhead].data);
    c->fhead = (c->fhead + 1) % MAXFIFO;
    c->fn--;
}

/* the request goes at once (agent_el_request_cb), or queued behind */
static void enqueue_request(struct cand *c, const struct el_req *r, const char *node,
                            const char *data)
{
    struct el_req q = *r;
    q.node = node;
    q.data = data;
    if (c->fn == 0 || r->type == EL_REQ_WATCH_SELF) {
        submit(c, &q);
        return;
    }
    struct item it;
    memset(&it, 0, sizeof it);
    it.is_event = 0;
    it.req = *r;
    if (node != NULL)
        snprintf(it.rnode, NAMELEN, "%s", node);
    if (data != NULL) {
        it.data = malloc(r->datalen + 1);
        if (it.data == NULL)
            exit(2);
        memcpy(it.data, data, r->datalen);
    }
    fifo_push(c, &it);
}

static void flush_requests(struct cand *c)
{
    for (int i = 0; i < c->npend; i++) {
        enqueue_request(c, &c->pend[i], c->pend[i].node != NULL ? c->pend_node[i] : NULL,
                        c->pend_data[i]);
        free(c->pend_data[i]);
    }
    c->npend = 0;
}

static void el_request_cb(void *ud, const struct el_req *r)
{
    struct cand *c = ud;
    if (c->npend == 32) {
        violation("model: too many requests at once");
        return;
    }
    int i = c->npend++;
    c->pend[i] = *r;
    if (r->node != NULL)
        snprintf(c->pend_node[i], NAMELEN, "%s", r->node);
    c->pend_data[i] = NULL;
    if (r->data != NULL) {
        c->pend_data[i] = malloc(r->datalen + 1);
        if (c->pend_data[i] == NULL)
            exit(2);
        memcpy(c->pend_data[i], r->data, r->datalen);
    }
}

static void revoke(struct cand *c)
{
    if (term_revoke(&c->term)) {
        tr("c%d: term of epoch %" PRId64 " revoked: its processes end", c->idx, c->term.epoch);
        /* its processes get SIGTERM, SIGKILL at half the budget */
        ns_t half = (ns_t)(S->plan.stepdown_budget_ms / 2) * MS;   /* (the agent's, in ms) */
        c->procs = 1;
        timer_after(c, T_DRAIN, chance(50) ? half - 1000 : rrange(0, half));
        guard_sync(c);
    }
}

static void el_event_cb(void *ud, const struct zke_event *ev)
{
    struct cand *c = ud;
    tr("c%d: event %d (%s) epoch %" PRId64 " node %s", c->idx, (int)ev->type,
       ev->reason ? ev->reason : "-", ev->epoch, ev->node ? ev->node : "-");
    /* the requests asked before this event go before it */
    flush_requests(c);
    if (ev->type == ZKE_EV_STEPDOWN && term_leads(&c->term) && ev->epoch == c->term.epoch)
        revoke(c);
    /* every event reaches the host in order (the agent's queue_event) */
    struct item it;
    memset(&it, 0, sizeof it);
    it.is_event = 1;
    it.type = ev->type;
    it.epoch = ev->epoch;
    it.reason = ev->reason;
    if (ev->node != NULL)
        snprintf(it.node, NAMELEN, "%s", ev->node);
    fifo_push(c, &it);
}

static int lease_ready(const struct cand *c)
{
    return lease_end(c) - lnow(c) > (int64_t)S->plan.renew_ms * MS;
}

static void renew_send(struct cand *c);
static void renew_soon(struct cand *c);
static void renew_answered(struct cand *c, ns_t sent);

/* agent_lease_tick */
static void lease_check(struct cand *c)
{
    int leading = el_role(c->el) == ZKE_ROLE_LEADER;
    if (!leading && !term_leads(&c->term))
        return;
    int64_t end = lease_end(c), now = lnow(c);
    if (c->term.life == TERM_WAITING)
        return;
    if (end == 0 || now >= end) {
        revoke(c);
        if (leading) {
            tr("c%d: lease ran out (end %.3f, now %.3f local ms): stepping down", c->idx,
               (double)end / 1e6, (double)now / 1e6);
            el_call_begin(c);
            (void)el_lease_expired(c->el, "lease");
            el_call_end(c);
        }
        return;
    }
    if (end != c->armed_end) {
        c->armed_end = end;
        guard_sync(c);
    }
    timer_keep(c, T_LEASE, end + MS / 2);
}

static void call_host(struct cand *c, struct item *it)
{
    if (term_leads(&c->term))
        lease_check(c);
    if (it->type == ZKE_EV_LEADER) {
        struct zke_status st;
        el_status(c->el, &st);
        int64_t left = lease_end(c) - lnow(c);
        if (st.role != ZKE_ROLE_LEADER || st.epoch != it->epoch || left <= 0) {
            tr("c%d: term of epoch %" PRId64 " ended before on_leader", c->idx, it->epoch);
            lease_check(c);
            return;
        }
        char *node = malloc(NAMELEN);
        if (node == NULL)
            exit(2);
        snprintf(node, NAMELEN, "%s", it->node);
        check_begin(c, it->epoch, it->node);
        term_begin(&c->term, it->epoch, node, lnow(c), 1);
        guard_sync(c);
        if (S->nterms < MAXTERMS) {
            struct termrec *r = &S->terms[S->nterms];
            r->cand = c->idx;
            r->epoch = it->epoch;
            r->sid = c->sid;
            r->start = S->now;
            r->end = -1;
            c->cur_term = S->nterms++;
        }
        tr("c%d: on_leader epoch %" PRId64 " node %s, lease left %.3f ms", c->idx, it->epoch,
           it->node, (double)left / 1e6);
        lease_check(c);
        return;
    }
    if (it->type == ZKE_EV_STEPDOWN) {
        if (!term_stepdown(&c->term, it->epoch))
            return;
        guard_sync(c);
        /* on_stepdown: a hook that waits holds the node */
        if (chance(40)) {
            /* within its budget: half the step-down budget */
            ns_t half = (ns_t)(S->plan.stepdown_budget_ms / 2) * MS;   /* (the agent's, in ms) */
            c->hold_token = term_hold(&c->term);
            c->holding = 1;
            timer_after(c, T_HOLDREL, chance(50) ? half - 2000 : rrange(0, half - 2000));
        }
        if (term_stepdown_returned(&c->term, 1) == TERM_HELD) {
            int ms = S->plan.stepdown_budget_ms / 2 > 0 ? S->plan.stepdown_budget_ms / 2 : 1;
            timer_after(c, T_HOLDTO, (ns_t)ms * MS);
            tr("c%d: on_stepdown returned holding the node", c->idx);
        } else {
            duty_end(c, it->reason);
        }
        guard_sync(c);
    }
}

/* run_pending: the FIFO through the term's gate */
static void run_pending(struct cand *c)
{
    for (int guard = 0; guard < 1000; guard++) {
        struct item *it = fifo_head(c);
        if (it == NULL || c->term.life == TERM_HELD)
            return;
        enum term_gate g = TERM_GO;
        if (it->is_event) {
            struct term_now now = {0, 0, 0};
            if (it->type == ZKE_EV_LEADER) {
                struct zke_status st;
                el_status(c->el, &st);
                now.leading_epoch = st.role == ZKE_ROLE_LEADER ? st.epoch : 0;
                now.lease_ready = lease_ready(c);
            }
            g = term_gate(&c->term, it->type, it->epoch, &now);
        }
        if (g == TERM_HOLD_LEASE) {
            if (term_wait(&c->term, it->epoch)) {
                tr("c%d: elected (epoch %" PRId64 "): waiting for the lease", c->idx, it->epoch);
                continue;
            }
            /* publish_ahead, else a renewal now */
            int sent = 0;
            for (int k = 1; k < c->fn; k++) {
                struct item *q = &c->fifo[(c->fhead + k) % MAXFIFO];
                if (!q->is_event && q->req.type == EL_REQ_PUBLISH &&
                    el_wants(c->el, EL_REQ_PUBLISH, q->req.token)) {
                    struct el_req r = q->req;
                    r.node = q->rnode;
                    r.data = q->data;
                    submit(c, &r);
                    free(q->data);
                    for (int j = k; j < c->fn - 1; j++)
                        c->fifo[(c->fhead + j) % MAXFIFO] = c->fifo[(c->fhead + j + 1) % MAXFIFO];
                    c->fn--;
                    sent = 1;
                    break;
                }
            }
            if (sent)
                c->term.pub_epoch = it->epoch;
            else if (c->term.pub_epoch != it->epoch || !el_publishing(c->el))
                renew_soon(c);
            return;
        }
        if (g == TERM_HOLD_DRAIN) {
            revoke(c);
            if (!c->term.drained)
                return;
        }
        if (it->is_event && it->type == ZKE_EV_LEADER)
            (void)term_unwait(&c->term, it->epoch);
        struct item cur = *it;
        it->data = NULL;
        fifo_drop_head(c);
        if (cur.is_event) {
            call_host(c, &cur);
        } else {
            cur.req.node = cur.req.node != NULL ? cur.rnode : NULL;
            cur.req.data = cur.data;
            submit(c, &cur.req);
            free(cur.data);
        }
    }
    violation("model: c%d's FIFO does not drain", c->idx);
}

/* ------------------------------------------------------------------ */
/* a candidate: the renewal stream                                      */

static int confirm_step_ms(void)
{
    int cm = S->plan.confirm_ms;
    return cm + (cm / 10 > 10 ? cm / 10 : 10);
}

/* What renewplan reads of the session and the timer (conn.c's renew_facts). */
static struct renew_now renew_facts(const struct cand *c)
{
    struct renew_now t;
    memset(&t, 0, sizeof t);
    t.now = lnow(c);
    t.base = c->touch.confirmed;
    t.pending_at = touch_pending_at(&c->touch);
    t.pair_gap_ns = S->gap_ns;
    t.timeout_ms = S->T;
    t.active = c->timer_at[T_RENEW] != 0;
    t.remaining = t.active ? (double)(c->timer_at[T_RENEW] - t.now) / 1e9 : 0.;
    return t;
}

static void renew_apply(struct cand *c, struct renew_step st)
{
    switch (st.act) {
    case RENEW_KEEP:
        break;
    case RENEW_ARM:
        timer_set(c, T_RENEW, lnow(c) + (st.after > 0 ? (ns_t)(st.after * 1e9) : 0) + 1);
        break;
    case RENEW_STOP:
        timer_stop(c, T_RENEW);
        break;
    case RENEW_SEND:
        renew_send(c);
        break;
    }
}

/* conn.c's renew_send: the kind renewplan says, on our node */
static void renew_send(struct cand *c)
{
    enum renew_send kind = renewplan_send(&c->rp);
    if (kind == RENEW_SEND_LATER)
        return;
    struct zke_status st;
    el_status(c->el, &st);
    if (c->st != CS_CONNECTED || st.node == NULL)
        return;
    if (kind == RENEW_SEND_READ) {
        send_req(c, RK_READ, EL_REQ_COUNT, 0, OP_EXISTS, st.node, NULL, 0, -1);
    } else {
        c->last_renewal = lnow(c);
        send_req(c, RK_RENEW, EL_REQ_COUNT, 0, kind == RENEW_SEND_WRITE ? OP_CHECK : OP_SYNC,
                 st.node, NULL, 0, -1);
    }
    renewplan_sent(&c->rp);
}

static void renew_answered(struct cand *c, ns_t sent)
{
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_answered(&c->rp, &t, sent));
}

/* conn_renew_soon: a term waits for its lease */
static void renew_soon(struct cand *c)
{
    if (!renewplan_leasing(&c->rp))
        return;
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_replan(&c->rp, 0, &t));
    t = renew_facts(c);
    renew_apply(c, renewplan_soon(&c->rp, &t, c->last_renewal));
}

/* agent_lease.c's renew_period and read_period */
static int renew_period(int leading)
{
    int p = S->plan.renew_ms;
    if (leading) {
        int cm = S->plan.confirm_ms, step = confirm_step_ms();
        if (p < step && 2 * step < cm + 2 * p)
            p = step;
        return p;
    }
    int q = S->T / 3, room = (S->plan.lease_ms - S->plan.confirm_ms - 2 * p) * 2 / 5;
    if (q > room)
        q = room;
    return q > p ? q : p;
}

static int read_period(void)
{
    int q = S->T / 3, room = S->plan.lease_ms - S->plan.renew_ms - confirm_step_ms();
    if (q > room)
        q = room;
    return q > 10 ? q : 10;
}

/* agent_update_renew and conn_agent_renew */
static void renew_plan(struct cand *c)
{
    struct zke_status st;
    el_status(c->el, &st);
    int want = st.role == ZKE_ROLE_LEADER || st.role == ZKE_ROLE_FOLLOWER;
    enum renew_level level = !want ? RENEW_NONE
                             : st.role == ZKE_ROLE_FOLLOWER && st.position != 1 ? RENEW_READ
                             : RENEW_LEASE;
    struct renew_demand d = renew_demand_of(level, renew_period(st.role == ZKE_ROLE_LEADER),
                                            read_period(), S->plan.lease_ms, 0);
    if (renew_demand_same(&c->rd, &d, level))
        return;
    renewplan_drop(&c->rp, &c->rd);
    c->rd = d;
    if (level != RENEW_NONE)
        renewplan_add(&c->rp, &c->rd, level);
    struct renew_now t = renew_facts(c);
    renew_apply(c, renewplan_replan(&c->rp, 0, &t));
}

/* ------------------------------------------------------------------ */
/* a candidate: session events                                          */

/* agent_session_state, agent_session_lost: the session event goes into the
 * FIFO first (agent_queue_session_event), then to the election */
static void el_session(struct cand *c, enum el_session_state st)
{
    struct item it;
    memset(&it, 0, sizeof it);
    it.is_event = 1;
    it.type = ZKE_EV_SESSION;
    it.reason = st == EL_SESS_CONNECTED ? "connected" : st == EL_SESS_DISCONNECTED
                ? "disconnected" : "expired";
    fifo_push(c, &it);
    el_call_begin(c);
    el_on_session(c->el, st, c->sid);
    el_call_end(c);
}

static void fail_inflight(struct cand *c)
{
    for (int i = 0; i < MAXREQ; i++) {
        struct creq *r = &c->reqs[i];
        if (!r->used)
            continue;
        r->used = 0;
        if (r->kind == RK_EL) {
            struct el_result res;
            memset(&res, 0, sizeof res);
            res.token = r->token;
            res.rc = EL_CONNLOSS;
            el_call_begin(c);
            el_on_result(c->el, r->type, &res);
            el_call_end(c);
        } else {
            renew_answered(c, r->sent);     /* (conn.c's renew_done: CONNLOSS too) */
        }
    }
}

static void connect_try(struct cand *c)
{
    c->gen++;
    c->st = CS_CONNECTING;
    c->srv = (int)rrange(0, NSRV - 1);
    struct msg *m = msg_new(M_CONNECT);
    m->sid = c->sid;
    m->gen = c->gen;
    m->zxid = c->seen_zxid;
    m->srv = c->srv;
    tr("c%d: connecting to server %d (session 0x%" PRIx64 ")", c->idx, c->srv, c->sid);
    client_send(c, m, 0);
    timer_after(c, T_CONNECT, (ns_t)S->T * MS / 3);
}

static void new_handle(struct cand *c)
{
    c->sid = 0;
    c->handle_connected = 0;
    c->opened = lnow(c);
    touch_init(&c->touch);
    c->zkc_gen++;
    c->seen_zxid = 0;
}

static void disconnected(struct cand *c, const char *why)
{
    if (c->st == CS_DISCONNECTED)
        return;
    int was = c->st == CS_CONNECTED;
    tr("c%d: disconnected (%s)", c->idx, why);
    c->st = CS_DISCONNECTED;
    c->gen++;
    touch_reset(&c->touch);
    fail_inflight(c);
    if (was) {
        el_session(c, EL_SESS_DISCONNECTED);
        if (c->timer_at[T_GIVEUP] == 0)
            timer_after(c, T_GIVEUP, (ns_t)S->T * MS);
    }
    timer_stop(c, T_RECV);
    timer_after(c, T_KICK, rrange(MS, 50 * MS));    /* the next try */
}

static void session_expired(struct cand *c, const char *why)
{
    tr("c%d: session 0x%" PRIx64 " expired (%s)", c->idx, c->sid, why);
    c->st = CS_DISCONNECTED;
    c->gen++;
    fail_inflight(c);
    el_session(c, EL_SESS_EXPIRED);
    new_handle(c);
    timer_stop(c, T_GIVEUP);
    timer_after(c, T_KICK, rrange(MS, 50 * MS));
}

/* zkclient.c's completion: touch, then the owner */
static void on_answer(struct cand *c, struct msg *m)
{
    struct creq *r = NULL;
    for (int i = 0; i < MAXREQ; i++)
        if (c->reqs[i].used && c->reqs[i].id == m->reqid)
            r = &c->reqs[i];
    if (r == NULL)
        return;
    struct creq q = *r;
    r->used = 0;
    int server = m->rc != EL_CONNLOSS && m->rc != EL_EXPIRED;
    if (server && c->st == CS_CONNECTED) {
        if (q.confirms && m->rc == EL_OK)
            (void)touch_synced(&c->touch, q.sent, lnow(c), S->gap_ns);
        else
            touch_answered(&c->touch, q.sent, lnow(c), S->gap_ns);
    }
    if (q.kind != RK_EL) {
        renew_answered(c, q.sent);
        return;
    }
    struct el_result res;
    const char *names[MAXNODES];
    memset(&res, 0, sizeof res);
    res.token = q.token;
    res.rc = (enum el_rc)m->rc;
    res.name = m->stat.name;
    res.czxid = m->stat.czxid;
    res.mzxid = m->stat.mzxid;
    res.owner = m->stat.owner;
    res.data = m->stat.datalen > 0 ? m->stat.data : NULL;
    res.datalen = m->stat.datalen;
    for (int i = 0; i < m->nchildren; i++)
        names[i] = m->children[i];
    res.children = names;
    res.nchildren = m->nchildren;
    res.cversion = m->cversion;
    tr("c%d: answer to %d token %u: rc %d%s%s", c->idx, (int)q.type, q.token, m->rc,
       q.type == EL_REQ_CREATE && m->rc == EL_OK ? " " : "",
       q.type == EL_REQ_CREATE && m->rc == EL_OK ? m->stat.name : "");
    el_call_begin(c);
    el_on_result(c->el, q.type, &res);
    el_call_end(c);
}

/* ------------------------------------------------------------------ */
/* a candidate's life                                                   */

static void cand_start(struct cand *c)
{
    static const struct el_ops ops = {el_request_cb, el_event_cb, NULL};
    char id[16];
    snprintf(id, sizeof id, "c%d", c->idx);
    c->el = el_new("/e", id, id, &ops, c, rnd64() | 1);
    if (c->el == NULL)
        exit(2);
    el_set_strict(c->el, 0);
    term_init(&c->term);
    c->alive = 1;
    c->cur_term = -1;
    c->procs = c->holding = 0;
    c->fn = c->fhead = 0;
    c->npend = 0;
    renewplan_init(&c->rp);
    memset(&c->rd, 0, sizeof c->rd);
    c->last_renewal = 0;
    c->armed_end = 0;
    for (int i = 0; i < MAXREQ; i++)
        c->reqs[i].used = 0;
    for (int w = 0; w < NTIMERS; w++)
        timer_stop(c, (enum ctimer)w);
    c->st = CS_DISCONNECTED;
    new_handle(c);
    tr("c%d: starts (clock rate %.5f)", c->idx, c->rate);
    connect_try(c);
    timer_after(c, T_PING, (ns_t)S->T * MS / 3);
}

static void cand_free(struct cand *c)
{
    for (int i = 0; i < c->fn; i++)
        free(c->fifo[(c->fhead + i) % MAXFIFO].data);
    c->fn = 0;
    for (int i = 0; i < c->npend; i++)
        free(c->pend_data[i]);
    c->npend = 0;
    el_free(c->el);
    c->el = NULL;
    term_clear(&c->term);
}

/* the process dies (a crash, or the guard's kill): its session lives on
 * until the leader expires it */
static void cand_die(struct cand *c, const char *how)
{
    if (!c->alive)
        return;
    tr("c%d: dies (%s)", c->idx, how);
    c->alive = 0;
    duty_end(c, how);
    c->gen++;
    c->guard_gen++;
    for (int w = 0; w < NTIMERS; w++)
        timer_stop(c, (enum ctimer)w);
    cand_free(c);
    for (int s = 0; s < NSRV; s++)
        S->srv[s].att_gen[c->idx] = 0;
    push(S->now + rrange((ns_t)S->T * MS / 2, (ns_t)S->T * MS * 3), K_RESTART, c->idx, 0, 0, NULL);
}

/* after each step of the loop: the FIFO, the stream, the lease */
static void loop_tail(struct cand *c)
{
    run_pending(c);
    if (!c->alive)
        return;
    renew_plan(c);
    if (term_leads(&c->term) || el_role(c->el) == ZKE_ROLE_LEADER) {
        int64_t end = lease_end(c);
        if (end > 0)
            timer_keep(c, T_LEASE, end + MS / 2);
    }
    /* a term never acts past its lease */
    if (c->term.life == TERM_ACTING && lnow(c) >= lease_end(c))
        violation("c%d's term of epoch %" PRId64 " acts past its lease (now %.3f, end %.3f "
                  "local ms)", c->idx, c->term.epoch, (double)lnow(c) / 1e6,
                  (double)lease_end(c) / 1e6);
}

static void on_client_msg(struct cand *c, struct msg *m, int local_fail)
{
    if (local_fail) {
        on_answer(c, m);        /* (whatever the connection since) */
        return;
    }
    if (m->gen != c->gen)
        return;
    c->last_recv = lnow(c);
    if (m->zxid > c->seen_zxid)
        c->seen_zxid = m->zxid;
    switch (m->type) {
    case M_CONNECTED:
        if (c->st != CS_CONNECTING)
            return;
        c->st = CS_CONNECTED;
        c->srv = m->srv;
        timer_stop(c, T_CONNECT);
        timer_stop(c, T_GIVEUP);
        touch_reset(&c->touch);
        c->last_renewal = 0;    /* (zkclient.c: what the old one sent pairs with nothing) */
        if (!c->handle_connected)
            touch_grant(&c->touch, c->opened);
        else
            touch_revalidated(&c->touch);
        c->handle_connected = 1;
        c->sid = m->sid;
        tr("c%d: connected to server %d, session 0x%" PRIx64 "%s", c->idx, m->srv, c->sid,
           m->created ? " (new)" : "");
        timer_set(c, T_RECV, c->last_recv + (ns_t)S->T * MS * 2 / 3);
        el_session(c, EL_SESS_CONNECTED);
        break;
    case M_SESS_EXPIRED:
        session_expired(c, "the server says so");
        break;
    case M_CLOSE:
        disconnected(c, "the server closed the connection");
        break;
    case M_ANS:
        on_answer(c, m);
        break;
    case M_NOTIFY:
        if (c->st != CS_CONNECTED)
            return;
        tr("c%d: watch: %s %s", c->idx, m->node, m->watch_deleted ? "deleted" : "changed");
        el_call_begin(c);
        el_on_watch(c->el, m->watch_deleted ? EL_W_DELETED : EL_W_CHANGED, m->node);
        el_call_end(c);
        break;
    default:
        break;
    }
}

static void on_timer(struct cand *c, enum ctimer w)
{
    c->timer_at[w] = 0;
    switch (w) {
    case T_RENEW:
        if (c->rp.repeat > 0)
            timer_after(c, T_RENEW, (ns_t)(c->rp.repeat * 1e9));     /* (its repeat) */
        renew_send(c);
        break;
    case T_BACKOFF:
        el_call_begin(c);
        el_kick(c->el);
        el_call_end(c);
        break;
    case T_LEASE:
        break;          /* the lease check ran first */
    case T_DRAIN:
        c->procs = 0;
        if (c->term.life == TERM_ENDING)
            term_drained(&c->term);
        duty_end(c, "processes ended");
        break;
    case T_HOLDREL:
        c->holding = 0;
        if (term_release(&c->term, c->hold_token)) {
            term_hold_over(&c->term);
            timer_stop(c, T_HOLDTO);
            guard_sync(c);
        }
        duty_end(c, "hold released");
        break;
    case T_HOLDTO:
        if (c->term.life == TERM_HELD) {
            term_hold_over(&c->term);
            guard_sync(c);
            duty_end(c, "hold timed out");
        }
        break;
    case T_PING:
        if (c->st == CS_CONNECTED && lnow(c) - c->last_send >= (ns_t)S->T * MS / 3) {
            struct msg *m = msg_new(M_PING);
            m->sid = c->sid;
            m->gen = c->gen;
            m->srv = c->srv;
            c->last_send = lnow(c);
            client_send(c, m, 0);
        }
        timer_set(c, T_PING, (c->last_send > lnow(c) - (ns_t)S->T * MS / 3 ? c->last_send
                              : lnow(c)) + (ns_t)S->T * MS / 3);
        break;
    case T_RECV:
        if (c->st != CS_CONNECTED)
            break;
        if (lnow(c) - c->last_recv < (ns_t)S->T * MS * 2 / 3)
            timer_set(c, T_RECV, c->last_recv + (ns_t)S->T * MS * 2 / 3);
        else
            disconnected(c, "nothing heard for 2T/3");
        break;
    case T_CONNECT:
        if (c->st == CS_CONNECTING) {
            c->st = CS_DISCONNECTED;
            connect_try(c);
        }
        break;
    case T_GIVEUP:
        if (c->st != CS_CONNECTED)
            session_expired(c, "given up T after the disconnect");
        break;
    case T_KICK:
        if (c->st == CS_DISCONNECTED)
            connect_try(c);
        break;
    default:
        break;
    }
}

static int renewal_answer(const struct cand *c, const struct msg *m)
{
    for (int i = 0; i < MAXREQ; i++)
        if (c->reqs[i].used && c->reqs[i].id == m->reqid)
            return c->reqs[i].kind != RK_EL;
    return 0;
}

/* one step of a candidate's loop: the lease check first, then what came */
static void cand_step(struct cand *c, const struct event *e)
{
    if (!c->alive)
        return;
    if (e->kind == K_TIMER && e->gen != c->timer_gen[e->b])
        return;
    lease_check(c);
    /* the conn's stream (its timer, its answers) pumps no agent; the
     * lease check kicks a term waiting for a lease that is ready now */
    int pump = !(e->kind == K_TIMER && e->b == T_RENEW) &&
               !(e->kind == K_MSG && e->m->type == M_ANS && renewal_answer(c, e->m));
    if (e->kind == K_MSG)
        on_client_msg(c, e->m, e->b == 1);
    else if (e->kind == K_TIMER) {
        if (e->b != T_PING && e->b != T_RENEW && e->b != T_RECV)
            tr("c%d: timer %s", c->idx, timer_names[e->b]);
        on_timer(c, (enum ctimer)e->b);
    }
    if (!pump && c->alive && c->term.life == TERM_WAITING && lease_ready(c))
        pump = 1;
    if (c->alive && pump)
        loop_tail(c);
}

/* ------------------------------------------------------------------ */
/* faults                                                               */

enum fault { F_STALL, F_LONG_STALL, F_CUT, F_ISOLATE, F_CRASH, F_RESIGN, F_SLOW, F_LATE_PING,
             F_COUNT };

/* The leader-to-follower direction of the leader candidate's server stalls
 * (pings, commits and sync answers read late, in order), from the next
 * write it answers, for less than syncLimit ticks, so the follower keeps
 * following; often the first write answered after it is followed by the
 * follower's cut (tight_cut). */
static void late_ping(int lead)
{
    int f = lead >= 0 && S->c[lead].srv > 0 ? S->c[lead].srv : (int)rrange(1, NSRV - 1);
    struct server *s = &S->srv[f];
    ns_t tick = (ns_t)S->tick_ms * MS;
    if (!s->following || s->cut_until > S->now || s->stall_until > S->now)
        return;
    /* long enough, where it can be, for the leader's next renewal to be
     * sent in it (it then passes the ping replies the stall holds) */
    ns_t lo = tick / 2, hi = SYNC_LIMIT * tick - tick / 10;
    ns_t per = lead >= 0 ? (ns_t)(S->c[lead].rp.repeat * 1e9) : 0;
    if (per > 0 && per + tick / 10 < hi && chance(70))
        lo = per + tick / 10;
    s->stall_arm = rrange(lo, hi);
    s->stall_tight = chance(60);
}

static int leader_cand(void)
{
    for (int i = 0; i < S->nc; i++)
        if (S->c[i].alive && term_leads(&S->c[i].term))
            return i;
    return -1;
}

static void fault(void)
{
    ns_t T = (ns_t)S->T * MS;
    int lead = leader_cand();
    int c = lead >= 0 && chance(60) ? lead : (int)rrange(0, S->nc - 1);
    struct cand *k = &S->c[c];
    switch ((enum fault)rrange(0, F_COUNT - 1)) {
    case F_STALL:
        if (k->alive && k->stall_until < S->now) {
            k->stall_until = S->now + rrange(MS, T / 2);
            tr("FAULT c%d's loop frozen for %.3f ms", c, (double)(k->stall_until - S->now) / 1e6);
        }
        break;
    case F_LONG_STALL:
        if (k->alive && k->stall_until < S->now) {
            k->stall_until = S->now + rrange(T / 2, 3 * T);
            tr("FAULT c%d's loop frozen for %.3f ms", c, (double)(k->stall_until - S->now) / 1e6);
        }
        break;
    case F_CUT:
        k->cut_until = S->now + rrange(T / 10, 2 * T);
        tr("FAULT c%d cut from the servers for %.3f ms", c, (double)(k->cut_until - S->now) / 1e6);
        break;
    case F_ISOLATE:
        isolate((int)rrange(1, NSRV - 1), 0, 2 * T);
        break;
    case F_CRASH:
        if (k->alive && chance(50)) {
            tr("FAULT c%d crashes", c);
            cand_die(k, "crash");
        }
        break;
    case F_RESIGN:
        if (lead >= 0 && S->now >= S->c[lead].stall_until &&
            el_role(S->c[lead].el) == ZKE_ROLE_LEADER) {
            tr("FAULT c%d resigns", lead);
            el_call_begin(&S->c[lead]);
            (void)el_resign(S->c[lead].el, 0);
            el_call_end(&S->c[lead]);
            loop_tail(&S->c[lead]);
        }
        break;
    case F_LATE_PING:
        late_ping(lead);
        break;
    case F_SLOW:
        k->cdelay_max = k->cdelay_max > T / 50 ? MS : rrange(MS, T / 8);
        tr("FAULT c%d's answers take up to %.3f ms", c, (double)k->cdelay_max / 1e6);
        break;
    default:
        break;
    }
    push(S->now + rrange(T / 4, 3 * T), K_FAULT, 0, 0, 0, NULL);
}

/* ------------------------------------------------------------------ */
/* a run                                                                */

static void dispatch(const struct event *e)
{
    switch (e->kind) {
    case K_MSG: {
        struct msg *m = e->m;
        if (e->a == 1) {                /* to a client */
            struct cand *c = &S->c[m->cand];
            if (!c->alive) {
                msg_free(m);
                return;
            }
            if (S->now < c->stall_until) {
                /* frozen: everything waits for the resume, in order */
                push(c->stall_until, e->kind, e->a, e->b, e->gen, m);
                return;
            }
            cand_step(c, e);
            msg_free(m);
        } else if (e->a == 0) {         /* to a server, from a client */
            struct cand *c = &S->c[m->cand];
            if (!c->alive || m->gen != c->gen) {
                msg_free(m);            /* the client closed that connection */
                return;
            }
            server_from_client(m->srv, m);
        } else if (e->a == 2) {
            leader_from_link(m);
        } else {
            follower_from_link(m);
        }
        break;
    }
    case K_TIMER: {
        struct cand *c = &S->c[e->a];
        if (c->alive && S->now < c->stall_until) {
            /* frozen: everything waits for the resume, in order */
            push(c->stall_until, e->kind, e->a, e->b, e->gen, NULL);
            return;
        }
        cand_step(c, e);
        break;
    }
    case K_GUARD: {
        struct cand *c = &S->c[e->a];
        if (!c->alive || e->gen != c->guard_gen || !term_armed(&c->term) ||
            c->term.armed.hard_ns == 0 || lnow(c) < c->term.armed.hard_ns)
            break;
        tr("c%d: the fail-stop watcher kills it at its hard end (term %s)", c->idx,
           term_life_name(c->term.life));
        cand_die(c, "killed at its hard end");
        break;
    }
    case K_LPING:
        leader_pings();
        break;
    case K_LTICK:
        leader_tick();
        break;
    case K_FAULT:
        fault();
        break;
    case K_LEAVE:
        if (S->srv[e->a].link_gen == e->gen)
            follower_leave(e->a);
        break;
    case K_REJOIN:
        follower_rejoin(e->a);
        break;
    case K_RESTART:
        cand_start(&S->c[e->a]);
        break;
    case K_STALL: {
        struct cand *c = &S->c[e->a];
        if (c->alive && c->stall_until < S->now) {
            c->stall_until = S->now + c->stall_next;
            tr("FAULT c%d's loop frozen for %.3f ms", c->idx, (double)c->stall_next / 1e6);
        }
        break;
    }
    default:
        break;
    }
}

static int setup(uint64_t seed, int tracing)
{
    static const int Ts[] = {1000, 2000, 3000, 4000, 6000};
    /* (the trace's buffer and the heap are kept from run to run) */
    char *tbuf = S->tr;
    size_t tcap = S->trcap;
    struct event *heap = S->heap;
    int capheap = S->capheap;
    memset(S, 0, sizeof *S);
    S->tr = tbuf;
    S->trcap = tcap;
    if (tbuf != NULL)
        tbuf[0] = '\0';
    S->heap = heap;
    S->capheap = capheap;
    S->tracing = tracing;
    S->seed = seed;
    S->rng = seed * UINT64_C(0x2545f4914f6cdd1d) + 1;
    S->T = Ts[rrange(0, 4)];
    S->tick_ms = (int)rrange(S->T / 20, S->T / 6);
    S->nc = (int)rrange(2, MAXC);
    struct zke_settings set;
    memset(&set, 0, sizeof set);
    set.server_tick_ms = S->tick_ms;
    /* the defaults, or settings an operator may give (the lease plan
     * refuses those that leave too little: then the defaults) */
    if (chance(50))
        set.lease_margin_ms = (int)rrange(5, 60);
    if (chance(50))
        set.drift = (double)rrange(1, 60) / 1000.0;
    if (chance(30))
        set.stepdown_budget_ms = (int)rrange(S->T / 40, S->T / 5);
    char err[1024];
    if (settings_lease_plan(&set, S->T, S->tick_ms, &S->plan, err, sizeof err) != 0) {
        memset(&set, 0, sizeof set);
        set.server_tick_ms = S->tick_ms;
        if (settings_lease_plan(&set, S->T, S->tick_ms, &S->plan, err, sizeof err) != 0) {
            fprintf(stderr, "seed %" PRIu64 ": the plan is refused: %s\n", seed, err);
            return -1;
        }
    }
    S->sharp = chance(70);
    S->tight_pct = chance(30) ? 0 : (int)rrange(2, 25);
    S->gap_ns = (int64_t)((double)S->tick_ms * 1e6 * (1.0 + S->plan.drift));
    S->end = (ns_t)S->T * MS * 25;
    for (int i = 0; i < NSRV; i++)
        S->srv[i].following = 1;
    S->cversion = (int32_t)rrange(0, 1000);
    for (int i = 0; i < S->nc; i++) {
        struct cand *c = &S->c[i];
        c->idx = i;
        c->cur_term = -1;
        /* within the drift, often at its edges */
        int64_t u = chance(40) ? -1000 : chance(66) ? 1000 : rrange(-1000, 1000);
        c->rate = 1.0 + S->plan.drift * 0.999 * ((double)u / 1000.0);
        c->off = rrange(0, (ns_t)1000 * 1000 * MS);
        c->cdelay_max = rrange(MS / 10, (ns_t)S->T * MS / 50);
        push(rrange(0, (ns_t)S->T * MS / 2), K_RESTART, i, 0, 0, NULL);
    }
    push(0, K_LPING, 0, 0, 0, NULL);
    push((ns_t)S->T * MS * 2, K_FAULT, 0, 0, 0, NULL);
    tr("seed %" PRIu64 ": %d candidates, T %d ms, server tick %d ms, lease %d ms, step-down "
       "budget %d ms, margin %d ms, renewal %d ms, drift %g; %s expiry, %d%% of confirmed "
       "renewals cut", seed, S->nc, S->T, S->tick_ms, S->plan.lease_ms,
       S->plan.stepdown_budget_ms, S->plan.margin_ms, S->plan.renew_ms, S->plan.drift,
       S->sharp ? "the earliest" : "ZooKeeper's", S->tight_pct);
    return 0;
}

static void teardown(void)
{
    while (S->nheap > 0) {
        struct event e = pop();
        msg_free(e.m);
    }
    for (int i = 0; i < S->nc; i++)
        if (S->c[i].alive)
            cand_free(&S->c[i]);
}


/* 0: the seed holds; 1: it broke an invariant */
static int run(uint64_t seed, int tracing, int *terms)
{
    if (setup(seed, tracing) != 0)
        return 0;
    while (S->nheap > 0 && !S->failed) {
        struct event e = pop();
        if (e.at > S->end) {
            msg_free(e.m);
            break;
        }
        S->now = e.at;
        if (++S->events > 20000000)
            violation("model: runaway (20M events)");
        dispatch(&e);
    }
    *terms = S->nterms;
    int failed = S->failed;
    teardown();
    return failed;
}

int main(int argc, char **argv)
{
    static struct sim sim;
    S = &sim;
    long seeds = 2000;
    uint64_t from = 1;
    int trace_all = 0, quiet = 0;
    const char *v;
    if ((v = getenv("ZKELECT_SIM_SEEDS")) != NULL)
        seeds = strtol(v, NULL, 10);
    if ((v = getenv("ZKELECT_SIM_FROM")) != NULL)
        from = strtoull(v, NULL, 10);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            seeds = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
            from = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--trace") == 0)
            trace_all = 1;
        else if (strcmp(argv[i], "--quiet") == 0)
            quiet = 1;
        else {
            fprintf(stderr, "usage: test_sim [--seeds N] [--from S] [--trace] [--quiet]\n");
            return 2;
        }
    }
    long failed = 0, terms = 0, events = 0;
    for (long i = 0; i < seeds; i++) {
        uint64_t seed = from + (uint64_t)i;
        int nt = 0;
        int bad = run(seed, trace_all, &nt);
        terms += nt;
        events += sim.events;
        if (trace_all && sim.tr != NULL)
            fputs(sim.tr, stdout);
        if (!bad)
            continue;
        failed++;
        char why[512];
        snprintf(why, sizeof why, "%s", sim.why);
        if (!trace_all) {
            (void)run(seed, 1, &nt);    /* again, traced */
            const char *t = sim.tr != NULL ? sim.tr : "";
            size_t len = strlen(t);
            int lines = 0;
            size_t at = len;
            while (at > 0 && lines < 250)
                if (t[--at] == '\n')
                    lines++;
            fprintf(stderr, "--- seed %" PRIu64 " (replay: test_sim --seeds 1 --from %" PRIu64
                    " --trace), its trace's last lines:\n%s", seed, seed, t + at);
        }
        fprintf(stderr, "FAIL seed %" PRIu64 ": %s\n", seed, why);
        if (failed >= 3)
            break;
    }
    printf("%ld seeds from %" PRIu64 ": %ld failed; %ld terms, %ld events\n", seeds, from,
           failed, terms, events);
    if (!quiet) {
        printf("terms ended by:");
        for (int i = 0; i < stats.k; i++)
            printf(" %s %ld%s", stats.how[i], stats.n[i], i + 1 < stats.k ? "," : "\n");
        printf("closest hand-over: the successor began %.3f ms after the last term ended "
               "(%ld hand-overs); closest expiry: %.3f ms after its session's last term ended "
               "(%ld expiries)\n", (double)stats.min_gap / 1e6, stats.handovers,
               (double)stats.min_slack / 1e6, stats.expiries_after_term);
    }
    free(sim.tr);
    free(sim.heap);
    return failed ? 1 : 0;
}
