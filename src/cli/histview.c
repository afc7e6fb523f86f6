/* histview.c - see histview.h. */
#define _POSIX_C_SOURCE 200809L
#include "histview.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "utf8.h"

static void add_text(cJSON *o, const char *key, const char *v)
{
    char *clean = v != NULL ? utf8_clean(v, 4096) : NULL;
    if (clean != NULL)
        cJSON_AddStringToObject(o, key, clean);
    else
        cJSON_AddNullToObject(o, key);
    free(clean);
}

static void iso(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || gmtime_r(&t, &tm) == NULL) {
        snprintf(buf, len, "-");
        return;
    }
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03dZ", (int)(ms % 1000));
}

void histview_finding(const struct zke_finding *f, char *buf, size_t len)
{
    switch (f->kind) {
    case ZKE_FINDING_OVERLAP:
        snprintf(buf, len, "overlap: the term of epoch %" PRId64 " began %" PRId64 " ms before "
                 "the term of epoch %" PRId64 " ended, by their own stamps: two leaders at once?",
                 f->epoch, f->ms, f->other);
        break;
    case ZKE_FINDING_EPOCH_BACKWARDS:
        snprintf(buf, len, "epoch_backwards: the term of epoch %" PRId64 " was recorded after "
                 "the term of epoch %" PRId64, f->epoch, f->other);
        break;
    default:
        snprintf(buf, len, "no_stepdown: the term of epoch %" PRId64 " ended without a "
                 "step-down (killed, or its session expired): look at what it left", f->epoch);
        break;
    }
}

char *histview_json(const struct zke_history *h, const char *path, int64_t skew_ms)
{
    struct zke_finding f[HISTVIEW_FINDINGS_MAX];
    int nf = zke_history_judge(h->terms, h->n, skew_ms, f, HISTVIEW_FINDINGS_MAX);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL)
        return NULL;
    add_text(o, "path", path);
    cJSON_AddBoolToObject(o, "exists", h->exists);
    cJSON_AddNumberToObject(o, "garbage", h->garbage);
    cJSON *arr = cJSON_AddArrayToObject(o, "terms");
    for (int i = 0; arr != NULL && i < h->n; i++) {
        const struct zke_term *t = &h->terms[i];
        cJSON *x = cJSON_CreateObject();
        char b[40];
        if (x == NULL)
            break;
        cJSON_AddNumberToObject(x, "epoch", (double)t->epoch);
        add_text(x, "id", t->id);
        add_text(x, "node", t->node);
        cJSON_AddNumberToObject(x, "start_ms", (double)t->start_ms);
        iso(t->start_ms, b, sizeof b);
        cJSON_AddStringToObject(x, "start", b);
        if (t->end_ms > 0) {
            cJSON_AddNumberToObject(x, "end_ms", (double)t->end_ms);
            iso(t->end_ms, b, sizeof b);
            cJSON_AddStringToObject(x, "end", b);
        } else {
            cJSON_AddNullToObject(x, "end_ms");
        }
        add_text(x, "reason", t->reason);
        if (t->closed_by != NULL)
            add_text(x, "closed_by", t->closed_by);
        cJSON_AddItemToArray(arr, x);
    }
    cJSON *fa = cJSON_AddArrayToObject(o, "findings");
    for (int i = 0; fa != NULL && i < nf && i < HISTVIEW_FINDINGS_MAX; i++) {
        cJSON *x = cJSON_CreateObject();
        char msg[256];
        if (x == NULL)
            break;
        histview_finding(&f[i], msg, sizeof msg);
        cJSON_AddStringToObject(x, "kind", zke_finding_name(f[i].kind));
        cJSON_AddNumberToObject(x, "epoch", (double)f[i].epoch);
        cJSON_AddNumberToObject(x, "other", (double)f[i].other);
        cJSON_AddNumberToObject(x, "ms", (double)f[i].ms);
        cJSON_AddStringToObject(x, "msg", msg);
        cJSON_AddItemToArray(fa, x);
    }
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}

void histview_text(FILE *out, const struct zke_history *h, const char *path, int64_t skew_ms)
{
    struct zke_finding f[HISTVIEW_FINDINGS_MAX];
    int nf = zke_history_judge(h->terms, h->n, skew_ms, f, HISTVIEW_FINDINGS_MAX);
    char *p = utf8_printable(path, 4096);
    fprintf(out, "history of %s: %d term%s recorded%s", p != NULL ? p : "?", h->n,
            h->n == 1 ? "" : "s", h->exists ? "" : " (no term recorded yet)");
    if (h->garbage > 0)
        fprintf(out, ", %d garbage record%s ignored", h->garbage, h->garbage == 1 ? "" : "s");
    fprintf(out, "\n");
    free(p);
    if (h->n > 0)
        fprintf(out, "  %-20s %-20s %-24s %-24s %s\n", "epoch", "id", "start", "end", "reason");
    for (int i = 0; i < h->n; i++) {
        const struct zke_term *t = &h->terms[i];
        char s[40], e[40];
        char *id = utf8_printable(t->id, 256), *why = utf8_printable(t->reason != NULL ? t->reason : "", 64);
        iso(t->start_ms, s, sizeof s);
        iso(t->end_ms, e, sizeof e);
        fprintf(out, "  %-20" PRId64 " %-20s %-24s %-24s %s\n", t->epoch, id != NULL ? id : "?",
                s, e, t->reason == NULL ? "(open)" : why != NULL ? why : "?");
        free(id);
        free(why);
    }
    fprintf(out, "findings: %d\n", nf);
    for (int i = 0; i < nf && i < HISTVIEW_FINDINGS_MAX; i++) {
        char msg[256];
        histview_finding(&f[i], msg, sizeof msg);
        fprintf(out, "  %s\n", msg);
    }
}
