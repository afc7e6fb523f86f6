/* history.c - see history.h; zke_history_judge and zke_finding_name
 * (zkelect.h) too. */
#define _POSIX_C_SOURCE 200809L
#include "history.h"

#include "zkelect.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define EXACT_MAX 9007199254740992.0    /* 2^53: integers a double holds exactly */

void hist_name(int64_t epoch, char out[HIST_NAME_LEN + 1])
{
    snprintf(out, HIST_NAME_LEN + 1, HIST_PREFIX "%019" PRId64, epoch);
}

int hist_parse_name(const char *name, int64_t *epoch)
{
    size_t p = sizeof HIST_PREFIX - 1;
    if (name == NULL || strlen(name) != HIST_NAME_LEN || strncmp(name, HIST_PREFIX, p) != 0)
        return -1;
    int64_t v = 0;
    for (const char *c = name + p; *c != '\0'; c++) {
        if (*c < '0' || *c > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*c - '0');
    }
    if (v <= 0)
        return -1;
    *epoch = v;
    return 0;
}

char *hist_encode(const struct hist_rec *r)
{
    cJSON *o = cJSON_CreateObject();
    char *txt = NULL;
    if (o == NULL)
        return NULL;
    if (cJSON_AddNumberToObject(o, "zkelect_term", 1) != NULL &&
        cJSON_AddNumberToObject(o, "epoch", (double)r->epoch) != NULL &&
        cJSON_AddStringToObject(o, "id", r->id != NULL ? r->id : "") != NULL &&
        cJSON_AddStringToObject(o, "node", r->node != NULL ? r->node : "") != NULL &&
        cJSON_AddNumberToObject(o, "start_ms", (double)r->start_ms) != NULL &&
        (r->end_ms <= 0 || cJSON_AddNumberToObject(o, "end_ms", (double)r->end_ms) != NULL) &&
        (r->reason == NULL || cJSON_AddStringToObject(o, "reason", r->reason) != NULL) &&
        (r->closed_by == NULL || cJSON_AddStringToObject(o, "closed_by", r->closed_by) != NULL))
        txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return txt;
}

