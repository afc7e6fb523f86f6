/* switchboard.c - see switchboard.h. */
#define _POSIX_C_SOURCE 200809L
#include "switchboard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <ev.h>

#include "exits.h"
#include "log.h"
#include "options.h"

struct switchboard {
    struct ev_loop *loop;
    control *ctl;
    zke_agent *agent;
    char *zk, *path, *id, *scheme, *cred;
    int session_ms;
    int (*reload)(void *ud);
    void *ud;
    const zke_policy *policy;
    /* the hand-over in progress: its request (token 0: none, or answered) */
    unsigned long token;
    /* the reload requests waiting for the reload's outcome (at most one per
     * connection the control socket serves at once) */
    unsigned long reloads[CONTROL_MAX_CONNS];
    int nreloads;
    int handing_over, stopping;
    /* the scheduled switchover (resign --to ID --at TIME): sched_to NULL
     * when none; sched fires at sched_at, wall clock (ev_periodic) */
    char *sched_to;
    double sched_at;
    ev_periodic sched;
};

/* t (seconds since the epoch) as RFC 3339 UTC into buf. */
static const char *utc_text(double t, char *buf, size_t len)
{
    time_t s = (time_t)t;
    struct tm tm;
    if (gmtime_r(&s, &tm) == NULL || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "%.0f", t);
    return buf;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

/* Answers with o (consumed): adds "ok". */
static void answer(switchboard *sb, unsigned long token, cJSON *o, int status)
{
    cJSON_AddBoolToObject(o, "ok", status == EX_OK);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    (void)control_answer(sb->ctl, token, txt != NULL ? txt : "{\"ok\":false,\"error\":\"out of "
                         "memory\",\"reason\":\"internal\"}", txt != NULL ? status : EX_SOFTWARE);
    free(txt);
}

static void fail(switchboard *sb, unsigned long token, int status, const char *reason,
                 const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "error", msg);
    cJSON_AddStringToObject(o, "reason", reason);
    answer(sb, token, o, status);
}

