/*
 * fuzz_children - the election state machine (src/election.c) driven by
 * synthetic events from the input: session changes, answers to any of its
 * recent requests (created names, children listings of any names, node
 * data, error codes, stale tokens), watch events, and the owner's calls
 * (kick, resign, withdraw, rejoin, lease expiry, stop). Checks sequence
 * parsing on every name, that terms alternate (leader, step-down), and the
 * status against the role.
 */
#include <inttypes.h>

#include "election.h"
#include "fuzz.h"

#define NREQ 16

struct st {
    struct el_req req[NREQ];
    char node[NREQ][160];
    int nreq;
    int leaders, stepdowns;
};

static void on_req(void *ud, const struct el_req *r)
{
    struct st *s = ud;
    int i = s->nreq++ % NREQ;
    s->req[i] = *r;
    snprintf(s->node[i], sizeof s->node[i], "%s", r->node ? r->node : "");
    s->req[i].node = s->node[i];
    s->req[i].data = NULL;
}

static void on_ev(void *ud, const struct zke_event *ev)
{
    struct st *s = ud;
    FZ_ASSERT(ev->reason != NULL || ev->type != ZKE_EV_STEPDOWN);
    if (ev->type == ZKE_EV_LEADER)
        s->leaders++;
    if (ev->type == ZKE_EV_STEPDOWN)
        s->stepdowns++;
    /* terms alternate: never two leaders without a step-down between */
    FZ_ASSERT(s->leaders - s->stepdowns == 0 || s->leaders - s->stepdowns == 1);
}

static void on_log(void *ud, enum zke_log_level lvl, const char *msg)
{
    (void)ud;
    (void)lvl;
    FZ_ASSERT(msg != NULL);
}

static const struct el_ops ops = { on_req, on_ev, on_log };

static void check_name(const char *name)
{
    int32_t seq;
    if (el_parse_seq(name, &seq) == 0) {
        char back[16];
        size_t n = strlen(name);
        snprintf(back, sizeof back, "%010" PRId32, seq);
        FZ_ASSERT(n >= strlen(back) && strcmp(name + n - strlen(back), back) == 0);
    }
    (void)el_is_our_name(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = { data, size };
    struct st s;
    memset(&s, 0, sizeof s);
    election *e = el_new("/app/election", "me", NULL, &ops, &s, fz_byte(&f));
    if (e == NULL)
        return 0;
    (void)el_set_compat(e, (enum zke_compat)(fz_byte(&f) % 4), 0);
    el_set_strict(e, (int)(fz_byte(&f) & 1));
    for (int step = 0; step < 64 && f.n > 0; step++) {
        unsigned op = fz_byte(&f);
        switch (op % 8) {
        case 0: {
            unsigned st = fz_byte(&f) % 3;
            unsigned sid = 1 + fz_byte(&f) % 3;
            el_on_session(e, (enum el_session_state)st, sid);
            break;
        }
        case 1:
        case 2:
        case 3: {
            /* answer one of the recent requests */
            if (s.nreq == 0)
                break;
            int back = (int)(fz_byte(&f) % (s.nreq < NREQ ? (unsigned)s.nreq : NREQ));
            struct el_req r = s.req[(s.nreq - 1 - back) % NREQ];
            char rnode[160];
            snprintf(rnode, sizeof rnode, "%s", r.node);
            unsigned flags = fz_byte(&f);
            struct el_result res;
            memset(&res, 0, sizeof res);
            res.token = (flags & 0x80) ? fz_u32(&f) : r.token;
            res.rc = (flags & 0x40) ? (enum el_rc)(fz_byte(&f) % 8) : EL_OK;
            res.czxid = fz_byte(&f);
            res.owner = fz_byte(&f) % 3;
            res.mzxid = fz_byte(&f);
            char name[200], *children[8] = { 0 }, *dat = NULL;
            char *str = fz_str(&f, 64);
            if (r.type == EL_REQ_CREATE) {
                /* the prefix with a sequence, or any name */
                if (flags & 1)
                    snprintf(name, sizeof name, "%s", str);
                else
                    snprintf(name, sizeof name, "%s%010" PRId32, rnode, (int32_t)fz_u32(&f));
                check_name(name);
                res.name = name;
            }
            int nc = 0;
            if (r.type == EL_REQ_LIST) {
                nc = (int)(fz_byte(&f) % 9);
                for (int i = 0; i < nc; i++) {
                    unsigned k = fz_byte(&f);
                    struct zke_status st;
                    el_status(e, &st);
                    if (k % 3 == 0 && st.node != NULL)
                        children[i] = strdup(st.node);        /* our own node */
                    else if (k % 3 == 1) {
                        char nm[64];
                        snprintf(nm, sizeof nm, "n_%016x-%010" PRId32, k, (int32_t)fz_u32(&f));
                        children[i] = strdup(nm);
                    } else
                        children[i] = fz_str(&f, 48);
                    if (children[i] == NULL)
                        abort();
                    check_name(children[i]);
                }
                res.children = (const char *const *)children;
                res.nchildren = nc;
                res.cversion = (int32_t)fz_u32(&f);
            }
            if (r.type == EL_REQ_WATCH || r.type == EL_REQ_GET_LEADER) {
                dat = fz_str(&f, 128);
                res.data = dat;
                res.datalen = (int)strlen(dat);
            }
            el_on_result(e, r.type, &res);
            for (int i = 0; i < nc; i++)
                free(children[i]);
            free(dat);
            free(str);
            break;
        }
        case 4: {
            struct zke_status st;
            el_status(e, &st);
            unsigned k = fz_byte(&f);
            char *str = fz_str(&f, 48);
            const char *node = (k & 1) && s.nreq > 0 ? s.node[(s.nreq - 1) % NREQ]
                               : (k & 2) && st.node ? st.node : str;
            char copy[200];
            snprintf(copy, sizeof copy, "%s", node);
            el_on_watch(e, (enum el_watch_type)((k >> 2) % 3), copy);
            free(str);
            break;
        }
        case 5:
            el_kick(e);
            break;
        case 6:
            switch (fz_byte(&f) % 4) {
            case 0: (void)el_resign(e, fz_byte(&f) * 100); break;
            case 1: (void)el_withdraw(e, "health"); break;
            case 2: (void)el_rejoin(e); break;
            default: (void)el_lease_expired(e, "lease"); break;
            }
            break;
        default:
            if ((fz_byte(&f) & 7) == 0)
                el_stop(e);
            break;
        }
        struct zke_status st;
        el_status(e, &st);
        FZ_ASSERT(st.role == el_role(e));
    }
    el_free(e);
    return 0;
}
