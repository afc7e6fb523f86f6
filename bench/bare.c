/*
 * bare.c - bench_bare: the bare ZooKeeper leader-election recipe on
 * libzookeeper_st, driven by its own poll() loop. The floor the benchmarks
 * compare zkelect with: no lease, no guid, no retries, no library.
 *
 *   bench_bare HOSTPORT PATH SESSION_MS COUNT
 *
 * COUNT candidates ("slots") in one process, each with its own handle (its
 * own session), all in one poll() loop. The recipe, per slot:
 *   1. create every prefix of PATH (persistent; NODEEXISTS is fine) and
 *      PATH/n_ EPHEMERAL|SEQUENTIAL, pipelined (ZooKeeper applies one
 *      session's requests in order);
 *   2. get the children, order them by the 10-digit sequence suffix;
 *   3. ours is the smallest: leader; else exists(predecessor, watch): ZOK is
 *      follower, NONODE or any event of that watch goes back to 2.
 * Asynchronous API only. Any unexpected result (a session expiry, a lost
 * connection under a request) prints `error` and exits 1.
 *
 * stdout, one write(2) per line:  <mono_us> <slot> <event>[ <detail>]
 *   node <name> | leader | follower | stopped | error <text>
 *   and "<mono_us> - ready" once, after the first COUNT slots were started.
 * mono_us is CLOCK_MONOTONIC in microseconds; `leader` is stamped first thing
 * in the children completion that finds our node the smallest.
 * stdin (lines): "stop <slot>" (delete our node, then close the session:
 * `stopped`), "add" (a new slot, the next index), "quit" or EOF (stop every
 * slot, exit 0 when all are stopped). SIGTERM/SIGINT: as quit (self-pipe).
 *
 * Threading: none. Every ZooKeeper callback (watchers, completions) runs
 * inside zookeeper_interest()/zookeeper_process() called from the loop, and
 * never closes a handle itself: it sets close_pending and the loop closes
 * (zookeeper_close inside the library's own call would free the handle under
 * it).
 *
 * Ownership: slots are allocated once and never freed before exit (a
 * completion that arrives during zookeeper_close, with ZCLOSING, still
 * points at its slot); the handle belongs to its slot until closed.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#define MAX_POLL_MS 1000
#define RETRY_MS 20          /* after a zookeeper_interest error: no spinning */

struct slot {
    int idx;
    zhandle_t *zh;           /* NULL once closed */
    int pfd;                 /* index in the poll set of this round, -1: none */
    /* the last zookeeper_interest(), asked again only when it is due
     * (due_us), after zookeeper_process, or when a callback or a command
     * touched the handle (dirty): with many slots the loop wakes for each
     * ping, and asking every handle each time was most of the idle CPU */
    int fd;
    short events;
    int dirty;
    int64_t due_us;
    int connected_once;
    int create_sent;         /* the join requests were sent */
    int stopping;            /* a stop was asked for */
    int delete_sent;
    int close_pending;       /* the loop closes the handle at its next step */
    int32_t seq;             /* our node's sequence number, -1: none yet */
    char node[64];           /* our node's name (no path), "" until created */
};

static const char *g_hosts, *g_path;
static int g_session_ms;
static struct slot **g_slots;
static int g_nslots, g_capslots, g_running, g_quitting;
static int g_sigpipe[2] = { -1, -1 };

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* One stdout line "<us> <slot> <text>\n" in one write(2). slot < 0: "-". */
static void emit_at(int64_t us, int slot, const char *fmt, ...)
{
    char buf[512];
    int n = slot >= 0 ? snprintf(buf, sizeof buf, "%" PRId64 " %d ", us, slot)
                      : snprintf(buf, sizeof buf, "%" PRId64 " - ", us);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof buf - 2)
        n = (int)sizeof buf - 2;
    buf[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;            /* stdout gone: nothing to tell anyone */
        off += (int)w;
    }
}

/* Prints `error <text>` for the slot and exits 1: the bare recipe does not
 * retry. Callable from anywhere, callbacks included. */
_Noreturn static void fatal(struct slot *s, const char *fmt, ...)
{
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    emit_at(mono_us(), s != NULL ? s->idx : -1, "error %s", msg);
    fprintf(stderr, "bench_bare: slot %d: %s\n", s != NULL ? s->idx : -1, msg);
    _exit(1);
}

/* realloc/calloc that exit on failure (`error out of memory`). */
static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (q == NULL) {
        emit_at(mono_us(), -1, "error out of memory");
        _exit(1);
    }
    return q;
}

static int live(const struct slot *s)
{
    return s->zh != NULL && !s->close_pending;
}

/* --- the recipe (all from ZooKeeper callbacks or the loop) -------------- */

