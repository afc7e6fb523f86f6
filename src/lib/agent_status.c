/*
 * agent_status.c - status for readers: zke_agent_status and the census that keeps it fresh. See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define CENSUS_BIG 1000          /* children: beyond this the census lists less often */

#define CENSUS_MAX_GAP_S 30.0

/* A zke_agent_view reader keeps the listing fresh this long (at least ten
 * census intervals): a scrape every minute, Prometheus's default, keeps it on */
#define VIEW_WANTED_S 120.0


static void census_get_done(void *arg, const struct zkc_result *r)
{
    zke_agent *a = arg;
    a->census.pending = 0;
    nodedata_clear(&a->census.lead);
    if (r->rc == ZKC_OK && nodedata_decode(r->data, r->datalen, &a->census.lead) == 0)
        return;
    a->census.node[0] = '\0';
    a->census.listed = 0;          /* gone meanwhile (or no memory): list again next time */
}


static void census_list_done(void *arg, const struct zkc_result *r)
{
    zke_agent *a = arg;
    const char *best = NULL;
    int32_t bs = 0, s;
    a->census.pending = 0;
    if (r->rc != ZKC_OK) {
        a->census.listed = 0;
        return;
    }
    a->census.listed_n = r->nchildren;
    a->census.stale = 0;
    struct zke_status st;
    el_status(a->el, &st);
    int before = 0;
    for (int i = 0; i < r->nchildren; i++) {
        if (el_parse_seq(r->children[i], &s) != 0)
            continue;
        if (best == NULL || s < bs) {
            best = r->children[i];
            bs = s;
        }
        if (st.node != NULL && s < st.seq)
            before++;
    }
    a->census.position = st.node != NULL ? before : -1;
    nodedata_clear(&a->census.lead);
    a->census.node[0] = '\0';
    if (best == NULL || strlen(best) >= sizeof a->census.node)
        return;
    snprintf(a->census.node, sizeof a->census.node, "%s", best);
    char *path = agent_full_path(a, best);
    if (path != NULL && zkclient_get(SESS(a), path, 0, census_get_done, a) == 0)
        a->census.pending = 1;
    free(path);
}


static void census_done(void *arg, const struct zkc_result *r)
{
    zke_agent *a = arg;
    a->census.pending = 0;
    if (r->rc != ZKC_OK || !r->has_stat)
        return;
    a->census.election_size = r->numchildren;
    agent_dupe_census(a, r->cversion, r->numchildren);     /* a new one with our id? */
    /* Who leads and where we stand, read again after a change of
     * membership, is what only a reader of a follower's view needs: the
     * leader and the next in line know it from their own watches, and every
     * follower further back listing the election after each failover is a
     * herd (N listings a failover, a census interval later). Without a
     * reader a listing older than the change is only marked stale (not
     * shown), and a reader's first look sends a census at once
     * (zke_agent_view). A leader's status never shows the listing. */
    if (zkc_now_ns() >= a->census.view_until_ns || el_role(a->el) == ZKE_ROLE_LEADER) {
        if (a->census.listed && r->cversion != a->census.cversion)
            a->census.stale = 1;
        return;
    }
    /* the membership changed since our last reading: who leads now? */
    if (a->census.listed && r->cversion == a->census.cversion) {
        /* same members, but a zkelect leader read before it published (a
         * data change does not move cversion): read it again */
        if (a->census.node[0] != '\0' && a->census.lead.ours && a->census.lead.epoch == 0) {
            char *path = agent_full_path(a, a->census.node);
            if (path != NULL && zkclient_get(SESS(a), path, 0, census_get_done, a) == 0)
                a->census.pending = 1;
            free(path);
        }
        return;
    }
    /* A big election (tens of thousands of children) changes at nearly
     * every interval, and each listing is ~33 bytes per child for every
     * candidate with a census: list it at most every interval * n / 1000
     * (at most CENSUS_MAX_GAP_S); candidates stays fresh from the stat, the
     * leader and position may be that old meanwhile. */
    int64_t now = zkc_now_ns();
    if (a->census.listed && a->census.listed_n > CENSUS_BIG && now < a->census.next_ns)
        return;
    a->census.listed = 1;
    a->census.cversion = r->cversion;
    if (zkclient_list(SESS(a), a->set.path, 0, census_list_done, a) == 0)
        a->census.pending = 1;
    double gap = 0;
    if (r->numchildren > CENSUS_BIG) {
        gap = a->set.census_interval_ms / 1000.0 * r->numchildren / CENSUS_BIG;
        if (gap > CENSUS_MAX_GAP_S)
            gap = CENSUS_MAX_GAP_S;
    }
    a->census.next_ns = now + (int64_t)(gap * 1e9);
}


/* The next census: with the stream's first tick an interval from now when
 * one comes within two (a timer of two intervals stands by, in case the
 * stream stops); else alone, an interval from now. */
static void census_plan(zke_agent *a)
{
    int iv_ms = a->set.census_interval_ms;
    ev_timer_stop(a->loop, &a->census.timer);
    if (conn_agent_ride(a->conn, a->cm, zkc_now_ns() + (int64_t)iv_ms * 1000000, 2 * iv_ms) == 0) {
        a->census.riding = 1;
        ev_timer_set(&a->census.timer, 2 * iv_ms / 1000.0, 0.);
    } else {
        ev_timer_set(&a->census.timer, iv_ms / 1000.0, 0.);
    }
    ev_timer_start(a->loop, &a->census.timer);
}

