/*
 * settings.c - see settings.h. The checks of what a host passes in
 * struct zke_settings and struct zke_conn_settings, and the lease plan.
 */
#define _POSIX_C_SOURCE 200809L
#include "settings.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 1 if s has a control character. Reasons are one line (they go to
 * terminals and logs): such a value is named through esc(). */
static int has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

#define ESC_CUT 200     /* esc() cuts after about this many bytes */
#define ESC_BUF 256     /* esc()'s out: ESC_CUT, one more \xNN and "..." */

/* s for a one-line message: control characters as \xNN, cut at about
 * ESC_CUT bytes ("..."). out must hold ESC_BUF bytes. */
static const char *esc(const char *s, char out[ESC_BUF])
{
    size_t o = 0;
    for (; *s && o < ESC_CUT; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(out + o, ESC_BUF - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    snprintf(out + o, ESC_BUF - o, "%s", *s ? "..." : "");
    return out;
}

int zke_check_path(const char *p, char *err, size_t errlen)
{
    if (p == NULL || *p == '\0') {
        snprintf(err, errlen, "election path is empty");
        return -1;
    }
    if (has_ctl(p)) {
        char e[ESC_BUF];
        snprintf(err, errlen, "election path '%s' contains a control character", esc(p, e));
        return -1;
    }
    if (p[0] != '/') {
        snprintf(err, errlen, "election path '%s' is not absolute (must start with '/')", p);
        return -1;
    }
    if (strlen(p) == 1 || p[strlen(p) - 1] == '/') {
        snprintf(err, errlen, "election path '%s' must not be '/' or end with '/'", p);
        return -1;
    }
    if (strlen(p) > SETTINGS_MAX_PATH) {
        char e[ESC_BUF];
        snprintf(err, errlen, "election path '%s' is longer than %d characters", esc(p, e),
                 SETTINGS_MAX_PATH);
        return -1;
    }
    for (const char *c = p; *c; c++) {
        if (c[0] == '/' && (c[1] == '/')) {
            snprintf(err, errlen, "election path '%s' has an empty component", p);
            return -1;
        }
        if (c[0] == '/' && c[1] == '.' && (c[2] == '/' || c[2] == '\0' ||
                                          (c[2] == '.' && (c[3] == '/' || c[3] == '\0')))) {
            snprintf(err, errlen, "election path '%s' has a '.' or '..' component", p);
            return -1;
        }
    }
    if (strcmp(p, "/zookeeper") == 0 || strncmp(p, "/zookeeper/", 11) == 0) {
        snprintf(err, errlen, "election path '%s' is under /zookeeper, which ZooKeeper reserves", p);
        return -1;
    }
    return 0;
}

int zke_check_id(const char *id, char *err, size_t errlen)
{
    if (id == NULL || *id == '\0') {
        snprintf(err, errlen, "candidate id is empty");
        return -1;
    }
    if (has_ctl(id)) {
        char e[ESC_BUF];
        snprintf(err, errlen, "candidate id '%s' contains a control character", esc(id, e));
        return -1;
    }
    if (strlen(id) > SETTINGS_MAX_ID) {
        snprintf(err, errlen, "candidate id '%.32s...' is longer than %d characters", id,
                 SETTINGS_MAX_ID);
        return -1;
    }
    if (strchr(id, '/') != NULL) {
        snprintf(err, errlen, "candidate id '%s' contains '/' or a control character", id);
        return -1;
    }
    return 0;
}

/* Whether [p, end) is an IPv6 address, the only host with ':' in it that
 * the ZooKeeper client takes (it splits HOST:PORT at the last ':'). */
static int ipv6_literal(const char *p, const char *end)
{
    char host[INET6_ADDRSTRLEN + 1];
    unsigned char addr[16];
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= sizeof host)
        return 0;
    memcpy(host, p, n);
    host[n] = '\0';
    return inet_pton(AF_INET6, host, addr) == 1;
}

int zke_check_hosts(const char *zk, char *err, size_t errlen)
{
    if (zk == NULL || *zk == '\0') {
        snprintf(err, errlen, "ZooKeeper connect string is empty");
        return -1;
    }
    if (has_ctl(zk)) {
        char e[ESC_BUF];
        snprintf(err, errlen, "ZooKeeper connect string '%s' contains a control character",
                 esc(zk, e));
        return -1;
    }
    const char *end = strchr(zk, '/');
    size_t len = end ? (size_t)(end - zk) : strlen(zk);
    if (end != NULL && end > zk && end[-1] == ':' && end[1] == '/') {
        /* "http://h:2181", "zk://h:2181": the client would take "//h:2181" as a chroot */
        snprintf(err, errlen, "ZooKeeper connect string '%s' starts with a scheme ('%.*s//'): "
                 "no scheme: HOST:PORT[,HOST:PORT...][/chroot]", zk, (int)len, zk);
        return -1;
    }
    if (len == 0) {
        snprintf(err, errlen, "ZooKeeper connect string '%s' has no HOST:PORT before the chroot", zk);
        return -1;
    }
    if (end != NULL) {
        char e2[256];
        if (zke_check_path(end, e2, sizeof e2) != 0) {
            snprintf(err, errlen, "chroot '%s' in connect string '%s' is not a valid path", end, zk);
            return -1;
        }
    }
    const char *p = zk;
    while (p < zk + len) {
        const char *comma = memchr(p, ',', (size_t)(zk + len - p));
        const char *stop = comma ? comma : zk + len;
        const char *colon = NULL;
        for (const char *q = p; q < stop; q++)
            if (*q == ':')
                colon = q;
        if (colon == NULL || colon == p || colon + 1 == stop) {
            snprintf(err, errlen, "ZooKeeper connect string '%s': element '%.*s' is not HOST:PORT",
                     zk, (int)(stop - p), p);
            return -1;
        }
        if (memchr(p, ':', (size_t)(colon - p)) != NULL && !ipv6_literal(p, colon)) {
            /* "zk1:2181:2182": the client would look up the host "zk1:2181" */
            snprintf(err, errlen, "ZooKeeper connect string '%s': element '%.*s' has more than "
                     "one ':' (one HOST:PORT per server, e.g. 'zk1:2181,zk2:2181'; an IPv6 "
                     "address is written bare, '::1:2181')", zk, (int)(stop - p), p);
            return -1;
        }
        long port = 0;
        for (const char *q = colon + 1; q < stop; q++) {
            if (!isdigit((unsigned char)*q) || port > 65535) {
                port = -1;
                break;
            }
            port = port * 10 + (*q - '0');
        }
        if (port < 1 || port > 65535) {
            snprintf(err, errlen, "ZooKeeper connect string '%s': bad port in '%.*s'",
                     zk, (int)(stop - p), p);
            return -1;
        }
        p = comma ? comma + 1 : stop;
        if (comma != NULL && p == zk + len) {
            snprintf(err, errlen, "ZooKeeper connect string '%s' ends with ','", zk);
            return -1;
        }
    }
    return 0;
}

int zke_check_auth(const char *scheme, const char *cred, char *err, size_t errlen)
{
    if (scheme == NULL && cred == NULL)
        return 0;
    if (scheme == NULL || *scheme == '\0') {
        snprintf(err, errlen, "authentication credentials given without a scheme "
                 "(expected SCHEME:CREDENTIALS, e.g. digest:user:password)");
        return -1;
    }
    size_t n = strlen(scheme);
    for (const char *c = scheme; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-') {
            n = 0;
            break;
        }
    }
    if (n == 0 || n > 64) {
        snprintf(err, errlen, "authentication scheme '%.64s' is not a scheme name (letters, "
                 "digits, '_', '-'; e.g. digest)", has_ctl(scheme) ? "?" : scheme);
        return -1;
    }
    if (cred == NULL || *cred == '\0') {
        snprintf(err, errlen, "authentication scheme '%s' has empty credentials", scheme);
        return -1;
    }
    if (strlen(cred) > 4096) {
        snprintf(err, errlen, "authentication credentials of scheme '%s' are longer than 4096 bytes",
                 scheme);
        return -1;
    }
    for (const char *c = cred; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            snprintf(err, errlen, "authentication credentials of scheme '%s' contain a control "
                     "character (a stray newline or carriage return?)", scheme);
            return -1;
        }
    }
    if (strcmp(scheme, "digest") == 0) {
        const char *colon = strchr(cred, ':');
        if (colon == NULL || colon == cred) {
            snprintf(err, errlen, "digest credentials must be USER:PASSWORD with a non-empty user "
                     "(%s)", colon == NULL ? "no ':' after the user" : "the user is empty");
            return -1;
        }
    }
    return 0;
}

