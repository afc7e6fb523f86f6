/*
 * group.c - a balanced group (the public zke_group_* of zkelect.h): the
 * elections of one member spread over the live members of the group.
 *
 * What it does, all on the conn's session:
 *  - membership: an ephemeral node <path>/members/<id> (made at each new
 *    session; the folders as containers), its data this member's counts
 *    (balance.h's bal_data), republished when "leads" changes, at most
 *    every ZKE_GROUP_PUBLISH_MS;
 *  - the reading: one listing of <path>/members with a child watch and one
 *    read per member with a data watch, again at every watch that fires
 *    (coalesced: one reading at a time, one more if a watch fired during
 *    it). Nothing while nothing changes; P + 1 requests per change,
 *    whatever E;
 *  - the plan, from a finished reading: the shares and the moves
 *    (balance.c); this member's rows become a queue of hand-overs
 *    (zke_agent_resign_to), at most `parallel` at once, within the rate,
 *    only once the member set has been unchanged for the settle delay
 *    (bal_settle). A round ends when its queue is done; the next plan
 *    waits for a reading taken 2 x ZKE_GROUP_PUBLISH_MS after the last
 *    hand-over ended, so the receivers' new counts are in it (no
 *    overshoot on stale counts). Which elections move: this member's
 *    leaders in the order of a hash of their path (stable: the same ones
 *    first each time, never a shuffle). A refusal the receiver would give
 *    again (no_candidate, not_next; any during a leave) is remembered: that
 *    election is not asked of that receiver again, and a receiver refusing
 *    RX_REFUSALS in a row gets no rows, until the members' data other than
 *    "leads" changes. Another failure backs the election off (settle_ms
 *    doubling per failure, <= 60 s). Each member counts at most its
 *    published elections, as its cap (bal_member_of); E is the most any
 *    member publishes.
 *
 * Contexts: the session's calls (conn_listener) and the completions run
 * inside the ZooKeeper library: they record and start the group's timer;
 * the plan, the hand-overs, the log and the host's callbacks run from the
 * timer (the loop). The tap (agent_set_tap) runs from the agents' pumps.
 */
#include "agent_int.h"
#include "balance.h"
#include "conn.h"
#include "xstr.h"
#include "zkclient.h"
#include "zkelect.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#define MEMBERS_MAX 1024        /* names of a listing taken (the rest ignored) */
#define BACKOFF_MAX_MS 60000
#define RETRY_MS 1000           /* a failed request of the group's own, again */
#define REF_MAX 8               /* receivers remembered per election as refusing it */
#define RX_REFUSALS 8           /* refusals in a row that make a receiver skipped */

/* One of the group's agents. Heap-allocated one by one: a hand-over's
 * done gets it, and it outlives the group while one is under way (g NULL). */
struct gent {
    zke_agent *a;               /* NULL once freed (its hand-over's done still due) */
    zke_group *g;               /* NULL once the group is freed */
    uint32_t hash;              /* of the election path: the order moves take */
    int leads;
    int at;                     /* its index in g->ents */
    int moving;                 /* a hand-over of ours under way */
    int queued;                 /* in g->queue, not started yet */
    int fails;
    int64_t backoff_until;      /* ms (ev_now) */
    /* the receivers that refused it (fnv of their ids), while the members'
     * data is unchanged (ref_gen == the group's): it is not asked of them
     * again; REF_MAX of them: refused by all */
    unsigned ref_gen;
    int nref;
    uint32_t ref[REF_MAX];
};

struct gmember {
    struct bal_data d;
    int refused;                /* refusals in a row (no success between), this data */
};

/* The reading under way: the names listed, the data read. */
struct reading {
    int active, again;          /* one under way; a watch fired during it */
    int pending;                /* reads not answered */
    int n;
    struct gmember *m;
};

struct qmove {
    struct gent *e;
    char to[BAL_ID_MAX + 1];
};

struct zke_group {
    struct ev_loop *loop;
    zke_conn *c;
    zkclient *zkc;
    char *path, *mdir, *node, *id;
    int weight, max, settle_ms, per_min, parallel;
    zke_log_fn *log;
    void *lud;
    zke_group_done_fn *done;
    void *done_ud;
    zke_group_change_fn *notify;
    void *notify_ud;
    enum zke_group_state state;
    struct gent **ents;
    int n, cap;
    int leads, moving;
    int64_t moved_out, failed;
    struct zkc_owner own;
    struct conn_listener lis;
    unsigned gen;               /* bumped at each new connection and loss */
    unsigned ref_gen;           /* bumped when the members' data (not "leads") changes */
    int connected, node_ok, creating;
    int disconnected;           /* the connection was lost; the session may live on */
    int create_step;            /* folders made so far (the create chain) */
    int published, publishing, pub_dirty;
    double pub_at;              /* ev_now of the last publish */
    struct reading rd;
    struct gmember *members;    /* the last finished reading */
    int nmembers;
    double read_at;             /* ev_now when it finished */
    int target;                 /* ours, from it (-1: none yet) */
    struct bal_settle settle;
    struct bal_rate rate;
    struct qmove *queue;
    int qlen, qhead;
    int round;                  /* a plan's moves under way (queued or moving) */
    double round_end;           /* ev_now when the last round ended */
    int dirty;                  /* the status changed: notify */
    int in_cb;                  /* inside a host callback: a free waits */
    int free_asked;
    int freeing;                /* zke_group_free: cancelled completions do nothing */
    int want_read, want_create; /* recorded in the library's context, done from the timer */
    ev_timer tick;
    char err[256];
};

