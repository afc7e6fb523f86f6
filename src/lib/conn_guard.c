/*
 * conn_guard.c - see conn_guard.h. The conn's link to the fail-stop guard.
 */
#include "conn_int.h"
#include "closer.h"
#include "guard.h"

#include <string.h>

/* The session's id, password and servers in the guard (guard.h), so that
 * its watcher closes the session once the agent's process is gone and its
 * terms are over; wiped (guard_unpublish) as soon as the session ends or
 * we close it ourselves. */
void conn_guard_publish(zke_conn *c)
{
    if (c->guard.g == NULL)
        return;
    if (c->guard.users != c->ms.n || zkclient_closing(c->zkc)) {
        /* an agent of the session is not guarded by it (the watcher knows
         * nothing of that agent's terms, so it must not end the session),
         * or we close it ourselves */
        guard_session_clear(c->guard.g, c->guard.base);
        return;
    }
    struct closer_addr a[GUARD_SESSION_ADDRS], more[GUARD_SESSION_ADDRS];
    unsigned char pw[16];
    uint64_t id = 0;
    if (zkclient_credentials(c->zkc, &id, pw, &a[0].sa, &a[0].len) != 0) {
        guard_session_clear(c->guard.g, c->guard.base);
        return;
    }
    int n = a[0].len > 0;       /* the connected server first */
    int m = closer_hosts(c->cfg.hosts, more, GUARD_SESSION_ADDRS);
    for (int i = 0; i < m && n < GUARD_SESSION_ADDRS; i++)
        if (a[0].len == 0 || more[i].len != a[0].len || memcmp(&more[i].sa, &a[0].sa, a[0].len) != 0)
            a[n++] = more[i];
    guard_session_set(c->guard.g, c->guard.base, id, pw, zkclient_timeout_ms(c->zkc), a, n);
    volatile unsigned char *v = pw;     /* (our copy of the secret) */
    for (size_t i = 0; i < sizeof pw; i++)
        v[i] = 0;
}

void conn_guard_unpublish(zke_conn *c)
{
    if (c->guard.g != NULL)
        guard_session_clear(c->guard.g, c->guard.base);
}

int conn_guard_base(zke_conn *c, zke_guard *g)
{
    if (g == NULL || (c->guard.g != NULL && c->guard.g != g))
        return 0;
    if (c->guard.g == NULL) {
        int b = guard_base_take(g);
        if (b == 0)
            return 0;
        c->guard.g = g;
        c->guard.base = b;
        c->guard.base_ns = 0;
        conn_guard_publish(c);
    }
    c->guard.users++;
    (void)conn_guard_push(c);
    return c->guard.base;
}

void conn_guard_release(zke_conn *c)
{
    if (c->guard.g == NULL)
        return;
    if (--c->guard.users > 0) {
        conn_guard_publish(c);       /* (an unguarded agent may remain) */
        return;
    }
    guard_base_release(c->guard.g, c->guard.base);
    c->guard.g = NULL;
    c->guard.base = 0;
    c->guard.base_ns = 0;
}

unsigned conn_guard_gen(const zke_conn *c)
{
    return c->guard.gen;
}

int64_t conn_guard_push(zke_conn *c)
{
    if (c->guard.g == NULL)
        return 0;
    int64_t base = zkclient_lease_base_ns(c->zkc);
    if (base > 0 && base != c->guard.base_ns) {
        guard_base_set(c->guard.g, c->guard.base, base);
        c->guard.base_ns = base;
    }
    return c->guard.base_ns;
}

void conn_guard_new_handle(zke_conn *c)
{
    /* the terms of the session that ended keep the ends they have: the
     * new session's base must not move them later (agents armed with
     * absolute ends see the generation and keep theirs) */
    if (c->guard.g != NULL && c->guard.base_ns != 0) {
        guard_base_freeze(c->guard.g, c->guard.base);
        c->guard.base_ns = 0;
    }
    c->guard.gen++;
    conn_guard_unpublish(c);    /* the session that ended (published again once connected) */
}

int conn_guard_silent(zke_conn *c, int64_t now)
{
    return c->guard.g != NULL && !guard_watcher_live(c->guard.g, now);
}

int64_t conn_guard_pending(zke_conn *c)
{
    return c->guard.g != NULL ? guard_watcher_pending(c->guard.g) : 0;
}