const char *zke_acl_name(enum zke_acl acl)
{
    switch (acl) {
    case ZKE_ACL_OPEN: return "open";
    case ZKE_ACL_CREATOR_ALL: return "creator-all";
    case ZKE_ACL_WORLD_READ: return "world-read";
    default: return "default";
    }
}

/* --- the lease arithmetic -------------------------------------------- */

/* Any of the values zke_lease_check can blame set explicitly. */
int settings_lease_given(const struct zke_settings *s)
{
    return s->stepdown_budget_ms != 0 || s->lease_margin_ms != 0 || s->renew_ms != 0 ||
           s->server_tick_ms != 0 || s->drift != 0 || s->hook_budget_ms != 0;
}

static int lease_plan(const struct zke_settings *s, int T, int tick_ms,
                      struct zke_lease_plan *out, char *err, size_t errlen, int advise);

/* The largest step-down budget the plan of s (with tick_ms, as
 * settings_lease_plan) accepts, all else kept; 0 when none does. The
 * plan's checks only fail more as the budget grows (the lease and what
 * the hook budget fits in shrink; the default renewal, T/4 only where
 * that fits, lowers the floor when it falls back to T/10). */
static int budget_max(const struct zke_settings *s, int T, int tick_ms)
{
    struct zke_settings t = *s;
    char scratch[8];
    int lo = 0, hi = T;         /* lo fits (0: none yet), hi + 1 does not */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2 + 1;   /* in (lo, hi]; no overflow at hi = INT_MAX */
        t.stepdown_budget_ms = mid;
        if (lease_plan(&t, T, tick_ms, NULL, scratch, sizeof scratch, 0) == 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Where the plan's server tick came from, for a refusal (tick_ms: as
 * settings_lease_plan's; *assumed: nothing the servers or the operator
 * said, half the session timeout). */
static const char *tick_source(const struct zke_settings *s, int T, int tick_ms,
                               const struct zke_lease_plan *p, int *assumed)
{
    *assumed = 0;
    if (s->server_tick_ms > 0)
        return p->server_tick_ms == s->server_tick_ms
            ? "stated (--server-tick)"
            : "the longest stated on the session (another agent's --server-tick)";
    if (tick_ms > 0 && tick_ms < T / 2)
        return "what the servers told: at most half the timeout they granted a probe session";
    *assumed = 1;
    return "assumed: half the session timeout, as no --server-tick states the servers' "
           "tickTime (they tell theirs once connected)";
}

/* zke_lease_check's refusal of a lease shorter than its floor (`left` ms
 * after the confirmation gap; the floor is twice the renewal interval when
 * by_renewal, else T/5): the values it used, where the server tick came
 * from, the largest step-down budget that fits when one was asked, and
 * the settings that may be changed, each by its flag. */
static void lease_too_short(const struct zke_settings *s, int T, int tick_ms,
                            const struct zke_lease_plan *pp, int64_t left, int by_renewal,
                            char *err, size_t errlen)
{
    const struct zke_lease_plan p = *pp;
    int64_t twice = (int64_t)2 * p.renew_ms;
    int assumed;
    const char *src = tick_source(s, T, tick_ms, &p, &assumed);
    char why[400] = "";
    if (s->stepdown_budget_ms > 0) {
        int most = budget_max(s, T, tick_ms);
        char zkd[160] = "";
        if (assumed && p.server_tick_ms > 2000) {
            /* what ZooKeeper's default tickTime would leave */
            struct zke_settings t = *s;
            t.server_tick_ms = 2000;
            int at2000 = budget_max(&t, T, 0);
            if (at2000 > 0)
                snprintf(zkd, sizeof zkd, ", with --server-tick 2000 (ZooKeeper's default "
                         "tickTime) at most %d ms", at2000);
        }
        if (most > 0)
            snprintf(why, sizeof why, "; with it --stepdown-budget can be at most %d ms (asked "
                     "%d ms)%s", most, s->stepdown_budget_ms, zkd);
        else
            snprintf(why, sizeof why, "; with it no --stepdown-budget fits (asked %d ms)%s",
                     s->stepdown_budget_ms, zkd);
    }
    /* only what was set can be lowered: the defaults always fit */
    char fix[300];
    size_t n = 0;
    const char *names[5];
    int k = 0;
    if (s->stepdown_budget_ms > 0)
        names[k++] = "--stepdown-budget";
    if (s->lease_margin_ms > 0)
        names[k++] = "--lease-margin";
    if (s->server_tick_ms > 0)
        names[k++] = "--server-tick (the servers' real tickTime)";
    if (by_renewal && s->renew_ms > 0)
        names[k++] = "--renew-interval";
    if (s->drift > 0)
        names[k++] = "--drift";
    fix[0] = '\0';
    if (assumed)
        n += (size_t)snprintf(fix, sizeof fix, "state the servers' tickTime with --server-tick, ");
    for (int i = 0; i < k && n < sizeof fix; i++)
        n += (size_t)snprintf(fix + n, sizeof fix - n, "%s%s", i == 0 ? "lower " :
                              i == k - 1 ? " or " : ", ", names[i]);
    snprintf(err, errlen, "the lease (session timeout %d ms x (1 - drift %g) - stepdown budget "
             "%d ms - margin %d ms - server tick %d ms x (1 + drift) = %" PRId64 " ms) must "
             "be at least %s (%" PRId64 " ms); the server tick %d ms is %s%s: %s%sraise "
             "--session-timeout", T, p.drift, p.stepdown_budget_ms, p.margin_ms,
             p.server_tick_ms, left,
             by_renewal ? "twice the renewal interval" : "a fifth of the session timeout",
             by_renewal ? twice : (int64_t)(T / 5), p.server_tick_ms, src, why, fix,
             k > 0 ? ", or " : "");
}

int zke_lease_check(const struct zke_settings *s, int T, struct zke_lease_plan *out,
                    char *err, size_t errlen)
{
    return settings_lease_plan(s, T, 0, out, err, errlen);
}

int settings_lease_plan(const struct zke_settings *s, int T, int tick_ms,
                        struct zke_lease_plan *out, char *err, size_t errlen)
{
    return lease_plan(s, T, tick_ms, out, err, errlen, 1);
}

/* The plan's values before its checks: each set value, else its default
 * for T; the server tick as settings_lease_plan's tick_ms says. */
static void plan_values(const struct zke_settings *s, int T, int tick_ms, struct zke_lease_plan *pp)
{
    struct zke_lease_plan p;
    memset(&p, 0, sizeof p);
    p.session_ms = T;
    p.drift = s->drift > 0 ? s->drift : ZKE_DEFAULT_DRIFT;
    int sd = T / ZKE_DEFAULT_STEPDOWN_DIVISOR, mg = T / ZKE_DEFAULT_MARGIN_DIVISOR;
    int rn = T / ZKE_DEFAULT_RENEW_DIVISOR;
    p.stepdown_budget_ms = s->stepdown_budget_ms > 0 ? s->stepdown_budget_ms
                           : sd < ZKE_DEFAULT_STEPDOWN_MAX_MS ? sd : ZKE_DEFAULT_STEPDOWN_MAX_MS;
    p.margin_ms = s->lease_margin_ms > 0 ? s->lease_margin_ms
                  : mg > ZKE_DEFAULT_MARGIN_MIN_MS ? mg : ZKE_DEFAULT_MARGIN_MIN_MS;
    p.renew_ms = s->renew_ms > 0 ? s->renew_ms
                 : rn > ZKE_DEFAULT_RENEW_MIN_MS ? rn : ZKE_DEFAULT_RENEW_MIN_MS;
    p.server_tick_ms = tick_ms > 0 ? tick_ms : s->server_tick_ms > 0 ? s->server_tick_ms : T / 2;
    /* T and the drift are not checked yet: keep the product in range */
    double confirm = (double)p.server_tick_ms * (1.0 + p.drift) + 0.999;
    p.confirm_ms = !(confirm > 0.) ? 0 : confirm < (double)INT_MAX ? (int)confirm : INT_MAX;
    if (s->renew_ms <= 0 && T > 0) {
        /* Each renewal pairs with the one before it (its follow-up) when
         * they are at least a confirmation step apart, so the lease's base
         * lags the newest renewal by up to two periods (p) and a round
         * trip. The server expires a crashed
         * leader T after the last request it heard, a plain client T after
         * its last ping (every T/3): renewing every T/4 makes the two about
         * even (the median request is T/8 old at a crash, a ping T/6). Where
         * the lease leaves a fifth of T after two such periods, and the step
         * fits in one, renew every T/4; else every T/10 (a long assumed
         * tick: the renewals pair further back). */
        int64_t quarter = T / ZKE_DEFAULT_RENEW_LONG_DIVISOR;
        int64_t step = (int64_t)p.confirm_ms + (p.confirm_ms / 10 > 10 ? p.confirm_ms / 10 : 10);
        /* the drift is checked below: an out-of-range one picks no default */
        double d = p.drift >= 0. && p.drift < 0.5 ? p.drift : 0.5;
        int64_t lease0 = (int64_t)((double)T * (1.0 - d)) - p.stepdown_budget_ms - p.margin_ms;
        if (quarter >= step && lease0 - 2 * quarter >= T / 5 && lease0 - p.confirm_ms >= 2 * quarter)
            p.renew_ms = (int)quarter;
    }
    *pp = p;
}

/* settings_lease_plan; advise: a refusal of a short lease says what would
 * fit (budget_max's own tries do not). */
static int lease_plan(const struct zke_settings *s, int T, int tick_ms,
                      struct zke_lease_plan *out, char *err, size_t errlen, int advise)
{
    struct zke_lease_plan p;
    plan_values(s, T, tick_ms, &p);
    if (out != NULL)
        *out = p;
    if (T <= 0) {
        snprintf(err, errlen, "session timeout %d ms is not positive", T);
        return -1;
    }
    if (s->drift < 0 || p.drift >= 0.5) {
        snprintf(err, errlen, "drift %g is out of range (0 < drift < 0.5)", s->drift);
        return -1;
    }
    if (s->stepdown_budget_ms < 0 || s->lease_margin_ms < 0 || s->hook_budget_ms < 0 ||
        s->renew_ms < 0 || s->server_tick_ms < 0) {
        snprintf(err, errlen, "stepdown budget, lease margin, renewal interval, server tick and "
                 "hook budget must not be negative");
        return -1;
    }
    /* in 64 bits: a host may pass budgets and margins up to INT_MAX */
    int64_t lease = (int64_t)((double)T * (1.0 - p.drift)) - p.stepdown_budget_ms - p.margin_ms;
    p.lease_ms = lease < INT_MIN ? INT_MIN : (int)lease;     /* lease <= T */
    if (out != NULL)
        *out = p;
    /* A request counts once a renewal sent a server tick (x (1 + drift))
     * after its answer came back, and the follow-up sent on that renewal's
     * answer, came back: the lease's base is that much older than the
     * latest renewal. What is left must be at least a fifth of T and two
     * renewals. */
    int64_t left = lease - p.confirm_ms;
    int64_t twice = (int64_t)2 * p.renew_ms;
    int by_renewal = twice > T / 5;
    int64_t fit = (int64_t)p.lease_ms - p.confirm_ms - p.renew_ms;
    if (s->hook_budget_ms > 0) {
        p.hook_budget_ms = s->hook_budget_ms;
    } else {
        int64_t h = T / 3 < ZKE_DEFAULT_HOOK_TIMEOUT_MS ? T / 3 : ZKE_DEFAULT_HOOK_TIMEOUT_MS;
        p.hook_budget_ms = (int)(h > fit ? (fit > 1 ? fit : 1) : h);
    }
    if (out != NULL)
        *out = p;
    if (left < (by_renewal ? twice : T / 5)) {
        if (advise)
            lease_too_short(s, T, tick_ms, &p, left, by_renewal, err, errlen);
        else
            snprintf(err, errlen, "short");
        return -1;
    }
    if (s->hook_budget_ms > 0 && s->hook_budget_ms > fit) {
        snprintf(err, errlen, "hook budget %d ms does not fit in the lease: at most lease %d ms - "
                 "server tick %d ms x (1 + drift) - renewal period %d ms = %" PRId64 " ms with "
                 "session timeout %d ms (lower --hook-timeout%s, or raise --session-timeout)",
                 s->hook_budget_ms, p.lease_ms, p.server_tick_ms, p.renew_ms, fit, T,
                 s->server_tick_ms > 0 ? " or --server-tick" : "");
        return -1;
    }
    return 0;
}

int settings_conn_given(const struct zke_settings *s)
{
    return s->zk != NULL || s->session_timeout_ms != 0 || s->connect_timeout_ms != 0 ||
           s->session_file != NULL || s->session_file_password != 0 || s->auth_scheme != NULL ||
           s->auth_credentials != NULL || s->acl != ZKE_ACL_DEFAULT || s->tls != NULL;
}

void settings_conn_of(const struct zke_settings *s, struct zke_conn_settings *out)
{
    memset(out, 0, sizeof *out);
    out->zk = s->zk;
    out->session_timeout_ms = s->session_timeout_ms;
    out->connect_timeout_ms = s->connect_timeout_ms;
    out->session_file = s->session_file;
    out->session_file_password = s->session_file_password;
    out->auth_scheme = s->auth_scheme;
    out->auth_credentials = s->auth_credentials;
    out->acl = s->acl;
    out->tls = s->tls;
}

int settings_check_conn(const struct zke_conn_settings *s, char *err, size_t errlen)
{
    if (zke_check_hosts(s->zk != NULL ? s->zk : "", err, errlen) != 0 ||
        zke_check_auth(s->auth_scheme, s->auth_credentials, err, errlen) != 0 ||
        (s->tls != NULL && zke_check_tls(s->tls, NULL, err, errlen) != 0))
        return -1;
    if ((s->acl == ZKE_ACL_CREATOR_ALL || s->acl == ZKE_ACL_WORLD_READ) && s->auth_scheme == NULL) {
        snprintf(err, errlen, "ACL '%s' names the creator's identity, which needs "
                 "authentication (ZooKeeper would answer INVALIDACL): give credentials or use "
                 "'open'", zke_acl_name(s->acl));
        return -1;
    }
    if ((unsigned)s->acl > ZKE_ACL_WORLD_READ) {
        snprintf(err, errlen, "ACL choice %d is not one of enum zke_acl", (int)s->acl);
        return -1;
    }
    if (s->session_timeout_ms < 0 || s->session_timeout_ms > SETTINGS_MAX_SESSION_TIMEOUT_MS) {
        snprintf(err, errlen, "session timeout %d ms is out of range (1..%d)",
                 s->session_timeout_ms, SETTINGS_MAX_SESSION_TIMEOUT_MS);
        return -1;
    }
    return 0;
}

int settings_check_candidate(const char *path, const char *id, const char *data, char *err,
                             size_t errlen)
{
    if (zke_check_path(path, err, errlen) != 0 || zke_check_id(id, err, errlen) != 0)
        return -1;
    if (strlen(data) > SETTINGS_MAX_DATA) {
        snprintf(err, errlen, "candidate data is longer than 512 KiB");
        return -1;
    }
    return 0;
}
