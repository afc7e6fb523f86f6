/*
 * history.h - the history of terms, pure: a term's record (encoded,
 * decoded from any bytes), the record's node name, and the audit's
 * judgement of a reading (zke_history_judge, zkelect.h). No I/O: the
 * writer is agent_history.c, the reader histread.c.
 *
 * A record is the node "<path>.history/term-<epoch, 19 digits>" whose data
 * is {"zkelect_term":1,"epoch":E,"id":"...","node":"...","start_ms":S}
 * with "end_ms" and "reason" once the term stepped down, and "closed_by"
 * when a successor marked it "no_stepdown". Its data is another client's
 * bytes once written: hist_decode() takes anything and refuses what is no
 * record (garbage, counted by the reader, never followed).
 *
 * Pure functions; any thread.
 */
#ifndef ZKELECT_HISTORY_H
#define ZKELECT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define HIST_PREFIX "term-"
#define HIST_NAME_LEN 24            /* "term-" + 19 digits */
#define HIST_STR_MAX 1024           /* id, node, reason, closed_by: longer is garbage */
#define HIST_NO_STEPDOWN "no_stepdown"

struct hist_rec {
    int64_t epoch;                  /* > 0 */
    char *id, *node;                /* malloc'd, never NULL after a decode */
    int64_t start_ms;               /* > 0 */
    int64_t end_ms;                 /* 0: none */
    char *reason;                   /* NULL: open */
    char *closed_by;                /* NULL: none */
};

/* "term-%019lld" into out (HIST_NAME_LEN + 1 bytes). */
void hist_name(int64_t epoch, char out[HIST_NAME_LEN + 1]);
/* A record's name: 0 and *epoch (> 0), or -1. */
int hist_parse_name(const char *name, int64_t *epoch);
/* The record as JSON (malloc'd), or NULL when out of memory. */
char *hist_encode(const struct hist_rec *r);
/* len bytes (not NUL-terminated) as a record whose epoch is the name's
 * (name NULL: any): 0, or -1 (no record, or out of memory; out cleared). */
int hist_decode(const char *buf, int len, const char *name, struct hist_rec *out);
void hist_clear(struct hist_rec *r);
/* What the leader of epoch does with the folder's n record names' epochs
 * e (sorted here, ascending): *pred the index of its newest predecessor
 * (the largest epoch below its own; -1: none), from which it reads back;
 * *prune how many of the oldest it deletes: those beyond the newest keep,
 * never its own nor a later one's. */
void hist_plan(int64_t *e, int n, int64_t epoch, int keep, int *pred, int *prune);

#endif
