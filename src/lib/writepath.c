/*
 * writepath.c - see writepath.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "writepath.h"
#include "election.h"
#include "zkelect.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int writepath_check(const char *p, const char *what, char *err, size_t errlen)
{
    if (p == NULL || *p == '\0') {
        snprintf(err, errlen, "%s is empty", what);
        return -1;
    }
    size_t n = strlen(p);
    if (n > WRITEPATH_MAX) {
        snprintf(err, errlen, "%s is longer than %d characters", what, WRITEPATH_MAX);
        return -1;
    }
    for (const char *c = p; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            snprintf(err, errlen, "%s contains a control character", what);
            return -1;
        }
    if (p[0] != '/') {
        snprintf(err, errlen, "%s '%s' is not absolute (must start with '/')", what, p);
        return -1;
    }
    if (n == 1 || p[n - 1] == '/') {
        snprintf(err, errlen, "%s '%s' must not be '/' or end with '/'", what, p);
        return -1;
    }
    for (const char *c = p; *c; c++) {
        if (c[0] != '/')
            continue;
        if (c[1] == '/') {
            snprintf(err, errlen, "%s '%s' has an empty component", what, p);
            return -1;
        }
        if (c[1] == '.' && (c[2] == '/' || c[2] == '\0' ||
                            (c[2] == '.' && (c[3] == '/' || c[3] == '\0')))) {
            snprintf(err, errlen, "%s '%s' has a '.' or '..' component", what, p);
            return -1;
        }
    }
    if (strcmp(p, "/zookeeper") == 0 || strncmp(p, "/zookeeper/", 11) == 0) {
        snprintf(err, errlen, "%s '%s' is under /zookeeper, which ZooKeeper reserves", what, p);
        return -1;
    }
    return 0;
}

/* Calls fn on each item of the comma-separated list (cut into buf): the
 * first non-zero it returns, or 0; -2 for an item longer than
 * WRITEPATH_MAX (fn not called). */
static int each_prefix(const char *prefixes, int (*fn)(const char *item, void *ud), void *ud)
{
    char buf[WRITEPATH_MAX + 1];
    const char *at = prefixes != NULL ? prefixes : "";
    while (*at != '\0') {
        const char *end = strchr(at, ',');
        size_t len = end != NULL ? (size_t)(end - at) : strlen(at);
        if (len > WRITEPATH_MAX)
            return -2;
        memcpy(buf, at, len);
        buf[len] = '\0';
        int rc = fn(buf, ud);
        if (rc != 0)
            return rc;
        if (end == NULL)
            break;
        at = end + 1;
    }
    return 0;
}

struct check_ctx {
    char *err;
    size_t errlen;
};

static int check_one(const char *item, void *ud)
{
    struct check_ctx *c = ud;
    return writepath_check(item, "write prefix", c->err, c->errlen) != 0 ? -1 : 0;
}

int writepath_check_prefixes(const char *prefixes, char *err, size_t errlen)
{
    struct check_ctx c = { err, errlen };
    if (prefixes != NULL && strlen(prefixes) > 64 * (size_t)WRITEPATH_MAX) {
        snprintf(err, errlen, "write prefixes: longer than %d characters", 64 * WRITEPATH_MAX);
        return -1;
    }
    if (prefixes != NULL && prefixes[0] != '\0' &&
        (prefixes[0] == ',' || prefixes[strlen(prefixes) - 1] == ',' || strstr(prefixes, ",,"))) {
        snprintf(err, errlen, "write prefixes '%s': an empty item", prefixes);
        return -1;
    }
    int rc = each_prefix(prefixes, check_one, &c);
    if (rc == -2)
        snprintf(err, errlen, "write prefix longer than %d characters", WRITEPATH_MAX);
    return rc != 0 ? -1 : 0;
}

/* 1 when path is base or below it. */
static int at_or_under(const char *path, const char *base)
{
    size_t n = strlen(base);
    return strncmp(path, base, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int under_one(const char *item, void *ud)
{
    return at_or_under(ud, item);
}

/* 1 when the component name[0..len) (a sequence appended when seq_tail:
 * a sequential create's last component) is a candidate's node of some
 * election: a name with a trailing sequence (el_parse_seq) in the form of
 * zkelect's own node (n_<16 hex>-, or its compat forms), Curator
 * LeaderLatch's ([_c_<uuid>-]latch-) or kazoo Election's (__lock__). */
static int candidate_name(const char *name, size_t len, int seq_tail)
{
    char buf[WRITEPATH_MAX + 16];
    if (len > WRITEPATH_MAX)
        return 0;
    memcpy(buf, name, len);
    buf[len] = '\0';
    if (seq_tail)
        memcpy(buf + len, "0000000000", 11);
    int32_t seq;
    if (el_parse_seq(buf, &seq) != 0)
        return 0;
    return el_is_our_name(buf) || strncmp(buf, "latch-", 6) == 0 ||
           strstr(buf, "-latch-") != NULL || strstr(buf, "__lock__") != NULL;
}

/* The reason (a static string) why a component of path makes it no place
 * for a write of this kind, anywhere in the tree; NULL when none does. */
static const char *forbidden_component(const char *path, int sequential, int check)
{
    for (const char *c = path + 1; *c != '\0';) {
        const char *end = strchr(c, '/');
        size_t len = end != NULL ? (size_t)(end - c) : strlen(c);
        if (candidate_name(c, len, sequential && end == NULL))
            return "is or is below a candidate's node of an election (zkelect's n_<16 hex>-<seq>, "
                   "Curator's latch-<seq>, kazoo's __lock__<seq>)";
        if (!check && len >= 8 && memcmp(c + len - 8, ".history", 8) == 0)
            return "is or is below a node named *.history (an election's history, the audit's "
                   "evidence: only its leaders' records write there)";
        if (end == NULL)
            break;
        c = end + 1;
    }
    return NULL;
}

int writepath_allowed(const char *election, const char *prefixes, const char *path,
                      int sequential, int check, char *err, size_t errlen)
{
    if (writepath_check(path, "write path", err, errlen) != 0)
        return -1;
    const char *why = forbidden_component(path, sequential, check);
    if (why != NULL) {
        snprintf(err, errlen, "write path '%s' %s", path, why);
        return -1;
    }
    size_t en = strlen(election);
    if (check && strncmp(path, election, en) == 0 && strncmp(path + en, ".history", 8) == 0 &&
        (path[en + 8] == '\0' || path[en + 8] == '/'))
        return 0;               /* the history: read (and checked), never written */
    if (at_or_under(path, election)) {
        size_t n = en;
        if (path[n] == '\0') {
            if (check)
                return 0;
            snprintf(err, errlen, "write path '%s' is the election folder itself", path);
            return -1;
        }
        const char *rest = path + n + 1;
        int32_t seq;
        if (strchr(rest, '/') == NULL && (!check || sequential || el_parse_seq(rest, &seq) == 0)) {
            snprintf(err, errlen, "write path '%s' is a direct child of the election folder "
                     "(every child is a candidate's node to Curator's recipe, and a name with "
                     "a sequence is one to the election): write below a child, or under a "
                     "write prefix", path);
            return -1;
        }
        return 0;
    }
    if (each_prefix(prefixes, under_one, (void *)path) == 1)
        return 0;
    snprintf(err, errlen, "write path '%s' is outside the election folder '%s' and not under a "
             "write prefix (%s)", path, election,
             prefixes != NULL && prefixes[0] != '\0' ? prefixes : "none is set");
    return -1;
}

int zke_check_write_prefixes(const char *prefixes, char *err, size_t errlen)
{
    return writepath_check_prefixes(prefixes, err, errlen);
}
