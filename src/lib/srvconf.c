/* srvconf.c - see srvconf.h. */
#include "srvconf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *srv_mode_name(enum srv_mode m)
{
    switch (m) {
    case SRV_MODE_UNKNOWN: return "unknown";
    case SRV_MODE_STANDALONE: return "standalone";
    case SRV_MODE_LEADER: return "leader";
    case SRV_MODE_FOLLOWER: return "follower";
    case SRV_MODE_OBSERVER: return "observer";
    case SRV_MODE_READONLY: return "read-only";
    }
    return "?";
}

const char *srv_told_name(enum srv_told t)
{
    switch (t) {
    case SRV_UNASKED: return "unasked";
    case SRV_UNREACHED: return "unreached";
    case SRV_NO_CONF: return "no_conf";
    case SRV_CONF: return "conf";
    }
    return "?";
}

const char *srv_judgement_name(enum srv_judgement j)
{
    switch (j) {
    case SRV_J_STATED: return "stated";
    case SRV_J_TOLD: return "told";
    case SRV_J_UNCHECKED: return "unchecked";
    case SRV_J_REFUSED: return "refused";
    }
    return "?";
}

/* The line [p, end) starts with key immediately followed by '=': the value
 * as a decimal in [1, 2^31) up to the line's end (a '\r' allowed), else 0. */
static long line_value(const char *p, const char *end, const char *key)
{
    size_t k = strlen(key);
    if ((size_t)(end - p) <= k || memcmp(p, key, k) != 0 || p[k] != '=')
        return 0;
    p += k + 1;
    if (end > p && end[-1] == '\r')
        end--;
    if (p == end || end - p > 10)
        return 0;
    long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        v = v * 10 + (*p - '0');
    }
    return v > 0 && v <= 0x7fffffffL ? v : 0;
}

int srvconf_parse_conf(const char *buf, size_t len, struct srv_conf *out)
{
    struct srv_conf c = { 0, 0, 0 };
    *out = c;
    if (buf == NULL)
        return -1;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl != NULL ? nl : end;
        long v;
        if (nl == NULL)
            break;              /* a cut line says nothing for sure */
        if ((v = line_value(p, le, "tickTime")) > 0)
            c.tick_ms = (int)v;
        else if ((v = line_value(p, le, "minSessionTimeout")) > 0)
            c.min_ms = (int)v;
        else if ((v = line_value(p, le, "maxSessionTimeout")) > 0)
            c.max_ms = (int)v;
        p = le + 1;
    }
    if (c.tick_ms == 0 || c.min_ms == 0 || c.max_ms == 0)
        return -1;
    *out = c;
    return 0;
}

int srvconf_refused(const char *buf, size_t len)
{
    static const char pat[] = "not in the whitelist";
    size_t m = sizeof pat - 1;
    for (size_t i = 0; buf != NULL && i + m <= len; i++)
        if (memcmp(buf + i, pat, m) == 0)
            return 1;
    return 0;
}

enum srv_mode srvconf_parse_mode(const char *buf, size_t len)
{
    static const struct { const char *word; enum srv_mode m; } modes[] = {
        { "standalone", SRV_MODE_STANDALONE }, { "leader", SRV_MODE_LEADER },
        { "follower", SRV_MODE_FOLLOWER }, { "observer", SRV_MODE_OBSERVER },
        { "read-only", SRV_MODE_READONLY },
    };
    if (buf == NULL)
        return SRV_MODE_UNKNOWN;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        const char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (le - p > 6 && memcmp(p, "Mode: ", 6) == 0) {
            size_t n = (size_t)(le - p - 6);
            for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
                if (strlen(modes[i].word) == n && memcmp(p + 6, modes[i].word, n) == 0)
                    return modes[i].m;
            return SRV_MODE_UNKNOWN;
        }
        p = nl + 1;
    }
    return SRV_MODE_UNKNOWN;
}

/* Appends "; name: what it told" for each server to line (bounded). */
static void list_servers(const struct srv_info *sv, int n, char *line, size_t cap)
{
    size_t at = strlen(line);
    for (int i = 0; i < n && at < cap; i++) {
        const struct srv_info *s = &sv[i];
        int w;
        if (s->told == SRV_CONF)
            w = snprintf(line + at, cap - at, "%s%s tickTime=%d minSessionTimeout=%d", i ? ", " : "",
                         s->name, s->conf.tick_ms, s->conf.min_ms);
        else
            w = snprintf(line + at, cap - at, "%s%s %s", i ? ", " : "", s->name,
                         s->told == SRV_NO_CONF ? "did not answer conf (not in 4lw.commands.whitelist?)"
                         : "not reached");
        if (w < 0)
            return;
        at += (size_t)w;
    }
}

