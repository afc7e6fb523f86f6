/* childout.c - see childout.h.
 *
 * Every reader is on one list (loop thread only, like log.c's sink): an
 * owned one (childout_open) until its owner closes it, then ours, like an
 * adopted one, until its end. A stream is a non-blocking read end watched
 * by an ev_io at the loop's lowest priority. Its callback reads a chunk
 * and logs its lines while the iteration's budget lasts (CHILDOUT_ITER_*,
 * shared by every reader and reset as the loop's iteration changes); a
 * stream that has more (bytes in its chunk or its pipe) when the budget
 * ends, or while others wait, waits in the run queue, which an ev_check
 * (lowest priority: after the loop's own work of the iteration) pumps a
 * chunk a turn, in order, while an ev_idle keeps the loop from sleeping. */
#define _GNU_SOURCE         /* pipe2 */
#include "childout.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define DRAIN_MAX ((size_t)256 * 1024)  /* bytes read from a stream once closed */
#define CALL_LEN 16                     /* a notify call's name: "stepdown" and the like */

enum turn { T_MORE, T_EMPTY, T_END };   /* a stream after a turn: more, its pipe empty, ended */

struct stream {
    ev_io io;                   /* io.fd: the read end, -1 once closed */
    struct childout *c;
    const char *name;           /* "stdout", "stderr" */
    struct stream *qnext;       /* the run queue */
    int queued;
    size_t drain_left;          /* once closed: bytes it may still read */
    char line[CHILDOUT_LINE];   /* the line so far */
    size_t n;
    int cutting;                /* past the cap: the rest of the line is not logged */
    char buf[CHILDOUT_CHUNK];   /* read, not yet looked at: buf[off..len) */
    size_t off, len;
};

struct childout {
    struct childout *next, *prev;
    struct ev_loop *loop;
    const char *child;
    char call[CALL_LEN];        /* "" : none */
    pid_t pid;
    int64_t epoch;
    int ours;                   /* adopted or closed: freed at its end; else the owner's */
    int closing;                /* closed: each stream reads what it holds, then ends */
    int wfd[2];                 /* write ends until the child started, -1 after */
    struct stream st[2];
    double tokens;              /* the rate's bucket: lines it may log now */
    double filled;              /* when it was last filled (CLOCK_MONOTONIC, s) */
    uint64_t over_rate, log_full;   /* lines not logged since the last report */
};

static childout *all;
static int warned_pipes;

/* The run queue, its pump and the iteration's budget (one loop: the agent's). */
static struct {
    struct ev_loop *loop;
    ev_check pump;
    ev_idle awake;
    struct stream *head, *tail;
    unsigned iter;              /* the loop's iteration the budget is for */
    int lines;                  /* lines still to log in it */
    double t0, now;             /* when its first turn began; the last look at the clock */
    int unlimited;              /* at exit (childout_close_all): no budget */
} q;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether the iteration's budget allows another line (q.now refreshed). */
static int budget_ok(void)
{
    q.now = mono();
    if (q.unlimited)
        return 1;
    unsigned it = ev_iteration(q.loop);
    if (it != q.iter) {
        q.iter = it;
        q.lines = CHILDOUT_ITER_LINES;
        q.t0 = q.now;
    }
    return q.lines > 0 && (q.now - q.t0) * 1000.0 < CHILDOUT_ITER_MS;
}

static void link_in(childout *c)
{
    c->prev = NULL;
    c->next = all;
    if (all != NULL)
        all->prev = c;
    all = c;
}

static void unlink_out(childout *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        all = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
}

static void enqueue(struct stream *s)
{
    ev_io_stop(s->c->loop, &s->io);
    if (s->queued)
        return;
    s->queued = 1;
    s->qnext = NULL;
    if (q.tail != NULL)
        q.tail->qnext = s;
    else
        q.head = s;
    q.tail = s;
    ev_check_start(q.loop, &q.pump);
    ev_idle_start(q.loop, &q.awake);
}

static void dequeue(struct stream *s)
{
    if (!s->queued)
        return;
    struct stream **pp = &q.head, *prev = NULL;
    while (*pp != s) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    *pp = s->qnext;
    if (q.tail == s)
        q.tail = prev;
    s->queued = 0;
    s->qnext = NULL;
    if (q.head == NULL) {
        ev_check_stop(q.loop, &q.pump);
        ev_idle_stop(q.loop, &q.awake);
    }
}

