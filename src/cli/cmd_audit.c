/* cmd_audit.c - zkelect audit: follow an election's history of terms
 * (zke_history_reader: watches, no polling) and its leader (an observer),
 * judge every reading (zke_history_judge) and raise each new finding once:
 * a log line ("audit", warn), a counter of its kind on /metrics (--status),
 * and the exit code (1 when anything was raised: --once at once, following
 * at SIGTERM/SIGINT). Following, the first reading's findings are the past
 * (a restarted audit finds the same history): logged "audit_past" (info),
 * in the gauge only, never raised. --since TIME leaves out findings whose
 * terms' stamps are all before TIME. It never joins nor writes. */
#define _GNU_SOURCE         /* strptime, timegm */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ev.h>

#include "commands.h"
#include "credentials.h"
#include "exits.h"
#include "histview.h"
#include "httpd.h"
#include "log.h"
#include "utf8.h"
#include "zkelect.h"

/* Findings remembered (each raised once): beyond this many the oldest are
 * forgotten, and one seen again is raised again. */
#define AUDIT_SEEN_MAX 4096

struct audit_app {
    struct ev_loop *loop;
    const char *path;
    int once, code, fatal;
    int64_t skew_ms;            /* --skew-ms: overlaps up to this long are not raised */
    ev_signal sigterm, sigint;
    httpd *http;
    unsigned long long found[ZKE_FINDING_COUNT];
    int current[ZKE_FINDING_COUNT];     /* the last reading's findings (after --since) */
    int64_t since_ms;                   /* --since: 0, or findings about stamps from then on */
    unsigned long long readings;
    int terms, garbage, raised;
    struct zke_finding seen[AUDIT_SEEN_MAX];
    int nseen, next;
    char *history_json;         /* the last reading, for /history */
    char *leader;               /* the observer's leader id, or NULL */
    int64_t leader_epoch;
};

static int seen_before(struct audit_app *a, const struct zke_finding *f)
{
    for (int i = 0; i < a->nseen; i++)
        if (a->seen[i].kind == f->kind && a->seen[i].epoch == f->epoch &&
            a->seen[i].other == f->other)
            return 1;
    a->seen[a->next] = *f;
    a->next = (a->next + 1) % AUDIT_SEEN_MAX;
    if (a->nseen < AUDIT_SEEN_MAX)
        a->nseen++;
    return 0;
}

static int64_t later(int64_t x, int64_t y)
{
    return x > y ? x : y;
}

/* The latest stamp of the terms a finding is about: its term's, the other
 * term's, and for no_stepdown the start of the term that followed it (its
 * successor found it then). What --since compares with. */
static int64_t finding_ms(const struct zke_history *h, const struct zke_finding *f)
{
    int64_t ms = 0, next = INT64_MAX, next_start = 0;
    for (int i = 0; i < h->n; i++) {
        const struct zke_term *t = &h->terms[i];
        if (t->epoch == f->epoch || (f->other != 0 && t->epoch == f->other))
            ms = later(ms, later(t->start_ms, t->end_ms));
        if (f->kind == ZKE_FINDING_NO_STEPDOWN && t->epoch > f->epoch && t->epoch < next) {
            next = t->epoch;
            next_start = t->start_ms;
        }
    }
    return later(ms, next_start);
}

/* One finding of a reading: raised once (a log line, the counter, the
 * exit code), or, in a following audit's first reading, told as past. */
static void one_finding(struct audit_app *a, const struct zke_finding *f, int past)
{
    a->current[f->kind]++;
    if (seen_before(a, f))
        return;
    char msg[256];
    histview_finding(f, msg, sizeof msg);
    struct logf lf[4] = { { "kind", LF_STR, zke_finding_name(f->kind), 0 },
                          { "epoch", LF_INT, NULL, (long long)f->epoch },
                          { "other", LF_INT, NULL, (long long)f->other },
                          { "msg", LF_STR, msg, 0 } };
    if (past) {
        log_line(ZKE_LOG_INFO, "audit_past", lf, 4);
        return;
    }
    log_line(ZKE_LOG_WARN, "audit", lf, 4);
    a->found[f->kind]++;
    a->raised = 1;
}

static void on_history(zke_history_reader *r, const struct zke_history *h, void *ud)
{
    struct audit_app *a = ud;
    (void)r;
    if (h->reason != NULL) {
        log_msg(ZKE_LOG_ERROR, "log", h->msg);
        a->code = exit_code_for(h->reason);
        a->fatal = 1;
        ev_break(a->loop, EVBREAK_ALL);
        return;
    }
    int past = !a->once && a->readings == 0;
    a->readings++;
    a->terms = h->n;
    a->garbage = h->garbage;
    free(a->history_json);
    a->history_json = histview_json(h, a->path, a->skew_ms);
    struct zke_finding f[HISTVIEW_FINDINGS_MAX];
    int nf = zke_history_judge(h->terms, h->n, a->skew_ms, f, HISTVIEW_FINDINGS_MAX);
    memset(a->current, 0, sizeof a->current);
    int kept = 0;
    for (int i = 0; i < nf && i < HISTVIEW_FINDINGS_MAX; i++)
        if (a->since_ms == 0 || finding_ms(h, &f[i]) >= a->since_ms) {
            one_finding(a, &f[i], past);
            kept++;
        }
    struct logf lf[3] = { { "terms", LF_INT, NULL, h->n }, { "garbage", LF_INT, NULL, h->garbage },
                          { "findings", LF_INT, NULL, kept } };
    log_line(ZKE_LOG_INFO, "audit_reading", lf, 3);
    if (a->once)
        ev_break(a->loop, EVBREAK_ALL);
}

