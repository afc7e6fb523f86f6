/*
 * zkclient_multi.c - the ops of a multi (zkclient_multi): copied at
 * submission, given to the library as zoo_op_t when the request is
 * handed over, and their per-op results read at its completion. The
 * copies, the created paths' buffers and the results live with the
 * request (the library writes results and created paths at completion).
 */
#define _POSIX_C_SOURCE 200809L
#include "zkclient_int.h"

#include <stdlib.h>
#include <string.h>

/* A created node's path: the given path plus a 10-digit sequence, at most
 * this long; a longer one is cut by the library (the node is not). */
#define CREATED_PATH_MAX 1024

struct zkc_multi {
    int n;
    struct zkc_op *ops;         /* copies: path and data owned */
    zoo_op_t *zops;
    zoo_op_result_t *zres;
    struct Stat *stats;
    char (*created)[CREATED_PATH_MAX];
    struct zkc_op_result *out;  /* what the completion reports */
};

void zkc_multi_free(struct zkc_multi *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < m->n; i++) {
        free((char *)m->ops[i].path);
        free((char *)m->ops[i].data);
    }
    free(m->ops);
    free(m->zops);
    free(m->zres);
    free(m->stats);
    free(m->created);
    free(m->out);
    free(m);
}

static int copy_op(struct zkc_op *to, const struct zkc_op *from)
{
    *to = *from;
    to->path = NULL;
    to->data = NULL;
    char *p = malloc(strlen(from->path) + 1);
    if (p == NULL)
        return -1;
    memcpy(p, from->path, strlen(from->path) + 1);
    to->path = p;
    if (from->data != NULL) {
        char *d = malloc(from->len > 0 ? from->len : 1);
        if (d == NULL)
            return -1;
        memcpy(d, from->data, from->len);
        to->data = d;
    }
    return 0;
}

struct zkc_multi *zkc_multi_copy(const struct zkc_op *ops, int n)
{
    struct zkc_multi *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->ops = calloc((size_t)n, sizeof *m->ops);
    m->zops = calloc((size_t)n, sizeof *m->zops);
    m->zres = calloc((size_t)n, sizeof *m->zres);
    m->stats = calloc((size_t)n, sizeof *m->stats);
    m->created = calloc((size_t)n, sizeof *m->created);
    m->out = calloc((size_t)n, sizeof *m->out);
    if (m->ops == NULL || m->zops == NULL || m->zres == NULL || m->stats == NULL ||
        m->created == NULL || m->out == NULL) {
        zkc_multi_free(m);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        m->n = i + 1;
        if (copy_op(&m->ops[i], &ops[i]) != 0) {
            zkc_multi_free(m);
            return NULL;
        }
    }
    m->n = n;
    return m;
}

static int create_mode(int flags)
{
    int eph = (flags & ZKC_CREATE_EPHEMERAL) != 0, seq = (flags & ZKC_CREATE_SEQUENTIAL) != 0;
    return eph && seq ? ZOO_EPHEMERAL_SEQUENTIAL : eph ? ZOO_EPHEMERAL
         : seq ? ZOO_PERSISTENT_SEQUENTIAL : ZOO_PERSISTENT;
}

int zkc_multi_issue(zkclient *s, struct zkc_multi *m, void_completion_t cb, const void *data)
{
    for (int i = 0; i < m->n; i++) {
        const struct zkc_op *o = &m->ops[i];
        int len = o->data != NULL ? (int)o->len : -1;
        memset(&m->stats[i], 0, sizeof m->stats[i]);
        m->created[i][0] = '\0';
        switch (o->type) {
        case ZKC_OP_CREATE:
            zoo_create_op_init(&m->zops[i], o->path, o->data, len, &s->auth.acl_vec,
                               create_mode(o->flags), m->created[i], CREATED_PATH_MAX);
            break;
        case ZKC_OP_SET:
            zoo_set_op_init(&m->zops[i], o->path, o->data, len, o->version, &m->stats[i]);
            break;
        case ZKC_OP_DELETE: zoo_delete_op_init(&m->zops[i], o->path, o->version); break;
        default: zoo_check_op_init(&m->zops[i], o->path, o->version); break;
        }
    }
    memset(m->zres, 0, (size_t)m->n * sizeof *m->zres);
    return zoo_amulti(s->zh, m->n, m->zops, m->zres, cb, data);
}

/* An op's own code in a multi that failed: the one that failed has its
 * error; the others were not applied (ZooKeeper answers them with ZOK or
 * ZRUNTIMEINCONSISTENCY). */
static int failed_at(const struct zkc_multi *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->zres[i].err != ZOK && m->zres[i].err != ZRUNTIMEINCONSISTENCY)
            return i;
    return -1;
}

const struct zkc_op_result *zkc_multi_results(struct zkc_multi *m, int rc,
                                              enum zkc_rc (*map)(int))
{
    int bad = rc == ZOK ? -1 : failed_at(m);
    for (int i = 0; i < m->n; i++) {
        struct zkc_op_result *o = &m->out[i];
        memset(o, 0, sizeof *o);
        if (rc == ZOK) {
            o->zrc = m->zres[i].err;
            if (m->ops[i].type == ZKC_OP_CREATE)
                o->path = m->created[i];
            if (m->ops[i].type == ZKC_OP_SET) {
                o->has_stat = 1;
                o->version = m->stats[i].version;
                o->mzxid = m->stats[i].mzxid;
            }
        } else if (bad >= 0) {
            o->zrc = i == bad ? m->zres[i].err : ZRUNTIMEINCONSISTENCY;
        } else {
            o->zrc = rc;            /* no server answer per op (a lost connection) */
        }
        o->rc = o->zrc == ZRUNTIMEINCONSISTENCY && rc != ZOK ? ZKC_ROLLEDBACK : map(o->zrc);
    }
    return m->out;
}
