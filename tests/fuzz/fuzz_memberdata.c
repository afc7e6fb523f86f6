/*
 * fuzz_memberdata - a balanced group's member node as another process wrote
 * it (any bytes) through bal_data_decode (src/lib/balance.c), the node's
 * name taken from the input's first line: a member that decodes has every
 * number in range and the node's name as its id, and encodes back to the
 * same member; the shares and moves of such members stay within E.
 */
#include "balance.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[BAL_ID_MAX + 1];
    if (size > 1 << 16)
        return 0;
    const char *nl = memchr(data, '\n', size);
    size_t nlen = nl != NULL ? (size_t)(nl - (const char *)data) : 0;
    if (nl == NULL || nlen > BAL_ID_MAX)
        return 0;
    memcpy(name, data, nlen);
    name[nlen] = '\0';
    const char *body = nl + 1;
    int blen = (int)(size - nlen - 1);
    struct bal_data d;
    if (bal_data_decode(body, blen, name, &d) != 0)
        return 0;
    FZ_ASSERT(strcmp(d.id, name) == 0);
    FZ_ASSERT(d.weight >= 1 && d.weight <= BAL_WEIGHT_MAX);
    FZ_ASSERT(d.max >= 0 && d.elections >= 0 && d.leads >= 0 && (d.leaving == 0 || d.leaving == 1));
    char buf[512];
    int n = bal_data_encode(&d, buf, sizeof buf);
    FZ_ASSERT(n > 0);
    struct bal_data back;
    FZ_ASSERT(bal_data_decode(buf, n, name, &back) == 0);
    FZ_ASSERT(memcmp(&back, &d, sizeof d) == 0);
    /* two members like it (one other): the shares of its elections */
    struct bal_member m[2] = {
        { .id = d.id, .weight = d.weight, .max = d.max, .leads = d.leads, .leaving = d.leaving },
        { .id = "~other", .weight = 1, .max = 0, .leads = 0 },
    };
    int t[2];
    int e = d.elections;
    int sum = bal_shares(m, 2, e, t);
    FZ_ASSERT(sum == e && t[0] + t[1] == e);
    FZ_ASSERT(d.max == 0 || t[0] <= d.max);
    struct bal_move mv[4];
    int rows = bal_moves(m, 2, t, mv, 4);
    FZ_ASSERT(rows >= 0 && rows <= 1);
    return 0;
}
