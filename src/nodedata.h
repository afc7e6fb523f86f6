/*
 * nodedata.h - what a candidate publishes in its znode.
 *
 * Our nodes carry one JSON object: {"zkelect":1,"id":"...","data":"...",
 * "epoch":N}. "epoch" is present once the node's owner leads (the leader
 * rewrites its node when its term starts), so observers learn the leader's
 * id, data and fencing epoch from one read. Nodes of other clients (Curator,
 * kazoo) carry anything: their bytes are taken as both id and data.
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
};

/* Returns a malloc'd NUL-terminated JSON text, or NULL (out of memory).
 * epoch <= 0 leaves "epoch" out. */
char *nodedata_encode(const char *id, const char *data, int64_t epoch);
/* Decodes len bytes (not NUL-terminated). 0, or -1 when out of memory. */
int nodedata_decode(const char *buf, int len, struct nodedata *out);
void nodedata_clear(struct nodedata *nd);

#endif
