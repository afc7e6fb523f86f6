/*
 * election.c - the leader-election recipe as a pure state machine.
 *
 * Phases: IDLE -> CREATE -> LIST -> (CONFIRM -> leader | WATCH -> follower).
 * A follower that steps aside (a switchover) goes CREATE -> DROP_OLD -> LIST.
 * One "main" request is outstanding at a time (want_main); the follower's
 * predecessor watch (want_watch), the leader-data read (want_data) and the
 * watch every candidate keeps on its own node (want_self) have their own
 * slots. Tokens are
 * unique for the life of the machine, so a result that does not match its
 * slot is stale and dropped: every session change and every new step takes
 * a new token, so a token names its (session, generation).
 */
#include "election.h"
#include "nodedata.h"
#include "rng.h"
#include "xstr.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 5000
#define REJOIN_MS      200      /* after a resign: let the others take over */
/* "Near the wrap": the folder's next suffix, or one of its children's, is
 * within 2^20 of 2^31 - 1. A folder gets there after some 2.1e9 creates; the
 * 2^20 left (12 days at one join a second) are the operator's time to rotate
 * the path (docs/design.md "The sequence wrap"). */
#define WRAP_MARGIN    (INT32_C(1) << 20)

enum phase {
    P_IDLE, P_ENSURE, P_CREATE, P_ADOPT_LIST, P_ADOPT_STAT, P_LIST, P_CONFIRM,
    P_WATCH, P_SETTLED, P_DELETE, P_DROP_OLD, P_STOPPED
};

/* What we know of our node in this session, in order: each needs the one
 * before; a disconnect (or a new node) goes back to NODE_UNCHECKED. */
enum node_trust {
    NODE_UNCHECKED,     /* none, or not seen as ours since the last disconnect */
    NODE_VERIFIED,      /* owner == session, no disconnect since */
    NODE_WATCHED        /* ...and our exists-watch on it is in place */
};

struct election {
    char *path, *id, *data;
    int priority;               /* published in our node (el_set_compat sets it) */
    char *enc;                  /* node data at create: nodedata_encode(id, data, 0), or the
                                 * data bytes verbatim in a compat mode */
    size_t enclen;
    struct el_ops ops;
    void *ud;
    enum zke_log_level log_min; /* lines below it are not formatted */
    uint64_t rng;
    uint32_t next_token;
    uint32_t want_main, want_watch, want_data, want_self, want_pub;

    int connected;
    uint64_t session;
    enum phase phase;
    enum zke_role role;
    int stopping, backoff_ms;
    int strict, suspended;
    int withdrawn;              /* out of the election until el_rejoin (health) */
    int rejoin_ms;              /* after the next resign: the owner's backoff (0: REJOIN_MS) */
    int led;                    /* our current node has led a term: it never leads again */
    int published;              /* the leader data of this term was written */
    int32_t pub_version;        /* our node's data version after that write */
    int pub_again;              /* the leader data changed while a publish was on its way */
    char *aside;                /* leader: the node our data asks the ones ahead to step aside for */
    char *requeue_old;          /* stepping aside: the node we leave, deleted once the new one
                                 * exists (P_DROP_OLD); no term meanwhile: the phase is not
                                 * P_WATCH/P_SETTLED until a listing of the new node */
    char *aside_leader, *aside_target;  /* the last (leader node, target) we stepped aside for */
    int near_wrap, wrap_warned; /* a listing showed the wrap near (sticky), said once */
    enum zke_compat compat;     /* node naming and data (el_set_compat) */
    int started;                /* el_on_session was called: compat is fixed */

    char prefix[64];            /* "n_<16 hex>-", "_c_zke<uuid rest>-latch-", "zke<29 hex>__lock__" */
    char *node;                 /* our node name, or NULL */
    int32_t seq;
    int64_t czxid;
    enum node_trust trust;
    char *stale_node;           /* our node of a session we gave up: delete it */
    int64_t epoch;              /* current term (leader only) */

    /* view from the last listing */
    char *pred, *settled_pred, *leader_node, *adopt_node;
    char *claim_checked;        /* predecessor whose leader data a listing was asked to check */
    struct nodedata leader_nd, pred_nd;     /* decoded node data; id NULL if unknown */
    int position, candidates, smaller;
    int settled_position;       /* position when last settled (-1: none since the view was cleared) */
    int watch_done, data_done;
};

struct child { const char *name; int32_t seq; };

static void trust_at_least(election *e, enum node_trust t)
{
    if (e->trust < t)
        e->trust = t;
}

static void set_str(char **dst, const char *src)
{
    if (*dst == src)
        return;
    char *n = xstrdup(src);
    free(*dst);
    *dst = n;
}