/* The election's size for status readers: the leader and the followers far
 * from the front never list the children again, so their last listing
 * ages. One exists() on the path every interval, no watch (no herd). It
 * goes with the session's renewal or read when the stream ticks that
 * often (census_plan): the process then wakes for one answer, not two. */
static void census_go(zke_agent *a)
{
    if (a->census.riding) {
        a->census.riding = 0;
        conn_agent_unride(a->conn, a->cm);
    }
    if (agent_done(a))
        return;
    if (!zkclient_connected(a->zkc)) {
        /* soon after the (re)connection, then at the interval again; the
         * delay is random so that a fleet reconnecting together after a
         * server restart does not list the election all at once */
        double iv = a->set.census_interval_ms / 1000.0;
        ev_timer_stop(a->loop, &a->census.timer);
        ev_timer_set(&a->census.timer, 0.1 + iv * rng_unit(&a->rng), 0.);
        ev_timer_start(a->loop, &a->census.timer);
        return;
    }
    if (!a->census.pending && zkclient_exists(SESS(a), a->set.path, 0, census_done, a) == 0)
        a->census.pending = 1;
    census_plan(a);
}

static void census_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    census_go(w->data);
}

void agent_census_init(zke_agent *a)
{
    ev_timer_init(&a->census.timer, census_cb, 0., 0.);
    a->census.timer.data = a;
    a->census.election_size = -1;
    a->census.position = -1;
}


void agent_census_start(zke_agent *a)
{
    if (a->set.census_interval_ms > 0) {
        /* a random phase: candidates started together do not census together */
        double iv = a->set.census_interval_ms / 1000.0;
        ev_timer_set(&a->census.timer, 0.05 + iv * rng_unit(&a->rng), 0.);
        ev_timer_start(a->loop, &a->census.timer);
    }
}


void agent_census_stop(zke_agent *a)
{
    ev_timer_stop(a->loop, &a->census.timer);
}


void agent_census_free(zke_agent *a)
{
    nodedata_clear(&a->census.lead);
    ev_timer_stop(a->loop, &a->census.timer);
}


void agent_census_ride(zke_agent *a)
{
    a->census.riding = 0;
    if (ev_is_active(&a->census.timer))      /* else stopped meanwhile (stopping, done) */
        census_go(a);
}


void agent_census_moved(zke_agent *a)
{
    if (a->census.listed)
        a->census.stale = 1;
}


int zke_agent_status(zke_agent *a, struct zke_status *out)
{
    if (a->el == NULL) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    el_status(a->el, out);
    out->connected = zkclient_connected(a->zkc);
    out->lease_ms = out->role == ZKE_ROLE_LEADER ? agent_lease_remaining_ms(a) : -1;
    out->election_size = a->census.election_size;
    out->short_terms = a->flap.terms;
    out->withdrawn_by = a->withdraw.by;
    /* a follower's own view of the leader is its last listing, which only
     * changes when its predecessor does; the census's, while a reader looks
     * (census_done), is read again after every change of membership
     * (within one interval), and not shown once a change made it stale */
    if (out->role != ZKE_ROLE_LEADER && a->census.listed && !a->census.stale &&
        a->census.node[0] != '\0' && a->census.lead.id != NULL) {
        /* the same leader node: whichever read saw its published epoch */
        int same = out->leader_node != NULL && strcmp(out->leader_node, a->census.node) == 0;
        if (!same || a->census.lead.epoch > out->leader_epoch) {
            out->leader = a->census.lead.id;
            out->leader_data = a->census.lead.data;
            out->leader_epoch = a->census.lead.epoch;
            out->leader_node = a->census.node;
        }
        if (out->role == ZKE_ROLE_FOLLOWER && a->census.position > 0)
            out->position = a->census.position;
    }
    return 0;
}


void zke_agent_lifecycle(const zke_agent *a, const char **session, const char **conn,
                         const char **member)
{
    if (session != NULL)
        *session = a->zkc != NULL ? zkclient_life_name(a->zkc) : "closed";
    if (conn != NULL)
        *conn = a->conn != NULL ? conn_state_name_of(a->conn) : "freeing";
    if (member != NULL)
        *member = a->cm != NULL ? conn_member_state_name(a->cm) : "detached";
}

int zke_agent_sequence_wrap(const zke_agent *a)
{
    return a->el != NULL && el_near_wrap(a->el);
}

int zke_agent_view(zke_agent *a, struct zke_status *out)
{
    if (a->el != NULL && a->set.census_interval_ms > 0) {
        int64_t now = zkc_now_ns();
        double keep = 10.0 * a->set.census_interval_ms / 1000.0;
        if (keep < VIEW_WANTED_S)
            keep = VIEW_WANTED_S;
        int idle = now >= a->census.view_until_ns;
        a->census.view_until_ns = now + (int64_t)(keep * 1e9);
        /* the first look after none, or a follower's look at a view that
         * our own step-down or withdrawal made stale: a census now, not at
         * its time (the view it finds is then fresh for the looks that
         * follow; a leader never lists) */
        int stale = a->census.stale && el_role(a->el) != ZKE_ROLE_LEADER;
        if ((idle ? !a->census.listed || a->census.stale : stale) && !a->census.pending &&
            ev_is_active(&a->census.timer))
            census_go(a);
    }
    return zke_agent_status(a, out);
}
