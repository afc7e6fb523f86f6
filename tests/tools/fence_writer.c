/*
 * fence_writer - the leader's duty process in the chaos suite (tests/chaos).
 *
 * Usage: fence_writer SOCKET_PATH INTERVAL_MS
 *        fence_writer --mark set|clear SOCKET_PATH [EPOCH [IGNORED...]]
 *
 * Environment (set by zkelect.spawn for a leader's children):
 *   ZKELECT_ID     candidate id (no white space)
 *   ZKELECT_EPOCH  fencing epoch of the leadership term (decimal integer)
 * Either missing or malformed: exit 64 (EX_USAGE).
 *
 * Connects to the fenced fake resource (tests/chaos/fence.py) on the Unix
 * stream socket SOCKET_PATH and writes one line "W <id> <epoch> <n>\n" every
 * INTERVAL_MS milliseconds with an increasing n, waiting for the reply line
 * ("OK" or "REJECT <max>") after each write. A rejected write is not an
 * error here: the writer keeps going (its parent agent must stop it), and the
 * fence's log counts it.
 *
 * Robustness rules:
 *   - SIGTERM/SIGINT: exit 0 at once, also while waiting (the signals are
 *     blocked outside pselect(2), which unblocks them atomically, so none is
 *     lost between a check and a wait);
 *   - the fence restarting or closing the connection: reconnect with a
 *     backoff that starts at INTERVAL_MS and doubles up to 1 s; never spins;
 *   - a reply that does not come within 2 s: drop the connection, reconnect;
 *   - ticks are scheduled on CLOCK_MONOTONIC; after a stall (SIGSTOP) the
 *     next write is one interval later, without a catch-up burst;
 *   - PR_SET_PDEATHSIG(SIGTERM): the writer ends when the agent that spawned
 *     it dies (e.g. SIGKILL), so no orphan keeps acting with an old epoch.
 * Silent on stdout/stderr except for usage errors (stderr is the agent's log).
 *
 * --mark set|clear: one request to the fence's marker table (a term's state
 * that has no epoch, as a virtual IP address has none), then exit:
 * "M SET <id> <epoch> <via>\n" or "M CLEAR <id> <epoch> <via>\n", where via
 * is "fence:<ZKELECT_REASON>" when the fail-stop watcher runs it as the fence
 * command (ZKELECT_EVENT=fence) and "hook" otherwise. The epoch is EPOCH
 * when given, else ZKELECT_EPOCH: a fence command is called with EPOCH
 * REASON appended, and an on_stepdown's process has ZKELECT_EPOCH=0 (it is
 * not the term's), so the hook names the term's epoch. Words after EPOCH are
 * ignored. Exit 0 once the fence answered "OK",
 * 1 on another answer, 69 (EX_UNAVAILABLE) when the fence cannot be reached
 * or does not answer within 2 s.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EX_OK 0
#define EX_USAGE 64
#define EX_UNAVAILABLE 69
#define REPLY_TIMEOUT_MS 2000
#define MAX_BACKOFF_MS 1000

static volatile sig_atomic_t stop_flag;
static sigset_t wait_mask;          /* the mask during pselect: SIGTERM/SIGINT unblocked */

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready (readable if want_read, else writable) or until
 * deadline_ms (monotonic); fd < 0: just sleeps. Returns 1 ready, 0 timeout,
 * -1 stop requested or error. */
static int wait_fd(int fd, int want_read, long long deadline_ms)
{
    for (int i = 0; i < 1000; i++) {
        if (stop_flag)
            return -1;
        long long left = deadline_ms - now_ms();
        if (left <= 0)
            return 0;
        struct timespec ts = { (time_t)(left / 1000), (long)(left % 1000) * 1000000L };
        fd_set set;
        FD_ZERO(&set);
        if (fd >= 0)
            FD_SET(fd, &set);
        int r = pselect(fd >= 0 ? fd + 1 : 0, want_read && fd >= 0 ? &set : NULL,
                        !want_read && fd >= 0 ? &set : NULL, NULL, &ts, &wait_mask);
        if (r > 0)
            return 1;
        if (r == 0)
            continue;       /* re-check the clock: pselect may wake early */
        if (errno != EINTR)
            return -1;
    }
    return 0;
}

static int connect_fence(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0
        || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes the whole line; 0 ok, -1 error/timeout/stop. */
static int send_all(int fd, const char *buf, size_t len)
{
    long long deadline = now_ms() + REPLY_TIMEOUT_MS;
    size_t off = 0;
    for (int i = 0; off < len && i < 10000; i++) {
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(fd, 0, deadline) != 1)
                return -1;
            continue;
        }
        return -1;
    }
    return off == len ? 0 : -1;
}

/* Reads one reply line into buf (NUL-terminated, at most len - 1 bytes);
 * 0 ok, -1 error/EOF/timeout/stop. */
static int read_reply_into(int fd, char *buf, size_t len)
{
    size_t n = 0;
    long long deadline = now_ms() + REPLY_TIMEOUT_MS;
    for (int i = 0; i < 10000; i++) {
        ssize_t r = recv(fd, buf + n, len - 1 - n, 0);
        if (r > 0) {
            n += (size_t)r;
            buf[n] = '\0';
            if (memchr(buf, '\n', n) != NULL)
                return 0;
            if (n >= len - 1)
                return -1;          /* not our protocol */
            continue;
        }
        if (r == 0)
            return -1;              /* the fence closed the connection */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (wait_fd(fd, 1, deadline) != 1)
            return -1;
    }
    return -1;
}