static void on_fatal(zke_history_reader *r, const char *reason, const char *msg, void *ud)
{
    struct audit_app *a = ud;
    (void)r;
    log_msg(ZKE_LOG_ERROR, "log", msg);
    error_line(msg, "");
    a->code = exit_code_for(reason);
    a->fatal = 1;
    ev_break(a->loop, EVBREAK_ALL);
}

static void obs_fatal(zke_observer *ob, const char *reason, const char *msg, void *ud)
{
    (void)ob;
    on_fatal(NULL, reason, msg, ud);
}

static void obs_change(zke_observer *ob, const struct zke_event *ev, void *ud)
{
    struct audit_app *a = ud;
    (void)ob;
    free(a->leader);
    a->leader = ev->leader != NULL ? utf8_clean(ev->leader, 1024) : NULL;
    a->leader_epoch = ev->leader_epoch;
}

static void quiet_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "log", msg);
}

/* a label's value: \, " and newlines escaped (the text is valid UTF-8) */
static void put_label(FILE *b, const char *v)
{
    for (const char *c = v; *c != '\0'; c++) {
        if (*c == '\\' || *c == '"')
            fputc('\\', b);
        if (*c == '\n')
            fputs("\\n", b);
        else
            fputc(*c, b);
    }
}

static char *prometheus(const struct audit_app *a, size_t *len)
{
    char *text = NULL;
    FILE *b = open_memstream(&text, len);
    if (b == NULL)
        return NULL;
    fprintf(b, "# HELP zkelect_audit_findings_total Findings the audit raised, by kind (each "
        "once; not those of its first reading).\n# TYPE zkelect_audit_findings_total counter\n");
    for (int k = 0; k < ZKE_FINDING_COUNT; k++)
        fprintf(b, "zkelect_audit_findings_total{kind=\"%s\"} %llu\n",
            zke_finding_name((enum zke_finding_kind)k), a->found[k]);
    fprintf(b, "# HELP zkelect_audit_findings Findings in the last reading of the history, by "
        "kind (past ones too).\n# TYPE zkelect_audit_findings gauge\n");
    for (int k = 0; k < ZKE_FINDING_COUNT; k++)
        fprintf(b, "zkelect_audit_findings{kind=\"%s\"} %d\n",
            zke_finding_name((enum zke_finding_kind)k), a->current[k]);
    fprintf(b, "# HELP zkelect_audit_readings_total Readings of the history.\n"
        "# TYPE zkelect_audit_readings_total counter\nzkelect_audit_readings_total %llu\n",
        a->readings);
    fprintf(b, "# HELP zkelect_audit_terms Terms in the last reading.\n"
        "# TYPE zkelect_audit_terms gauge\nzkelect_audit_terms %d\n", a->terms);
    fprintf(b, "# HELP zkelect_audit_garbage_records Children of the history folder that are no "
        "record, in the last reading.\n# TYPE zkelect_audit_garbage_records gauge\n"
        "zkelect_audit_garbage_records %d\n", a->garbage);
    fprintf(b, "# HELP leader_election_master_status 1 for the election's current leader, by "
        "name (the election path) and id.\n# TYPE leader_election_master_status gauge\n");
    char *path = utf8_clean(a->path, 4096);
    if (a->leader != NULL && path != NULL) {
        fprintf(b, "leader_election_master_status{name=\"");
        put_label(b, path);
        fprintf(b, "\",id=\"");
        put_label(b, a->leader);
        fprintf(b, "\"} 1\n");
    }
    free(path);
    if (fclose(b) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static void on_http(void *ud, const char *method, const char *url, struct httpd_reply *r)
{
    struct audit_app *a = ud;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        r->status = 405;
        r->allow = "GET, HEAD";
        r->body = strdup("method not allowed: GET or HEAD\n");
    } else if (strcmp(url, "/metrics") == 0) {
        r->type = "text/plain; version=0.0.4; charset=utf-8";
        r->body = prometheus(a, &r->len);
        if (r->body != NULL)
            return;
        r->status = 500;
    } else if (strcmp(url, "/history") == 0 && a->history_json != NULL) {
        r->type = "application/json";
        size_t n = strlen(a->history_json);
        r->body = malloc(n + 2);
        if (r->body != NULL) {
            memcpy(r->body, a->history_json, n);
            memcpy(r->body + n, "\n", 2);
        }
    } else if (strcmp(url, "/history") == 0) {
        r->status = 503;
        r->body = strdup("no reading of the history yet\n");
    } else {
        r->status = 404;
        r->body = strdup("not found: /metrics or /history\n");
    }
    r->len = r->body != NULL ? strlen(r->body) : 0;
}

static void on_http_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    log_msg(lvl, "log", msg);
}

