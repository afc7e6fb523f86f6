/*
 * cmd_ctl.c - zkelect ctl: one request to a running agent over its control
 * socket (control.h: one line out, one JSON line and "status N" back),
 * printed as text or, with --json, as the agent's JSON; the exit code is
 * the agent's N. No agent on the socket: exit 69. The socket: --control,
 * -i NAME, ZKELECT_CONTROL, $RUNTIME_DIRECTORY's, then the shipped units'
 * (socket_path).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "control.h"
#include "exits.h"

/* the longest an answer may take: a hand-over waits up to max(10 s, 4 x
 * the session timeout) for the new leader (switchboard.h; the longest
 * session ZooKeeper grants is a few minutes), a reload until no hook runs
 * (at most a hook's budget, 30 s by default); every other request is
 * answered from the agent's loop at once: a frozen agent is reported */
#define LONG_WAIT_MS 2700000
#define ANSWER_WAIT_MS 10000

/* The shipped units' RuntimeDirectory=: zkelect.service's socket is
 * RUN_DIR/zkelect.sock, zkelect@NAME.service's RUN_DIR/NAME/zkelect.sock. */
#ifndef ZKELECT_RUN_DIR
#define ZKELECT_RUN_DIR "/run/zkelect"
#endif
#define SOCK_NAME "zkelect.sock"

static int is_socket(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* -i NAME: "db", or the unit's name "zkelect@db" / "zkelect@db.service". */
static char *instance_path(const char *given)
{
    const char *name = given;
    size_t n = strlen(name);
    if (strncmp(name, "zkelect@", 8) == 0) {
        name += 8;
        n -= 8;
    }
    if (n > 8 && strcmp(name + n - 8, ".service") == 0)
        n -= 8;
    if (n == 0 || memchr(name, '/', n) != NULL || (n == 1 && name[0] == '.') ||
        (n == 2 && strncmp(name, "..", 2) == 0))
        die(EX_USAGE, "--instance '%s': not an instance name (zkelect@NAME.service's NAME)",
            given);
    return xprintf("%s/%.*s/%s", ZKELECT_RUN_DIR, (int)n, name, SOCK_NAME);
}

/* No socket named: zkelect.service's, else the only zkelect@NAME one.
 * Exits 64 when there are several, 69 when there is none. */
static char *unit_socket(void)
{
    char *one = xprintf("%s/%s", ZKELECT_RUN_DIR, SOCK_NAME);
    if (is_socket(one))
        return one;
    free(one);
    char *found = NULL, *names = NULL;
    int n = 0;
    DIR *d = opendir(ZKELECT_RUN_DIR);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue;
        char *p = xprintf("%s/%s/%s", ZKELECT_RUN_DIR, e->d_name, SOCK_NAME);
        if (!is_socket(p)) {
            free(p);
            continue;
        }
        char *more = xprintf("%s%s%s", names != NULL ? names : "", n > 0 ? ", " : "",
                                e->d_name);
        free(names);
        names = more;
        n++;
        free(found);
        found = p;
    }
    if (d != NULL)
        closedir(d);
    if (n == 1) {
        free(names);
        return found;
    }
    free(found);
    if (n > 1)
        die(EX_USAGE, "several agents under %s (%s): name one with -i NAME (zkelect@NAME), or "
            "give --control PATH", ZKELECT_RUN_DIR, names);
    die(EX_UNAVAILABLE, "no agent found: no control socket at %s/%s (zkelect.service) nor at "
        "%s/NAME/%s (zkelect@NAME.service); give --control PATH (as given to zkelect run) or "
        "-i NAME", ZKELECT_RUN_DIR, SOCK_NAME, ZKELECT_RUN_DIR, SOCK_NAME);
}

/* The socket to talk to, allocated: --control, -i NAME, ZKELECT_CONTROL,
 * $RUNTIME_DIRECTORY's (a command that a unit runs), then the units'. */