static void stream_init(childout *c, struct stream *s, const char *name)
{
    memset(s, 0, sizeof *s);
    s->c = c;
    s->name = name;
    ev_io_init(&s->io, NULL, -1, EV_READ);
}

/* The fields every record of c has first. */
static int head_fields(const childout *c, struct logf *f)
{
    f[0] = (struct logf){ "child", LF_STR, c->child, 0 };
    f[1] = (struct logf){ "pid", LF_INT, NULL, c->pid };
    f[2] = (struct logf){ "epoch", LF_INT, NULL, c->epoch };
    f[3] = (struct logf){ "call", LF_STR, c->call[0] != '\0' ? c->call : NULL, 0 };
    return 4;
}

/* One child_output_dropped record when lines were not logged. */
static void report_dropped(childout *c)
{
    if (c->over_rate == 0 && c->log_full == 0)
        return;
    struct logf f[7];
    int k = head_fields(c, f);
    f[k++] = (struct logf){ "over_rate", LF_INT, NULL, (int64_t)c->over_rate };
    f[k++] = (struct logf){ "log_full", LF_INT, NULL, (int64_t)c->log_full };
    f[k++] = (struct logf){ "msg", LF_STR, "lines of the child were not logged: more than the "
                            "lines a child may log at its rate (over_rate), or the log's reader "
                            "fell behind (log_full)", 0 };
    c->over_rate = c->log_full = 0;
    log_line(ZKE_LOG_WARN, "child_output_dropped", f, k);
}

/* Whether the next line of c may be logged (counted when not): a token
 * bucket of CHILDOUT_BURST lines filled at CHILDOUT_RATE a second. */
static int admit(childout *c)
{
    double now = q.now;
    if (now > c->filled) {
        c->tokens += (now - c->filled) * CHILDOUT_RATE;
        if (c->tokens > CHILDOUT_BURST)
            c->tokens = CHILDOUT_BURST;
    }
    c->filled = now;
    if (c->tokens < 1.0) {
        c->over_rate++;
        return 0;
    }
    if (log_pending() > LOG_PENDING_MAX / 2) {
        c->log_full++;
        return 0;
    }
    c->tokens -= 1.0;
    return 1;
}

/* The line of s as a record (cut: the line went on past the cap). */
static void emit(childout *c, struct stream *s, int cut)
{
    size_t n = s->n;
    s->n = 0;
    if (!log_enabled(ZKE_LOG_INFO) || !admit(c))
        return;
    report_dropped(c);
    struct logf f[7];
    int k = head_fields(c, f);
    f[k++] = (struct logf){ "stream", LF_STR, s->name, 0 };
    f[k++] = (struct logf){ "line", LF_BYTES, s->line, (int64_t)n };
    f[k++] = (struct logf){ "cut", LF_STR, cut ? "yes" : NULL, 0 };
    log_line(ZKE_LOG_INFO, "child_output", f, k);
    q.lines--;
}

/* Where a line of n bytes at p is cut: before a UTF-8 sequence that the
 * cap would split (its lead byte says it needs more bytes than are left),
 * else at n. */
static size_t cut_point(const char *p, size_t n)
{
    for (size_t k = n, back = 0; k > 0 && back < 4; back++) {
        unsigned char b = (unsigned char)p[--k];
        if ((b & 0xC0) == 0x80)
            continue;           /* a continuation byte: its lead is further back */
        size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
        return n - k < need ? k : n;
    }
    return n;
}

/* The bytes of s's chunk: whole lines logged while the budget lasts, a
 * partial line kept; what the budget leaves stays in the chunk. */
static void feed(childout *c, struct stream *s)
{
    if (!budget_ok())
        return;
    /* the clock read every 32 lines: a flood's dropped lines cost little */
    for (unsigned k = 1; s->off < s->len; k++) {
        if ((q.lines <= 0 && !q.unlimited) || (k % 32 == 0 && !budget_ok()))
            return;
        const char *p = s->buf + s->off;
        size_t n = s->len - s->off;
        const char *nl = memchr(p, '\n', n);
        size_t len = nl != NULL ? (size_t)(nl - p) : n;
        if (!s->cutting) {
            size_t room = sizeof s->line - s->n;
            int over = len > room;      /* a byte past the cap */
            memcpy(s->line + s->n, p, over ? room : len);
            s->n += over ? room : len;
            if (over) {
                s->n = cut_point(s->line, s->n);
                emit(c, s, 1);
                s->cutting = 1;
            }
        }
        if (nl == NULL) {
            s->off = s->len;
            return;
        }
        if (!s->cutting)
            emit(c, s, 0);
        s->cutting = 0;
        s->n = 0;
        s->off += len + 1;
    }
}

