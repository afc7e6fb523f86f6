/*
 * census.h - a one-time reading of an election: its candidates in order,
 * with what each published. Used by `zkelect status`; works on elections
 * that mix zkelect, Curator and kazoo candidates (ordered by the trailing
 * sequence, as the agent orders them).
 *
 * census_run() connects, lists the election path, reads every candidate's
 * data and stat, closes, and calls done() once, from the loop (also on
 * failure: why != OB_OK and errstr set). Loop thread only. The public face
 * is zke_census_run() (census_api.c).
 */
#ifndef ZKELECT_CENSUS_H
#define ZKELECT_CENSUS_H

#include <stdint.h>

#include "observer.h"     /* enum ob_reason */

struct ev_loop;

struct census_entry {
    char *node;             /* child name */
    int32_t seq;
    char *id, *data;        /* decoded (foreign nodes: their bytes) */
    const char *kind;       /* "zkelect", "curator", "kazoo" or "other" */
    int64_t epoch;          /* published epoch, 0 if none */
    uint64_t owner;         /* ephemeralOwner (session), 0 if persistent */
    int64_t ctime_ms;       /* creation time, server clock */
    int gone;               /* deleted between the listing and the read */
    int priority;           /* published priority (a hint), 0 if none */
    int64_t mtime_ms;       /* last data write, server clock */
};

struct census {
    enum ob_reason why;     /* OB_OK, or OB_NO_ELECTION, OB_UNREACHABLE, OB_AUTH (no
                             * permission or authentication failed), OB_CONFIG (no such
                             * chroot), OB_INTERNAL (out of memory) */
    const char *errstr;     /* one line when why != OB_OK (owned by the run), else NULL */
    int n;
    struct census_entry *e; /* sorted by sequence; e[0] is the leader (if not gone) */
    int others;             /* children that are no candidate (no sequence suffix) */
    char *other;            /* the first of them in the listing, or NULL */
};

/* "zkelect", "curator", "kazoo" or "other", from a node's name and whether
 * its data decoded as ours. Pure. */
const char *census_kind(const char *name, int ours);

typedef void census_done_fn(void *ud, const struct census *c);

/* Starts; done() is called exactly once, from the loop; c and everything
 * it points to are valid during the call only. Returns -1 (and calls
 * nothing) only when out of memory. session_ms: the requested session
 * timeout (0: ZKE_DEFAULT_SESSION_TIMEOUT_MS); timeout_ms: the whole reading
 * within (negative: no limit). auth_scheme NULL: no credentials; they are
 * copied (and wiped when the run ends). */
int census_run(struct ev_loop *loop, const char *zk, const char *path, int session_ms,
               int timeout_ms,
               const char *auth_scheme, const char *auth_credentials,
                       const struct zke_tls *tls,
               census_done_fn *done, void *ud);

#endif