static const char *const STATE_NAMES[] = { "new", "joining", "member", "leaving", "left" };

const char *zke_group_state_name(enum zke_group_state s)
{
    return (unsigned)s < sizeof STATE_NAMES / sizeof *STATE_NAMES ? STATE_NAMES[s] : NULL;
}

static int64_t now_ms(const zke_group *g)
{
    return (int64_t)(ev_now(g->loop) * 1000.0);
}

static void glog(zke_group *g, enum zke_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void glog(zke_group *g, enum zke_log_level lvl, const char *fmt, ...)
{
    if (g->log == NULL)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(buf, sizeof buf, "group %s: ", g->id);
    (void)vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    g->in_cb++;
    g->log(g->lud, lvl, buf);
    g->in_cb--;
}

static void seterr(zke_group *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void seterr(zke_group *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(g->err, sizeof g->err, fmt, ap);
    va_end(ap);
}

/* The timer runs the group's work at the latest after `in` seconds. */
static void wake(zke_group *g, double in)
{
    if (in < 0)
        in = 0;
    if (ev_is_active(&g->tick)) {
        double left = ev_timer_remaining(g->loop, &g->tick);
        if (left <= in)
            return;
        ev_timer_stop(g->loop, &g->tick);
    }
    ev_timer_set(&g->tick, in, 0.);
    ev_timer_start(g->loop, &g->tick);
}

static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* --- the session's side (inside the ZooKeeper library) ---------------- */

static void on_state(void *ud, enum zkc_state st)
{
    zke_group *g = ud;
    if (st == ZKC_S_CONNECTED) {
        if (!g->connected) {
            g->connected = 1;
            g->want_create = 1;
            g->want_read = 1;
        } else if (g->disconnected) {
            g->want_read = 1;   /* a reading cut by the loss may have missed a member */
        }
        g->disconnected = 0;
    } else if (st == ZKC_S_DISCONNECTED) {
        /* the session may live on: the node and the watches stay */
        g->disconnected = 1;
    } else {
        g->connected = 0;
        g->node_ok = 0;
        g->gen++;
    }
    wake(g, 0);
}

static void on_lost(void *ud)
{
    zke_group *g = ud;
    g->connected = 0;
    g->node_ok = 0;
    g->gen++;
    wake(g, 0);
}

static void on_watch(void *ud, enum zkc_watch type, const char *path)
{
    zke_group *g = ud;
    (void)type;
    (void)path;
    g->want_read = 1;
    wake(g, 0);
}

/* --- the member node -------------------------------------------------- */

static int encode(zke_group *g, char *buf, size_t len)
{
    struct bal_data d = { .weight = g->weight, .max = g->max, .elections = g->n,
                          .leads = g->leads, .leaving = g->state == ZKE_GROUP_LEAVING };
    snprintf(d.id, sizeof d.id, "%s", g->id);
    return bal_data_encode(&d, buf, len);
}

/* The completion's argument: the group and the generation it was asked
 * in; a group freed meanwhile cancelled it (ZKC_CLOSING). */
static void create_done(void *arg, const struct zkc_result *r);

static void create_send(zke_group *g);

/* The next step of the create chain; a request that cannot be sent is
 * tried again from the timer. */
static void create_next(zke_group *g)
{
    create_send(g);
    if (!g->creating) {
        g->want_create = 1;
        wake(g, RETRY_MS / 1000.0);
    }
}

static void create_send(zke_group *g)
{
    /* the folders of path, then <path>/members, then our node */
    char buf[2048];
    const char *p = g->path;
    int step = 0;
    for (const char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        size_t len = s != NULL ? (size_t)(s - p) : strlen(p);
        if (step++ == g->create_step) {
            snprintf(buf, sizeof buf, "%.*s", (int)len, p);
            zkclient_tag(g->zkc, &g->own);
            if (zkclient_create(g->zkc, buf, NULL, 0, ZKC_CONTAINER, create_done, g) == 0)
                g->creating = 1;
            return;
        }
        if (s == NULL)
            break;
    }
    if (step == g->create_step) {
        zkclient_tag(g->zkc, &g->own);
        if (zkclient_create(g->zkc, g->mdir, NULL, 0, ZKC_CONTAINER, create_done, g) == 0)
            g->creating = 1;
        return;
    }
    int n = encode(g, buf, sizeof buf);
    zkclient_tag(g->zkc, &g->own);
    if (n > 0 && zkclient_create(g->zkc, g->node, buf, (size_t)n, ZKC_EPHEMERAL, create_done, g) == 0) {
        g->creating = 1;
        g->published = g->leads;
    }
}

static int create_steps(const zke_group *g)
{
    int n = 1;
    for (const char *s = strchr(g->path + 1, '/'); s != NULL; s = strchr(s + 1, '/'))
        n++;
    return n + 1;       /* + members; the node is the last step */
}

static void create_done(void *arg, const struct zkc_result *r)
{
    zke_group *g = arg;
    if (r->rc == ZKC_CLOSING && g->freeing)
        return;
    g->creating = 0;
    int last = g->create_step == create_steps(g);
    if (r->rc == ZKC_OK || (r->rc == ZKC_NODEEXISTS && !last)) {
        if (last) {
            g->node_ok = 1;
            g->dirty = 1;
            if (g->state == ZKE_GROUP_JOINING)
                g->state = ZKE_GROUP_MEMBER;
        } else {
            g->create_step++;
            create_next(g);
        }
    } else if (last && r->rc == ZKC_NODEEXISTS) {
        /* ours from this session (a retry), or an earlier session's not
         * expired yet: the child watch tells when it goes */
        g->node_ok = 1;
        g->pub_dirty = 1;
        if (g->state == ZKE_GROUP_JOINING)
            g->state = ZKE_GROUP_MEMBER;
    } else if (r->rc == ZKC_NONODE) {
        g->create_step = 0;     /* a container went meanwhile: again */
        g->want_create = 1;
    } else {
        g->want_create = 1;     /* retried from the timer */
    }
    wake(g, g->want_create ? RETRY_MS / 1000.0 : 0);
}

static void publish_done(void *arg, const struct zkc_result *r)
{
    zke_group *g = arg;
    if (r->rc == ZKC_CLOSING && g->freeing)
        return;
    g->publishing = 0;
    if (r->rc == ZKC_NONODE) {
        g->node_ok = 0;
        g->want_create = 1;
    } else if (r->rc != ZKC_OK) {
        g->pub_dirty = 1;
    }
    wake(g, 0);
}

/* Republishes our counts when they changed, at most every
 * ZKE_GROUP_PUBLISH_MS. */
static void publish(zke_group *g)
{
    if (!g->node_ok || g->publishing || (!g->pub_dirty && g->published == g->leads))
        return;
    double since = ev_now(g->loop) - g->pub_at;
    if (since < ZKE_GROUP_PUBLISH_MS / 1000.0) {
        wake(g, ZKE_GROUP_PUBLISH_MS / 1000.0 - since);
        return;
    }
    char buf[512];
    int n = encode(g, buf, sizeof buf);
    zkclient_tag(g->zkc, &g->own);
    if (n > 0 && zkclient_set(g->zkc, g->node, buf, (size_t)n, -1, 0, publish_done, g) == 0) {
        g->publishing = 1;
        g->pub_dirty = 0;
        g->published = g->leads;
        g->pub_at = ev_now(g->loop);
    }
}

/* --- the reading -------------------------------------------------------- */

struct readarg {
    zke_group *g;
    int i;
};

static void reading_end(zke_group *g);

static int by_member_id(const void *x, const void *y)
{
    return strcmp(((const struct gmember *)x)->d.id, ((const struct gmember *)y)->d.id);
}

/* Whether the two readings have other ids (or the same ids leaving
 * otherwise, weights or maxima changed): a change of the member set. */
static int set_changed(const struct gmember *a, int na, const struct gmember *b, int nb)
{
    if (na != nb)
        return 1;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i].d.id, b[i].d.id) != 0 || a[i].d.weight != b[i].d.weight ||
            a[i].d.max != b[i].d.max)
            return 1;
    return 0;
}

