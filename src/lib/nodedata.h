/*
 * nodedata.h - what a candidate publishes in its znode.
 *
 * Our nodes carry one JSON object: {"zkelect":1,"id":"...","data":"...",
 * "epoch":N,"priority":P}. "epoch" is present once the node's owner leads (the leader
 * rewrites its node when its term starts), so observers learn the leader's
 * id, data and fencing epoch from one read. Nodes of other clients (Curator,
 * kazoo) carry anything: their bytes are taken as both id and data.
 * "priority" is present when the candidate has one above 0 (--priority);
 * read from another node it is a hint: anything but an integer within
 * 0..ZKE_PRIORITY_MAX reads as 0.
 * "aside" is present in a leader's data while it asks the candidates ahead
 * of that node (a child name) to step aside for it (a switchover,
 * el_set_aside); read from another node it is a hint too: anything but a
 * plausible child name (1..NODEDATA_ASIDE_MAX printable ASCII bytes, no '/',
 * not "." or "..") reads as none.
 *
 * Pure functions; any thread.
 */
#ifndef ZKELECT_NODEDATA_H
#define ZKELECT_NODEDATA_H

#include <stddef.h>
#include <stdint.h>

struct nodedata {
    char *id;          /* malloc'd; never NULL after a successful decode */
    char *data;        /* malloc'd; never NULL after a successful decode */
    int64_t epoch;     /* 0: not published (not leading, or a foreign node) */
    int ours;          /* the object came from a zkelect candidate */
    int priority;      /* 0..ZKE_PRIORITY_MAX; 0: none published (or not valid) */
    char *aside;       /* malloc'd; NULL: none published (or not a plausible child name) */
};

#define NODEDATA_ASIDE_MAX 255

/* Returns a malloc'd NUL-terminated JSON text, or NULL (out of memory).
 * epoch <= 0 leaves "epoch" out, priority <= 0 "priority". */
char *nodedata_encode(const char *id, const char *data, int64_t epoch, int priority);
/* The same with "aside" (NULL: left out; the caller passes a child name). */
char *nodedata_encode_aside(const char *id, const char *data, int64_t epoch, int priority,
                            const char *aside);
/* Decodes len bytes (not NUL-terminated). 0, or -1 when out of memory. */
int nodedata_decode(const char *buf, int len, struct nodedata *out);
void nodedata_clear(struct nodedata *nd);

#endif
