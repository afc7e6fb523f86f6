/*
 * cgroups.c - term containment by cgroup v2: see zkelect.h ("Term
 * containment").
 *
 * The folder is <cgroup2 mount><this process's cgroup>/zkelect-<pid>, each
 * term's cgroup <folder>/term-<id>. A child joins one by writing "0" to its
 * cgroup.procs (an fd the parent opened) between fork and exec, so that
 * nothing it runs is ever outside. SIGKILL is cgroup.kill (the kernel kills
 * every member, those forked meanwhile too); another signal goes to each
 * pid listed in cgroup.procs. Emptiness is `populated 0` in cgroup.events.
 */
#define _GNU_SOURCE         /* O_DIRECTORY, O_CLOEXEC */
#include "zkelect.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TERMS_MAX 64            /* term cgroups of one folder at once */

struct term_cg {
    int id;                     /* > 0, 0: free */
    int procs;                  /* its cgroup.procs, O_WRONLY */
};

struct zke_cgroups {
    char path[ZKE_CGROUPS_PATH_MAX];    /* the folder */
    int next;                   /* the next term's id */
    struct term_cg terms[TERMS_MAX];
    zke_guard *guard;           /* borrowed, or NULL: gets each term cgroup */
    char err[ZKE_CGROUPS_PATH_MAX + 320];
};

/* Reads a small file (at most len - 1 bytes, NUL-terminated); its length
 * or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    while (n < len - 1) {
        ssize_t r = read(fd, buf + n, len - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    return (ssize_t)n;
}

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t w = write(fd, s, strlen(s));
    int e = errno;
    close(fd);
    errno = e;
    return w == (ssize_t)strlen(s) ? 0 : -1;
}

/* The cgroup2 mount point (from /proc/self/mountinfo) in out; 0 or -1. The
 * mount of the root of the hierarchy (field 4 "/") is the one that shows
 * every cgroup. */