/* Whether anything but "leads" changed: what a refusal depends on. */
static int data_changed(const struct gmember *a, int na, const struct gmember *b, int nb)
{
    if (set_changed(a, na, b, nb))
        return 1;
    for (int i = 0; i < na; i++)
        if (a[i].d.elections != b[i].d.elections || a[i].d.leaving != b[i].d.leaving)
            return 1;
    return 0;
}

static void get_done(void *arg, const struct zkc_result *r)
{
    struct readarg *ra = arg;
    zke_group *g = ra->g;
    int i = ra->i;
    free(ra);
    if (r->rc == ZKC_CLOSING && g->freeing)
        return;
    struct gmember *m = &g->rd.m[i];
    char name[BAL_ID_MAX + 1];
    snprintf(name, sizeof name, "%s", m->d.id);
    if (r->rc != ZKC_OK && r->rc != ZKC_NONODE)
        g->rd.again = 1;        /* not read (a connection loss): no watch set, read again */
    if (r->rc != ZKC_OK || bal_data_decode(r->data, r->datalen, name, &m->d) != 0)
        m->d.id[0] = '\0';      /* gone, or garbage: left out */
    if (--g->rd.pending == 0)
        reading_end(g);
}

static void list_done(void *arg, const struct zkc_result *r)
{
    zke_group *g = arg;
    if (r->rc == ZKC_CLOSING && g->freeing)
        return;
    if (r->rc != ZKC_OK) {
        g->rd.active = 0;
        if (r->rc == ZKC_NONODE)
            g->want_create = 1;     /* the folder went (a container): it comes back with ours */
        g->want_read = 1;
        wake(g, RETRY_MS / 1000.0);
        return;
    }
    int n = r->nchildren < MEMBERS_MAX ? r->nchildren : MEMBERS_MAX;
    free(g->rd.m);
    g->rd.m = calloc((size_t)n + 1, sizeof *g->rd.m);
    g->rd.n = 0;
    g->rd.pending = 1;          /* held until every read is asked */
    for (int i = 0; g->rd.m != NULL && i < n; i++) {
        const char *name = r->children[i];
        if (strlen(name) > BAL_ID_MAX)
            continue;
        char *p = zkc_child_path(g->mdir, name);
        struct readarg *ra = malloc(sizeof *ra);
        if (p == NULL || ra == NULL) {
            free(p);
            free(ra);
            continue;
        }
        int k = g->rd.n++;
        snprintf(g->rd.m[k].d.id, sizeof g->rd.m[k].d.id, "%s", name);
        *ra = (struct readarg){ g, k };
        zkclient_tag(g->zkc, &g->own);
        if (zkclient_get(g->zkc, p, 1, get_done, ra) == 0) {
            g->rd.pending++;
        } else {
            free(ra);
            g->rd.m[k].d.id[0] = '\0';
        }
        free(p);
    }
    if (--g->rd.pending == 0)
        reading_end(g);
}

