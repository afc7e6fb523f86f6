/* log.c - see log.h.
 *
 * The sink never blocks the loop. A pipe, a FIFO or a terminal is opened
 * anew through /proc/self/fd (a file description of our own, so that
 * O_NONBLOCK does not reach the children that share stderr); a socket
 * (journald's stream) is written with send(MSG_DONTWAIT); a regular file
 * with write() (it has no reader to wait for). A line that cannot be
 * written at once waits, whole, in a bounded buffer, written when the sink
 * can take it (an ev_io once log_attach_loop gave a loop, and before every
 * later line); a line that does not fit is dropped and counted, and one
 * "log_dropped" line says how many once the buffer has drained. */
#define _GNU_SOURCE         /* O_CLOEXEC, MSG_DONTWAIT, MSG_NOSIGNAL */
#include "log.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/socket.h>
#include <sys/stat.h>

#include <ev.h>

#define PENDING_MAX LOG_PENDING_MAX
#define LINE_ATOMIC 4096            /* PIPE_BUF on Linux: written whole or not at all */

enum sink_kind { SINK_WRITE, SINK_SEND };

static FILE *out;
static int sink_fd = -1;            /* where lines go (-1: nowhere) */
static int sink_own;                /* sink_fd is our reopened description */
static enum sink_kind sink_kind;
static char *pending;               /* lines not yet written (whole lines) */
static size_t pending_n;
static struct ev_loop *sink_loop;
static ev_io sink_io;
static enum log_format format = LOG_TEXT;
static enum zke_log_level min_level = ZKE_LOG_INFO;
static const char *self_id = "";
static int syslog_prefix;       /* out is journald's stream: lines start with <N> */
static uint64_t dropped, dropped_reported;  /* lines lost to write errors */
static int dropped_errno;

/* systemd connects a service's stderr to journald and names that stream in
 * $JOURNAL_STREAM ("device:inode"); only when f is that very stream (not a
 * redirection of it) do lines get a priority prefix, which journald strips
 * and keeps as the entry's PRIORITY (sd-daemon(3)). */