static int same(const char *a, const char *b)
{
    return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static void elog(election *e, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    if (e->ops.log == NULL || lvl < e->log_min)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    e->ops.log(e->ud, lvl, buf);
}

static uint64_t rnd(election *e)
{
    return rng_next(&e->rng);
}

/* A fresh create prefix carrying a new guid, in the naming of e->compat.
 * Curator: its protected-mode shape "_c_<36-character id>-latch-" with an id
 * shaped like a UUID; kazoo: "<32 characters>__lock__" like uuid4().hex. Both
 * start the guid with "zke", which no hex UUID does (el_is_our_name). */
static void new_guid(election *e)
{
    uint64_t a = rnd(e), b = rnd(e);
    switch (e->compat) {
    case ZKE_COMPAT_CURATOR:
        snprintf(e->prefix, sizeof e->prefix, "_c_zke%05" PRIx64 "-%04" PRIx64 "-%04" PRIx64
                 "-%04" PRIx64 "-%012" PRIx64 "-latch-", a >> 44, (a >> 28) & 0xffff,
                 (a >> 12) & 0xffff, b >> 48, b & UINT64_C(0xffffffffffff));
        break;
    case ZKE_COMPAT_KAZOO:
        snprintf(e->prefix, sizeof e->prefix, "zke%013" PRIx64 "%016" PRIx64 "__lock__",
                 a >> 12, b);
        break;
    default:
        snprintf(e->prefix, sizeof e->prefix, "n_%016" PRIx64 "-", a);
        break;
    }
}

static uint32_t request_data(election *e, enum el_req_type t, const char *node, int delay_ms,
                             const char *data, size_t len, int version)
{
    struct el_req r;
    memset(&r, 0, sizeof r);
    r.type = t;
    r.token = ++e->next_token;
    if (r.token == 0)
        r.token = ++e->next_token;
    r.node = node;
    r.delay_ms = delay_ms;
    r.data = data;
    r.datalen = len;
    r.version = version;
    e->ops.request(e->ud, &r);
    return r.token;
}

static uint32_t request(election *e, enum el_req_type t, const char *node, int delay_ms)
{
    if (t == EL_REQ_CREATE)
        return request_data(e, t, node, 0, e->enc, e->enclen, -1);
    return request_data(e, t, node, delay_ms, NULL, 0, -1);
}

/* Copies a node's bytes into a decoded view (cleared when r has no data). */
static void set_nd(struct nodedata *nd, const char *data, int len)
{
    nodedata_clear(nd);
    if (data != NULL && len >= 0)
        (void)nodedata_decode(data, len, nd);
}

static void emit(election *e, enum zke_event_type t, const char *reason)
{
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = t;
    ev.id = e->id;
    ev.path = e->path;
    ev.node = e->node;
    ev.seq = e->node ? e->seq : -1;
    ev.session = e->session;
    ev.reason = reason;
    ev.epoch = e->epoch;
    ev.candidates = e->candidates;
    ev.position = -1;
    if (t == ZKE_EV_LEADER) {
        /* every node ahead of us is gone; the one directly ahead of us
         * (our last predecessor) is, in a normal hand-over, the last leader */
        ev.previous = e->pred_nd.id ? e->pred_nd.id : e->leader_nd.id;
        ev.position = 0;
    } else if (t == ZKE_EV_FOLLOWER || t == ZKE_EV_PREDECESSOR_CHANGE) {
        ev.leader = e->leader_nd.id;
        ev.leader_data = e->leader_nd.data;
        ev.leader_epoch = e->leader_nd.epoch;
        ev.leader_node = e->leader_node;
        ev.predecessor = e->pred;
        ev.position = e->position;
        ev.old_pred = e->settled_pred;
        ev.new_pred = e->pred;
    }
    e->ops.event(e->ud, &ev);
}

static void backoff(election *e)
{
    if (e->backoff_ms < BACKOFF_MIN_MS)
        e->backoff_ms = BACKOFF_MIN_MS;
    else if (e->backoff_ms < BACKOFF_MAX_MS)
        e->backoff_ms *= 2;
    if (e->backoff_ms > BACKOFF_MAX_MS)
        e->backoff_ms = BACKOFF_MAX_MS;
    int delay = e->backoff_ms / 2 + (int)(rnd(e) % (uint64_t)(e->backoff_ms / 2 + 1));
    e->want_main = request(e, EL_REQ_BACKOFF, NULL, delay);
}

static void clear_view(election *e)
{
    set_str(&e->pred, NULL);
    nodedata_clear(&e->pred_nd);
    set_str(&e->settled_pred, NULL);
    set_str(&e->leader_node, NULL);
    set_str(&e->claim_checked, NULL);
    e->want_watch = e->want_data = e->want_self = e->want_pub = 0;
    e->position = -1;
    e->settled_position = -1;
    e->smaller = -1;
}

/* Our node is gone (or no longer ours): end the term if we led. */
static void lose_node(election *e, const char *reason)
{
    if (e->role == ZKE_ROLE_LEADER)
        emit(e, ZKE_EV_STEPDOWN, reason);
    else if (e->node != NULL)
        elog(e, ZKE_LOG_WARN, "our node %s is gone (%s)", e->node, reason);
    e->role = ZKE_ROLE_IDLE;
    e->epoch = 0;
    e->suspended = e->led = 0;
    e->pub_again = 0;
    set_str(&e->aside, NULL);
    set_str(&e->node, NULL);
    e->trust = NODE_UNCHECKED;
    e->seq = -1;
    e->czxid = 0;
    clear_view(e);
    new_guid(e);
}

/* Every candidate watches its own node: ZooKeeper notifies in zxid order, so
 * once this watch is in place a deletion of our node is seen before any
 * later change, which is what makes the fast path below safe. */
static void ensure_self_watch(election *e)
{
    if (e->node != NULL && e->trust != NODE_WATCHED && e->want_self == 0)
        e->want_self = request(e, EL_REQ_WATCH_SELF, e->node, 0);
}

static void finish_stop(election *e)
{
    e->phase = P_STOPPED;
    e->want_main = e->want_watch = e->want_data = e->want_self = 0;
    request(e, EL_REQ_DONE, NULL, 0);
}

static void start_create(election *e)
{
    if (e->withdrawn) {
        e->phase = P_IDLE;      /* no node until el_rejoin */
        e->want_main = 0;       /* and no answer to wait for */
        return;
    }
    e->phase = P_CREATE;
    e->want_main = request(e, EL_REQ_CREATE, e->prefix, 0);
}

static void start_ensure(election *e)
{
    e->phase = P_ENSURE;
    e->want_main = request(e, EL_REQ_ENSURE, NULL, 0);
}

static void start_list(election *e)
{
    e->phase = P_LIST;
    e->want_main = request(e, EL_REQ_LIST, NULL, 0);
}

static void start_adopt(election *e)
{
    e->phase = P_ADOPT_LIST;
    if (e->connected)
        e->want_main = request(e, EL_REQ_LIST, NULL, 0);
}

static void start_delete(election *e)
{
    e->phase = P_DELETE;
    e->want_main = e->want_watch = e->want_data = e->want_self = e->want_pub = 0;
    if (e->connected)
        e->want_main = request(e, EL_REQ_DELETE, e->node, 0);
}

/* Ends a term without losing the node: tell the owner, then release the node
 * (now, or once connected again) and rejoin with a new one. */
static void end_term(election *e, const char *reason)
{
    set_str(&e->aside, NULL);
    e->pub_again = 0;
    emit(e, ZKE_EV_STEPDOWN, reason);
    e->role = ZKE_ROLE_IDLE;
    e->epoch = 0;
    e->suspended = 0;
    set_str(&e->leader_node, NULL);     /* our node, going: no leader known */
    start_delete(e);
}

/* Writes the leader data with the term's epoch into our node; version 0 on
 * the first try (we never wrote this node before: a node leads once), any
 * version when retried after a reconnect. */
static void publish(election *e, int version)
{
    if (e->compat != ZKE_COMPAT_NONE) {
        /* Curator and kazoo read a participant's id from its node's data:
         * the node keeps the bytes it was created with, and the epoch (its
         * czxid) is not written */
        e->published = 1;
        return;
    }
    char *enc = nodedata_encode_aside(e->id, e->data, e->epoch, e->priority, e->aside);
    if (enc == NULL) {
        elog(e, ZKE_LOG_WARN, "out of memory: leader data of epoch %" PRId64 " not published",
             e->epoch);
        return;
    }
    e->want_pub = request_data(e, EL_REQ_PUBLISH, e->node, 0, enc, strlen(enc), version);
    free(enc);
}

/* Epoch: the czxid of our node. It strictly increases across all terms of
 * the election because (1) the leader is the smallest live node, so every
 * later leader's node was created later (sequence order is creation order,
 * and a recreated folder only has later nodes), and (2) a node leads at most
 * one term: every step-down releases the node (end_term) and `led` refuses a
 * second term to a node that already had one. The epoch thus costs no round
 * trip on the failover path; the publish write that follows is not awaited. */
static void become_leader(election *e, const char *reason)
{
    if (e->role != ZKE_ROLE_LEADER && e->led) {
        elog(e, ZKE_LOG_WARN, "node %s already led a term: releasing it and rejoining", e->node);
        start_delete(e);
        return;
    }
    e->phase = P_SETTLED;
    e->backoff_ms = 0;
    e->position = 0;
    if (e->role != ZKE_ROLE_LEADER) {
        e->role = ZKE_ROLE_LEADER;
        e->led = 1;
        e->published = 0;
        e->pub_again = 0;
        set_str(&e->aside, NULL);
        e->suspended = 0;
        e->epoch = e->czxid;
        emit(e, ZKE_EV_LEADER, reason);
        nodedata_clear(&e->leader_nd);
        e->leader_nd.id = xstrdup(e->id);
        e->leader_nd.data = xstrdup(e->data);
        e->leader_nd.epoch = e->epoch;
        e->leader_nd.ours = 1;
        publish(e, 0);
    } else if (e->suspended) {
        /* same session, node confirmed ours again */
        e->suspended = 0;
        emit(e, ZKE_EV_RESUME, "reconnected");
        if ((!e->published || e->pub_again) && e->want_pub == 0) {
            e->pub_again = 0;
            publish(e, -1);
        }
    }
    /* only now: the LEADER event names our last predecessor as `previous` */
    set_str(&e->pred, NULL);
    nodedata_clear(&e->pred_nd);
    set_str(&e->leader_node, e->node);
    set_str(&e->settled_pred, NULL);
    e->settled_position = -1;
    ensure_self_watch(e);
}

static void maybe_settle(election *e)
{
    if (e->phase != P_WATCH || !e->watch_done || !e->data_done)
        return;
    e->phase = P_SETTLED;
    e->backoff_ms = 0;
    if (e->role != ZKE_ROLE_FOLLOWER) {
        e->role = ZKE_ROLE_FOLLOWER;
        emit(e, ZKE_EV_FOLLOWER, "joined");
    } else if (!same(e->settled_pred, e->pred)) {
        emit(e, ZKE_EV_PREDECESSOR_CHANGE, "predecessor_gone");
    }
    set_str(&e->settled_pred, e->pred);
    /* the watch on the predecessor is in place: when next in line, the
     * fast path's condition from here on */
    if (e->settled_position != e->position)
        elog(e, ZKE_LOG_DEBUG, "position %d of %d: predecessor %s", e->position, e->candidates,
             e->pred != NULL ? e->pred : "?");
    e->settled_position = e->position;
}

int el_parse_seq(const char *name, int32_t *seq)
{
    size_t n = name ? strlen(name) : 0;
    if (n < 10)
        return -1;
    const char *t = name + n - 10;
    int neg = t[0] == '-';
    int64_t v = 0;
    for (int i = neg; i < 10; i++) {
        if (t[i] < '0' || t[i] > '9')
            return -1;
        v = v * 10 + (t[i] - '0');
    }
    if (neg) {
        if (v == 0)
            return -1;      /* "-000000000": not how "%010d" writes any number */
        v = -v;
    } else if (v >= 1000000000 && v <= INT32_MAX && n >= 11 && name[n - 11] == '-' &&
               (n == 11 || name[n - 12] == '-' || name[n - 12] == '_')) {
        /* "%010d" of -1000000000 .. -2147483647 is 11 characters: its '-'
         * comes right after the prefix, which ends in '-' (ours, Curator's)
         * or '_' (kazoo's, the recipe's "n_"); a positive suffix's prefix
         * ends there instead ("<guid>-", "-latch-", "__lock__", "n_") */
        v = -v;
    } else if (v > INT32_MAX) {
        /* only "%010d" of INT32_MIN is longer than 10: "-2147483648" */
        if (v != INT64_C(2147483648) || n < 11 || name[n - 11] != '-')
            return -1;
        v = -v;
    }
    *seq = (int32_t)v;
    return 0;
}

static int child_cmp(const void *a, const void *b)
{
    const struct child *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The folder's next sequence suffix, from its stat in a listing: ZooKeeper
 * keeps one counter per node, of creates under it, makes a sequential
 * child's suffix from it ("%010d") and bumps it by one; a stat reports
 * cversion = 2 x counter - numChildren (DataNode.copyStat: "every create has
 * a delete, except for the children still present"), in 32 bits. The
 * counter is below 2^31, so the sum gives it back exactly, whatever the
 * wrap of that product did to cversion (negative from 2^30 creates on). */
static int32_t next_suffix(int32_t cversion, int nchildren)
{
    uint32_t twice = (uint32_t)cversion + (uint32_t)nchildren;
    return (int32_t)(twice / 2);
}

/* Sets near_wrap from a sorted listing (m sequence children of n) and says
 * so once. ZooKeeper 3.8 never goes past 2^31 - 1: the create that takes
 * that suffix computes INT32_MIN as the new counter, which the tree refuses
 * (it only ever raises a counter), so every later create gets 2147483647
 * again, and one prepared while another is still uncommitted gets a
 * negative one. So near the wrap is: a big suffix, a negative one, a
 * suffix given twice, or a big counter. */
static void check_wrap(election *e, const struct child *c, int m, int n, int32_t cversion)
{
    int32_t next = next_suffix(cversion, n);
    char why[96] = "";
    if (m > 0 && c[0].seq < 0)
        snprintf(why, sizeof why, "a negative suffix %" PRId32, c[0].seq);
    for (int i = 1; i < m && why[0] == '\0'; i++)
        if (c[i].seq == c[i - 1].seq)
            snprintf(why, sizeof why, "the suffix %" PRId32 " given twice", c[i].seq);
    if (why[0] == '\0' && m > 0 && c[m - 1].seq >= INT32_MAX - WRAP_MARGIN)
        snprintf(why, sizeof why, "the suffix %" PRId32, c[m - 1].seq);
    if (why[0] == '\0' && next >= INT32_MAX - WRAP_MARGIN)
        snprintf(why, sizeof why, "the next suffix %" PRId32, next);
    if (why[0] == '\0')
        return;
    e->near_wrap = 1;
    if (!e->wrap_warned) {
        e->wrap_warned = 1;
        elog(e, ZKE_LOG_WARN, "election %s is at the 2^31 sequence wrap (%s; cversion %" PRId32
             "): suffixes no longer follow creation order; no fast path, and no term starts "
             "while the smallest suffix is negative or shared; rotate the election path "
             "(docs/operations.md)", e->path, why, cversion);
    }
}

/* 1 if a node sorted before ours (c[0..me-1]) came before it in creation
 * order for sure: a suffix >= 0 below ours. After the wrap, a negative
 * suffix or one equal to ours may belong to a later node. */
static int strictly_ahead(const struct child *c, int me)
{
    for (int i = 0; i < me; i++)
        if (c[i].seq >= 0 && c[i].seq < c[me].seq)
            return 1;
    return 0;
}

/* We are first in the listing but may not start a term on it: our suffix
 * is negative, or another node has it too. Sequences only grow up to
 * 2^31 - 1, so a node created after a term's listing has a suffix at least
 * the leader's, or a negative one: a candidate that starts only as the one
 * smallest suffix >= 0 can never start beside a node that was already there
 * (DESIGN "The sequence wrap"). A negative node is released and created
 * again (it gets 2147483647 or later, behind the others); a tie waits
 * behind the other node with our suffix, re-listing when it goes. 1 if it
 * handled the listing. */
static int refuse_first(election *e, const struct child *c, int m)
{
    if (e->role == ZKE_ROLE_LEADER || (c[0].seq >= 0 && (m < 2 || c[1].seq != c[0].seq)))
        return 0;
    if (c[0].seq < 0) {
        elog(e, ZKE_LOG_WARN, "our node %s has a negative suffix after the sequence wrap: "
             "not leading on it; releasing it and rejoining", e->node);
        e->role = ZKE_ROLE_IDLE;
        clear_view(e);
        start_delete(e);
        return 1;
    }
    elog(e, ZKE_LOG_WARN, "our node %s shares its suffix with %s after the sequence wrap: "
         "neither may lead while both exist; waiting for it to go", e->node, c[1].name);
    if (!same(e->pred, c[1].name))
        nodedata_clear(&e->pred_nd);
    set_str(&e->pred, c[1].name);
    set_str(&e->leader_node, NULL);
    nodedata_clear(&e->leader_nd);
    e->smaller = 0;             /* never the fast path */
    e->position = 1;
    e->phase = P_WATCH;
    e->watch_done = 0;
    e->data_done = 1;           /* no leader to read */
    e->want_watch = request(e, EL_REQ_WATCH, e->pred, 0);
    return 1;
}

static void evaluate(election *e, const char *const *names, int n, int32_t cversion)
{
    struct child *c = calloc((size_t)(n > 0 ? n : 1), sizeof *c);
    int m = 0, me = -1;
    if (c == NULL) {
        backoff(e);
        return;
    }
    for (int i = 0; i < n; i++) {
        int32_t s;
        if (el_parse_seq(names[i], &s) == 0) {
            c[m].name = names[i];
            c[m].seq = s;
            m++;
        }
    }
    qsort(c, (size_t)m, sizeof *c, child_cmp);
    check_wrap(e, c, m, n, cversion);
    for (int i = 0; i < m && e->node != NULL; i++)
        if (strcmp(c[i].name, e->node) == 0)
            me = i;
    if (me < 0) {
        free(c);
        lose_node(e, "lost");
        start_create(e);
        return;
    }
    e->candidates = m;
    e->smaller = me;
    ensure_self_watch(e);
    /* a sitting leader keeps its term beside nodes that only sort before
     * it after the wrap: refuse_first keeps them from leading */
    if (me == 0 || (e->role == ZKE_ROLE_LEADER && !strictly_ahead(c, me))) {
        int refused = me == 0 && refuse_first(e, c, m);
        free(c);
        if (refused)
            return;
        if (e->trust >= NODE_VERIFIED) {
            become_leader(e, "elected");
        } else {
            e->phase = P_CONFIRM;
            e->want_main = request(e, EL_REQ_CONFIRM, e->node, 0);
        }
        return;
    }
    if (e->role == ZKE_ROLE_LEADER) {
        /* Only a foreign writer puts a node with a smaller suffix >= 0
         * before a sitting leader; end the term rather than lead beside it. */
        free(c);
        end_term(e, "lost");
        return;
    }
    if (!same(e->leader_node, c[0].name))
        nodedata_clear(&e->leader_nd);
    if (!same(e->pred, c[me - 1].name))
        nodedata_clear(&e->pred_nd);
    set_str(&e->pred, c[me - 1].name);
    set_str(&e->leader_node, c[0].name);
    e->position = me;
    free(c);
    e->phase = P_WATCH;
    e->watch_done = 0;
    e->data_done = same(e->pred, e->leader_node);
    e->want_watch = request(e, EL_REQ_WATCH, e->pred, 0);
    if (!e->data_done)
        e->want_data = request(e, EL_REQ_GET_LEADER, e->leader_node, 0);
}


/* A result that failed: wait for the reconnect, or back off and retry. */
static void failed(election *e, const struct el_result *r, const char *what)
{
    if (r->rc == EL_CONNLOSS || r->rc == EL_EXPIRED || r->rc == EL_CLOSING)
        return;             /* the session event drives what happens next */
    if (r->rc != EL_DENIED)
        elog(e, ZKE_LOG_WARN, "%s failed (rc %d); retrying", what, (int)r->rc);
    backoff(e);
}

/* Our node exists (created or adopted), or none was found to adopt: the
 * node we stepped aside from goes first (P_DROP_OLD: it is kept, whatever
 * happens to the new one, until deleted in this session or handed to
 * stale_node with it), then on as usual. */
static void joined(election *e)
{
    if (e->requeue_old != NULL) {
        e->phase = P_DROP_OLD;
        if (e->connected)
            e->want_main = request(e, EL_REQ_DELETE, e->requeue_old, 0);
        return;
    }
    if (e->node == NULL) {
        if (e->stopping)
            finish_stop(e);
        else
            start_create(e);
        return;
    }
    if (e->stopping || e->withdrawn) {
        start_delete(e);
    } else {
        ensure_self_watch(e);
        start_list(e);
    }
}

/* EL_REQ_DELETE's answer in P_DROP_OLD: the node we stepped aside from. */
static void on_drop_old(election *e, const struct el_result *r)
{
    if (r->rc == EL_OK || r->rc == EL_NONODE) {
        set_str(&e->requeue_old, NULL);
        joined(e);
    } else {
        failed(e, r, "delete the node we stepped aside from");
    }
}

static void on_create(election *e, const struct el_result *r)
{
    if (r->rc == EL_OK) {
        set_str(&e->node, r->name);
        if (el_parse_seq(e->node, &e->seq) != 0)
            e->seq = -1;
        e->czxid = r->czxid;
        if (r->owner == e->session)
            trust_at_least(e, NODE_VERIFIED);
        else
            e->trust = NODE_UNCHECKED;
        e->led = 0;
        emit(e, ZKE_EV_JOINED, "created");
        joined(e);
    } else if (r->rc == EL_NONODE) {
        start_ensure(e);
    } else if (r->rc == EL_CONNLOSS) {
        /* the create may have happened: find it by guid after the reconnect */
        start_adopt(e);
    } else {
        failed(e, r, "create");
    }
}

static void on_list(election *e, const struct el_result *r)
{
    if (r->rc == EL_NONODE) {
        if (e->phase != P_ADOPT_LIST)
            lose_node(e, "lost");
        start_ensure(e);
        return;
    }
    if (r->rc != EL_OK) {
        failed(e, r, "list");
        return;
    }
    if (e->phase == P_ADOPT_LIST) {
        size_t pl = strlen(e->prefix);
        for (int i = 0; i < r->nchildren; i++) {
            int32_t s;
            if (strncmp(r->children[i], e->prefix, pl) == 0 && el_parse_seq(r->children[i], &s) == 0) {
                set_str(&e->adopt_node, r->children[i]);
                e->phase = P_ADOPT_STAT;
                e->want_main = request(e, EL_REQ_ADOPT_STAT, e->adopt_node, 0);
                return;
            }
        }
        joined(e);              /* none: create one (or stop) */
        return;
    }
    evaluate(e, r->children, r->nchildren, r->cversion);
}

static void on_adopt_stat(election *e, const struct el_result *r)
{
    if (r->rc == EL_OK && r->owner == e->session) {
        set_str(&e->node, e->adopt_node);
        if (el_parse_seq(e->node, &e->seq) != 0)
            e->seq = -1;
        e->czxid = r->czxid;
        trust_at_least(e, NODE_VERIFIED);
        e->led = 0;
        emit(e, ZKE_EV_JOINED, "adopted");
        joined(e);
    } else if (r->rc == EL_OK || r->rc == EL_NONODE) {
        if (r->rc == EL_OK) {
            /* carries our guid but belongs to an older session */
            elog(e, ZKE_LOG_WARN, "deleting %s: our guid, but owned by session 0x%" PRIx64,
                 e->adopt_node, r->owner);
            request(e, EL_REQ_DELETE_STALE, e->adopt_node, 0);
        }
        new_guid(e);
        joined(e);              /* none: create one (or stop) */
    } else {
        failed(e, r, "adopt");
    }
}

static void on_confirm(election *e, const struct el_result *r)
{
    if (r->rc == EL_OK && r->owner == e->session) {
        trust_at_least(e, NODE_VERIFIED);
        e->czxid = r->czxid;
        become_leader(e, "elected");
    } else if (r->rc == EL_OK || r->rc == EL_NONODE) {
        lose_node(e, "lost");
        start_create(e);
    } else {
        failed(e, r, "confirm");
    }
}

static void on_delete(election *e, const struct el_result *r)
{
    if (r->rc == EL_OK || r->rc == EL_NONODE) {
        set_str(&e->node, NULL);
        e->seq = -1;
        e->trust = NODE_UNCHECKED;
        e->led = 0;
        clear_view(e);
        new_guid(e);
        if (e->stopping) {
            finish_stop(e);
        } else if (e->withdrawn) {
            e->phase = P_IDLE;      /* stays out until el_rejoin */
        } else {
            e->phase = P_IDLE;
            int base = e->rejoin_ms > 0 ? e->rejoin_ms : REJOIN_MS;
            e->rejoin_ms = 0;
            /* jitter: up to half again, so flapping candidates spread out */
            e->want_main = request(e, EL_REQ_BACKOFF, NULL,
                                   base + (int)(rnd(e) % (uint64_t)(base / 2 + 100)));
        }
    } else {
        failed(e, r, "delete");
    }
}

/* Our predecessor's data says it leads (leader data under its own czxid),
 * while our last listing had other nodes ahead of it. Any client that may
 * write the folder can write such data, so it is only a hint: a listing
 * (the server's own word) decides whether the predecessor is now the
 * smallest node, which makes us next in line, renewing like one and taking
 * the fast path when it goes. One listing per predecessor: a claim that
 * the listing refuted is not listed again for. The listing runs while the
 * predecessor lives, never between its deletion and our term. */
static int pred_claim_to_check(election *e, const struct el_result *r)
{
    if (e->smaller <= 1 || !e->pred_nd.ours || e->pred_nd.epoch <= 0 ||
        e->pred_nd.epoch != r->czxid || same(e->claim_checked, e->pred))
        return 0;
    set_str(&e->claim_checked, e->pred);
    return 1;
}

/* Our predecessor is the leader (our last listing: it is the smallest node)
 * and its leader data (under its own czxid: it published it as the leader)
 * asks the candidates ahead of a node to step aside for it: 1 if that is
 * us. Only for a target behind us (a larger sequence; none near the wrap,
 * where suffixes no longer follow creation order), once per (leader node,
 * target), and never while we lead, stop or are out (the caller is in
 * P_WATCH: never mid-step). Anyone who can write the folder can write
 * such data: the only effect is that we re-queue, never that anybody
 * leads. */
static int aside_asked(election *e, const struct el_result *r)
{
    const char *t = e->leader_nd.aside;
    int32_t tseq;
    if (t == NULL || !e->leader_nd.ours || e->leader_nd.epoch <= 0 ||
        e->leader_nd.epoch != r->czxid || e->role == ZKE_ROLE_LEADER || e->stopping ||
        e->withdrawn || e->near_wrap || e->node == NULL || e->seq < 0)
        return 0;
    if (el_parse_seq(t, &tseq) != 0 || tseq <= e->seq || same(t, e->node))
        return 0;
    if (same(e->aside_leader, e->leader_node) && same(e->aside_target, t))
        return 0;
    set_str(&e->aside_leader, e->leader_node);
    set_str(&e->aside_target, t);
    return 1;
}

/* Steps aside for the target aside_asked() found: a new node is created
 * at once (behind the target), and our old one deleted only once it exists
 * (joined): so the one behind us, which reacts to that deletion, creates
 * its new node after ours, and the ones that step aside keep their order.
 * The role stays (a follower re-queues, it does not leave); the phases are
 * P_CREATE, P_DROP_OLD and P_LIST, so the predecessor's deletion starts no
 * term meanwhile (el_on_watch acts on it only in P_WATCH and P_SETTLED),
 * and the old node never leads: no machine holds it. */
static void step_aside(election *e)
{
    char *old = xstrdup(e->node);
    if (old == NULL)
        return;                 /* out of memory: stay where we are */
    elog(e, ZKE_LOG_INFO, "stepping aside for %s (asked by the leader %s)", e->aside_target,
         e->aside_leader);
    free(e->requeue_old);
    e->requeue_old = old;
    set_str(&e->node, NULL);
    e->seq = -1;
    e->czxid = 0;
    e->trust = NODE_UNCHECKED;
    clear_view(e);
    new_guid(e);
    start_create(e);
}

/* EL_REQ_WATCH's answer: the exists-watch on our predecessor, with its data.
 * Its token is its own (not want_main). */
static void on_watch(election *e, const struct el_result *r)
{
    if (r->token != e->want_watch || e->phase != P_WATCH)
        return;
    e->want_watch = 0;
    if (r->rc == EL_OK) {
        e->watch_done = 1;
        set_nd(&e->pred_nd, r->data, r->datalen);
        if (same(e->pred, e->leader_node)) {
            set_nd(&e->leader_nd, r->data, r->datalen);
            if (aside_asked(e, r)) {
                step_aside(e);
                if (e->phase == P_CREATE)
                    return;
            }
        } else if (pred_claim_to_check(e, r)) {
            start_list(e);
            return;
        }
        maybe_settle(e);
    } else if (r->rc == EL_NONODE) {
        start_list(e);      /* gone before the watch was set: re-read */
    } else {
        failed(e, r, "watch");
    }
}

/* EL_REQ_GET_LEADER's answer: the leader's data.
 * Its token is its own (not want_main). */
static void on_get_leader(election *e, const struct el_result *r)
{
    if (r->token != e->want_data || e->phase != P_WATCH)
        return;
    e->want_data = 0;
    if (r->rc == EL_OK)
        set_nd(&e->leader_nd, r->data, r->datalen);
    else
        nodedata_clear(&e->leader_nd);
    if (r->rc == EL_CONNLOSS || r->rc == EL_EXPIRED || r->rc == EL_CLOSING)
        return;
    e->data_done = 1;
    maybe_settle(e);
}

/* EL_REQ_PUBLISH's answer: our leader data written for this term.
 * Its token is its own (not want_main). */
static void on_publish(election *e, const struct el_result *r)
{
    if (r->token != e->want_pub)
        return;
    e->want_pub = 0;
    if (r->rc == EL_OK) {
        e->published = 1;
        e->pub_version = r->version;
        elog(e, ZKE_LOG_DEBUG, "leader data published: epoch %" PRId64 ", write zxid %" PRId64,
             e->epoch, r->mzxid);
        if (e->pub_again && e->role == ZKE_ROLE_LEADER && !e->stopping) {
            e->pub_again = 0;
            publish(e, e->pub_version);
        }
    } else if (r->rc == EL_CONNLOSS) {
        e->pub_again = 1;       /* a lost write may or may not be in: the data is written
                                 * again on resuming (an ask taken back meanwhile too) */
    } else if (r->rc != EL_EXPIRED && r->rc != EL_CLOSING &&
               r->rc != EL_NONODE && r->rc != EL_DENIED) {
        elog(e, ZKE_LOG_WARN, "leader data of epoch %" PRId64 " not published (rc %d): "
             "someone else wrote our node", e->epoch, (int)r->rc);
    }
}

/* EL_REQ_WATCH_SELF's answer: the exists-watch on our own node.
 * Its token is its own (not want_main). */
static void on_watch_self(election *e, const struct el_result *r)
{
    if (r->token != e->want_self)
        return;
    e->want_self = 0;
    if (e->phase == P_DELETE || e->phase == P_STOPPED)
        return;
    if (r->rc == EL_OK && r->owner == e->session) {
        e->trust = NODE_WATCHED;
    } else if (r->rc == EL_OK || r->rc == EL_NONODE) {
        lose_node(e, "lost");       /* gone, or not ours */
        start_create(e);
    } else {
        failed(e, r, "watch own node");
    }
}

void el_on_result(election *e, enum el_req_type type, const struct el_result *r)
{
    if (r->token == 0)
        return;
    switch (type) {
    case EL_REQ_WATCH:      on_watch(e, r); return;
    case EL_REQ_GET_LEADER: on_get_leader(e, r); return;
    case EL_REQ_PUBLISH:    on_publish(e, r); return;
    case EL_REQ_WATCH_SELF: on_watch_self(e, r); return;
    default:
        break;
    }
    if (r->token != e->want_main)
        return;
    e->want_main = 0;
    switch (type) {
    case EL_REQ_CREATE:     on_create(e, r); break;
    case EL_REQ_ENSURE:
        if (r->rc == EL_OK || r->rc == EL_NODEEXISTS)
            start_create(e);
        else
            failed(e, r, "create election path");
        break;
    case EL_REQ_LIST:       on_list(e, r); break;
    case EL_REQ_ADOPT_STAT: on_adopt_stat(e, r); break;
    case EL_REQ_CONFIRM:    on_confirm(e, r); break;
    case EL_REQ_DELETE:
        if (e->phase == P_DROP_OLD)
            on_drop_old(e, r);
        else
            on_delete(e, r);
        break;
    default: break;
    }
}

int el_wants(const election *e, enum el_req_type type, uint32_t token)
{
    if (token == 0)
        return 0;
    switch (type) {
    case EL_REQ_WATCH: return token == e->want_watch && e->phase == P_WATCH;
    case EL_REQ_GET_LEADER: return token == e->want_data && e->phase == P_WATCH;
    case EL_REQ_PUBLISH: return token == e->want_pub;
    case EL_REQ_WATCH_SELF: return token == e->want_self;
    case EL_REQ_DELETE_STALE: return 0;
    default: return token == e->want_main;
    }
}

void el_on_watch(election *e, enum el_watch_type type, const char *node)
{
    if (node == NULL)
        return;
    if (same(node, e->node)) {
        if (e->phase == P_DELETE || e->phase == P_STOPPED)
            return;
        if (type == EL_W_DELETED) {
            lose_node(e, "lost");
            if (e->connected)
                start_create(e);
            else
                e->phase = P_IDLE;
        } else {
            /* a fired watch is gone: set it again */
            if (e->trust == NODE_WATCHED)
                e->trust = NODE_VERIFIED;
            ensure_self_watch(e);
        }
        return;
    }
    if (!same(node, e->pred) || (e->phase != P_WATCH && e->phase != P_SETTLED))
        return;
    if (type == EL_W_DELETED) {
        /* A deletion only means "re-read" (DESIGN 2.4), except when the
         * predecessor was the only smaller node of our last listing and our
         * watch on our own node has been in place, in this session, without
         * a disconnect since: then no smaller node can exist (sequences only
         * grow) and our node still exists unless the session has expired
         * unseen (its deletion would have been notified first), so we lead
         * without another round trip. Whether the session lives is the
         * owner's lease: a term starts only once the quorum leader has
         * confirmed it, by a write (the publish) if need be, which fails
         * on an expired session; a listing would add nothing to that. */
        if (e->phase == P_SETTLED && e->smaller == 1 && e->trust == NODE_WATCHED &&
            e->connected && !e->near_wrap && !e->stopping) {
            /* no listing: later joiners are unknown, so no count */
            e->candidates = 0;
            elog(e, ZKE_LOG_DEBUG, "predecessor %s gone: next in line, leading without a listing",
                 node);
            become_leader(e, "elected");
        } else {
            elog(e, ZKE_LOG_DEBUG, "predecessor %s gone: listing the children", node);
            start_list(e);
        }
    } else if (type == EL_W_CHANGED) {
        e->phase = P_WATCH;
        e->watch_done = 0;
        e->data_done = 1;
        e->want_watch = request(e, EL_REQ_WATCH, e->pred, 0);
    }
}

void el_on_session(election *e, enum el_session_state st, uint64_t sid)
{
    e->started = 1;
    if (st == EL_SESS_DISCONNECTED) {
        e->connected = 0;
        e->trust = NODE_UNCHECKED;
        if (e->role == ZKE_ROLE_LEADER && !e->stopping) {
            if (e->strict) {
                end_term(e, "disconnect");
            } else if (!e->suspended) {
                e->suspended = 1;
                emit(e, ZKE_EV_SUSPEND, "disconnected");
            }
        }
        return;
    }
    if (st == EL_SESS_EXPIRED) {
        e->connected = 0;
        /* if the server has not expired it yet (we gave up locally), the
         * node would block the election for a session timeout */
        if (e->node != NULL)
            set_str(&e->stale_node, e->node);
        /* a follower stepping aside (it may have no node now: it is a
         * follower no more) leaves requeue_old to the next session, which
         * deletes it as stale */
        if (e->node != NULL || e->role != ZKE_ROLE_IDLE)
            lose_node(e, "expired");
        e->want_main = e->want_watch = e->want_data = e->want_self = 0;
        if (e->stopping)
            finish_stop(e);
        else if (e->phase != P_STOPPED)
            e->phase = P_IDLE;
        return;
    }
    /* connected */
    e->connected = 1;
    if (sid != e->session) {
        if (e->requeue_old != NULL) {
            request(e, EL_REQ_DELETE_STALE, e->requeue_old, 0);
            set_str(&e->requeue_old, NULL);
        }
        if (e->node != NULL) {
            set_str(&e->stale_node, e->node);
            lose_node(e, "expired");
        } else if (e->role != ZKE_ROLE_IDLE) {
            lose_node(e, "expired");    /* a follower stepping aside, between its nodes */
        }
        e->session = sid;
        e->trust = NODE_UNCHECKED;
        /* every answer still due belongs to the old session: stale (without
         * this a listing of the old session, answered late, was taken as
         * the current one while we had no node) */
        e->want_main = e->want_watch = e->want_data = e->want_self = 0;
        if (e->stale_node != NULL) {
            request(e, EL_REQ_DELETE_STALE, e->stale_node, 0);
            set_str(&e->stale_node, NULL);
        }
        if (e->phase == P_STOPPED)
            return;
        if (e->stopping) {
            finish_stop(e);
            return;
        }
        new_guid(e);
        start_create(e);
        return;
    }
    e->trust = NODE_UNCHECKED;
    el_kick(e);
}

void el_kick(election *e)
{
    if (!e->connected)
        return;
    switch (e->phase) {
    case P_IDLE:
        if (e->stopping)
            finish_stop(e);
        else
            start_create(e);
        break;
    case P_ENSURE:     start_ensure(e); break;
    case P_CREATE:
    case P_ADOPT_LIST:
    case P_ADOPT_STAT: start_adopt(e); break;
    case P_LIST:
    case P_CONFIRM:
    case P_WATCH:
    case P_SETTLED:    start_list(e); break;
    case P_DELETE:     start_delete(e); break;
    case P_DROP_OLD:   joined(e); break;
    case P_STOPPED:    break;
    }
}

int el_resign(election *e, int rejoin_ms)
{
    if (e->role != ZKE_ROLE_LEADER || e->stopping)
        return -1;
    e->rejoin_ms = rejoin_ms;
    end_term(e, "resign");
    return 0;
}

int el_withdraw(election *e, const char *reason)
{
    if (e->stopping || e->withdrawn)
        return -1;
    e->withdrawn = 1;
    if (e->role == ZKE_ROLE_LEADER) {
        end_term(e, reason);
    } else if (e->requeue_old != NULL) {
        /* stepping aside: joined() deletes the old node, then the new one */
        e->role = ZKE_ROLE_IDLE;
        clear_view(e);
    } else if (e->node != NULL) {
        e->role = ZKE_ROLE_IDLE;
        clear_view(e);
        start_delete(e);
    } else if (e->phase == P_IDLE || e->phase == P_ENSURE) {
        e->phase = P_IDLE;
        e->want_main = 0;
    }
    /* a create in flight: its result sees `withdrawn` and deletes the node */
    return 0;
}

int el_rejoin(election *e)
{
    if (e->stopping || !e->withdrawn)
        return -1;
    e->withdrawn = 0;
    if (e->connected && e->phase == P_IDLE)
        start_create(e);
    return 0;
}

int el_set_aside(election *e, const char *node)
{
    if (e->role != ZKE_ROLE_LEADER || e->stopping || e->compat != ZKE_COMPAT_NONE)
        return -1;
    if (same(e->aside, node) || (e->aside == NULL && node == NULL))
        return 0;
    char *n = node != NULL ? xstrdup(node) : NULL;
    if (node != NULL && n == NULL)
        return -1;
    free(e->aside);
    e->aside = n;
    if (e->want_pub != 0 || !e->connected)
        e->pub_again = 1;       /* after the write on its way, or once connected again */
    else
        publish(e, e->published ? e->pub_version : -1);
    return 0;
}

int el_lease_expired(election *e, const char *reason)
{
    if (e->role != ZKE_ROLE_LEADER || e->stopping)
        return -1;
    end_term(e, reason);
    return 0;
}

void el_set_strict(election *e, int strict)
{
    e->strict = strict != 0;
}

int el_publishing(const election *e)
{
    return e->want_pub != 0;
}

void el_set_log_level(election *e, enum zke_log_level min)
{
    e->log_min = min;
}

int el_set_compat(election *e, enum zke_compat compat, int priority)
{
    char *enc;
    if (e->started || compat < ZKE_COMPAT_NONE || compat > ZKE_COMPAT_KAZOO || priority < 0)
        return -1;
    e->priority = priority;
    enc = compat == ZKE_COMPAT_NONE ? nodedata_encode(e->id, e->data, 0, e->priority) : xstrdup(e->data);
    if (enc == NULL)
        return -1;
    free(e->enc);
    e->enc = enc;
    e->enclen = strlen(enc);
    e->compat = compat;
    new_guid(e);
    return 0;
}

int el_is_our_name(const char *name)
{
    if (name == NULL)
        return 0;
    if (strncmp(name, "n_", 2) == 0) {
        for (int i = 2; i < 18; i++)
            if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
                return 0;
        return name[18] == '-';
    }
    if (strncmp(name, "_c_zke", 6) == 0)
        return strstr(name, "-latch-") != NULL;
    if (strncmp(name, "zke", 3) == 0)
        return strstr(name, "__lock__") != NULL;
    return 0;
}

void el_stop(election *e)
{
    if (e->stopping)
        return;
    e->stopping = 1;
    if (e->role == ZKE_ROLE_LEADER)
        emit(e, ZKE_EV_STEPDOWN, "shutdown");
    e->role = ZKE_ROLE_IDLE;
    e->epoch = 0;
    e->suspended = 0;
    if (e->phase == P_STOPPED)
        return;
    if (e->phase == P_DROP_OLD)
        return;                     /* joined() deletes the old node, then the new one */
    if (e->node != NULL) {
        start_delete(e);
    } else if (e->phase == P_CREATE || e->phase == P_ADOPT_LIST || e->phase == P_ADOPT_STAT) {
        if (e->connected && e->phase != P_CREATE)
            start_adopt(e);        /* finish the adoption, then delete */
        /* else the create's result decides */
    } else {
        finish_stop(e);
    }
}

enum zke_role el_role(const election *e)
{
    return e->role;
}

void el_status(const election *e, struct zke_status *st)
{
    memset(st, 0, sizeof *st);
    st->role = e->role;
    st->node = e->node;
    st->seq = e->node ? e->seq : -1;
    st->session = e->session;
    st->connected = e->connected;
    st->epoch = e->role == ZKE_ROLE_LEADER ? e->epoch : 0;
    /* leader_nd outlives the view (a LEADER event after a resign names our
     * own last term as `previous`): without a leader node the leader is
     * unknown, not the one we last knew (ourselves, just withdrawn) */
    if (e->leader_node != NULL) {
        st->leader = e->leader_nd.id;
        st->leader_data = e->leader_nd.data;
        st->leader_epoch = e->leader_nd.epoch;
    }
    st->suspended = e->suspended;
    st->withdrawn = e->withdrawn;
    st->leader_node = e->leader_node;
    st->predecessor = e->role == ZKE_ROLE_FOLLOWER ? e->pred : NULL;
    st->position = e->role == ZKE_ROLE_LEADER ? 0 : e->role == ZKE_ROLE_FOLLOWER ? e->position : -1;
    st->candidates = e->candidates;
}

const char *el_leaving_node(const election *e)
{
    return e->requeue_old;
}

int el_near_wrap(const election *e)
{
    return e->near_wrap;
}

election *el_new(const char *path, const char *id, const char *data,
                 const struct el_ops *ops, void *ud, uint64_t seed)
{
    election *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->path = xstrdup(path);
    e->id = xstrdup(id);
    e->data = xstrdup(data ? data : id);
    if (e->path == NULL || e->id == NULL || e->data == NULL) {
        el_free(e);
        return NULL;
    }
    e->enc = nodedata_encode(e->id, e->data, 0, e->priority);
    if (e->enc == NULL) {
        el_free(e);
        return NULL;
    }
    e->enclen = strlen(e->enc);
    e->ops = *ops;
    e->ud = ud;
    e->rng = seed ? seed : UINT64_C(0x9e3779b97f4a7c15);
    e->seq = -1;
    e->position = -1;
    e->settled_position = -1;
    e->smaller = -1;
    new_guid(e);
    return e;
}

void el_free(election *e)
{
    if (e == NULL)
        return;
    free(e->path);
    free(e->id);
    free(e->data);
    free(e->enc);
    free(e->node);
    free(e->pred);
    free(e->settled_pred);
    free(e->leader_node);
    nodedata_clear(&e->leader_nd);
    nodedata_clear(&e->pred_nd);
    free(e->adopt_node);
    free(e->stale_node);
    free(e->claim_checked);
    free(e->aside);
    free(e->aside_leader);
    free(e->aside_target);
    free(e->requeue_old);
    free(e);
}
