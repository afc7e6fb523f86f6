/*
 * census.h - a one-time reading of an election: its candidates in order,
 * with what each published. Used by `zkelect status`; works on elections
 * that mix zkelect, Curator and kazoo candidates (ordered by the trailing
 * sequence, as the agent orders them).
 *
 * census_run() connects, lists the election path, reads every candidate's
 * data and stat, closes, and calls done() once, from the loop (also on
 * failure: rc != 0 and errstr set). Loop thread only.
 */
#ifndef ZKELECT_CENSUS_H
#define ZKELECT_CENSUS_H

#include <stdint.h>

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
};

struct census {
    int rc;                 /* 0, or a sysexits code: 66 no such election, 69 unreachable,
                             * 77 no permission or authentication failed, 78 no such chroot */
    char errstr[400];
    int n;
    struct census_entry *e; /* sorted by sequence; e[0] is the leader (if not gone) */
};

typedef void census_done_fn(void *ud, const struct census *c);

/* Starts; done() is called exactly once. Returns -1 (and calls nothing)
 * only when out of memory. auth_scheme NULL: no credentials; they are
 * copied (and wiped when the run ends). */
int census_run(struct ev_loop *loop, const char *zk, const char *path, int timeout_ms,
               const char *auth_scheme, const char *auth_credentials,
               census_done_fn *done, void *ud);

#endif
