/*
 * leasewatch.c - when a conn's leasers must be checked (see leasewatch.h).
 *
 * (A walk of all E leaders at each renewal made the idle cost of a process
 * grow with E; one at every publish's answer in a mass takeover was
 * O(E^2): hence the summary, and a walk only on what needs it.)
 */
#include "leasewatch.h"

#include <stddef.h>

void leasewatch_init(struct leasewatch *w)
{
    *w = (struct leasewatch){ .next = INT64_MAX, .min_off = INT64_MAX };
}

/* A move back (a new session), any move while one waits for it (a term
 * that starts once its lease is), and, while a leaser follows the base, a
 * move of LEASEWATCH_MOVE_NS or more. */
int leasewatch_base_moved(const struct leasewatch *w, int64_t base)
{
    if (base == w->base_seen)
        return 0;
    return base < w->base_seen || w->waiters > 0 ||
           (w->followers > 0 && base - w->base_seen >= LEASEWATCH_MOVE_NS);
}

int64_t leasewatch_due(const struct leasewatch *w, int64_t base)
{
    if (w->followers == 0 && w->min_off != INT64_MAX && base > 0 && base >= w->base_seen)
        return base + w->min_off;
    return w->next;
}

int leasewatch_pending(const struct leasewatch *w, int64_t base, int n)
{
    return n > 0 && (leasewatch_base_moved(w, base) || w->dirty || w->new_from < n);
}

/* Why a check walks (its debug line), before the walk records the base. */
static const char *walk_reason(const struct leasewatch *w, int64_t base)
{
    if (w->dirty)
        return "a leaser changed";
    if (w->guard == LEASEWATCH_GUARD_SILENT)
        return "the fail-stop watcher went silent";
    if (!leasewatch_base_moved(w, base))
        return "a lease end came";
    if (base < w->base_seen)
        return "the base moved back";
    return w->waiters > 0 ? "the base moved, a term waits for it" : "the base moved, a guard follows it";
}

enum leasewatch_pass leasewatch_begin(struct leasewatch *w, int64_t base, int64_t now, int silent,
                                      int n, int *from, const char **why)
{
    *from = n;
    *why = NULL;
    if (n <= 0)
        return LEASEWATCH_NONE;
    w->guard = !silent ? LEASEWATCH_GUARD_HEARD
               : w->guard == LEASEWATCH_GUARD_HEARD ? LEASEWATCH_GUARD_SILENT
                                                    : LEASEWATCH_GUARD_SILENCE_SEEN;
    if (!leasewatch_base_moved(w, base) && !w->dirty && now < leasewatch_due(w, base) &&
        w->guard != LEASEWATCH_GUARD_SILENT) {
        if (w->new_from >= n)
            return LEASEWATCH_NONE;
        *from = w->new_from;        /* only the leasers added since the last walk */
        return LEASEWATCH_NEW;
    }
    *why = walk_reason(w, base);
    w->base_seen = base;
    w->dirty = 0;
    if (w->guard == LEASEWATCH_GUARD_SILENT)
        w->guard = LEASEWATCH_GUARD_SILENCE_SEEN;
    *from = 0;
    return LEASEWATCH_ALL;
}

void leasewatch_sum_init(struct leasewatch_sum *s)
{
    s->next = s->min_off = INT64_MAX;
    s->waiters = s->followers = 0;
}

void leasewatch_sum_add(struct leasewatch_sum *s, int64_t at, int follows, int64_t base)
{
    s->followers += follows != 0;
    if (at == INT64_MAX)
        s->waiters++;
    else if (at - base < s->min_off)
        s->min_off = at - base;
    if (at < s->next)
        s->next = at;
}

void leasewatch_end(struct leasewatch *w, enum leasewatch_pass pass, const struct leasewatch_sum *s,
                    int n)
{
    if (pass == LEASEWATCH_NEW) {
        w->waiters += s->waiters;
        w->followers += s->followers;
        if (s->min_off < w->min_off)
            w->min_off = s->min_off;
        if (s->next < w->next)
            w->next = s->next;
    } else if (pass == LEASEWATCH_ALL) {
        w->waiters = s->waiters;
        w->followers = s->followers;
        w->min_off = s->min_off;
        w->next = s->next;
    } else {
        return;
    }
    w->new_from = n;
}

int64_t leasewatch_next(const struct leasewatch *w, int64_t base, int64_t pending)
{
    int64_t due = leasewatch_due(w, base);
    if (w->guard != LEASEWATCH_GUARD_HEARD)
        pending = 0;
    if (pending > 0 && pending + 1000000 < due)
        due = pending + 1000000;    /* the watcher's silence confirmed (or not) then */
    return due;
}

void leasewatch_dropped(struct leasewatch *w, int slot, int n, int in_check)
{
    if (in_check || (slot < w->new_from && n >= w->new_from))
        w->dirty = 1;           /* (a new one moved among the checked: all again) */
    if (w->new_from > n)
        w->new_from = n;
}

void leasewatch_wait(struct leasewatch *w)
{
    w->waiters++;               /* (a count too high only checks more often) */
}

void leasewatch_recheck(struct leasewatch *w)
{
    w->dirty = 1;
}

const char *leasewatch_guard_name(enum leasewatch_guard g)
{
    switch (g) {
    case LEASEWATCH_GUARD_HEARD:
        return "heard";
    case LEASEWATCH_GUARD_SILENT:
        return "silent";
    case LEASEWATCH_GUARD_SILENCE_SEEN:
        return "silence_seen";
    }
    return "?";
}
