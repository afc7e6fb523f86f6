/*
 * fuzz_hosts_path_id - the settings a candidate takes from outside: the
 * connect string (zke_check_hosts), the election path (zke_check_path), the
 * id (zke_check_id), the credentials (zke_check_auth), each NUL-separated
 * field given to all of them; and the lease arithmetic (zke_lease_check)
 * with the first 28 bytes as its numbers (an embedding host passes any int).
 */
#include <math.h>

#include "fuzz.h"
#include "zkelect.h"

static void lease(const uint8_t *data, size_t size)
{
    struct fz f = { data, size };
    struct zke_settings s;
    struct zke_lease_plan p;
    char err[512] = "";
    memset(&s, 0, sizeof s);
    int T = (int)fz_u32(&f);
    s.stepdown_budget_ms = (int)fz_u32(&f);
    s.lease_margin_ms = (int)fz_u32(&f);
    s.hook_budget_ms = (int)fz_u32(&f);
    uint32_t d = fz_u32(&f);
    /* a few exact fractions, and any float's bits */
    float fl;
    memcpy(&fl, &d, sizeof fl);
    s.drift = (d >> 31) ? (double)(d & 0xffff) / 65536.0 : (double)fl;
    s.renew_ms = (int)fz_u32(&f);       /* 0 (the default) when the input ends */
    s.server_tick_ms = (int)fz_u32(&f);
    if (zke_lease_check(&s, T, &p, err, sizeof err) == 0) {
        /* the promise: positive, renewed at least twice per lease, the
         * budget inside it */
        FZ_ASSERT(T > 0 && p.session_ms == T);
        FZ_ASSERT(p.drift > 0 && p.drift < 0.5);
        FZ_ASSERT(p.renew_ms > 0 && p.lease_ms >= 2 * p.renew_ms);
        /* what is left once a renewal is confirmed a server tick later */
        FZ_ASSERT(p.server_tick_ms > 0 && p.confirm_ms >= p.server_tick_ms);
        FZ_ASSERT((int64_t)p.lease_ms - p.confirm_ms >= 2 * (int64_t)p.renew_ms);
        FZ_ASSERT(p.lease_ms < T);
        FZ_ASSERT((int64_t)p.lease_ms + p.stepdown_budget_ms + p.margin_ms <= T);
        FZ_ASSERT(s.hook_budget_ms <= p.lease_ms - p.confirm_ms - p.renew_ms);
    } else {
        FZ_ASSERT(err[0] != '\0' && !fz_has_ctl(err));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *fields[16];
    int n;
    if (size >= 20)
        lease(data, size);
    char *buf = fz_fields(data, size, fields, 16, &n);
    for (int i = 0; i < n; i++) {
        const char *v = fields[i];
        char err[512] = "";
        if (zke_check_hosts(v, err, sizeof err) == 0) {
            FZ_ASSERT(strchr(v, ':') != NULL && !fz_has_ctl(v));
        } else {
            FZ_ASSERT(err[0] != '\0' && !fz_has_ctl(err));
        }
        err[0] = '\0';
        if (zke_check_path(v, err, sizeof err) == 0) {
            FZ_ASSERT(v[0] == '/' && strstr(v, "//") == NULL && !fz_has_ctl(v));
            FZ_ASSERT(strlen(v) <= 1024 && v[strlen(v) - 1] != '/');
        } else {
            FZ_ASSERT(err[0] != '\0' && !fz_has_ctl(err));
        }
        err[0] = '\0';
        if (zke_check_id(v, err, sizeof err) == 0) {
            FZ_ASSERT(*v != '\0' && strlen(v) <= 128 && strchr(v, '/') == NULL && !fz_has_ctl(v));
        } else {
            FZ_ASSERT(err[0] != '\0' && !fz_has_ctl(err));
        }
        /* "scheme:credentials" */
        char *copy = strdup(v);
        if (copy == NULL)
            abort();
        char *colon = strchr(copy, ':');
        const char *scheme = copy, *cred = NULL;
        if (colon != NULL) {
            *colon = '\0';
            cred = colon + 1;
        }
        err[0] = '\0';
        if (zke_check_auth(scheme, cred, err, sizeof err) == 0) {
            FZ_ASSERT(cred != NULL && *cred != '\0' && !fz_has_ctl(cred));
        } else {
            FZ_ASSERT(err[0] != '\0' && !fz_has_ctl(err));
            /* the reason never shows the credentials */
            FZ_ASSERT(cred == NULL || strlen(cred) < 12 || strstr(err, cred) == NULL ||
                      strstr(scheme, cred) != NULL);
        }
        free(copy);
    }
    free(buf);
    return 0;
}