static void reading_end(zke_group *g)
{
    int k = 0;
    if (g->rd.m == NULL) {      /* out of memory: again later */
        g->rd.active = 0;
        g->want_read = 1;
        wake(g, RETRY_MS / 1000.0);
        return;
    }
    for (int i = 0; i < g->rd.n; i++)
        if (g->rd.m[i].d.id[0] != '\0')
            g->rd.m[k++] = g->rd.m[i];
    qsort(g->rd.m, (size_t)k, sizeof *g->rd.m, by_member_id);
    if (set_changed(g->members, g->nmembers, g->rd.m, k)) {
        int gone = 0;   /* an id of the last reading missing from this one (both sorted) */
        for (int i = 0, j = 0; i < g->nmembers && !gone; i++) {
            while (j < k && strcmp(g->rd.m[j].d.id, g->members[i].d.id) < 0)
                j++;
            gone = j >= k || strcmp(g->rd.m[j].d.id, g->members[i].d.id) != 0;
        }
        bal_settle_change(&g->settle, now_ms(g), gone);
    }
    if (data_changed(g->members, g->nmembers, g->rd.m, k))
        g->ref_gen++;           /* every refusal may be void now */
    else
        for (int i = 0; i < k; i++)
            g->rd.m[i].refused = g->members[i].refused;
    int self = 0;
    for (int i = 0; i < k && !self; i++)
        self = strcmp(g->rd.m[i].d.id, g->id) == 0;
    if (!self && g->node_ok && !g->creating) {
        /* our node went (an earlier session's, which we found in place,
         * expired): made again */
        g->node_ok = 0;
        g->want_create = 1;
    }
    free(g->members);
    g->members = g->rd.m;
    g->nmembers = k;
    g->rd.m = NULL;
    g->rd.n = 0;
    g->rd.active = 0;
    g->read_at = ev_now(g->loop);
    g->dirty = 1;
    if (g->rd.again) {
        g->rd.again = 0;
        g->want_read = 1;
    }
    wake(g, 0);
}

static void read_members(zke_group *g)
{
    if (g->rd.active) {
        g->rd.again = 1;
        return;
    }
    zkclient_tag(g->zkc, &g->own);
    if (zkclient_list(g->zkc, g->mdir, 1, list_done, g) == 0) {
        g->rd.active = 1;
        g->want_read = 0;
    } else {
        wake(g, RETRY_MS / 1000.0);
    }
}

/* --- the plan ----------------------------------------------------------- */

/* The members of the reading as balance.c takes them (bal_member_of: each
 * capped at its published elections, those without any left out), ours
 * with our own counts (fresher than our node's); *self: our index, -1 if
 * not read; *e: the elections balanced, the most a member holds (the same
 * for every member when they hold the same ones); *mi: each one's index
 * in g->members (-1: ours added). */
static struct bal_member *as_members(zke_group *g, int *n, int *self, int *e, int **mi)
{
    struct bal_member *m = calloc((size_t)g->nmembers + 1, sizeof *m);
    *mi = calloc((size_t)g->nmembers + 1, sizeof **mi);
    *self = -1;
    *e = g->n;
    if (m == NULL || *mi == NULL) {
        free(m);
        free(*mi);
        return NULL;
    }
    int k = 0;
    for (int i = 0; i < g->nmembers; i++) {
        struct bal_data d = g->members[i].d;
        int me = strcmp(d.id, g->id) == 0;
        if (me) {
            d.leads = g->leads;
            d.weight = g->weight;
            d.max = g->max;
            d.elections = g->n;
            d.leaving = g->state == ZKE_GROUP_LEAVING;
        }
        if (bal_member_of(&d, &m[k]) != 0)
            continue;
        m[k].id = g->members[i].d.id;
        if (me)
            *self = k;
        if (d.elections > *e)
            *e = d.elections;
        (*mi)[k++] = i;
    }
    if (*self < 0 && g->state == ZKE_GROUP_LEAVING && g->leads > 0) {
        /* our node not read (yet, or any more): we still lead what we lead */
        m[k] = (struct bal_member){ .id = g->id, .weight = g->weight, .max = g->max,
                                    .leads = g->leads, .leaving = 1 };
        (*mi)[k] = -1;
        *self = k++;
    }
    *n = k;
    return m;
}

/* Empties the queue of moves not started. */
static void queue_clear(zke_group *g)
{
    for (int i = g->qhead; i < g->qlen; i++)
        g->queue[i].e->queued = 0;
    g->qlen = g->qhead = 0;
}

static int by_hash(const void *x, const void *y)
{
    const struct gent *a = *(struct gent *const *)x, *b = *(struct gent *const *)y;
    return a->hash < b->hash ? -1 : a->hash > b->hash;
}