static int read_reply(int fd)
{
    char buf[256];
    return read_reply_into(fd, buf, sizeof buf);
}

static int parse_long(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int usage(const char *msg)
{
    fprintf(stderr, "fence_writer: error: %s\n"
                    "usage: fence_writer SOCKET_PATH INTERVAL_MS\n"
                    "       fence_writer --mark set|clear SOCKET_PATH [EPOCH [IGNORED...]]\n"
                    "(environment: ZKELECT_ID, ZKELECT_EPOCH)\n", msg);
    return EX_USAGE;
}

/* --mark set|clear: one marker request (see the top of the file). */
static int mark(const char *op, const char *path, const char *id, long long epoch)
{
    char line[256], via[64], reply[256];
    const char *ev = getenv("ZKELECT_EVENT");
    const char *reason = getenv("ZKELECT_REASON");
    if (ev != NULL && strcmp(ev, "fence") == 0)
        snprintf(via, sizeof via, "fence:%s", reason != NULL && *reason != '\0' &&
                 strpbrk(reason, " \t\r\n") == NULL ? reason : "?");
    else
        snprintf(via, sizeof via, "hook");
    int len = snprintf(line, sizeof line, "M %s %s %lld %s\n", strcmp(op, "set") == 0 ? "SET"
                       : "CLEAR", id, epoch, via);
    if (len <= 0 || (size_t)len >= sizeof line)
        return usage("the marker request does not fit in one line");
    int fd = connect_fence(path);
    if (fd < 0) {
        fprintf(stderr, "fence_writer: --mark %s: cannot connect to %s: %s\n", op, path,
                strerror(errno));
        return EX_UNAVAILABLE;
    }
    int rc = send_all(fd, line, (size_t)len) == 0 && read_reply_into(fd, reply, sizeof reply) == 0
                 ? (strncmp(reply, "OK", 2) == 0 ? EX_OK : 1) : EX_UNAVAILABLE;
    close(fd);
    if (rc != EX_OK)
        fprintf(stderr, "fence_writer: --mark %s: %s\n", op,
                rc == 1 ? "the fence refused the request" : "no answer from the fence");
    return rc;
}

int main(int argc, char **argv)
{
    long long interval = 0, epoch;
    int marking = argc >= 2 && strcmp(argv[1], "--mark") == 0;
    if (marking) {
        if (argc < 4 || (strcmp(argv[2], "set") != 0 && strcmp(argv[2], "clear") != 0))
            return usage("--mark takes set or clear and SOCKET_PATH");
    } else {
        if (argc != 3)
            return usage("expected 2 arguments");
        if (parse_long(argv[2], 1, 60000, &interval) != 0)
            return usage("INTERVAL_MS must be an integer in 1..60000");
    }
    const char *sock = marking ? argv[3] : argv[1];
    const char *id = getenv("ZKELECT_ID");
    const char *ep = getenv("ZKELECT_EPOCH");
    if (id == NULL || *id == '\0' || strpbrk(id, " \t\r\n") != NULL || strlen(id) > 128)
        return usage("ZKELECT_ID missing, empty, too long or containing white space");
    if (parse_long(ep, LLONG_MIN, LLONG_MAX, &epoch) != 0)
        return usage("ZKELECT_EPOCH missing or not a decimal integer");
    if (marking && argc >= 5 && parse_long(argv[4], LLONG_MIN, LLONG_MAX, &epoch) != 0)
        return usage("EPOCH is not a decimal integer");
    if (strlen(sock) >= sizeof((struct sockaddr_un *)0)->sun_path)
        return usage("SOCKET_PATH too long");
    if (marking) {
        sigprocmask(SIG_SETMASK, NULL, &wait_mask);     /* pselect keeps the mask as it is */
        signal(SIGPIPE, SIG_IGN);
        return mark(argv[2], sock, id, epoch);
    }

    /* SIGTERM/SIGINT blocked except inside pselect */
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &wait_mask);
    sigdelset(&wait_mask, SIGTERM);
    sigdelset(&wait_mask, SIGINT);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)        /* the parent died before prctl */
        return EX_OK;

    int fd = -1;
    long long n = 0;
    long long backoff = interval;
    long long next = now_ms();
    char line[256];
    while (!stop_flag) {
        if (fd < 0) {
            fd = connect_fence(argv[1]);
            if (fd < 0) {
                if (wait_fd(-1, 0, now_ms() + backoff) < 0)
                    break;
                backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
                continue;
            }
            backoff = interval;
        }
        /* the tick */
        if (wait_fd(-1, 0, next) < 0)
            break;
        sigset_t pending;       /* a SIGTERM that came while not in pselect */
        if (sigpending(&pending) == 0
            && (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1))
            break;
        n++;
        int len = snprintf(line, sizeof line, "W %s %lld %lld\n", id, epoch, n);
        if (len <= 0 || (size_t)len >= sizeof line || send_all(fd, line, (size_t)len) != 0
            || read_reply(fd) != 0) {
            close(fd);
            fd = -1;
            if (stop_flag)
                break;
            if (wait_fd(-1, 0, now_ms() + backoff) < 0)
                break;
            backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
            continue;
        }
        next += interval;
        long long now = now_ms();
        if (next <= now)
            next = now + interval;      /* stalled: no catch-up burst */
    }
    if (fd >= 0)
        close(fd);
    return EX_OK;
}
