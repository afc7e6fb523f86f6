/*
 * cmd_ctl.c - zkelect ctl: one request to a running agent over its control
 * socket (control.h: one line out, one JSON line and "status N" back),
 * printed as text or, with --json, as the agent's JSON; the exit code is
 * the agent's N. No agent on the socket: exit 69.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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
    char *def = o->control == NULL ? control_default_path() : NULL;
    const char *path = o->control != NULL ? o->control : def;
    if (path == NULL)
        die(EX_USAGE, "no control socket: give --control PATH (or ZKELECT_CONTROL), as given "
            "to zkelect run");
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
    free(def);
    return status;
}