/* Whether the receiver whose id hashes to h refused e (this data). */
static int refused_by(const zke_group *g, const struct gent *e, uint32_t h)
{
    if (e->ref_gen != g->ref_gen)
        return 0;
    if (e->nref >= REF_MAX)
        return 1;
    for (int i = 0; i < e->nref; i++)
        if (e->ref[i] == h)
            return 1;
    return 0;
}

/* Our rows as the queue of a round: for each receiver, our leaders in hash
 * order that it did not refuse. Returns the count queued. */
static int queue_rows(zke_group *g, const struct bal_member *m, const int *mi, int self,
                      const struct bal_move *mv, int rows)
{
    struct gent **cand = calloc((size_t)g->n + 1, sizeof(struct gent *));
    if (cand == NULL)
        return 0;
    int nc = 0;
    int64_t now = now_ms(g);
    for (int i = 0; i < g->n; i++) {
        struct gent *e = g->ents[i];
        if (e->leads && !e->moving && e->backoff_until <= now)
            cand[nc++] = e;
    }
    qsort(cand, (size_t)nc, sizeof(struct gent *), by_hash);
    queue_clear(g);
    free(g->queue);
    g->queue = calloc((size_t)nc + 1, sizeof *g->queue);
    g->qlen = g->qhead = 0;
    for (int r = 0; g->queue != NULL && r < rows; r++) {
        int to = mv[r].to;
        if (mv[r].from != self || (mi[to] >= 0 && g->members[mi[to]].refused >= RX_REFUSALS))
            continue;           /* not ours, or a receiver refusing every move */
        uint32_t h = fnv(m[to].id);
        for (int j = 0, k = 0; j < nc && k < mv[r].count; j++) {
            if (cand[j] == NULL || refused_by(g, cand[j], h))
                continue;
            struct qmove *q = &g->queue[g->qlen++];
            q->e = cand[j];
            q->e->queued = 1;
            cand[j] = NULL;
            snprintf(q->to, sizeof q->to, "%s", m[to].id);
            k++;
        }
    }
    free(cand);
    return g->qlen;
}

/* Computes the target; with `queue`, also our rows as the queue of a round.
 * Returns the count queued. */
static int plan(zke_group *g, int queue)
{
    int n, self, e, *mi;
    struct bal_member *m = as_members(g, &n, &self, &e, &mi);
    if (m == NULL)
        return 0;
    int *t = calloc((size_t)n + 1, sizeof *t);
    int queued = 0;
    if (t == NULL || bal_shares(m, n, e, t) < 0) {
        free(t);
        free(m);
        free(mi);
        return 0;
    }
    int target = self >= 0 ? t[self] : -1;
    if (target != g->target) {
        g->target = target;
        g->dirty = 1;
    }
    int rows = self >= 0 && queue ? bal_moves(m, n, t, NULL, 0) : 0;
    struct bal_move *mv = rows > 0 ? calloc((size_t)rows, sizeof *mv) : NULL;
    if (mv != NULL) {
        (void)bal_moves(m, n, t, mv, rows);
        int ours = 0;
        for (int r = 0; r < rows && !ours; r++)
            ours = mv[r].from == self;
        if (ours)               /* the O(E log E) of the candidates only then */
            queued = queue_rows(g, m, mi, self, mv, rows);
    }
    free(mv);
    free(t);
    free(m);
    free(mi);
    return queued;
}

static void handover_done(zke_agent *a, const struct zke_handover *r, void *ud);

/* Starts the queued hand-overs the window and the rate allow. */
static void pump_moves(zke_group *g)
{
    int64_t now = now_ms(g);
    while (g->qhead < g->qlen && g->moving < g->parallel) {
        if (bal_rate_avail(&g->rate, now, g->per_min) < 1) {
            wake(g, (double)bal_rate_wait_ms(&g->rate, now, g->per_min) / 1000.0);
            return;
        }
        struct qmove *q = &g->queue[g->qhead++];
        struct gent *e = q->e;
        e->queued = 0;
        if (e->a == NULL || !e->leads || e->moving)
            continue;
        if (zke_agent_resign_to(e->a, q->to, handover_done, e) != 0) {
            glog(g, ZKE_LOG_WARN, "cannot hand %s over to %s: %s", agent_path(e->a), q->to,
                 zke_agent_errstr(e->a));
            g->failed++;
            continue;
        }
        bal_rate_take(&g->rate, 1);
        e->moving = 1;
        g->moving++;
        g->dirty = 1;
        glog(g, ZKE_LOG_INFO, "handing %s over to %s", agent_path(e->a), q->to);
    }
}

static void round_over(zke_group *g)
{
    if (g->round && g->qhead >= g->qlen && g->moving == 0) {
        g->round = 0;
        g->round_end = ev_now(g->loop);
        /* the receivers' counts come within a publish interval: read then */
        g->want_read = 1;
        wake(g, 2.0 * ZKE_GROUP_PUBLISH_MS / 1000.0);
    }
}

/* The member of the last reading whose id is id, or NULL. */
static struct gmember *member_of(zke_group *g, const char *id)
{
    for (int i = 0; id != NULL && i < g->nmembers; i++)
        if (strcmp(g->members[i].d.id, id) == 0)
            return &g->members[i];
    return NULL;
}

/* A refusal the receiver will give again while nothing changes (it has no
 * candidate there, or cannot be switched to), or any during a leave (its
 * tries are bounded: a leave ends): not asked of it again until the
 * members' data changes. 1 when recorded. */
