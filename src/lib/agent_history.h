/*
 * agent_history.h - the leader's record of its terms in ZooKeeper
 * (agent_history.c; zkelect.h "The history of terms", the record's format
 * in history.h). Loop thread only. A feature of the agent: it calls the
 * core only; the term (agent_term.c) tells it a term began and stepped
 * down, agent.c inits and frees it.
 *
 * Nothing here delays the term: each write is sent and not waited for,
 * the step-down's end goes out before the node's release (the same
 * session, in order: a successor's record always comes after it), and at
 * most AGENT_HISTORY_INFLIGHT requests are in flight per agent (more are
 * dropped, logged at debug; N agents on one shared session: N times that
 * on it). The prunes and the predecessors' reads take at most
 * AGENT_HISTORY_INFLIGHT - AGENT_HISTORY_RESERVE of them: the rest stay for
 * the folder's and the record's create, the listing, the record's end and
 * the marks, so that a backlog being pruned never drops a term's end (its
 * successor would mark it no_stepdown: a false "killed leader"). A term's
 * prunes go on as the earlier ones are answered, until the listing's
 * backlog is gone (or a prune fails, or the next term lists again). A
 * failed write is a warning, never an error of the term.
 */
#ifndef ZKELECT_AGENT_HISTORY_H
#define ZKELECT_AGENT_HISTORY_H

#include <stdint.h>

#include "zkelect.h"

#define AGENT_HISTORY_INFLIGHT 16
/* Predecessors' records a new leader reads to mark those left open. */
#define AGENT_HISTORY_LOOKBACK 4
/* Slots the prunes and reads leave free: the folder's create, the
 * record's create, the listing, the end, and a mark per predecessor read. */
#define AGENT_HISTORY_RESERVE (4 + AGENT_HISTORY_LOOKBACK)

/* Which of our record's writes is where (the current term's). */
enum hist_rec_state {
    HIST_NONE = 0,      /* no record of this term (no term, or history off) */
    HIST_CREATING,      /* its create is in flight (its end may be sent behind it) */
    HIST_RETRYING,      /* the create found no folder: the folder, then the create again */
    HIST_WRITTEN,       /* created (or updated): version known */
    HIST_FAILED,        /* the create failed: the end is not written */
};

/* Owned by agent_history.c. */
struct agent_history {
    char *dir;                  /* "<path>.history", NULL: history off */
    int keep;
    enum hist_rec_state st;
    int64_t epoch;              /* the record's term */
    char *node;                 /* its leader node */
    int64_t start_ms;
    int version;                /* the record's data version after our last write */
    int64_t end_ms;             /* > 0: the end to write once the create is answered */
    int end_behind;             /* the end was sent right behind the create (HIST_CREATING) */
    int dir_made;               /* the folder's create was answered OK or NODEEXISTS */
    char reason[48];
    int ending;                 /* stepping down: the end is stamped at the release */
    int inflight;
    int bulk;                   /* of inflight: prunes and reads (at most INFLIGHT - RESERVE) */
    int64_t *prune;             /* the epochs the record's term still prunes, oldest first */
    int nprune, pruned;         /* their number; how many were sent */
    int warned;                 /* a failed write was logged at warn once */
};

/* At zke_agent_new, after the settings were copied. 0, or -1 (no memory). */
int agent_history_init(zke_agent *a);
/* The term of epoch began (its on_leader is due): its record is created. */
void agent_history_begin(zke_agent *a, int64_t epoch, const char *node);
/* The term of epoch steps down for reason (on_stepdown is due). */
void agent_history_end(zke_agent *a, int64_t epoch, const char *reason);
/* Its step-down is over (on_stepdown returned, its holds released): the
 * end is stamped now and written ahead of the node's release on the same
 * session; the create still in flight, right behind it (ZooKeeper applies a
 * session's requests in order: the create's version 0 is the one it sets),
 * or, the create being retried after making the folder, once it is in. */
void agent_history_released(zke_agent *a);
void agent_history_free(zke_agent *a);

#endif