static void list_children(struct slot *s);

static void pred_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct slot *s = ctx;
    s->dirty = 1;
    (void)zh;
    (void)state;
    (void)path;
    if (type == ZOO_SESSION_EVENT || !live(s) || s->stopping)
        return;            /* session events reach every watcher: the default one handles them */
    list_children(s);      /* deleted (or changed: the watch is used up either way) */
}

static void exists_done(int rc, const struct Stat *stat, const void *data)
{
    struct slot *s = (struct slot *)data;
    s->dirty = 1;
    (void)stat;
    if (!live(s) || s->stopping)
        return;
    if (rc == ZOK)
        emit_at(mono_us(), s->idx, "follower");
    else if (rc == ZNONODE)
        list_children(s);  /* the predecessor went before we could watch it */
    else
        fatal(s, "exists on the predecessor: %s", zerror(rc));
}

static int32_t seq_of(const char *name)
{
    size_t n = strlen(name);
    if (n < 10)
        return -1;
    long v = 0;
    for (size_t i = n - 10; i < n; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v > INT32_MAX ? -1 : (int32_t)v;
}

static void children_done(int rc, const struct String_vector *v, const void *data)
{
    int64_t now = mono_us();        /* first thing: the leader stamp */
    struct slot *s = (struct slot *)data;
    s->dirty = 1;
    if (!live(s) || s->stopping)
        return;
    if (rc != ZOK)
        fatal(s, "get children of %s: %s", g_path, zerror(rc));
    int32_t min = -1, pred = -1;
    const char *pred_name = NULL;
    int ours = 0;
    for (int i = 0; i < v->count; i++) {
        int32_t q = seq_of(v->data[i]);
        if (q < 0)
            continue;
        if (q == s->seq)
            ours = 1;
        if (min < 0 || q < min)
            min = q;
        if (q < s->seq && q > pred) {
            pred = q;
            pred_name = v->data[i];
        }
    }
    if (!ours)
        fatal(s, "our node %s is not among the children of %s", s->node, g_path);
    if (min == s->seq) {
        emit_at(now, s->idx, "leader");
        return;
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", g_path, pred_name);
    rc = zoo_awexists(s->zh, p, pred_watcher, s, exists_done, s);
    if (rc != ZOK)
        fatal(s, "zoo_awexists: %s", zerror(rc));
}

static void list_children(struct slot *s)
{
    int rc = zoo_aget_children(s->zh, g_path, 0, children_done, s);
    if (rc != ZOK)
        fatal(s, "zoo_aget_children: %s", zerror(rc));
}

static void delete_done(int rc, const void *data)
{
    struct slot *s = (struct slot *)data;
    s->dirty = 1;
    if (s->zh == NULL)
        return;
    if (rc != ZOK && rc != ZNONODE)
        fatal(s, "delete %s: %s", s->node, zerror(rc));
    s->close_pending = 1;
}

static void send_delete(struct slot *s)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", g_path, s->node);
    int rc = zoo_adelete(s->zh, p, -1, delete_done, s);
    if (rc != ZOK)
        fatal(s, "zoo_adelete: %s", zerror(rc));
    s->delete_sent = 1;
}

static void create_done(int rc, const char *value, const void *data)
{
    struct slot *s = (struct slot *)data;
    s->dirty = 1;
    if (s->zh == NULL)
        return;
    if (rc != ZOK)
        fatal(s, "create %s/n_: %s", g_path, zerror(rc));
    const char *name = strrchr(value, '/');
    name = name != NULL ? name + 1 : value;
    snprintf(s->node, sizeof s->node, "%s", name);
    s->seq = seq_of(s->node);
    emit_at(mono_us(), s->idx, "node %s", s->node);
    if (s->stopping)
        send_delete(s);
    else
        list_children(s);
}

static void parent_done(int rc, const char *value, const void *data)
{
    struct slot *s = (struct slot *)data;
    (void)value;
    if (s->zh != NULL && rc != ZOK && rc != ZNODEEXISTS)
        fatal(s, "create a parent of %s/n_: %s", g_path, zerror(rc));
}

/* Step 1: every prefix of the path, then our node, back to back. */
static void join(struct slot *s)
{
    char p[1024];
    int rc;
    size_t n = strlen(g_path);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && g_path[i] != '/')
            continue;
        snprintf(p, sizeof p, "%.*s", (int)i, g_path);
        rc = zoo_acreate(s->zh, p, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, parent_done, s);
        if (rc != ZOK)
            fatal(s, "zoo_acreate %s: %s", p, zerror(rc));
    }
    snprintf(p, sizeof p, "%s/n_", g_path);
    rc = zoo_acreate(s->zh, p, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                     create_done, s);
    if (rc != ZOK)
        fatal(s, "zoo_acreate %s: %s", p, zerror(rc));
    s->create_sent = 1;
}