static int cgroup2_mount(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return -1;
    char line[4096];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f) != NULL) {
        /* id parent major:minor root mountpoint opts... - fstype source superopts */
        char *sep = strstr(line, " - ");
        if (sep == NULL || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        char *root = NULL, *mnt = NULL;
        for (int i = 0; tok != NULL && i < 5; i++, tok = strtok_r(NULL, " ", &save)) {
            if (i == 3)
                root = tok;
            else if (i == 4)
                mnt = tok;
        }
        if (root == NULL || mnt == NULL || strcmp(root, "/") != 0 || strchr(mnt, '\\') != NULL)
            continue;       /* (an octal escape: a mount point with a space) */
        if (strlen(mnt) < len) {
            snprintf(out, len, "%s", mnt);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* This process's cgroup v2 path ("0::/a/b" in /proc/self/cgroup); 0 or -1. */
static int own_cgroup(char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    char line[4096];
    int found = -1;
    while (found != 0 && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        if (strlen(line + 3) < len && line[3] == '/') {
            snprintf(out, len, "%s", line + 3);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

zke_cgroups *zke_cgroups_new(char *err, size_t errlen)
{
    char mnt[1024], own[2048], probe[ZKE_CGROUPS_PATH_MAX + 32];
    if (cgroup2_mount(mnt, sizeof mnt) != 0) {
        snprintf(err, errlen, "no cgroup2 hierarchy is mounted (/proc/self/mountinfo)");
        return NULL;
    }
    if (own_cgroup(own, sizeof own) != 0) {
        snprintf(err, errlen, "this process has no cgroup v2 path in /proc/self/cgroup");
        return NULL;
    }
    zke_cgroups *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* a folder of our own: one left by an earlier process of our pid, or
     * made by a process of the same pid in another pid namespace, is
     * never shared (its watcher would kill our terms) */
    int made = -1, e = 0;
    for (int k = 0; made != 0 && k < 100; k++) {
        int n = k == 0 ? snprintf(c->path, sizeof c->path, "%s%s/zkelect-%ld", mnt,
                                  strcmp(own, "/") == 0 ? "" : own, (long)getpid())
                       : snprintf(c->path, sizeof c->path, "%s%s/zkelect-%ld.%d", mnt,
                                  strcmp(own, "/") == 0 ? "" : own, (long)getpid(), k);
        if (n < 0 || (size_t)n >= sizeof c->path) {
            snprintf(err, errlen, "the cgroup path %s%s is too long", mnt, own);
            free(c);
            return NULL;
        }
        made = mkdir(c->path, 0755);
        e = errno;
        if (made != 0 && e != EEXIST)
            break;
    }
    if (made != 0) {
        snprintf(err, errlen, "cannot make %s: %s%s", c->path, strerror(e),
                 e == EACCES || e == EPERM || e == EROFS
                     ? " (this cgroup is not delegated to us: under systemd, Delegate=yes)" : "");
        free(c);
        return NULL;
    }
    /* (the root cgroup has none: the folder is the first that may) */
    snprintf(probe, sizeof probe, "%s/cgroup.kill", c->path);
    if (access(probe, F_OK) != 0) {
        snprintf(err, errlen, "%s has no cgroup.kill (Linux 5.14 or later is needed)", c->path);
        (void)rmdir(c->path);
        free(c);
        return NULL;
    }
    c->next = 1;
    return c;
}

const char *zke_cgroups_path(const zke_cgroups *c)
{
    return c != NULL ? c->path : NULL;
}

const char *zke_cgroups_errstr(const zke_cgroups *c)
{
    return c != NULL ? c->err : "no cgroups";
}

static struct term_cg *find(zke_cgroups *c, int id)
{
    for (int i = 0; c != NULL && id > 0 && i < TERMS_MAX; i++)
        if (c->terms[i].id == id)
            return &c->terms[i];
    return NULL;
}

/* <folder>/term-<id>[/file] in buf. */
static void term_path(const zke_cgroups *c, int id, const char *file, char *buf, size_t len)
{
    snprintf(buf, len, "%s/term-%d%s%s", c->path, id, file != NULL ? "/" : "", file ? file : "");
}

int zke_cgroups_make(zke_cgroups *c)
{
    char p[ZKE_CGROUPS_PATH_MAX + 64];
    if (c == NULL)
        return -1;
    struct term_cg *t = NULL;
    for (int i = 0; t == NULL && i < TERMS_MAX; i++)
        if (c->terms[i].id == 0)
            t = &c->terms[i];
    if (t == NULL) {
        snprintf(c->err, sizeof c->err, "%d term cgroups exist already", TERMS_MAX);
        return -1;
    }
    int id = c->next, made = -1;
    /* (one left by an earlier process of our pid is skipped) */
    for (int tries = 0; made != 0 && tries < 1000; tries++) {
        id = c->next;
        c->next = id == 0x3fffffff ? 1 : id + 1;
        term_path(c, id, NULL, p, sizeof p);
        made = mkdir(p, 0755);
        if (made != 0 && errno != EEXIST)
            break;
    }
    if (made != 0) {
        snprintf(c->err, sizeof c->err, "cannot make %s: %s", p, strerror(errno));
        return -1;
    }
    term_path(c, id, "cgroup.procs", p, sizeof p);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(c->err, sizeof c->err, "cannot open %s: %s", p, strerror(errno));
        term_path(c, id, NULL, p, sizeof p);
        (void)rmdir(p);
        return -1;
    }
    if (c->guard != NULL && zke_guard_add_cgroup(c->guard, id) != 0) {
        snprintf(c->err, sizeof c->err, "the fail-stop guard watches %d process groups and "
                 "cgroups already", ZKE_GUARD_GROUPS);
        close(fd);
        term_path(c, id, NULL, p, sizeof p);
        (void)rmdir(p);
        return -1;
    }
    t->id = id;
    t->procs = fd;
    return id;
}

void zke_cgroups_set_guard(zke_cgroups *c, zke_guard *g)
{
    if (c != NULL)
        c->guard = g;
}

int zke_cgroups_join_fd(zke_cgroups *c, int id)
{
    struct term_cg *t = find(c, id);
    return t != NULL ? t->procs : -1;
}

int zke_cgroups_join(int fd)
{
    ssize_t w;
    do
        w = write(fd, "0", 1);
    while (w < 0 && errno == EINTR);
    return w == 1 ? 0 : -1;
}

int zke_cgroups_signal(zke_cgroups *c, int id, int sig)
{
    char p[ZKE_CGROUPS_PATH_MAX + 64];
    if (find(c, id) == NULL) {
        if (c != NULL)
            snprintf(c->err, sizeof c->err, "no term cgroup %d", id);
        return -1;
    }
    if (sig == SIGKILL) {
        term_path(c, id, "cgroup.kill", p, sizeof p);
        if (write_str(p, "1") != 0) {
            snprintf(c->err, sizeof c->err, "%s: %s", p, strerror(errno));
            return -1;
        }
        return 0;
    }
    term_path(c, id, "cgroup.procs", p, sizeof p);
    FILE *f = fopen(p, "re");
    if (f == NULL) {
        snprintf(c->err, sizeof c->err, "%s: %s", p, strerror(errno));
        return -1;
    }
    char line[32];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *end;
        long pid = strtol(line, &end, 10);
        if (end != line && pid > 0 && kill((pid_t)pid, sig) == 0)
            n++;
    }
    fclose(f);
    return n;
}

int zke_cgroups_watch_fd(zke_cgroups *c, int id)
{
    char p[ZKE_CGROUPS_PATH_MAX + 64];
    if (c == NULL || find(c, id) == NULL) {
        errno = ENOENT;
        return -1;
    }
    term_path(c, id, "cgroup.events", p, sizeof p);
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return -1;
    if (inotify_add_watch(fd, p, IN_MODIFY) < 0) {
        int e = errno;
        (void)close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int zke_cgroups_populated(zke_cgroups *c, int id)
{
    char p[ZKE_CGROUPS_PATH_MAX + 64], buf[512];
    if (find(c, id) == NULL)
        return -1;
    term_path(c, id, "cgroup.events", p, sizeof p);
    if (read_small(p, buf, sizeof buf) < 0) {
        snprintf(c->err, sizeof c->err, "%s: %s", p, strerror(errno));
        return -1;
    }
    const char *k = strstr(buf, "populated ");
    return k == NULL ? -1 : k[10] == '1';
}

int zke_cgroups_remove(zke_cgroups *c, int id)
{
    char p[ZKE_CGROUPS_PATH_MAX + 64];
    struct term_cg *t = find(c, id);
    if (t == NULL)
        return -1;
    term_path(c, id, NULL, p, sizeof p);
    if (rmdir(p) != 0 && errno != ENOENT) {
        snprintf(c->err, sizeof c->err, "cannot remove %s: %s", p, strerror(errno));
        return -1;
    }
    close(t->procs);
    t->id = 0;
    t->procs = -1;
    zke_guard_remove_cgroup(c->guard, id);
    return 0;
}

int zke_cgroups_end(zke_cgroups *c, int id, int wait_ms)
{
    if (find(c, id) == NULL)
        return -1;
    int live = zke_cgroups_populated(c, id);
    if (live != 0)
        (void)zke_cgroups_signal(c, id, SIGKILL);
    for (int waited = 0; live > 0 && waited < wait_ms; waited += 5) {
        struct timespec five_ms = { 0, 5000000 };
        nanosleep(&five_ms, NULL);
        live = zke_cgroups_populated(c, id);
    }
    if (live == 0 && zke_cgroups_remove(c, id) == 0)
        return 0;
    if (live > 0)
        snprintf(c->err, sizeof c->err, "term cgroup %d did not empty within %d ms "
                 "(left to the fail-stop watcher)", id, wait_ms);
    return -1;     /* (unreadable: c->err says why) */
}

void zke_cgroups_free(zke_cgroups *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < TERMS_MAX; i++) {
        int id = c->terms[i].id;
        if (id != 0 && zke_cgroups_end(c, id, 1000) != 0) {
            close(c->terms[i].procs);       /* left to the keeper */
            c->terms[i].id = 0;
        }
    }
    (void)rmdir(c->path);
    free(c);
}
