/*
 * fuzz_histrecord - a record of the history of terms as read from
 * ZooKeeper (any bytes another client wrote) through hist_decode, what
 * decodes back through hist_encode, and the audit's judgement of records
 * made from the input (zke_history_judge: any epochs and stamps).
 */
#include "fuzz.h"
#include "history.h"
#include "zkelect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hist_rec r;
    if (size > 1 << 20)
        return 0;
    if (hist_decode((const char *)data, (int)size, NULL, &r) == 0) {
        FZ_ASSERT(r.epoch > 0 && r.start_ms > 0 && r.end_ms >= 0);
        FZ_ASSERT(r.id != NULL && r.node != NULL);
        FZ_ASSERT(r.end_ms == 0 || r.reason != NULL);
        char *enc = hist_encode(&r);
        if (enc != NULL) {
            struct hist_rec back;
            char name[HIST_NAME_LEN + 1];
            hist_name(r.epoch, name);
            FZ_ASSERT(hist_decode(enc, (int)strlen(enc), name, &back) == 0);
            FZ_ASSERT(back.epoch == r.epoch && back.start_ms == r.start_ms);
            FZ_ASSERT(back.end_ms == r.end_ms && strcmp(back.id, r.id) == 0);
            hist_clear(&back);
            free(enc);
        }
        hist_clear(&r);
    }
    /* the judgement of terms whose numbers are the input's (any int64, as
     * a host may pass), with a skew that is the input's too */
    struct zke_term t[16];
    struct zke_finding f[8];
    int n = 0;
    int64_t skew = 0;
    if (size >= sizeof skew)
        memcpy(&skew, data + size - sizeof skew, sizeof skew);
    for (size_t i = 0; i + 24 <= size && n < 16; i += 24, n++) {
        int64_t v[3];
        memcpy(v, data + i, sizeof v);
        t[n] = (struct zke_term){ v[0], "x", "n", v[1], v[2] > 0 ? v[2] : 0,
                                  v[2] > 0 ? "shutdown" : v[2] < -100 ? "no_stepdown" : NULL,
                                  NULL, n, "term-" };
    }
    int k = zke_history_judge(t, n, skew, f, 8);
    FZ_ASSERT(k >= 0 && k <= 3 * n);
    for (int i = 0; i < k && i < 8; i++)
        FZ_ASSERT(zke_finding_name(f[i].kind) != NULL &&
                  (f[i].kind != ZKE_FINDING_OVERLAP || (f[i].ms > 0 && f[i].ms > skew)));
    return 0;
}