/* A whole number in [lo, 2^53], or -1 (absent: dflt). */
static int whole(const cJSON *o, const char *key, int64_t lo, int64_t dflt, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v == NULL) {
        *out = dflt;
        return dflt >= 0 ? 0 : -1;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble < (double)lo || v->valuedouble > EXACT_MAX ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* A string of at most HIST_STR_MAX bytes copied to *out; absent: NULL
 * (0 if optional). */
static int text(const cJSON *o, const char *key, int optional, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (v == NULL)
        return optional ? 0 : -1;
    if (!cJSON_IsString(v) || v->valuestring == NULL || strlen(v->valuestring) > HIST_STR_MAX)
        return -1;
    *out = strdup(v->valuestring);
    return *out != NULL ? 0 : -1;
}

int hist_decode(const char *buf, int len, const char *name, struct hist_rec *out)
{
    memset(out, 0, sizeof *out);
    int64_t named = 0, version = 0;
    if (buf == NULL || len <= 0 || (name != NULL && hist_parse_name(name, &named) != 0))
        return -1;
    cJSON *o = cJSON_ParseWithLength(buf, (size_t)len);
    int ok = o != NULL && cJSON_IsObject(o) && whole(o, "zkelect_term", 1, -1, &version) == 0 &&
             version == 1 && whole(o, "epoch", 1, -1, &out->epoch) == 0 &&
             (name == NULL || out->epoch == named) &&
             whole(o, "start_ms", 1, -1, &out->start_ms) == 0 &&
             whole(o, "end_ms", 0, 0, &out->end_ms) == 0 && text(o, "id", 0, &out->id) == 0 &&
             text(o, "node", 0, &out->node) == 0 && text(o, "reason", 1, &out->reason) == 0 &&
             text(o, "closed_by", 1, &out->closed_by) == 0;
    cJSON_Delete(o);
    /* an end needs its reason, and a step-down's reason its end */
    if (ok && ((out->end_ms > 0 && out->reason == NULL) ||
               (out->reason != NULL && out->end_ms == 0 &&
                strcmp(out->reason, HIST_NO_STEPDOWN) != 0)))
        ok = 0;
    if (!ok) {
        hist_clear(out);
        return -1;
    }
    return 0;
}

void hist_clear(struct hist_rec *r)
{
    free(r->id);
    free(r->node);
    free(r->reason);
    free(r->closed_by);
    memset(r, 0, sizeof *r);
}

static int by_value(const void *x, const void *y)
{
    int64_t p = *(const int64_t *)x, q = *(const int64_t *)y;
    return p < q ? -1 : p > q;
}

void hist_plan(int64_t *e, int n, int64_t epoch, int keep, int *pred, int *prune)
{
    int below = 0;
    if (n > 0)
        qsort(e, (size_t)n, sizeof *e, by_value);
    while (below < n && e[below] < epoch)
        below++;
    *pred = below - 1;
    *prune = n - keep < below ? n - keep : below;
    if (*prune < 0)
        *prune = 0;
}

const char *zke_finding_name(enum zke_finding_kind k)
{
    static const char *const names[] = { "overlap", "epoch_backwards", "no_stepdown" };
    return (unsigned)k < ZKE_FINDING_COUNT ? names[k] : NULL;
}

static void add(struct zke_finding *out, int max, int *n, struct zke_finding f)
{
    if (*n < max)
        out[*n] = f;
    (*n)++;
}

static int by_epoch(const void *x, const void *y)
{
    const struct zke_term *a = x, *b = y;
    return a->epoch < b->epoch ? -1 : a->epoch > b->epoch;
}

/* A term that ended by a step-down: its end stamp is its own. */
static int stepped_down(const struct zke_term *t)
{
    return t->end_ms > 0 && (t->reason == NULL || strcmp(t->reason, HIST_NO_STEPDOWN) != 0);
}

/* a - b, saturated (the terms may come from any host: any int64). */
static int64_t minus(int64_t a, int64_t b)
{
    if (b < 0 && a > INT64_MAX + b)
        return INT64_MAX;
    if (b > 0 && a < INT64_MIN + b)
        return INT64_MIN;
    return a - b;
}

int zke_history_judge(const struct zke_term *terms, int n, int64_t skew_ms,
                      struct zke_finding *out, int max)
{
    int found = 0;
    if (terms == NULL || n <= 0)
        return 0;
    if (skew_ms < 0)
        skew_ms = 0;
    struct zke_term *byep = malloc((size_t)n * sizeof *byep);   /* shallow copies */
    if (byep == NULL)
        return 0;
    memcpy(byep, terms, (size_t)n * sizeof *byep);
    qsort(byep, (size_t)n, sizeof *byep, by_epoch);
    const struct zke_term *e = byep;
    /* each term against every earlier one by epoch that stepped down: the
     * latest such end (a long term covers several after it) after its start */
    int last = -1;              /* the earlier term with the latest own end */
    for (int i = 0; i < n; i++) {
        int64_t by = last >= 0 ? minus(e[last].end_ms, e[i].start_ms) : 0;
        if (last >= 0 && e[last].epoch != e[i].epoch && by > skew_ms)
            add(out, max, &found, (struct zke_finding){ ZKE_FINDING_OVERLAP, e[i].epoch,
                                                        e[last].epoch, by });
        if (stepped_down(&e[i]) && (last < 0 || e[i].end_ms > e[last].end_ms))
            last = i;
    }
    /* in the order ZooKeeper recorded them, the epochs only grow */
    int64_t top = 0;
    for (int i = 0; i < n; i++) {
        if (terms[i].epoch < top)
            add(out, max, &found, (struct zke_finding){ ZKE_FINDING_EPOCH_BACKWARDS,
                                                        terms[i].epoch, top, 0 });
        else
            top = terms[i].epoch;
    }
    /* a term a later one followed, with no step-down recorded */
    for (int i = 0; i + 1 < n; i++)
        if (!stepped_down(&e[i]) && e[i + 1].epoch != e[i].epoch)
            add(out, max, &found, (struct zke_finding){ ZKE_FINDING_NO_STEPDOWN, e[i].epoch,
                                                        0, 0 });
    free(byep);
    return found;
}