static int note_refusal(zke_group *g, struct gent *e, const struct zke_handover *r)
{
    int lasting = strcmp(r->reason, "no_candidate") == 0 || strcmp(r->reason, "not_next") == 0;
    if (r->resigned || r->to == NULL || !(lasting || g->state == ZKE_GROUP_LEAVING))
        return 0;
    if (e->ref_gen != g->ref_gen) {
        e->ref_gen = g->ref_gen;
        e->nref = 0;
    }
    if (e->nref < REF_MAX)
        e->ref[e->nref++] = fnv(r->to);
    struct gmember *gm = member_of(g, r->to);
    if (gm != NULL && gm->refused < RX_REFUSALS)
        gm->refused++;
    return 1;
}

static void handover_done(zke_agent *a, const struct zke_handover *r, void *ud)
{
    struct gent *e = ud;
    zke_group *g = e->g;
    (void)a;
    e->moving = 0;
    if (g == NULL) {
        free(e);                /* orphaned: the group or the agent went (counted then) */
        return;
    }
    g->moving--;
    g->dirty = 1;
    if (r->reason == NULL) {
        g->moved_out++;
        e->fails = 0;
        struct gmember *gm = member_of(g, r->to);
        if (gm != NULL)
            gm->refused = 0;
    } else {
        g->failed++;
        if (!note_refusal(g, e, r)) {
            if (e->fails < 16)
                e->fails++;
            int64_t back = (int64_t)g->settle_ms << (e->fails - 1);
            e->backoff_until = now_ms(g) + (back > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : back);
        }
        glog(g, r->resigned ? ZKE_LOG_WARN : ZKE_LOG_INFO, "hand-over of %s to %s: %s (%s)",
             agent_path(e->a), r->to != NULL ? r->to : "?", r->reason, r->msg ? r->msg : "");
    }
    round_over(g);
    wake(g, 0);
}

/* Calls the host's done (a leave's end) once. Returns 1 when the group
 * was freed inside it. */
static int finish_leave(zke_group *g, int left)
{
    zke_group_done_fn *fn = g->done;
    g->done = NULL;
    g->state = ZKE_GROUP_LEFT;
    g->dirty = 1;
    glog(g, ZKE_LOG_INFO, "left (%s)", left ? "every election handed over" : "some not handed over");
    if (fn == NULL)
        return 0;
    g->in_cb++;
    fn(g, left, g->done_ud);
    g->in_cb--;
    if (g->free_asked) {
        zke_group_free(g);
        return 1;
    }
    return 0;
}

/* May a new round be planned now? When 0, *wait is when to look again
 * (seconds, -1: at the next event). */
static int may_plan(zke_group *g, double *wait)
{
    *wait = -1;
    if (g->round || !g->node_ok || g->rd.active || g->want_read)
        return 0;
    double now = ev_now(g->loop);
    double fresh = g->round_end + 2.0 * ZKE_GROUP_PUBLISH_MS / 1000.0;
    if (g->read_at < fresh) {
        g->want_read = 1;
        *wait = fresh - now;
        return 0;
    }
    if (g->state == ZKE_GROUP_LEAVING)
        return 1;       /* deliberate: no settle delay */
    int64_t w = bal_settle_wait_ms(&g->settle, now_ms(g));
    if (w > 0) {
        *wait = (double)w / 1000.0;
        return 0;
    }
    return 1;
}

/* Seconds until the first of our leaders that is backed off may move
 * again, -1 when none is. */
static double backed_off(const zke_group *g)
{
    int64_t now = now_ms(g), first = INT64_MAX;
    for (int i = 0; i < g->n; i++) {
        const struct gent *e = g->ents[i];
        if (e->leads && e->backoff_until > now && e->backoff_until < first)
            first = e->backoff_until;
    }
    return first == INT64_MAX ? -1 : (double)(first - now) / 1000.0;
}

/* Returns 1 when the group was freed (inside a host callback). */
static int work(zke_group *g)
{
    if (g->state == ZKE_GROUP_NEW || g->state == ZKE_GROUP_LEFT)
        return 0;
    if (g->connected && !g->node_ok && !g->creating && (g->want_create || g->create_step == 0)) {
        g->want_create = 0;
        create_next(g);
    }
    if (g->connected && g->node_ok)
        publish(g);
    double wait = -1;
    if (g->connected && g->want_read && !g->rd.active) {
        double fresh = g->round_end + 2.0 * ZKE_GROUP_PUBLISH_MS / 1000.0 - ev_now(g->loop);
        if (fresh > 0)
            wake(g, fresh);
        else
            read_members(g);
    }
    if (g->connected && may_plan(g, &wait)) {
        int q = plan(g, 1);
        if (q > 0) {
            g->round = 1;
            glog(g, ZKE_LOG_INFO, "round: %d of %d leaders to hand over (target %d)", q, g->leads,
                 g->target);
        } else {
            double back = backed_off(g);
            if (g->state == ZKE_GROUP_LEAVING && g->moving == 0 && (g->leads == 0 || back < 0))
                return finish_leave(g, g->leads == 0);
            if (back >= 0)
                wake(g, back);  /* a plan again once they may move */
        }
    } else {
        (void)plan(g, 0);   /* the target only */
        if (wait >= 0)
            wake(g, wait);
    }
    if (g->round)
        pump_moves(g);
    round_over(g);
    if (g->dirty && g->notify != NULL) {
        g->dirty = 0;
        g->in_cb++;
        g->notify(g, g->notify_ud);
        g->in_cb--;
        if (g->free_asked) {
            zke_group_free(g);
            return 1;
        }
    }
    return 0;
}