/* The handle's default watcher: session events only (we set no default
 * watches). */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
    struct slot *s = (struct slot *)zoo_get_context(zh);
    (void)path;
    (void)ctx;
    if (s == NULL || !live(s) || type != ZOO_SESSION_EVENT)
        return;
    s->dirty = 1;
    if (state == ZOO_CONNECTED_STATE && !s->connected_once) {
        s->connected_once = 1;
        if (s->stopping)
            s->close_pending = 1;     /* stopped before it joined: nothing to delete */
        else
            join(s);
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        fatal(s, "session expired");
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        fatal(s, "authentication failed");
    }
}

/* --- slots and commands (from the loop, never inside a callback) -------- */

static void add_slot(void)
{
    if (g_nslots == g_capslots) {
        int cap = g_capslots ? g_capslots * 2 : 64;
        g_slots = xrealloc(g_slots, (size_t)cap * sizeof(struct slot *));
        g_capslots = cap;
    }
    struct slot *s = xrealloc(NULL, sizeof *s);
    memset(s, 0, sizeof *s);
    s->idx = g_nslots;
    s->pfd = -1;
    s->fd = -1;
    s->dirty = 1;
    s->seq = -1;
    g_slots[g_nslots++] = s;
    s->zh = zookeeper_init(g_hosts, session_watcher, g_session_ms, NULL, s, 0);
    if (s->zh == NULL)
        fatal(s, "zookeeper_init: %s", strerror(errno));
    g_running++;
}

/* Graceful stop: delete our node, close at the answer. */
static void stop_slot(struct slot *s)
{
    if (!live(s) || s->stopping)
        return;
    s->stopping = 1;
    s->dirty = 1;
    if (s->node[0] != '\0')
        send_delete(s);
    else if (!s->create_sent)
        s->close_pending = 1;
    /* else: create_done deletes the node it gets */
}

static void quit(void)
{
    g_quitting = 1;
    for (int i = 0; i < g_nslots; i++)
        stop_slot(g_slots[i]);
}

static void close_pending_slots(void)
{
    for (int i = 0; i < g_nslots; i++) {
        struct slot *s = g_slots[i];
        if (s->zh == NULL || !s->close_pending)
            continue;
        zhandle_t *zh = s->zh;
        int stopping = s->stopping;
        (void)zookeeper_close(zh);  /* completions left get ZCLOSING, live() is false */
        s->zh = NULL;
        g_running--;
        if (stopping)
            emit_at(mono_us(), s->idx, "stopped");
    }
    if (g_quitting && g_running == 0)
        exit(0);
}

static void command(char *line)
{
    char *end;
    if (strncmp(line, "stop ", 5) == 0) {
        long i = strtol(line + 5, &end, 10);
        if (end != line + 5 && *end == '\0' && i >= 0 && i < g_nslots)
            stop_slot(g_slots[i]);
        else
            fprintf(stderr, "bench_bare: no slot '%s'\n", line + 5);
    } else if (strcmp(line, "add") == 0) {
        if (!g_quitting)
            add_slot();
    } else if (strcmp(line, "quit") == 0) {
        quit();
    } else if (line[0] != '\0') {
        fprintf(stderr, "bench_bare: unknown command '%s'\n", line);
    }
}

/* Reads what stdin has (non-blocking) and runs each complete line.
 * Returns 0 at EOF. */