static void done(switchboard *sb, unsigned long token, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "message", msg);
    answer(sb, token, o, EX_OK);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v != NULL)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static void status(switchboard *sb, unsigned long token)
{
    struct zke_status st;
    /* a person reads it: the census keeps a follower's leader fresh */
    if (zke_agent_view(sb->agent, &st) != 0) {
        fail(sb, token, EX_SOFTWARE, "internal", zke_agent_errstr(sb->agent));
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", sb->id);
    cJSON_AddStringToObject(o, "path", sb->path);
    cJSON_AddStringToObject(o, "role", st.withdrawn ? "withdrawn" : zke_role_name(st.role));
    cJSON_AddBoolToObject(o, "withdrawn", st.withdrawn);
    add_str(o, "withdrawn_by", st.withdrawn_by);
    cJSON_AddBoolToObject(o, "connected", st.connected);
    cJSON_AddBoolToObject(o, "suspended", st.suspended);
    cJSON_AddBoolToObject(o, "sequence_wrap", zke_agent_sequence_wrap(sb->agent));
    add_str(o, "node", st.node);
    add_str(o, "leader", st.leader);
    cJSON_AddNumberToObject(o, "epoch", (double)(st.role == ZKE_ROLE_LEADER ? st.epoch
                                                                        : st.leader_epoch));
    if (st.role == ZKE_ROLE_LEADER)
        cJSON_AddNumberToObject(o, "lease_ms", (double)st.lease_ms);
    else
        cJSON_AddNullToObject(o, "lease_ms");
    cJSON_AddNumberToObject(o, "position", st.position);
    if (st.election_size >= 0)
        cJSON_AddNumberToObject(o, "candidates", st.election_size);
    else
        cJSON_AddNullToObject(o, "candidates");
    char session[24];
    snprintf(session, sizeof session, "0x%llx", (unsigned long long)st.session);
    cJSON_AddStringToObject(o, "session", session);
    if (sb->sched_to != NULL) {
        char when[40], line[600];
        snprintf(line, sizeof line, "%.500s at %s", sb->sched_to,
                 utc_text(sb->sched_at, when, sizeof when));
        cJSON_AddStringToObject(o, "scheduled", line);
    } else {
        cJSON_AddNullToObject(o, "scheduled");
    }
    const char *ls, *lc, *lm;
    zke_agent_lifecycle(sb->agent, &ls, &lc, &lm);
    cJSON *life = cJSON_AddObjectToObject(o, "lifecycle");
    if (life != NULL) {
        add_str(life, "session", ls);
        add_str(life, "conn", lc);
        add_str(life, "member", lm);
    }
    const char *hstate;
    const char *hook = zke_policy_hook_run(sb->policy, &hstate);
    if (hook != NULL) {
        cJSON *hr = cJSON_AddObjectToObject(o, "hook_run");
        if (hr != NULL) {
            cJSON_AddStringToObject(hr, "hook", hook);
            cJSON_AddStringToObject(hr, "state", hstate);
        }
    } else {
        cJSON_AddNullToObject(o, "hook_run");
    }
    answer(sb, token, o, EX_OK);
}

/* --- the hand-over (resign ID): zke_agent_resign_to ----------------------- */

static int handover_status(const char *reason)
{
    if (strcmp(reason, "no_candidate") == 0)
        return EX_DATAERR;
    if (strcmp(reason, "unreachable") == 0)
        return EX_UNAVAILABLE;
    if (strcmp(reason, "internal") == 0)
        return EX_SOFTWARE;
    return EX_TEMPFAIL;
}

static void handover_done(zke_agent *a, const struct zke_handover *r, void *ud)
{
    switchboard *sb = ud;
    (void)a;
    sb->handing_over = 0;
    if (sb->stopping) {
        free(sb);               /* switchboard_free() answered and left it to us */
        return;
    }
    unsigned long token = sb->token;
    sb->token = 0;
    if (r->reason != NULL) {
        const char *reason = strcmp(r->reason, "stopped") == 0 || strcmp(r->reason, "freed") == 0
                                 ? "stopping" : strcmp(r->reason, "unreachable") == 0 && !r->resigned
                                 ? "unreachable" : r->reason;
        size_t len = strlen(r->to) + strlen(r->msg) + 32;
        char *line = malloc(len);
        if (line != NULL)
            snprintf(line, len, "resign --to %s refused: %s", r->to, r->msg);
        log_msg(ZKE_LOG_WARN, "ctl", line != NULL ? line : r->msg);
        free(line);
        fail(sb, token, handover_status(r->reason), reason, r->msg);
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "message", r->msg);
    cJSON_AddStringToObject(o, "leader", r->leader);
    cJSON_AddNumberToObject(o, "epoch", (double)r->leader_epoch);
    if (r->stepped_aside != NULL)
        cJSON_AddStringToObject(o, "stepped_aside", r->stepped_aside);
    log_msg(ZKE_LOG_INFO, "ctl", r->msg);
    answer(sb, token, o, EX_OK);
}

/* The scheduled switchover's time came: the hand-over as resign --to's,
 * with nobody waiting for its answer (token 0: the log says the outcome). */
static void sched_fire(struct ev_loop *loop, ev_periodic *w, int revents)
{
    switchboard *sb = w->data;
    (void)loop;
    (void)revents;
    char *to = sb->sched_to;
    sb->sched_to = NULL;
    ev_periodic_stop(sb->loop, &sb->sched);
    if (to == NULL)
        return;
    struct zke_status st;
    char msg[600];
    (void)zke_agent_status(sb->agent, &st);
    if (sb->handing_over) {
        snprintf(msg, sizeof msg, "scheduled switchover to %.400s not made: a hand-over is in "
                 "progress already", to);
        log_msg(ZKE_LOG_WARN, "ctl", msg);
    } else if (st.role != ZKE_ROLE_LEADER) {
        snprintf(msg, sizeof msg, "scheduled switchover to %.400s not made: this candidate does "
                 "not lead", to);
        log_msg(ZKE_LOG_WARN, "ctl", msg);
    } else if (zke_agent_resign_to(sb->agent, to, handover_done, sb) != 0) {
        snprintf(msg, sizeof msg, "scheduled switchover to %.300s not made: %.200s", to,
                 zke_agent_errstr(sb->agent));
        log_msg(ZKE_LOG_WARN, "ctl", msg);
    } else {
        snprintf(msg, sizeof msg, "scheduled switchover to %.400s: starting", to);
        log_msg(ZKE_LOG_INFO, "ctl", msg);
        sb->token = 0;
        sb->handing_over = 1;
    }
    free(to);
}

/* The id a switchover goes to: refused (1, the answer sent) when it is no
 * valid id or this candidate's own; 0 when it may be asked for. */
static int bad_target(switchboard *sb, unsigned long token, const char *to)
{
    char err[600];
    if (zke_check_id(to, err, sizeof err) != 0) {
        fail(sb, token, EX_USAGE, "usage", err);
        return 1;
    }
    if (strcmp(to, sb->id) == 0) {
        fail(sb, token, EX_DATAERR, "self", "that is this candidate's own id");
        return 1;
    }
    return 0;
}

/* resign --to ID --at TIME: "schedule SECONDS ID" (SECONDS since the
 * epoch, the wall clock's). Only a leader takes one; one at a time. */
static void schedule(switchboard *sb, unsigned long token, const char *arg)
{
    char err[600], when[40];
    char *end = NULL;
    errno = 0;
    double at = strtod(arg, &end);
    if (end == arg || errno != 0 || *end != ' ' || !(at > 0 && at < 1e11)) {
        fail(sb, token, EX_USAGE, "usage", "schedule: SECONDS ID");
        return;
    }
    const char *to = end + 1;
    if (bad_target(sb, token, to))
        return;
    if (sb->sched_to != NULL) {
        snprintf(err, sizeof err, "a switchover to %.400s is scheduled already at %s (zkelect "
                 "ctl resign --cancel)", sb->sched_to, utc_text(sb->sched_at, when, sizeof when));
        fail(sb, token, EX_TEMPFAIL, "busy", err);
        return;
    }
    struct zke_status st;
    (void)zke_agent_status(sb->agent, &st);
    if (st.role != ZKE_ROLE_LEADER) {
        fail(sb, token, EX_TEMPFAIL, "not_leader", "this candidate does not lead");
        return;
    }
    sb->sched_to = strdup(to);
    if (sb->sched_to == NULL) {
        fail(sb, token, EX_SOFTWARE, "internal", "out of memory");
        return;
    }
    sb->sched_at = at;
    ev_periodic_set(&sb->sched, at, 0., NULL);
    ev_periodic_start(sb->loop, &sb->sched);
    snprintf(err, sizeof err, "switchover to %.400s scheduled at %s (zkelect ctl resign --cancel "
             "cancels it)", to, utc_text(at, when, sizeof when));
    log_msg(ZKE_LOG_INFO, "ctl", err);
    done(sb, token, err);
}

/* resign --cancel: the scheduled switchover is dropped. */
static void unschedule(switchboard *sb, unsigned long token)
{
    char msg[600], when[40];
    if (sb->sched_to == NULL) {
        fail(sb, token, EX_TEMPFAIL, "not_scheduled", "no switchover is scheduled");
        return;
    }
    ev_periodic_stop(sb->loop, &sb->sched);
    snprintf(msg, sizeof msg, "the switchover to %.400s at %s is cancelled", sb->sched_to,
             utc_text(sb->sched_at, when, sizeof when));
    free(sb->sched_to);
    sb->sched_to = NULL;
    log_msg(ZKE_LOG_INFO, "ctl", msg);
    done(sb, token, msg);
}

static void resign_to(switchboard *sb, unsigned long token, const char *to)
{
    char err[600];
    if (sb->handing_over) {
        fail(sb, token, EX_TEMPFAIL, "busy", "a hand-over is in progress already");
        return;
    }
    if (bad_target(sb, token, to))
        return;
    struct zke_status st;
    (void)zke_agent_status(sb->agent, &st);
    if (st.role != ZKE_ROLE_LEADER) {
        snprintf(err, sizeof err, "this candidate does not lead (%s%s%s)",
                 st.withdrawn ? "withdrawn" : zke_role_name(st.role),
                 st.leader != NULL ? "; the leader is " : "", st.leader ? st.leader : "");
        fail(sb, token, EX_TEMPFAIL, "not_leader", err);
        return;
    }
    if (zke_agent_resign_to(sb->agent, to, handover_done, sb) != 0) {
        fail(sb, token, EX_TEMPFAIL, "not_leader", zke_agent_errstr(sb->agent));
        return;
    }
    sb->token = token;
    sb->handing_over = 1;
}

/* --- the commands --------------------------------------------------------- */

void switchboard_request(void *ud, unsigned long token, const char *cmd, const char *arg)
{
    switchboard *sb = ud;
    char msg[600];
    if (strcmp(cmd, "status") == 0 && arg[0] == '\0') {
        status(sb, token);
    } else if (strcmp(cmd, "resign") == 0 && arg[0] != '\0') {
        resign_to(sb, token, arg);
    } else if (strcmp(cmd, "schedule") == 0 && arg[0] != '\0') {
        schedule(sb, token, arg);
    } else if (strcmp(cmd, "unschedule") == 0 && arg[0] == '\0') {
        unschedule(sb, token);
    } else if (strcmp(cmd, "resign") == 0) {
        if (zke_agent_resign(sb->agent) != 0) {
            fail(sb, token, EX_TEMPFAIL, "not_leader", "this candidate does not lead");
            return;
        }
        log_msg(ZKE_LOG_INFO, "ctl", "resigning (zkelect ctl resign)");
        done(sb, token, "resigned: rejoining at the back");
    } else if (strcmp(cmd, "withdraw") == 0 && arg[0] == '\0') {
        if (zke_agent_withdraw(sb->agent, "ctl") != 0) {
            fail(sb, token, EX_TEMPFAIL, "not_in_election", zke_agent_errstr(sb->agent));
            return;
        }
        done(sb, token, "withdrawn: the session stays, the node is gone (zkelect ctl rejoin)");
    } else if (strcmp(cmd, "rejoin") == 0 && arg[0] == '\0') {
        if (zke_agent_rejoin(sb->agent, "ctl") != 0) {
            fail(sb, token, EX_TEMPFAIL, "not_withdrawn", zke_agent_errstr(sb->agent));
            return;
        }
        struct zke_status st;
        if (zke_agent_status(sb->agent, &st) == 0 && st.withdrawn && st.withdrawn_by != NULL) {
            snprintf(msg, sizeof msg, "withdrawn by ctl no more; still out of the election for: %.400s",
                     st.withdrawn_by);
            done(sb, token, msg);
        } else {
            done(sb, token, "rejoining the election");
        }
    } else if (strcmp(cmd, "reload") == 0 && arg[0] == '\0') {
        if (sb->nreloads == CONTROL_MAX_CONNS) {      /* (the socket serves no more at once) */
            fail(sb, token, EX_TEMPFAIL, "busy", "too many reload requests waiting");
            return;
        }
        log_msg(ZKE_LOG_INFO, "ctl", "reload asked (zkelect ctl reload)");
        if (sb->reload(sb->ud) != 0) {
            fail(sb, token, EX_USAGE, "no_script", "this agent runs no script to reload "
                 "(zkelect run --script FILE)");
            return;
        }
        sb->reloads[sb->nreloads++] = token;     /* answered by switchboard_reloaded */
    } else {
        snprintf(msg, sizeof msg, "unknown request '%.200s%s%.200s' (status, resign [ID], "
                 "schedule SECONDS ID, unschedule, withdraw, rejoin, reload)", cmd, arg[0] ? " " : "", arg);
        fail(sb, token, EX_USAGE, "usage", msg);
    }
}

void switchboard_reloaded(switchboard *sb, int code, const char *err)
{
    if (sb == NULL)
        return;
    for (int i = 0; i < sb->nreloads; i++) {
        if (code == EX_OK) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "message", "script reloaded");
            answer(sb, sb->reloads[i], o, EX_OK);
        } else {
            char msg[2200];
            snprintf(msg, sizeof msg, "reload refused, the old script runs on: %s", err);
            fail(sb, sb->reloads[i], code, "refused", msg);
        }
    }
    sb->nreloads = 0;
}