static void tick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    (void)work(w->data);
}

/* --- the tap on the agents -------------------------------------------- */

static struct gent *find(const zke_group *g, const zke_agent *a)
{
    for (int i = 0; i < g->n; i++)
        if (g->ents[i]->a == a)
            return g->ents[i];
    return NULL;
}

/* The tap's ud is the agent's entry: O(1) per term. */
static void tap_role(void *ud, zke_agent *a, int leads)
{
    struct gent *e = ud;
    zke_group *g = e->g;
    (void)a;
    if (e->leads == leads)
        return;
    e->leads = leads;
    g->leads += leads ? 1 : -1;
    g->dirty = 1;
    wake(g, 0);
}

static void drop(zke_group *g, struct gent *e)
{
    g->ents[e->at] = g->ents[--g->n];
    g->ents[e->at]->at = e->at;
    if (e->leads)
        g->leads--;
    for (int i = g->qhead; e->queued && i < g->qlen; i++)
        if (g->queue[i].e == e) {
            memmove(&g->queue[i], &g->queue[i + 1], (size_t)(g->qlen - i - 1) * sizeof *g->queue);
            g->qlen--;
            break;
        }
    if (e->moving) {
        /* its done frees it (and only that: the group may be gone then) */
        g->moving--;
        e->g = NULL;
        e->a = NULL;
        round_over(g);
    } else {
        free(e);
    }
    g->dirty = 1;
    g->pub_dirty = 1;           /* "elections" changed */
    wake(g, 0);
}

static void tap_gone(void *ud, zke_agent *a)
{
    struct gent *e = ud;
    (void)a;
    drop(e->g, e);
}

static const struct agent_tap_ops TAP = { tap_role, tap_gone };

/* --- the public API ----------------------------------------------------- */

static int id_ok(const char *id)
{
    struct bal_data d = { .weight = 1 };
    char buf[512];
    if (strlen(id) > BAL_ID_MAX)
        return 0;
    snprintf(d.id, sizeof d.id, "%s", id);
    return bal_data_encode(&d, buf, sizeof buf) > 0;
}

