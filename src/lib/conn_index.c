/*
 * conn_index.c - see conn_index.h. Running members by election path: a
 * chained hash table (FNV-1a), doubled at half full.
 */
#include "conn_int.h"

#include <stdlib.h>
#include <string.h>

unsigned conn_path_hash(const char *p, size_t n)
{
    unsigned h = 2166136261u;           /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 16777619u;
    }
    return h;
}

/* The running member whose election path is p[0..n), or NULL. */
conn_member *conn_index_find(const zke_conn *c, const char *p, size_t n, unsigned h)
{
    if (c->index.size == 0)
        return NULL;
    for (conn_member *m = c->index.tab[h & (c->index.size - 1)]; m != NULL; m = m->hnext) {
        const char *mp = m->ops->path(m->a);
        if (m->hash == h && strncmp(mp, p, n) == 0 && mp[n] == '\0')
            return m;
    }
    return NULL;
}

/* -1: no memory to grow the index */
int conn_index_add(zke_conn *c, conn_member *m)
{
    if ((unsigned)c->index.nrunning + 1 > c->index.size / 2) {
        unsigned size = c->index.size ? c->index.size * 2 : 64;
        conn_member **t = calloc(size, sizeof(conn_member *));
        if (t == NULL)
            return -1;
        for (unsigned i = 0; i < c->index.size; i++) {
            for (conn_member *x = c->index.tab[i], *nx; x != NULL; x = nx) {
                nx = x->hnext;
                x->hnext = t[x->hash & (size - 1)];
                t[x->hash & (size - 1)] = x;
            }
        }
        free(c->index.tab);
        c->index.tab = t;
        c->index.size = size;
    }
    conn_member **slot = &c->index.tab[m->hash & (c->index.size - 1)];
    m->hnext = *slot;
    *slot = m;
    c->index.nrunning++;
    return 0;
}

void conn_index_remove(zke_conn *c, conn_member *m)
{
    for (conn_member **p = &c->index.tab[m->hash & (c->index.size - 1)]; *p != NULL; p = &(*p)->hnext) {
        if (*p == m) {
            *p = m->hnext;
            break;
        }
    }
    m->hnext = NULL;
    c->index.nrunning--;
}

int conn_index_count(const zke_conn *c)
{
    return c->index.nrunning;
}

void conn_index_free(zke_conn *c)
{
    free(c->index.tab);
    c->index.tab = NULL;
    c->index.size = 0;
    c->index.nrunning = 0;
}
