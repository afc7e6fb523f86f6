/*
 * agent_resign.c - leaving the lead or the election on purpose: resign (with the flapping backoff), withdraw, rejoin. See agent.c for the agent's flow.
 */
#define _POSIX_C_SOURCE 200809L
#include "agent_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstr.h"


/* A term given up because its promotion failed (zke_agent_resign_failed)
 * within max(5 s, T) of its start is a flap: the first rejoins after the
 * usual 200 ms, each one more in a row waits twice as long (up to
 * FLAP_MAX_MS, plus jitter), so a policy whose on_leader always fails
 * cannot make the candidates trade the lead forever. A longer term, or a
 * resign by choice, ends the streak. */
#define FLAP_MAX_MS 30000


static int resign(zke_agent *a, int failed)
{
    struct zke_status st;
    if (a->life == AL_RUNNING)
        el_status(a->el, &st);
    else
        st.role = ZKE_ROLE_IDLE;        /* not started, or stopping: not in the election */
    if (st.role != ZKE_ROLE_LEADER) {
        agent_err(a, "not the leader");
        return -1;
    }
    int64_t window = (int64_t)(a->lease.plan.session_ms > 5000 ? a->lease.plan.session_ms : 5000) * 1000000;
    int rejoin = 0;
    if (failed && term_leads(&a->term) && zkc_now_ns() - a->term.began_ns < window) {
        a->flap.streak++;
        a->flap.terms++;
        if (a->flap.streak > 1) {
            int64_t d = 200;
            for (int i = 1; i < a->flap.streak && d < FLAP_MAX_MS; i++)
                d *= 2;
            rejoin = d < FLAP_MAX_MS ? (int)d : FLAP_MAX_MS;
            agent_alog(a, ZKE_LOG_WARN, "%d terms in a row failed within %d ms of their start: "
                 "rejoining in %d ms or a little more (backing off)", a->flap.streak,
                 (int)(window / 1000000), rejoin);
        }
    } else {
        a->flap.streak = failed ? 1 : 0;
    }
    if (el_resign(a->el, rejoin) != 0) {
        agent_err(a, "not the leader");
        return -1;
    }
    agent_kick_now(a);
    return 0;
}


int zke_agent_resign(zke_agent *a)
{
    return resign(a, 0);
}


int zke_agent_resign_failed(zke_agent *a)
{
    return resign(a, 1);
}


static int held_by(const zke_agent *a, const char *reason)
{
    for (int i = 0; i < a->withdraw.n; i++)
        if (strcmp(a->withdraw.holds[i], reason) == 0)
            return i;
    return -1;
}


/* withdrawn_by again from the holds ("ctl,health"); keeps the old one when
 * out of memory */
static void name_holds(zke_agent *a)
{
    size_t n = 1;
    for (int i = 0; i < a->withdraw.n; i++)
        n += strlen(a->withdraw.holds[i]) + 1;
    char *s = a->withdraw.n > 0 ? malloc(n) : NULL;
    if (a->withdraw.n > 0 && s == NULL)
        return;
    if (s != NULL) {
        size_t at = 0;
        for (int i = 0; i < a->withdraw.n; i++) {
            size_t k = strlen(a->withdraw.holds[i]);
            if (i > 0)
                s[at++] = ',';
            memcpy(s + at, a->withdraw.holds[i], k);
            at += k;
        }
        s[at] = '\0';
    }
    free(a->withdraw.by);
    a->withdraw.by = s;
}


void agent_free_withdraw_holds(zke_agent *a)
{
    for (int i = 0; i < a->withdraw.n; i++)
        free(a->withdraw.holds[i]);
    a->withdraw.n = 0;
    free(a->withdraw.by);
    a->withdraw.by = NULL;
}


int zke_agent_withdraw(zke_agent *a, const char *reason)
{
    if (reason == NULL || reason[0] == '\0')
        reason = "withdraw";
    if (a->life != AL_RUNNING) {
        agent_err(a, "not in the election (not started, or stopping)");
        return -1;
    }
    if (held_by(a, reason) >= 0) {
        agent_err(a, "withdrawn already (%s)", a->withdraw.by);
        return -1;
    }
    char *copy = a->withdraw.n < AGENT_WITHDRAW_HOLDS ? xstrdup(reason) : NULL;
    if (copy == NULL) {
        agent_err(a, a->withdraw.n < AGENT_WITHDRAW_HOLDS ? "out of memory"
                 : "withdrawn for %d reasons already (%s)", AGENT_WITHDRAW_HOLDS, a->withdraw.by);
        return -1;
    }
    if (a->withdraw.n == 0 && el_withdraw(a->el, reason) != 0) {
        free(copy);
        agent_err(a, "not in the election (stopping)");
        return -1;
    }
    a->withdraw.holds[a->withdraw.n++] = copy;
    name_holds(a);
    if (a->withdraw.n == 1) {
        agent_census_moved(a);
        agent_alog(a, ZKE_LOG_WARN, "withdrawn from the election (%s)", reason);
        agent_kick_now(a);
    } else {
        agent_alog(a, ZKE_LOG_INFO, "withdrawn for %s too (out of the election: %s)", reason,
                   a->withdraw.by);
    }
    return 0;
}


int zke_agent_rejoin(zke_agent *a, const char *reason)
{
    if (reason == NULL || reason[0] == '\0')
        reason = "withdraw";
    int i = a->life == AL_RUNNING ? held_by(a, reason) : -1;
    if (i < 0) {
        if (a->withdraw.n > 0 && a->life == AL_RUNNING)
            agent_err(a, "not withdrawn for %s (out of the election for: %s)",
                     reason, a->withdraw.by);
        else
            agent_err(a, "not withdrawn");
        return -1;
    }
    if (a->withdraw.n == 1 && el_rejoin(a->el) != 0) {
        agent_err(a, "not withdrawn");
        return -1;
    }
    free(a->withdraw.holds[i]);
    for (int k = i; k + 1 < a->withdraw.n; k++)    /* the order they were taken in */
        a->withdraw.holds[k] = a->withdraw.holds[k + 1];
    a->withdraw.n--;
    name_holds(a);
    if (a->withdraw.n == 0) {
        agent_alog(a, ZKE_LOG_INFO, "rejoining the election (%s)", reason);
        agent_kick_now(a);
    } else {
        agent_alog(a, ZKE_LOG_INFO, "%s no longer keeps the candidate out, %s still does", reason,
                   a->withdraw.by);
    }
    return 0;
}
