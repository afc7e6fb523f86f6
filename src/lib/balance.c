/*
 * balance.c - the arithmetic of a balanced group (balance.h). Pure.
 */
#include "balance.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define LEADS_MAX 10000000

/* Indexes of m sorted by id (insertion sort: n is the group's size). */
static void by_id(const struct bal_member *m, int n, int *idx)
{
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && strcmp(m[idx[j - 1]].id, m[i].id) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
}

/* One round of Hamilton among the members not fixed: returns 1 when one
 * passed its max (it is fixed there and the round must be done again). */
static int apportion(const struct bal_member *m, int n, const int *idx, int e, int *target,
                     unsigned char *fixed, int64_t *rem)
{
    int64_t w = 0;
    int left = e;
    for (int i = 0; i < n; i++) {
        if (fixed[i])
            left -= target[i];
        else
            w += m[i].weight;
    }
    if (w == 0 || left <= 0) {
        for (int i = 0; i < n; i++)
            if (!fixed[i])
                target[i] = 0;
        return 0;
    }
    int given = 0;
    for (int i = 0; i < n; i++) {
        if (fixed[i])
            continue;
        int64_t num = (int64_t)left * m[i].weight;
        target[i] = (int)(num / w);
        rem[i] = num % w;
        given += target[i];
    }
    /* the rest, one each, by largest remainder; equal ones by id */
    while (given < left) {
        int best = -1;
        for (int k = 0; k < n; k++) {
            int i = idx[k];
            if (!fixed[i] && rem[i] >= 0 && (best < 0 || rem[i] > rem[best]))
                best = i;
        }
        if (best < 0)
            break;
        target[best]++;
        rem[best] = -1;
        given++;
    }
    int over = 0;
    for (int i = 0; i < n; i++)
        if (!fixed[i] && m[i].max > 0 && target[i] >= m[i].max) {
            if (target[i] > m[i].max)
                over = 1;
        }
    if (!over)
        return 0;
    for (int i = 0; i < n; i++)
        if (!fixed[i] && m[i].max > 0 && target[i] > m[i].max) {
            target[i] = m[i].max;
            fixed[i] = 1;
        }
    return 1;
}

int bal_shares(const struct bal_member *m, int n, int e, int *target)
{
    if (n < 0 || e < 0 || (n > 0 && (m == NULL || target == NULL)))
        return -1;
    for (int i = 0; i < n; i++)
        if (m[i].weight < 1 || m[i].weight > BAL_WEIGHT_MAX || m[i].max < 0 || m[i].id == NULL)
            return -1;
    if (n == 0)
        return 0;
    int *idx = malloc((size_t)n * sizeof *idx);
    unsigned char *fixed = calloc((size_t)n, 1);
    int64_t *rem = malloc((size_t)n * sizeof *rem);
    if (idx == NULL || fixed == NULL || rem == NULL) {
        free(idx);
        free(fixed);
        free(rem);
        return -1;
    }
    by_id(m, n, idx);
    for (int i = 0; i < n; i++) {
        target[i] = 0;
        fixed[i] = m[i].leaving != 0;
    }
    /* each round fixes at least one member: at most n rounds */
    for (int round = 0; round <= n && apportion(m, n, idx, e, target, fixed, rem); round++) {
    }
    int sum = 0;
    for (int i = 0; i < n; i++)
        sum += target[i];
    free(idx);
    free(fixed);
    free(rem);
    return sum;
}

int bal_moves(const struct bal_member *m, int n, const int *target, struct bal_move *out,
              int max_out)
{
    if (n < 0 || max_out < 0 || (n > 0 && (m == NULL || target == NULL)))
        return -1;
    if (n == 0)
        return 0;
    int *idx = malloc((size_t)n * sizeof *idx);
    int *left = malloc((size_t)n * sizeof *left);
    if (idx == NULL || left == NULL) {
        free(idx);
        free(left);
        return -1;
    }
    by_id(m, n, idx);
    for (int i = 0; i < n; i++)
        left[i] = m[i].leads - target[i];       /* > 0 surplus, < 0 deficit */
    int rows = 0, d = 0, r = 0;
    for (;;) {
        while (d < n && left[idx[d]] <= 0)
            d++;
        while (r < n && left[idx[r]] >= 0)
            r++;
        if (d >= n || r >= n)
            break;
        int from = idx[d], to = idx[r];
        int k = left[from] < -left[to] ? left[from] : -left[to];
        if (rows < max_out)
            out[rows] = (struct bal_move){ .from = from, .to = to, .count = k };
        rows++;
        left[from] -= k;
        left[to] += k;
    }
    free(idx);
    free(left);
    return rows;
}

int bal_rate_avail(struct bal_rate *r, int64_t now_ms, int per_min)
{
    int64_t cap = (int64_t)(per_min > 0 ? per_min : 0) * 1000;
    if (r->at_ms == 0) {
        r->milli = cap;
    } else if (now_ms > r->at_ms) {
        int64_t dt = now_ms - r->at_ms;
        /* per_min tokens in 60000 ms: per_min/60 milli-tokens per ms */
        int64_t add = dt > 60000 ? cap : dt * per_min / 60;
        r->milli = r->milli + add > cap ? cap : r->milli + add;
    }
    r->at_ms = now_ms > 0 ? now_ms : 1;
    return (int)(r->milli / 1000);
}