zke_group *zke_group_new(zke_conn *c, const struct zke_group_settings *s, zke_log_fn *log,
                         void *ud, char *err, size_t errlen)
{
    char why[256];
    if (c == NULL || s == NULL || s->path == NULL || s->id == NULL) {
        snprintf(err, errlen, "group: conn, settings, path and id are required");
        return NULL;
    }
    if (zke_check_path(s->path, why, sizeof why) != 0 || strcmp(s->path, "/") == 0 ||
        strlen(s->path) > 900) {
        snprintf(err, errlen, "group path: %s", strcmp(s->path, "/") == 0 ? "not /" : why);
        return NULL;
    }
    if (!id_ok(s->id)) {
        snprintf(err, errlen, "group id '%.64s': 1..%d printable ASCII bytes, no '/', '\"', '\\'",
                 s->id, BAL_ID_MAX);
        return NULL;
    }
    if (s->weight < 0 || s->weight > ZKE_GROUP_WEIGHT_MAX || s->max < 0 || s->settle_ms < 0 ||
        s->moves_per_min < 0 || s->parallel < 0) {
        snprintf(err, errlen, "group: weight 0..%d, max, settle_ms, moves_per_min and parallel >= 0",
                 ZKE_GROUP_WEIGHT_MAX);
        return NULL;
    }
    zke_group *g = calloc(1, sizeof *g);
    if (g == NULL || (g->path = xstrdup(s->path)) == NULL || (g->id = xstrdup(s->id)) == NULL ||
        (g->mdir = xprintf("%s/members", s->path)) == NULL ||
        (g->node = xprintf("%s/members/%s", s->path, s->id)) == NULL) {
        if (g != NULL) {
            free(g->path);
            free(g->id);
            free(g->mdir);
        }
        free(g);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    g->c = c;
    g->loop = conn_loop(c);
    g->zkc = conn_session(c);
    g->weight = s->weight > 0 ? s->weight : 1;
    g->max = s->max;
    g->settle_ms = s->settle_ms > 0 ? s->settle_ms : ZKE_DEFAULT_GROUP_SETTLE_MS;
    g->per_min = s->moves_per_min > 0 ? s->moves_per_min : ZKE_DEFAULT_GROUP_MOVES_PER_MIN;
    g->parallel = s->parallel > 0 ? s->parallel : ZKE_DEFAULT_GROUP_PARALLEL;
    g->log = log;
    g->lud = ud;
    g->target = -1;
    g->round_end = -1e9;
    g->read_at = -1e9;
    bal_settle_init(&g->settle, g->settle_ms);
    ev_timer_init(&g->tick, tick_cb, 0., 0.);
    g->tick.data = g;
    return g;
}

int zke_group_add(zke_group *g, zke_agent *a)
{
    if (g == NULL || a == NULL)
        return -1;
    if (g->state == ZKE_GROUP_LEFT || g->state == ZKE_GROUP_LEAVING) {
        seterr(g, "the group is leaving");
        return -1;
    }
    if (agent_conn(a) != g->c) {
        seterr(g, "agent %s is not on the group's conn", agent_path(a));
        return -1;
    }
    if (strcmp(agent_id(a), g->id) != 0) {
        seterr(g, "agent %s has id '%.64s', the group's is '%.64s'", agent_path(a), agent_id(a), g->id);
        return -1;
    }
    if (g->n == g->cap) {
        int cap = g->cap > 0 ? g->cap * 2 : 64;
        struct gent **v = realloc(g->ents, (size_t)cap * sizeof(struct gent *));
        if (v == NULL) {
            seterr(g, "out of memory");
            return -1;
        }
        g->ents = v;
        g->cap = cap;
    }
    struct gent *e = calloc(1, sizeof *e);
    if (e == NULL || agent_set_tap(a, &TAP, e) != 0) {
        seterr(g, e == NULL ? "out of memory" : "agent %s is in a group already", agent_path(a));
        free(e);
        return -1;
    }
    e->a = a;
    e->g = g;
    e->hash = fnv(agent_path(a));
    e->leads = agent_term_epoch(a) > 0;
    g->leads += e->leads;
    e->at = g->n;
    g->ents[g->n++] = e;
    g->pub_dirty = 1;
    g->dirty = 1;
    if (g->state != ZKE_GROUP_NEW)
        wake(g, 0);
    return 0;
}

int zke_group_remove(zke_group *g, zke_agent *a)
{
    struct gent *e = g != NULL ? find(g, a) : NULL;
    if (e == NULL) {
        if (g != NULL)
            seterr(g, "not in the group");
        return -1;
    }
    (void)agent_set_tap(a, NULL, NULL);
    drop(g, e);
    return 0;
}

int zke_group_start(zke_group *g)
{
    if (g == NULL || g->state != ZKE_GROUP_NEW) {
        if (g != NULL)
            seterr(g, "started already");
        return -1;
    }
    g->state = ZKE_GROUP_JOINING;
    g->lis = (struct conn_listener){ .state = on_state, .lost = on_lost, .watch = on_watch,
                                     .ud = g, .prefix = g->mdir };
    conn_listen(g->c, &g->lis);
    g->dirty = 1;
    wake(g, 0);
    return 0;
}

int zke_group_leave(zke_group *g, zke_group_done_fn *done, void *ud)
{
    if (g == NULL || g->state == ZKE_GROUP_NEW || g->state >= ZKE_GROUP_LEAVING) {
        if (g != NULL)
            seterr(g, g->state == ZKE_GROUP_NEW ? "not started" : "leaving already");
        return -1;
    }
    g->state = ZKE_GROUP_LEAVING;
    g->done = done;
    g->done_ud = ud;
    g->pub_dirty = 1;
    g->pub_at = -1e9;           /* "leaving" goes out now */
    /* a round under way ends: the leave plans its own */
    queue_clear(g);
    g->round = g->moving > 0;
    g->dirty = 1;
    wake(g, 0);
    return 0;
}

int zke_group_status(const zke_group *g, struct zke_group_status *out)
{
    if (g == NULL || out == NULL)
        return -1;
    *out = (struct zke_group_status){
        .state = g->state, .members = g->nmembers, .elections = g->n, .leads = g->leads,
        .target = g->target, .moving = g->moving, .moved_out = g->moved_out, .failed = g->failed,
    };
    return 0;
}

const char *zke_group_errstr(const zke_group *g)
{
    return g != NULL ? g->err : "no group";
}

int zke_group_on_change(zke_group *g, zke_group_change_fn *fn, void *ud)
{
    if (g == NULL)
        return -1;
    g->notify = fn;
    g->notify_ud = ud;
    return 0;
}

static void ignore_done(void *arg, const struct zkc_result *r)
{
    (void)arg;
    (void)r;
}

void zke_group_free(zke_group *g)
{
    if (g == NULL)
        return;
    if (g->in_cb > 0) {
        g->free_asked = 1;      /* when the host's callback returns */
        return;
    }
    if (g->done != NULL) {
        zke_group_done_fn *fn = g->done;
        g->done = NULL;
        g->in_cb++;
        fn(g, 0, g->done_ud);
        g->in_cb--;
    }
    ev_timer_stop(g->loop, &g->tick);
    if (g->state != ZKE_GROUP_NEW)
        conn_unlisten(g->c, &g->lis);
    g->freeing = 1;
    zkclient_cancel(g->zkc, &g->own);
    /* untagged (not cancelled), whenever the session may live on: also
     * while the connection is down (sent on reconnecting) and while our
     * create is in flight (a session's requests run in order: the delete
     * after it); a node that is not there answers NONODE, ignored */
    enum zkc_life life = zkclient_life(g->zkc);
    if (g->state != ZKE_GROUP_NEW && (life == ZKC_LIFE_CONNECTED || life == ZKC_LIFE_SUSPENDED))
        (void)zkclient_delete(g->zkc, g->node, ignore_done, NULL);
    for (int i = 0; i < g->n; i++) {
        struct gent *e = g->ents[i];
        if (e->a != NULL)
            (void)agent_set_tap(e->a, NULL, NULL);
        if (e->moving)
            e->g = NULL;        /* its done frees it */
        else
            free(e);
    }
    free(g->ents);
    free(g->queue);
    free(g->members);
    free(g->rd.m);
    free(g->path);
    free(g->mdir);
    free(g->node);
    free(g->id);
    free(g);
}
