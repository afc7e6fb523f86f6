/*
 * census_api.c - the public census (zkelect.h, zke_census_run) on top of
 * census.c: settings checked, the entries handed to the host as public
 * candidates, reasons named as zkelect.h names them.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkelect.h"
#include "census.h"

#include <stdio.h>
#include <stdlib.h>

struct census_call {
    zke_census_fn *done;
    void *ud;
};

/* census.c -> the host: its entries as public candidates (borrowed). */
static void census_done(void *ud, const struct census *c)
{
    struct census_call *call = ud;
    struct zke_census pub = { ob_reason_name(c->why), c->errstr, 0, NULL, c->others, c->other };
    struct zke_candidate *cand = NULL;
    if (c->why == OB_OK && c->n > 0) {
        cand = calloc((size_t)c->n, sizeof *cand);
        if (cand == NULL) {
            pub.reason = ob_reason_name(OB_INTERNAL);
            pub.msg = "out of memory";
        }
    }
    for (int i = 0; cand != NULL && i < c->n; i++) {
        const struct census_entry *e = &c->e[i];
        cand[i] = (struct zke_candidate){ e->node, e->seq, e->id, e->data, e->kind, e->epoch,
                                          e->owner, e->ctime_ms, e->gone, e->priority,
                                          e->mtime_ms };
    }
    if (cand != NULL) {
        pub.n = c->n;
        pub.candidates = cand;
    }
    call->done(&pub, call->ud);
    free(cand);
    free(call);
}

int zke_census_run(struct ev_loop *loop, const struct zke_observer_settings *s,
                   zke_census_fn *done, void *ud, char *err, size_t errlen)
{
    if (loop == NULL || s == NULL || done == NULL || s->zk == NULL || s->path == NULL) {
        snprintf(err, errlen, "census: a loop, settings with zk and path, and done are required");
        return -1;
    }
    if (zke_check_hosts(s->zk, err, errlen) != 0 || zke_check_path(s->path, err, errlen) != 0 ||
        zke_check_auth(s->auth_scheme, s->auth_credentials, err, errlen) != 0 ||
        (s->tls != NULL && zke_check_tls(s->tls, NULL, err, errlen) != 0))
        return -1;
    if (s->session_timeout_ms < 0) {
        snprintf(err, errlen, "session timeout %d ms is negative", s->session_timeout_ms);
        return -1;
    }
    struct census_call *call = malloc(sizeof *call);
    if (call == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    call->done = done;
    call->ud = ud;
    int timeout = s->connect_timeout_ms == 0 ? ZKE_DEFAULT_CONNECT_TIMEOUT_MS : s->connect_timeout_ms;
    if (census_run(loop, s->zk, s->path, s->session_timeout_ms, timeout, s->auth_scheme,
                   s->auth_credentials, s->tls, census_done, call) != 0) {
        free(call);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}