static int is_journal_stream(FILE *f)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char end;
    /* %c catches trailing garbage; an overflow only makes no match */
    if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &end) != 2) /* NOLINT(cert-err34-c) */
        return 0;
    if (fstat(fileno(f), &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* The sink for f: see the top of the file. */
static void open_sink(FILE *f)
{
    if (sink_own && sink_fd >= 0)
        (void)close(sink_fd);
    sink_fd = -1;
    sink_own = 0;
    sink_kind = SINK_WRITE;
    struct stat st;
    int fd = f != NULL ? fileno(f) : -1;
    if (fd < 0 || fstat(fd, &st) != 0)
        return;
    sink_fd = fd;
    if (S_ISSOCK(st.st_mode)) {
        sink_kind = SINK_SEND;
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
        int nb = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (nb >= 0) {
            sink_fd = nb;
            sink_own = 1;
        }
        /* (else: writes that may block, as before; /proc is not mounted) */
    }
}

void log_setup(FILE *f, enum log_format fmt, enum zke_log_level min, const char *id)
{
    out = f;
    if (f != NULL)
        fflush(f);
    open_sink(f);
    format = fmt;
    min_level = min;
    self_id = id ? id : "";
    syslog_prefix = f != NULL && is_journal_stream(f);
}

int log_parse_level(const char *s, enum zke_log_level *lvl)
{
    static const char *n[] = { "debug", "info", "warn", "error" };
    for (int i = 0; i < 4; i++)
        if (strcmp(s, n[i]) == 0) {
            *lvl = (enum zke_log_level)i;
            return 0;
        }
    if (strcmp(s, "warning") == 0) {
        *lvl = ZKE_LOG_WARN;
        return 0;
    }
    return -1;
}

enum log_format log_get_format(void)
{
    return format;
}

const char *log_get_id(void)
{
    return self_id;
}

enum zke_log_level log_min_level(void)
{
    return min_level;
}

int log_enabled(enum zke_log_level lvl)
{
    return lvl >= min_level;
}

struct buf {
    char b[16384];
    size_t n;
};

/* A long value (a traceback) is cut so that its closing quote, the `}` and
 * the newline still fit: a truncated line stays a valid JSON object. Fields
 * after it are dropped once less than FIELD_ROOM is left. */
#define RESERVE 64
#define FIELD_ROOM 1024

static void put(struct buf *b, const char *s, size_t len)
{
    size_t limit = sizeof b->b - RESERVE;
    if (b->n >= limit)
        return;
    if (len > limit - b->n)
        len = limit - b->n;
    memcpy(b->b + b->n, s, len);
    b->n += len;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* A JSON string; cut short (whole escapes and characters only) when the
 * line is full. Any bytes in (an id, a foreign node's data): valid UTF-8 is
 * kept, control characters (C0, DEL, C1) are escaped, and every invalid
 * byte becomes U+FFFD, so a line is always valid UTF-8 JSON. */
static void put_json_bytes(struct buf *b, const char *s, size_t left)
{
    const size_t room = sizeof b->b - RESERVE;
    const unsigned char *p = (const unsigned char *)s;
    b->b[b->n++] = '"';
    while (left > 0) {
        char esc[8];
        size_t n, len = utf8_seq(p, left);
        if (len == 0) {
            n = (size_t)snprintf(esc, sizeof esc, "\\ufffd");
            len = 1;
        } else if (len == 2 && p[0] == 0xc2 && p[1] < 0xa0) {
            snprintf(esc, sizeof esc, "\\u%04x", p[1]);       /* C1 */
            n = 6;
        } else if (len > 1) {
            memcpy(esc, p, len);
            n = len;
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            n = 2;
        } else if (*p == '\n') {
            esc[0] = '\\';
            esc[1] = 'n';
            n = 2;
        } else if (*p == '\t') {
            esc[0] = '\\';
            esc[1] = 't';
            n = 2;
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
            n = 6;
        } else {
            esc[0] = (char)*p;
            n = 1;
        }
        if (b->n + n > room)
            break;
        memcpy(b->b + b->n, esc, n);
        b->n += n;
        p += len;
        left -= len;
    }
    b->b[b->n++] = '"';
}

static void put_json_str(struct buf *b, const char *s)
{
    put_json_bytes(b, s, strlen(s));
}

/* A text-format value: bare when it is plain (no space, quote, '=',
 * control character (NUL included) or invalid UTF-8), else quoted as a
 * JSON string. */
static void put_text_bytes(struct buf *b, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t left = n;
    int quote = left == 0;
    while (left > 0 && !quote) {
        size_t len = utf8_seq(p, left);
        quote = len == 0 || (len == 1 && (*p <= ' ' || *p == '"' || *p == '=' || *p == 0x7f)) ||
                (len == 2 && p[0] == 0xc2 && p[1] < 0xa0);
        p += len;
        left -= len;
    }
    if (!quote) {
        put(b, s, n);
        return;
    }
    put_json_bytes(b, s, n);     /* same escaping, readable */
}

/* The record's start: the syslog priority (under systemd), the time, the
 * level, our id, the event and the monotonic clock. */
static void put_head(struct buf *b, enum zke_log_level lvl, const char *event)
{
    char ts[64], num[32];
    struct timespec now;
    struct tm tm;
    if (syslog_prefix) {
        /* syslog priorities: 7 debug, 6 info, 4 warning, 3 err */
        static const char *const prio[] = { "<7>", "<6>", "<4>", "<3>" };
        puts_(b, prio[lvl >= ZKE_LOG_DEBUG && lvl <= ZKE_LOG_ERROR ? lvl : ZKE_LOG_ERROR]);
    }
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t tl = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + tl, sizeof ts - tl, ".%06ldZ", now.tv_nsec / 1000);
    /* CLOCK_MONOTONIC is shared by every process of the host: tools (the
     * chaos checker) order lines of different agents by it */
    struct timespec mono;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    snprintf(num, sizeof num, "%" PRId64, (int64_t)mono.tv_sec * 1000000000 + mono.tv_nsec);
    if (format == LOG_JSON) {
        puts_(b, "{\"ts\":\"");
        puts_(b, ts);
        puts_(b, "\",\"level\":\"");
        puts_(b, zke_log_level_name(lvl));
        puts_(b, "\",\"id\":");
        put_json_str(b, self_id);
        puts_(b, ",\"event\":");
        put_json_str(b, event);
        puts_(b, ",\"mono_ns\":");
        puts_(b, num);
    } else {
        puts_(b, ts);
        puts_(b, " ");
        puts_(b, zke_log_level_name(lvl));
        puts_(b, " [");
        puts_(b, self_id);
        puts_(b, "] ");
        puts_(b, event);
        puts_(b, " mono_ns=");      /* the same fields as a JSON line */
        puts_(b, num);
    }
}

/* The fields (those that do not fit in the line are left out). */
static void put_fields(struct buf *b, const struct logf *f, int n)
{
    char num[32];
    for (int i = 0; i < n; i++) {
        if ((f[i].type == LF_STR || f[i].type == LF_BYTES) && f[i].s == NULL)
            continue;
        if (b->n > sizeof b->b - FIELD_ROOM)
            break;
        if (format == LOG_JSON) {
            puts_(b, ",");
            put_json_str(b, f[i].key);
            puts_(b, ":");
        } else {
            puts_(b, " ");
            puts_(b, f[i].key);
            puts_(b, "=");
        }
        if (f[i].type == LF_STR || f[i].type == LF_BYTES) {
            size_t len = f[i].type == LF_BYTES ? (size_t)f[i].i : strlen(f[i].s);
            if (format == LOG_JSON)
                put_json_bytes(b, f[i].s, len);
            else
                put_text_bytes(b, f[i].s, len);
        } else if (f[i].type == LF_HEX) {
            snprintf(num, sizeof num, format == LOG_JSON ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64,
                     (uint64_t)f[i].i);
            puts_(b, num);
        } else {
            snprintf(num, sizeof num, "%" PRId64, f[i].i);
            puts_(b, num);
        }
    }
}

/* One non-blocking write: bytes written, 0 when the sink is full (EAGAIN),
 * -1 on an error (errno). */
static ssize_t sink_write(const char *p, size_t n)
{
    ssize_t w;
    do
        w = sink_kind == SINK_SEND ? send(sink_fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                                   : write(sink_fd, p, n);
    while (w < 0 && errno == EINTR);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return w;
}

static void sink_io_cb(struct ev_loop *loop, ev_io *w, int revents);

/* Writes what waits, as far as the sink takes it; a write error drops the
 * lines that wait (counted). 1 when nothing waits any more. */
static int flush_pending(void)
{
    while (pending_n > 0) {
        /* whole lines of at most PIPE_BUF bytes at a time: a pipe takes
         * such a write whole or not at all, so a sink that fills up (or an
         * exit that stops waiting for it) never cuts a line; only a line
         * longer than that is written in parts */
        size_t n = 0;
        for (size_t i = 0; i < pending_n && i < LINE_ATOMIC; i++)
            if (pending[i] == '\n')
                n = i + 1;
        if (n == 0)
            n = pending_n;
        ssize_t w = sink_write(pending, n);
        if (w == 0)
            break;
        if (w < 0) {
            /* disk full, a closed pipe (SIGPIPE is ignored): count, go on */
            size_t lines = 0;
            for (size_t i = 0; i < pending_n; i++)
                lines += pending[i] == '\n';
            dropped += lines > 0 ? lines : 1;
            dropped_errno = errno;
            pending_n = 0;
            break;
        }
        memmove(pending, pending + w, pending_n - (size_t)w);
        pending_n -= (size_t)w;
    }
    if (sink_loop != NULL) {
        if (pending_n > 0 && !ev_is_active(&sink_io)) {
            ev_io_init(&sink_io, sink_io_cb, sink_fd, EV_WRITE);
            ev_io_start(sink_loop, &sink_io);
        } else if (pending_n == 0 && ev_is_active(&sink_io)) {
            ev_io_stop(sink_loop, &sink_io);
        }
    }
    return pending_n == 0;
}

/* Keeps a line that could not be written (whole): 0, or -1 when it does
 * not fit (dropped, counted). */
static int keep(const char *p, size_t n)
{
    if (pending == NULL && (pending = malloc(PENDING_MAX)) == NULL)
        return -1;
    if (n > PENDING_MAX - pending_n)
        return -1;
    memcpy(pending + pending_n, p, n);
    pending_n += n;
    return 0;
}

static void report_dropped(void);

static void sink_io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    if (flush_pending())
        report_dropped();
}

void log_forked(void)
{
    sink_own = 0;               /* (its descriptor was closed with the others) */
    sink_loop = NULL;           /* the parent's loop */
    pending_n = 0;              /* the parent's lines, the parent's to write */
    open_sink(out);
}

void log_attach_loop(struct ev_loop *loop)
{
    if (sink_loop != NULL && ev_is_active(&sink_io))
        ev_io_stop(sink_loop, &sink_io);
    sink_loop = sink_fd >= 0 ? loop : NULL;
    if (sink_loop != NULL)
        (void)flush_pending();
}

void log_drain(int ms)
{
    if (sink_loop != NULL && ev_is_active(&sink_io))
        ev_io_stop(sink_loop, &sink_io);
    sink_loop = NULL;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (sink_fd >= 0 && !flush_pending()) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        int left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            break;
        struct pollfd pf = { sink_fd, POLLOUT, 0 };
        (void)poll(&pf, 1, left);
    }
}

size_t log_pending(void)
{
    return pending_n;
}

void log_line(enum zke_log_level lvl, const char *event, const struct logf *f, int n)
{
    struct buf b;
    if (sink_fd < 0 || lvl < min_level)
        return;
    b.n = 0;
    put_head(&b, lvl, event);
    put_fields(&b, f, n);
    if (format == LOG_JSON)
        b.b[b.n++] = '}';
    b.b[b.n++] = '\n';
    /* what waits goes first: the lines stay in order */
    if (!flush_pending()) {
        if (keep(b.b, b.n) != 0) {
            dropped++;
            dropped_errno = EAGAIN;
        }
        (void)flush_pending();
        return;
    }
    ssize_t w = sink_write(b.b, b.n);
    if (w < 0) {
        dropped++;
        dropped_errno = errno;
        return;
    }
    if ((size_t)w < b.n) {
        if (keep(b.b + w, b.n - (size_t)w) != 0) {
            /* (cannot happen: the buffer is empty here) */
            dropped++;
            dropped_errno = EAGAIN;
        }
        (void)flush_pending();
        return;
    }
    report_dropped();
}

/* Once the sink takes lines again: one line saying how many were lost. */
static void report_dropped(void)
{
    if (dropped > dropped_reported && pending_n == 0) {
        char msg[200];
        uint64_t lost = dropped - dropped_reported;
        dropped_reported = dropped;
        snprintf(msg, sizeof msg, "%" PRIu64 " log lines were not written: %s", lost,
                 dropped_errno == EAGAIN ? "the log's reader fell behind (the agent does not "
                 "wait for it)" : strerror(dropped_errno));
        log_msg(ZKE_LOG_WARN, "log_dropped", msg);
    }
}

uint64_t log_dropped(void)
{
    return dropped;
}

void log_msg(enum zke_log_level lvl, const char *event, const char *msg)
{
    struct logf f = { "msg", LF_STR, msg, 0 };
    log_line(lvl, event, &f, 1);
}

/* One piece: a table of which fields each event type logs, read best as
 * one switch. */
void log_event(const struct zke_event *ev)
{
    struct logf f[14];
    int n = 0;
    enum zke_log_level lvl = ZKE_LOG_INFO;
#define S(k, v) f[n++] = (struct logf){ k, LF_STR, v, 0 }
#define I(k, v) f[n++] = (struct logf){ k, LF_INT, NULL, (int64_t)(v) }
#define H(k, v) f[n++] = (struct logf){ k, LF_HEX, NULL, (int64_t)(v) }
    switch (ev->type) {
    case ZKE_EV_SESSION:
        S("reason", ev->reason);
        H("session", ev->session);
        if (strcmp(ev->reason, "connected") != 0 && strcmp(ev->reason, "reconnected") != 0)
            lvl = ZKE_LOG_WARN;
        break;
    case ZKE_EV_JOINED:
        S("node", ev->node);
        I("seq", ev->seq);
        H("session", ev->session);
        S("reason", ev->reason);
        break;
    case ZKE_EV_SUSPEND:
    case ZKE_EV_RESUME:
        S("node", ev->node);
        I("epoch", ev->epoch);
        I("lease_ms", ev->lease_ms);
        S("reason", ev->reason);
        if (ev->type == ZKE_EV_SUSPEND)
            lvl = ZKE_LOG_WARN;
        break;
    case ZKE_EV_LEADER:
        S("node", ev->node);
        I("seq", ev->seq);
        H("session", ev->session);
        I("epoch", ev->epoch);
        I("lease_ms", ev->lease_ms);
        S("reason", ev->reason);
        S("previous", ev->previous);
        if (ev->candidates > 0)             /* 0: decided without a listing */
            I("candidates", ev->candidates);
        break;
    case ZKE_EV_FOLLOWER:
        S("node", ev->node);
        I("seq", ev->seq);
        S("leader", ev->leader);
        S("leader_data", ev->leader_data);
        if (ev->leader_epoch > 0)
            I("leader_epoch", ev->leader_epoch);
        S("leader_node", ev->leader_node);
        S("predecessor", ev->predecessor);
        I("position", ev->position);
        I("candidates", ev->candidates);
        break;
    case ZKE_EV_PREDECESSOR_CHANGE:
        S("node", ev->node);
        S("old", ev->old_pred);
        S("new", ev->new_pred);
        I("position", ev->position);
        S("leader", ev->leader);
        break;
    case ZKE_EV_STEPDOWN:
        S("node", ev->node);
        I("epoch", ev->epoch);
        S("reason", ev->reason);
        if (strcmp(ev->reason, "resign") != 0 && strcmp(ev->reason, "shutdown") != 0)
            lvl = ZKE_LOG_WARN;
        break;
    case ZKE_EV_STOPPED:
        S("reason", ev->reason);
        break;
    case ZKE_EV_LEADER_CHANGE:
        S("leader", ev->leader);
        S("leader_node", ev->leader_node);
        I("leader_epoch", ev->leader_epoch);
        S("leader_data", ev->leader_data);
        I("candidates", ev->candidates);
        S("reason", ev->reason);
        break;
    default:
        break;
    }
#undef S
#undef I
#undef H
    log_line(lvl, zke_event_name(ev->type), f, n);
}

void log_script(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                const char *msg)
{
    struct logf f[2] = { { "hook", LF_STR, hook, 0 }, { "msg", LF_STR, msg, 0 } };
    (void)ud;
    log_line(lvl, event, f, 2);
}