static int read_stdin(void)
{
    static char buf[4096];
    static size_t len;
    for (;;) {
        ssize_t r = read(STDIN_FILENO, buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return 1;                /* EAGAIN */
        if (r == 0)
            return 0;
        len += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < len; i++) {
            if (buf[i] != '\n')
                continue;
            buf[i] = '\0';
            if (i > start && buf[i - 1] == '\r')
                buf[i - 1] = '\0';
            command(buf + start);
            start = i + 1;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        if (len == sizeof buf - 1)
            len = 0;                 /* a line longer than the buffer: dropped */
    }
}

static void on_signal(int sig)
{
    int e = errno;
    char c = (char)sig;
    (void)!write(g_sigpipe[1], &c, 1);
    errno = e;
}

static void setup_fds(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;   /* one socket per slot */
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (pipe(g_sigpipe) != 0)
        fatal(NULL, "pipe: %s", strerror(errno));
    for (int i = 0; i < 2; i++)
        (void)fcntl(g_sigpipe[i], F_SETFL, O_NONBLOCK), (void)fcntl(g_sigpipe[i], F_SETFD, FD_CLOEXEC);
    int fl = fcntl(STDIN_FILENO, F_GETFL);
    if (fl >= 0)
        (void)fcntl(STDIN_FILENO, F_SETFL, fl | O_NONBLOCK);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

/* A whole number in [lo, hi], or -1. */
static int number(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && v >= lo && v <= hi ? (int)v : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s HOSTPORT PATH SESSION_MS COUNT\n", argv[0]);
        return 64;
    }
    g_hosts = argv[1];
    g_path = argv[2];
    g_session_ms = number(argv[3], 1, 3600000);
    int count = number(argv[4], 0, 1000000);
    if (g_path[0] != '/' || strlen(g_path) < 2 || g_path[strlen(g_path) - 1] == '/' ||
        strlen(g_path) > 900 || g_session_ms < 0 || count < 0) {
        fprintf(stderr, "bench_bare: bad PATH, SESSION_MS or COUNT\n");
        return 64;
    }
    /* the client's log off; BENCH_ZKLOG=1: its errors on stderr */
    zoo_set_debug_level(getenv("BENCH_ZKLOG") != NULL ? ZOO_LOG_LEVEL_ERROR : (ZooLogLevel)0);
    setup_fds();
    for (int i = 0; i < count; i++)
        add_slot();
    emit_at(mono_us(), -1, "ready");

    int stdin_open = 1;
    struct pollfd *pfd = NULL;
    int cappfd = 0;
    for (;;) {
        close_pending_slots();
        if (pfd == NULL || cappfd < g_nslots + 2) {
            cappfd = (g_nslots + 2) * 2;
            pfd = xrealloc(pfd, (size_t)cappfd * sizeof *pfd);
        }
        int n = 0, timeout = MAX_POLL_MS;
        int64_t now = mono_us();
        pfd[n++] = (struct pollfd){ .fd = g_sigpipe[0], .events = POLLIN };
        pfd[n++] = (struct pollfd){ .fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN };
        for (int i = 0; i < g_nslots; i++) {
            struct slot *s = g_slots[i];
            s->pfd = -1;
            if (s->zh == NULL)
                continue;
            if (s->dirty || now >= s->due_us) {
                int fd = -1, zi = 0, ms;
                struct timeval tv = { 0, 0 };
                s->dirty = 0;
                int rc = zookeeper_interest(s->zh, &fd, &zi, &tv);  /* may run callbacks */
                if (rc != ZOK) {
                    if (is_unrecoverable(s->zh) == ZINVALIDSTATE)
                        fatal(s, "session lost: %s", zerror(rc));
                    int st = zoo_state(s->zh);
                    zi = (fd >= 0 && st == ZOO_CONNECTED_STATE) ? ZOOKEEPER_READ : 0;
                    ms = RETRY_MS;
                } else {
                    ms = (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
                }
                s->fd = (fd >= 0 && zi != 0) ? fd : -1;
                s->events = (short)(((zi & ZOOKEEPER_READ) ? POLLIN : 0) |
                                    ((zi & ZOOKEEPER_WRITE) ? POLLOUT : 0));
                s->due_us = now + (int64_t)ms * 1000;
                if (s->dirty)
                    s->due_us = now;  /* a callback ran inside: ask again at once */
            }
            if (s->fd >= 0) {
                s->pfd = n;
                pfd[n++] = (struct pollfd){ .fd = s->fd, .events = s->events };
            }
            int64_t ms = (s->due_us - now + 999) / 1000;
            if (ms < timeout)
                timeout = (int)ms;
        }
        if (poll(pfd, (nfds_t)n, timeout < 0 ? 0 : timeout) < 0) {
            if (errno == EINTR)
                continue;
            fatal(NULL, "poll: %s", strerror(errno));
        }
        for (int i = 0; i < g_nslots; i++) {
            struct slot *s = g_slots[i];
            if (s->pfd < 0 || s->zh == NULL || pfd[s->pfd].revents == 0)
                continue;
            short re = pfd[s->pfd].revents;
            int ev = ((re & (POLLIN | POLLERR | POLLHUP)) ? ZOOKEEPER_READ : 0) |
                     ((re & (POLLOUT | POLLERR | POLLHUP)) ? ZOOKEEPER_WRITE : 0);
            (void)zookeeper_process(s->zh, ev);  /* losses and expiry reach the watchers */
            s->dirty = 1;
        }
        if (pfd[0].revents != 0) {
            char b[64];
            while (read(g_sigpipe[0], b, sizeof b) > 0)
                ;
            quit();
        }
        if (stdin_open && pfd[1].revents != 0 && !read_stdin()) {
            stdin_open = 0;
            quit();
        }
    }
}