void bal_rate_take(struct bal_rate *r, int n)
{
    r->milli -= (int64_t)n * 1000;
    if (r->milli < 0)
        r->milli = 0;
}

int64_t bal_rate_wait_ms(const struct bal_rate *r, int64_t now_ms, int per_min)
{
    if (per_min <= 0)
        return INT64_MAX;
    struct bal_rate c = *r;
    if (bal_rate_avail(&c, now_ms, per_min) >= 1)
        return 0;
    int64_t need = 1000 - c.milli;     /* milli-tokens short of one */
    return (need * 60 + per_min - 1) / per_min;
}

void bal_settle_init(struct bal_settle *s, int base_ms)
{
    s->base_ms = base_ms > 0 ? base_ms : 0;
    s->delay_ms = s->base_ms;
    s->changed_at = INT64_MIN;
}

void bal_settle_change(struct bal_settle *s, int64_t now_ms, int gone)
{
    int64_t window = (int64_t)s->base_ms * 10;
    if (s->changed_at != INT64_MIN) {
        int64_t quiet = now_ms - s->changed_at;
        if (quiet < window) {
            if (!gone) {
                s->changed_at = now_ms;     /* a join: the wait starts again, no longer */
                return;
            }
            s->delay_ms *= 2;
            if (s->delay_ms > (int64_t)s->base_ms * 16)
                s->delay_ms = (int64_t)s->base_ms * 16;
        } else {
            /* a change after a quiet stretch: halved per whole window of it */
            for (; quiet >= window && s->delay_ms > s->base_ms; quiet -= window)
                s->delay_ms /= 2;
            if (s->delay_ms < s->base_ms)
                s->delay_ms = s->base_ms;
        }
    }
    s->changed_at = now_ms;
}

int64_t bal_settle_wait_ms(const struct bal_settle *s, int64_t now_ms)
{
    if (s->changed_at == INT64_MIN)
        return 0;
    int64_t end = s->changed_at + s->delay_ms;
    return now_ms >= end ? 0 : end - now_ms;
}

static int id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > BAL_ID_MAX || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)id[i] < 0x21 || (unsigned char)id[i] > 0x7e || id[i] == '/' ||
            id[i] == '"' || id[i] == '\\')
            return 0;
    return 1;
}

int bal_data_encode(const struct bal_data *d, char *buf, size_t len)
{
    if (!id_ok(d->id))
        return -1;
    int n = snprintf(buf, len, "{\"id\":\"%s\",\"weight\":%d,\"max\":%d,\"elections\":%d,\"leads\":%d%s}",
                     d->id, d->weight, d->max, d->elections, d->leads,
                     d->leaving ? ",\"leaving\":1" : "");
    return n < 0 || (size_t)n >= len ? -1 : n;
}

/* An integer member in [lo, hi], or -1 (absent: dflt). */
static int num_of(const cJSON *o, const char *key, int lo, int hi, int dflt, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v == NULL) {
        *out = dflt;
        return 0;
    }
    /* the range first: a cast of a double outside int64_t is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    *out = (int)v->valuedouble;
    return 0;
}

int bal_data_decode(const char *buf, int len, const char *name, struct bal_data *out)
{
    memset(out, 0, sizeof *out);
    if (buf == NULL || len <= 0 || len > 4096 || name == NULL || !id_ok(name))
        return -1;
    cJSON *o = cJSON_ParseWithLength(buf, (size_t)len);
    if (o == NULL)
        return -1;
    int rc = -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (cJSON_IsObject(o) && cJSON_IsString(id) && id->valuestring != NULL &&
        strcmp(id->valuestring, name) == 0 &&
        num_of(o, "weight", 1, BAL_WEIGHT_MAX, -1, &out->weight) == 0 && out->weight > 0 &&
        num_of(o, "max", 0, LEADS_MAX, 0, &out->max) == 0 &&
        num_of(o, "elections", 0, LEADS_MAX, 0, &out->elections) == 0 &&
        num_of(o, "leads", 0, LEADS_MAX, 0, &out->leads) == 0 &&
        num_of(o, "leaving", 0, 1, 0, &out->leaving) == 0) {
        snprintf(out->id, sizeof out->id, "%s", name);
        rc = 0;
    }
    cJSON_Delete(o);
    if (rc != 0)
        memset(out, 0, sizeof *out);
    return rc;
}

int bal_member_of(const struct bal_data *d, struct bal_member *m)
{
    if (d->elections <= 0 || d->weight < 1 || d->weight > BAL_WEIGHT_MAX)
        return -1;
    *m = (struct bal_member){
        .id = d->id, .weight = d->weight,
        .max = d->max > 0 && d->max < d->elections ? d->max : d->elections,
        .leads = d->leads < d->elections ? d->leads : d->elections,
        .leaving = d->leaving != 0,
    };
    return 0;
}
