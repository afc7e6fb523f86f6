/* cmd_status.c - zkelect status: one census of the election
 * (zke_census_run), printed as a table or one JSON object. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <ev.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "credentials.h"
#include "exits.h"
#include "utf8.h"
#include "zkelect.h"

struct status_run {
    const char *zk, *path;
    int json, code, done;
    int missing;                /* no such path: an election without candidates */
};

/* an outside string (node names, ids and data are any bytes another
 * client wrote) as valid UTF-8: the output stays JSON */
static void add_text(cJSON *o, const char *key, const char *v)
{
    char *clean = utf8_clean(v != NULL ? v : "", (size_t)1 << 20);
    cJSON_AddStringToObject(o, key, clean != NULL ? clean : "");
    free(clean);
}

static void status_json(const struct status_run *sr, const struct zke_census *c, int64_t now_ms)
{
    const struct zke_candidate *lead = c->n > 0 && !c->candidates[0].gone ? &c->candidates[0] : NULL;
    cJSON *o = cJSON_CreateObject();
    add_text(o, "path", sr->path);
    cJSON_AddBoolToObject(o, "exists", !sr->missing);
    cJSON *arr = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 0; i < c->n; i++) {
        const struct zke_candidate *e = &c->candidates[i];
        cJSON *x = cJSON_CreateObject();
        char sess[24];
        snprintf(sess, sizeof sess, "0x%llx", (unsigned long long)e->session);
        cJSON_AddNumberToObject(x, "position", i);
        add_text(x, "node", e->node);
        cJSON_AddNumberToObject(x, "seq", e->seq);
        cJSON_AddStringToObject(x, "kind", e->kind);
        if (e->gone) {
            cJSON_AddBoolToObject(x, "gone", 1);
        } else {
            add_text(x, "id", e->id);
            add_text(x, "data", e->data);
            cJSON_AddStringToObject(x, "session", sess);
            cJSON_AddNumberToObject(x, "age_ms", (double)(now_ms - e->ctime_ms));
            if (e->epoch > 0)
                cJSON_AddNumberToObject(x, "epoch", (double)e->epoch);
        }
        cJSON_AddItemToArray(arr, x);
    }
    if (lead != NULL) {
        cJSON *l = cJSON_AddObjectToObject(o, "leader");
        add_text(l, "id", lead->id);
        add_text(l, "node", lead->node);
        cJSON_AddStringToObject(l, "kind", lead->kind);
        if (lead->epoch > 0)
            cJSON_AddNumberToObject(l, "epoch", (double)lead->epoch);
        cJSON_AddBoolToObject(l, "published", lead->epoch > 0);
    } else {
        cJSON_AddNullToObject(o, "leader");
    }
    char *txt = cJSON_PrintUnformatted(o);
    if (txt != NULL)
        printf("%s\n", txt);
    free(txt);
    cJSON_Delete(o);
}

/* names and ids are any bytes another client wrote: printed escaped
 * (utf8_printable), so none can move the cursor or forge a line */
static void status_text(const struct status_run *sr, const struct zke_census *c, int64_t now_ms)
{
    const struct zke_candidate *lead = c->n > 0 && !c->candidates[0].gone ? &c->candidates[0] : NULL;
    char *path = utf8_printable(sr->path, 4096);
    if (sr->missing)
        printf("election %s: no such path, so no candidates (ZooKeeper removes the folder of an "
               "election that has none)\n", path ? path : "?");
    else
        printf("election %s: %d candidate%s\n", path ? path : "?", c->n, c->n == 1 ? "" : "s");
    free(path);
    if (c->n > 0)
        printf("  %-4s %-34s %-20s %-20s %9s  %s\n", "pos", "node", "id", "session", "age", "kind");
    for (int i = 0; i < c->n; i++) {
        const struct zke_candidate *e = &c->candidates[i];
        char sess[24], age[32];
        char *node = utf8_printable(e->node, 512), *id = utf8_printable(e->id ? e->id : "", 512);
        snprintf(sess, sizeof sess, "0x%llx", (unsigned long long)e->session);
        snprintf(age, sizeof age, "%.1fs", (double)(now_ms - e->ctime_ms) / 1000.0);
        printf("  %-4d %-34s %-20s %-20s %9s  %s%s\n", i, node ? node : "?",
               e->gone ? "-" : id ? id : "?", e->gone ? "-" : sess, e->gone ? "-" : age, e->kind,
               e->gone ? " (gone)" : "");
        free(node);
        free(id);
    }
    char *lid = lead != NULL ? utf8_printable(lead->id ? lead->id : "", 512) : NULL;
    char *lnode = lead != NULL ? utf8_printable(lead->node, 512) : NULL;
    if (lead == NULL)
        printf("leader: none\n");
    else if (lead->epoch > 0)
        printf("leader: %s (node %s, epoch %lld, leader data published)\n", lid ? lid : "?",
               lnode ? lnode : "?", (long long)lead->epoch);
    else
        printf("leader: %s (node %s, %s)\n", lid ? lid : "?", lnode ? lnode : "?",
               strcmp(lead->kind, "zkelect") == 0 ? "leader data not published (yet)"
                                                   : "a foreign candidate: no epoch");
    free(lid);
    free(lnode);
}