switchboard *switchboard_new(struct ev_loop *loop, const struct switchboard_settings *s)
{
    switchboard *sb = calloc(1, sizeof *sb);
    if (sb == NULL)
        return NULL;
    sb->loop = loop;
    sb->agent = s->agent;
    sb->session_ms = s->session_timeout_ms;
    sb->reload = s->reload;
    sb->ud = s->ud;
    sb->policy = s->policy;
    sb->zk = dup_or_null(s->zk);
    sb->path = dup_or_null(s->path);
    sb->id = dup_or_null(s->id);
    sb->scheme = dup_or_null(s->auth_scheme);
    sb->cred = dup_or_null(s->auth_credentials);
    ev_periodic_init(&sb->sched, sched_fire, 0., 0., NULL);
    sb->sched.data = sb;
    if (sb->zk == NULL || sb->path == NULL || sb->id == NULL ||
        (s->auth_scheme != NULL && sb->scheme == NULL) ||
        (s->auth_credentials != NULL && sb->cred == NULL)) {
        switchboard_free(sb);
        return NULL;
    }
    return sb;
}

void switchboard_attach(switchboard *sb, control *ctl)
{
    sb->ctl = ctl;
}

void switchboard_free(switchboard *sb)
{
    if (sb == NULL)
        return;
    if (sb->token != 0)
        fail(sb, sb->token, EX_TEMPFAIL, "stopping", "the agent is stopping");
    sb->token = 0;
    for (int i = 0; i < sb->nreloads; i++)
        fail(sb, sb->reloads[i], EX_TEMPFAIL, "stopping", "the agent is stopping");
    sb->nreloads = 0;
    ev_periodic_stop(sb->loop, &sb->sched);
    free(sb->sched_to);
    sb->sched_to = NULL;
    free(sb->zk);
    free(sb->path);
    free(sb->id);
    free(sb->scheme);
    options_wipe(sb->cred);
    free(sb->cred);
    sb->zk = sb->path = sb->id = sb->scheme = sb->cred = NULL;
    if (sb->handing_over)
        sb->stopping = 1;       /* handover_done frees it: the agent calls it once, at the
                                 * latest when it is freed */
    else
        free(sb);
}