/* --since TIME in ms since 1970: "N" with s, m, h or d (that long ago), or
 * "YYYY-MM-DDTHH:MM[:SS]Z" (UTC). Exits 64 on anything else. */
static int64_t parse_since(const char *t)
{
    time_t now = time(NULL), at = (time_t)-1;
    char *end = NULL;
    if (t[0] >= '0' && t[0] <= '9') {
        long v = strtol(t, &end, 10);
        long unit = *end == 's' ? 1 : *end == 'm' ? 60 : *end == 'h' ? 3600
                  : *end == 'd' ? 86400 : 0;
        if (unit > 0 && end[1] == '\0' && v > 0 && v <= 3650L * 86400 / unit)
            at = now - (time_t)(v * unit);
    }
    static const char *const forms[] = { "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%MZ" };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0] && at == (time_t)-1; i++) {
        struct tm tm;
        memset(&tm, 0, sizeof tm);
        const char *rest = strptime(t, forms[i], &tm);
        at = rest != NULL && *rest == '\0' ? timegm(&tm) : (time_t)-1;
    }
    if (at <= 0)
        die(EX_USAGE, "--since '%s': not a time (N with s, m, h or d: that long ago; or "
            "YYYY-MM-DDTHH:MM[:SS]Z)", t);
    if (at > now + 60)      /* a mistyped year would hide every finding */
        die(EX_USAGE, "--since '%s': in the future (it bounds what the audit judges from then on)",
            t);
    return (int64_t)at * 1000;
}

static void on_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)s;
    (void)revents;
    ev_break(loop, EVBREAK_ALL);
}

int cmd_audit(struct opts *o)
{
    char err[2048];
    static struct audit_app a;          /* its memory of findings is large: not on the stack */
    require_election(o);
    a.since_ms = o->since != NULL ? parse_since(o->since) : 0;
    log_setup(stderr, (enum log_format)o->log, (enum zke_log_level)o->level, "audit");
    a.loop = ev_default_loop(EVFLAG_AUTO);
    if (a.loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop");
    log_attach_loop(a.loop);
    signal(SIGPIPE, SIG_IGN);
    a.path = o->path;
    a.once = o->once;
    a.skew_ms = o->skew_ms;
    if (o->status_addr != NULL) {
        int e = 0;
        a.http = httpd_new(a.loop, o->status_addr, on_http, &a, on_http_log, err, sizeof err, &e);
        if (a.http == NULL)
            die(e == EADDRINUSE ? EX_TEMPFAIL : e == EACCES ? EX_NOPERM : EX_CONFIG, "%s", err);
        struct logf f[1] = { { "addr", LF_STR, httpd_addr(a.http), 0 } };
        log_line(ZKE_LOG_INFO, "status_listen", f, 1);
    }
    struct zke_observer_settings s;
    struct reader_creds creds;
    resolve_reader(o, &s, &creds);
    s.session_timeout_ms = o->session_timeout;
    s.connect_timeout_ms = a.once ? options_status_timeout(o) : options_connect_timeout(o);
    struct zke_history_callbacks cb = { on_history, on_fatal, quiet_log };
    zke_history_reader *r = zke_history_reader_new(a.loop, &s, !a.once, &cb, &a);
    /* following: the leader's gauge from an observer (its own session) */
    struct zke_observer_callbacks ocb = { obs_change, obs_fatal, quiet_log };
    zke_observer *ob = a.once ? NULL : zke_observer_new(a.loop, &s, &ocb, &a);
    forget_reader(o, &creds);
    if (r == NULL || (!a.once && ob == NULL))
        die(EX_SOFTWARE, "out of memory");
    if (zke_history_reader_start(r) != 0)
        die(EX_USAGE, "%s", zke_history_reader_errstr(r));
    if (ob != NULL && zke_observer_start(ob) != 0)
        die(EX_USAGE, "%s", zke_observer_errstr(ob));
    ev_signal_init(&a.sigterm, on_signal, SIGTERM);
    ev_signal_init(&a.sigint, on_signal, SIGINT);
    ev_signal_start(a.loop, &a.sigterm);
    ev_signal_start(a.loop, &a.sigint);
    ev_run(a.loop, 0);
    zke_history_reader_free(r);
    zke_observer_free(ob);
    httpd_free(a.http);
    ev_signal_stop(a.loop, &a.sigterm);
    ev_signal_stop(a.loop, &a.sigint);
    free(a.history_json);
    free(a.leader);
    log_attach_loop(NULL);
    log_drain(1000);
    if (a.fatal)
        return a.code;
    return a.raised ? EX_AUDIT_RAISED : EX_OK;
}
