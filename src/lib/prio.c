/* prio.c - see prio.h. */
#include "prio.h"

#include <stddef.h>

int prio_decide(const struct prio_cand *c, int n, int mine, int64_t now_ms, int delay_ms)
{
    int best = -1;
    if (now_ms <= 0 || c == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!c[i].usable || c[i].priority <= mine || c[i].since_ms <= 0)
            continue;
        if (now_ms - c[i].since_ms < (int64_t)delay_ms)
            continue;               /* not held for the whole delay yet */
        if (best < 0 || c[i].priority > c[best].priority ||
            (c[i].priority == c[best].priority && c[i].seq < c[best].seq))
            best = i;
    }
    return best;
}