static char *socket_path(const struct opts *o)
{
    if (o->control_flag && o->instance != NULL)
        die(EX_USAGE, "--control and --instance (-i) name two sockets: give one");
    if (o->control_flag)
        return xprintf("%s", o->control);
    if (o->instance != NULL)
        return instance_path(o->instance);
    if (o->control != NULL)
        return xprintf("%s", o->control);
    char *def = control_default_path();
    return def != NULL ? def : unit_socket();
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_to(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sa.sun_path)
        die(EX_USAGE, "--control '%s': longer than a unix socket path may be (107 bytes)", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die(EX_SOFTWARE, "socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        int e = errno;
        if (e == ENOENT || e == ECONNREFUSED || e == ENOTSOCK)
            die(EX_UNAVAILABLE, "no agent on the control socket '%s' (%s): is zkelect run "
                "--control %s running?", path, strerror(e), path);
        die(e == EACCES ? EX_NOPERM : EX_UNAVAILABLE, "control socket '%s': %s", path,
            strerror(e));
    }
    return fd;
}

/* Sends line and reads the whole answer (until the agent closes). */
static char *exchange(int fd, const char *path, const char *line, int wait_ms)
{
    size_t len = strlen(line), off = 0;
    while (off < len) {
        ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die(EX_UNAVAILABLE, "control socket '%s': %s", path, strerror(errno));
        off += (size_t)n;
    }
    size_t cap = 4096, have = 0;
    char *buf = malloc(cap);
    int64_t end = now_ms() + wait_ms;
    for (;;) {
        if (buf == NULL)
            die(EX_SOFTWARE, "out of memory");
        int64_t left = end - now_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            die(EX_UNAVAILABLE, "control socket '%s': no answer within %d ms (is the agent "
                "stopped or stuck?)", path, wait_ms);
        if (have + 1 >= cap) {
            cap *= 2;
            char *more = cap <= (1u << 20) ? realloc(buf, cap) : NULL;
            if (more == NULL)
                die(EX_SOFTWARE, "control socket '%s': the answer is too long", path);
            buf = more;
        }
        ssize_t n = recv(fd, buf + have, cap - 1 - have, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die(EX_UNAVAILABLE, "control socket '%s': %s", path, strerror(errno));
        if (n == 0)
            break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    return buf;
}

static void print_text(const char *cmd, cJSON *o)
{
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(o, "message");
    if (strcmp(cmd, "status") != 0) {
        if (cJSON_IsString(msg))
            printf("%s\n", msg->valuestring);
        return;
    }
    static const char *const keys[] = { "id", "path", "role", "leader", "epoch", "lease_ms",
                                        "node", "position", "candidates", "connected",
                                        "session" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (cJSON_IsString(v))
            printf("%-10s %s\n", keys[i], v->valuestring);
        else if (cJSON_IsNumber(v))
            printf("%-10s %lld\n", keys[i], (long long)v->valuedouble);
        else if (cJSON_IsBool(v))
            printf("%-10s %s\n", keys[i], cJSON_IsTrue(v) ? "yes" : "no");
        else
            printf("%-10s -\n", keys[i]);
    }
}

int cmd_ctl(struct opts *o)
{
    if (o->words_argc < 1)
        die(EX_USAGE, "missing ctl command (status, resign, withdraw, rejoin or reload)");
    const char *cmd = o->words[0];
    static const char *const known[] = { "status", "resign", "withdraw", "rejoin", "reload" };
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= strcmp(cmd, known[i]) == 0;
    if (!ok)
        die(EX_USAGE, "unknown ctl command '%s' (status, resign, withdraw, rejoin or reload)", cmd);
    /* the options after the command: --to, --json, --control */
    char *msg = NULL;
    o->words_ok = 0;
    int words = o->words_argc;
    o->words_argc = 0;
    if (words > 1) {
        enum options_outcome rc = options_argv(o, words, o->words, &msg);
        if (rc == OPTIONS_HELP) {
            options_usage(stdout);
            return EX_OK;
        }
        if (rc != OPTIONS_OK)
            die(msg != NULL ? EX_USAGE : EX_SOFTWARE, "%s", msg != NULL ? msg : "out of memory");
    }
    if (o->to != NULL && strcmp(cmd, "resign") != 0)
        die(EX_USAGE, "--to is for zkelect ctl resign only");
    if (o->to != NULL && (o->to[0] == '\0' || strpbrk(o->to, " \n\r/") != NULL))
        die(EX_USAGE, "--to '%s': not a candidate id (no '/', spaces or newlines)", o->to);
    char *path = socket_path(o);
    char line[CONTROL_LINE_MAX];
    if (snprintf(line, sizeof line, "%s%s%s\n", cmd, o->to ? " " : "", o->to ? o->to : "") >=
        (int)sizeof line)
        die(EX_USAGE, "--to: the id is too long");
    int fd = connect_to(path);
    int waits = o->to != NULL || strcmp(cmd, "reload") == 0;
    char *answer = exchange(fd, path, line, waits ? LONG_WAIT_MS : ANSWER_WAIT_MS);
    close(fd);
    char *nl = strchr(answer, '\n');
    int status = -1;
    if (nl != NULL) {
        *nl = '\0';
        char *end = NULL;
        if (strncmp(nl + 1, "status ", 7) == 0) {
            long v = strtol(nl + 8, &end, 10);
            if (end != nl + 8 && (*end == '\n' || *end == '\0') && v >= 0 && v <= 125)
                status = (int)v;
        }
    }
    cJSON *reply = cJSON_Parse(answer);
    if (reply == NULL || status < 0 || status > 125)
        die(EX_SOFTWARE, "control socket '%s': a malformed answer", path);
    if (o->json)
        printf("%s\n", answer);
    if (status == EX_OK && !o->json) {
        print_text(cmd, reply);
    } else if (status != EX_OK) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
        fflush(stdout);
        error_line(cJSON_IsString(e) ? e->valuestring : "the agent refused", "");
    }
    cJSON_Delete(reply);
    free(answer);
    free(path);
    return status;
}