/* One turn of s: a chunk read (when the last one is done) and fed. */
static enum turn turn(childout *c, struct stream *s)
{
    if (s->off == s->len) {
        size_t want = sizeof s->buf;
        if (c->closing && s->drain_left < want)
            want = s->drain_left;
        if (want == 0)
            return T_END;
        ssize_t r;
        do
            r = read(s->io.fd, s->buf, want);
        while (r < 0 && errno == EINTR);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return c->closing ? T_END : T_EMPTY;
        if (r <= 0)
            return T_END;
        s->off = 0;
        s->len = (size_t)r;
        if (c->closing)
            s->drain_left -= (size_t)r;
    }
    feed(c, s);
    return T_MORE;
}

/* The end of s: its partial line logged, its descriptor closed. */
static void stream_end(childout *c, struct stream *s)
{
    if (s->io.fd < 0)
        return;
    dequeue(s);
    if (s->n > 0 && !s->cutting)
        emit(c, s, 0);
    s->n = 0;
    s->cutting = 0;
    s->off = s->len = 0;
    ev_io_stop(c->loop, &s->io);
    (void)close(s->io.fd);
    ev_io_set(&s->io, -1, EV_READ);
}

static void destroy(childout *c)
{
    for (int i = 0; i < 2; i++) {
        stream_end(c, &c->st[i]);
        if (c->wfd[i] >= 0)
            (void)close(c->wfd[i]);
    }
    report_dropped(c);
    unlink_out(c);
    free(c);
}

/* Both streams ended: what was dropped is said, and a reader of ours is
 * freed. 1: c was freed. */
static int ended(childout *c)
{
    if (c->st[0].io.fd >= 0 || c->st[1].io.fd >= 0)
        return 0;
    report_dropped(c);
    if (!c->ours)
        return 0;       /* (the owner frees it) */
    destroy(c);
    return 1;
}

/* s after a turn: watched (its pipe is empty), queued (more), or ended
 * (1: c was freed). */
static int settle(childout *c, struct stream *s, enum turn t)
{
    if (t == T_MORE) {
        enqueue(s);
        return 0;
    }
    if (t == T_EMPTY) {
        dequeue(s);
        ev_io_start(c->loop, &s->io);
        return 0;
    }
    stream_end(c, s);
    return ended(c);
}

static void read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct stream *s = w->data;
    (void)loop;
    (void)revents;
    if (q.head != NULL || !budget_ok()) {
        enqueue(s);             /* (behind those waiting) */
        return;
    }
    (void)settle(s->c, s, turn(s->c, s));
}

static void pump_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    while (q.head != NULL && budget_ok()) {
        struct stream *s = q.head;
        dequeue(s);
        (void)settle(s->c, s, turn(s->c, s));
    }
}

static void awake_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;      /* (only keeps the loop from sleeping while streams wait) */
}

static childout *alloc(struct ev_loop *loop, const char *child)
{
    childout *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (q.loop == NULL) {
        q.loop = loop;
        ev_check_init(&q.pump, pump_cb);
        ev_set_priority(&q.pump, EV_MINPRI);
        ev_idle_init(&q.awake, awake_cb);
        ev_set_priority(&q.awake, EV_MINPRI);
        q.iter = ev_iteration(loop) - 1;
    }
    c->loop = loop;
    c->child = child;
    c->wfd[0] = c->wfd[1] = -1;
    c->tokens = CHILDOUT_BURST;
    c->filled = mono();
    stream_init(c, &c->st[0], "stdout");
    stream_init(c, &c->st[1], "stderr");
    link_in(c);
    return c;
}

/* Starts reading the read ends fds (made non-blocking here). */
static void watch(childout *c, const int fds[2])
{
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0)
            continue;
        (void)fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        (void)fcntl(fds[i], F_SETFD, FD_CLOEXEC);
        ev_io_init(&c->st[i].io, read_cb, fds[i], EV_READ);
        ev_set_priority(&c->st[i].io, EV_MINPRI);
        c->st[i].io.data = &c->st[i];
        ev_io_start(c->loop, &c->st[i].io);
    }
}