/* A path whose children are no candidates (its parent, say): exit 66. */
static void not_an_election(struct status_run *sr, const struct zke_census *c)
{
    char *path = utf8_printable(sr->path, 4096);
    char *other = c->other != NULL ? utf8_printable(c->other, 512) : NULL;
    size_t n = (path ? strlen(path) : 1) + (other ? strlen(other) : 1) + 320;
    char *msg = malloc(n);
    if (msg != NULL)
        snprintf(msg, n, "%s is not an election: it has %d child%s and no candidate (such as "
                 "'%s'; a candidate's name ends in a sequence number): is the election %s/%s?",
                 path ? path : "?", c->others, c->others == 1 ? "" : "ren", other ? other : "?",
                 strcmp(sr->path, "/") == 0 ? "" : path ? path : "?", other ? other : "?");
    error_line(msg != NULL ? msg : "the path is not an election", "");
    free(msg);
    free(path);
    free(other);
    sr->code = EX_NOINPUT;
}

static void status_done(const struct zke_census *c, void *ud)
{
    struct status_run *sr = ud;
    struct timeval tv;
    sr->done = 1;
    sr->code = exit_code_for(c->reason);
    sr->missing = c->reason != NULL && strcmp(c->reason, "no_election") == 0;
    if (c->reason != NULL && strcmp(c->reason, "unreachable") == 0) {
        error_line(c->msg, "");     /* the library's one wording, as run and watch say it */
        return;
    }
    if (c->reason != NULL && !sr->missing) {
        size_t n = strlen(sr->path) + strlen(c->msg) + strlen(sr->zk) + 8;
        char *msg = malloc(n);
        if (msg != NULL)
            snprintf(msg, n, "%s: %s at %s", sr->path, c->msg, sr->zk);
        error_line(msg != NULL ? msg : c->msg, "");
        free(msg);
        return;
    }
    if (c->reason == NULL && c->n == 0 && c->others > 0) {
        not_an_election(sr, c);
        return;
    }
    /* 0 with a leader, 3 without: an empty election and one whose empty
     * folder ZooKeeper removed are the same state */
    sr->code = c->n > 0 && !c->candidates[0].gone ? EX_OK : EX_NO_LEADER;
    gettimeofday(&tv, NULL);
    int64_t now_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    if (sr->json)
        status_json(sr, c, now_ms);
    else
        status_text(sr, c, now_ms);
}

int cmd_status(struct opts *o)
{
    char err[2048];
    struct status_run sr = { o->zk, o->path, o->json, 0, 0, 0 };
    require_election(o);
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    if (loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop");
    struct zke_observer_settings s;
    struct reader_creds rc_creds;
    resolve_reader(o, &s, &rc_creds);
    /* --connect-timeout bounds the whole reading: by default a short one
     * (options_status_timeout), 0 none */
    s.connect_timeout_ms = options_status_timeout(o);
    int rc = zke_census_run(loop, &s, status_done, &sr, err, sizeof err);
    forget_reader(o, &rc_creds);
    if (rc != 0)
        die(EX_SOFTWARE, "%s", err);
    ev_run(loop, 0);
    if (!sr.done)
        die(EX_SOFTWARE, "the event loop ended early");
    return sr.code;
}