/* The rules of srvconf.h, in their order. */
void srvconf_judge(const struct srv_info *sv, int n, int stated_ms, struct srv_verdict *v)
{
    int lo = 0, hi = 0, told = 0, below = 0;
    memset(v, 0, sizeof *v);
    for (int i = 0; i < n; i++) {
        if (sv[i].mode == SRV_MODE_OBSERVER)
            v->observer = 1;
        if (sv[i].told != SRV_CONF)
            continue;
        int t = sv[i].conf.tick_ms;
        lo = told == 0 || t < lo ? t : lo;
        hi = t > hi ? t : hi;
        told++;
        if ((int64_t)sv[i].conf.min_ms < 2 * (int64_t)t)     /* a told tick is up to 2^31 - 1 */
            below = 1;
    }
    v->tick_ms = hi;
    if (stated_ms > 0 && hi > stated_ms) {
        v->j = SRV_J_REFUSED;
        snprintf(v->line, sizeof v->line, "--server-tick %d is shorter than a server's tickTime: "
                 "state --server-tick %d (the longest) or remove it: ", stated_ms, hi);
    } else if (stated_ms > 0) {
        v->j = SRV_J_STATED;
        return;
    } else if (lo != hi) {
        v->j = SRV_J_REFUSED;
        snprintf(v->line, sizeof v->line, "the servers disagree on tickTime: state --server-tick %d "
                 "(the longest) or give them one tickTime: ", hi);
    } else if (told == n && n > 0) {
        v->j = SRV_J_TOLD;
        return;
    } else if (below) {
        v->j = SRV_J_REFUSED;
        snprintf(v->line, sizeof v->line, "a server's minSessionTimeout is below 2 x tickTime and "
                 "not every server tells its tickTime, so the lease cannot infer it from a "
                 "granted timeout: state --server-tick %d or more, or whitelist conf on every "
                 "server (4lw.commands.whitelist): ", hi);
    } else {
        v->j = SRV_J_UNCHECKED;
        snprintf(v->line, sizeof v->line, "the servers' tickTime is inferred from a granted "
                 "session timeout, assuming minSessionTimeout >= 2 x tickTime on every server, "
                 "unchecked where conf is not answered: state --server-tick, or whitelist conf "
                 "(4lw.commands.whitelist) to check it: ");
    }
    list_servers(sv, n, v->line, sizeof v->line);
}

void srvconf_judge_unasked(int stated_ms, struct srv_verdict *v)
{
    memset(v, 0, sizeof *v);
    v->j = stated_ms > 0 ? SRV_J_STATED : SRV_J_UNCHECKED;
    v->observer = 1;
    snprintf(v->line, sizeof v->line, "the servers are not asked over TLS (conf and srvr are plain "
             "four-letter words): their tickTime, minSessionTimeout and modes go unchecked, so "
             "renewals pair with twice the tick, as if an observer were among them, and the tick "
             "is %s; servers that disagree on tickTime, or run a minSessionTimeout below 2 x "
             "tickTime, are not refused: give every server one tickTime and state it with "
             "--server-tick", stated_ms > 0 ? "the stated --server-tick, unchecked"
             : "inferred from a granted session timeout, assuming minSessionTimeout >= 2 x "
               "tickTime on every server");
}

int srvconf_unreached(const struct srv_info *sv, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += sv[i].told == SRV_UNASKED || sv[i].told == SRV_UNREACHED;
    return k;
}

void srvconf_retry(int k, int *delay_ms, int *deadline_ms)
{
    int d = SRVCONF_RETRY_FIRST_MS;
    for (int i = 0; i < k && d < SRVCONF_RETRY_MAX_MS; i++)
        d *= 2;
    if (d > SRVCONF_RETRY_MAX_MS)
        d = SRVCONF_RETRY_MAX_MS;
    *delay_ms = d;
    *deadline_ms = d < SRVCONF_RETRY_DEADLINE_MS ? d : SRVCONF_RETRY_DEADLINE_MS;
}