childout *childout_open(struct ev_loop *loop, const char *child, int fds[2])
{
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    childout *c = NULL;
    fds[0] = fds[1] = -1;
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0 ||
        (c = alloc(loop, child)) == NULL) {
        int e = errno != 0 ? errno : ENOMEM;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                (void)close(po[i]);
            if (pe[i] >= 0)
                (void)close(pe[i]);
        }
        if (!warned_pipes) {
            struct logf f[2] = { { "child", LF_STR, child, 0 },
                                 { "error", LF_STR, strerror(e), 0 } };
            log_line(ZKE_LOG_WARN, "child_output_inherited", f, 2);
            warned_pipes = 1;
        }
        return NULL;
    }
    const int rfds[2] = { po[0], pe[0] };
    c->wfd[0] = fds[0] = po[1];
    c->wfd[1] = fds[1] = pe[1];
    for (int i = 0; i < 2; i++)
        c->st[i].io.fd = rfds[i];       /* watched once the child started */
    return c;
}

void childout_started(childout *c, pid_t pid, int64_t epoch, const char *call)
{
    if (c == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        (void)close(c->wfd[i]);
        c->wfd[i] = -1;
    }
    if (pid <= 0) {
        for (int i = 0; i < 2; i++)
            (void)close(c->st[i].io.fd);
        unlink_out(c);
        free(c);
        return;
    }
    c->pid = pid;
    c->epoch = epoch;
    snprintf(c->call, sizeof c->call, "%s", call != NULL ? call : "");
    const int fds[2] = { c->st[0].io.fd, c->st[1].io.fd };
    watch(c, fds);
}

void childout_flush(childout *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        struct stream *s = &c->st[i];
        if (s->io.fd < 0)
            continue;
        /* two turns whatever the iteration's budget (what a turn left, then
         * a fresh chunk: at most 2 x CHILDOUT_CHUNK bytes a stream, their
         * lines still rate-limited), so that a child's last lines come
         * before its exit's record on a loaded loop too; more waits for it */
        int unlimited = q.unlimited;
        q.unlimited = 1;
        enum turn t = turn(c, s);
        if (t == T_MORE)
            t = turn(c, s);
        q.unlimited = unlimited;
        while (t == T_MORE && budget_ok())
            t = turn(c, s);
        if (settle(c, s, t))
            return;                 /* (not an owned one's case: never freed here) */
    }
}

/* c's end begins: ours from here on; each stream reads what it holds (at
 * most DRAIN_MAX) on the loop, and ends. */
static void close_later(childout *c)
{
    if (c->closing)
        return;
    c->ours = 1;
    c->closing = 1;
    for (int i = 0; i < 2; i++) {
        c->st[i].drain_left = DRAIN_MAX;
        if (c->st[i].io.fd >= 0)
            enqueue(&c->st[i]);
    }
    (void)ended(c);
}

void childout_close(childout *c)
{
    if (c != NULL)
        close_later(c);
}

void childout_adopt(struct ev_loop *loop, const char *child, pid_t pid, int64_t epoch,
                    int out_fd, int err_fd)
{
    childout *c = alloc(loop, child);
    if (c == NULL) {
        if (out_fd >= 0)
            (void)close(out_fd);
        if (err_fd >= 0)
            (void)close(err_fd);
        return;
    }
    c->ours = 1;
    c->pid = pid;
    c->epoch = epoch;
    const int fds[2] = { out_fd, err_fd };
    watch(c, fds);
}

void childout_end_terms_before(int64_t epoch)
{
    for (childout *c = all, *next; c != NULL; c = next) {
        next = c->next;
        if (c->ours && !c->closing && c->epoch > 0 && c->epoch < epoch)
            close_later(c);     /* (may free c: next is kept) */
    }
}

void childout_close_all(void)
{
    q.unlimited = 1;
    for (childout *c = all, *next; c != NULL; c = next) {
        next = c->next;
        for (int i = 0; i < 2 && !c->closing; i++)
            c->st[i].drain_left = DRAIN_MAX;
        c->closing = 1;
        for (int i = 0; i < 2; i++) {
            struct stream *s = &c->st[i];
            if (s->io.fd < 0)
                continue;
            while (turn(c, s) == T_MORE)
                ;
            stream_end(c, s);
        }
        destroy(c);
    }
    q.unlimited = 0;
}
