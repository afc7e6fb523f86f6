/*
 * health.c - health()'s hysteresis (script_int.h's struct health): the
 * script's check fails health_fails times in a row and the candidate
 * withdraws; it passes health_passes times in a row and it rejoins.
 * hookrun.c runs the check and reports each result here. Calls no other
 * file of the module.
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"
#include "xstr.h"

#include <stdlib.h>

void health_init(struct health *h, const struct script_opts *opts)
{
    h->healthy = 1;
    h->need_fails = opts && opts->health_fails > 0 ? opts->health_fails : ZKE_DEFAULT_HEALTH_FAILS;
    h->need_passes = opts && opts->health_passes > 0 ? opts->health_passes
                                                     : ZKE_DEFAULT_HEALTH_PASSES;
}

void health_set(struct health *h, void (*fn)(void *ud, int healthy), int healthy)
{
    h->on_health = fn;
    h->healthy = healthy != 0;
    h->fails = h->passes = 0;
}

/* Logged: each failure of a healthy candidate (warn, "k of N"), the
 * withdrawal, each pass of a withdrawn one (info, "k of M") and the
 * rejoin; a withdrawn candidate's further failures only at debug (it said
 * so once when it withdrew). msg is freed. */
static void health_log(script *sc, enum zke_log_level lvl, char *msg)
{
    script_log(sc, lvl, "health", "health", msg != NULL ? msg : "out of memory");
    free(msg);
}

void health_result(script *sc, int healthy, const char *why)
{
    struct health *h = &sc->health;
    if (healthy) {
        h->fails = 0;
        h->passes++;
        if (!h->healthy && h->passes < h->need_passes)
            health_log(sc, ZKE_LOG_INFO, xprintf("check passed (%d of %d) while withdrawn",
                                                 h->passes, h->need_passes));
        if (!h->healthy && h->passes >= h->need_passes) {
            h->healthy = 1;
            health_log(sc, ZKE_LOG_INFO, xstrdup("healthy again: rejoining"));
            if (h->on_health)
                h->on_health(sc->cb.ud, 1);
        }
        return;
    }
    h->passes = 0;
    h->fails++;
    if (h->healthy)
        health_log(sc, ZKE_LOG_WARN, xprintf("check failed (%d of %d): %s", h->fails,
                                             h->need_fails, why));
    else
        health_log(sc, ZKE_LOG_DEBUG, xprintf("check failed again (withdrawn; %d in a row): %s",
                                              h->fails, why));
    if (h->healthy && h->fails >= h->need_fails) {
        h->healthy = 0;
        health_log(sc, ZKE_LOG_WARN, xprintf("unhealthy: withdrawing from the election until %d "
                                             "checks in a row pass (until then failures are "
                                             "logged at debug)", h->need_passes));
        if (h->on_health)
            h->on_health(sc->cb.ud, 0);
    }
}

void health_start(struct health *h, struct ev_loop *loop, int interval_ms,
                  void (*cb)(struct ev_loop *loop, ev_timer *w, int revents), void *data)
{
    int ms = interval_ms > 0 ? interval_ms : ZKE_DEFAULT_HEALTH_INTERVAL_MS;
    double iv = ms / 1000.0;
    ev_timer_init(&h->timer, cb, iv, iv);
    h->timer.data = data;
    ev_timer_start(loop, &h->timer);
    ev_unref(loop);     /* the check alone does not keep the loop alive */
}

void health_stop(struct health *h, struct ev_loop *loop)
{
    h->on_health = NULL;
    if (loop != NULL && ev_is_active(&h->timer)) {
        ev_ref(loop);   /* started unreferenced */
        ev_timer_stop(loop, &h->timer);
    }
}
