/*
 * zkclient_log.c - the ZooKeeper client's log lines, routed to the handle
 * they are about, and the folding of failed connect attempts.
 *
 * The one process-wide pointer of the module: libzookeeper_st 3.8 takes a
 * log callback per handle (zookeeper_init2, zoo_set_log_callback), but the
 * callback gets only the line (log_callback_fn: no handle, no context), and
 * some lines are written before the handle exists (zookeeper_init2's own).
 * So each call into the library names the handle it is for
 * (zkc_route_enter/leave around it), and the callback sends the lines to
 * that handle. Loop thread only; nested calls restore the outer handle.
 */
#define _POSIX_C_SOURCE 200809L
#include "zkclient_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static zkclient *routed;     /* the handle whose library call is running, or NULL */

zkclient *zkc_route_enter(zkclient *s)
{
    zkclient *prev = routed;
    routed = s;
    return prev;
}

void zkc_route_leave(zkclient *prev)
{
    routed = prev;
}

zkclient *zkc_routed(void)
{
    return routed;
}

void zkc_log(zkclient *s, enum zke_log_level lvl, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    if (s == NULL || s->log.fn == NULL || lvl < s->log.min)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    s->log.fn(s->ud, lvl, buf);
}

/* A failed connect attempt's reason, as one short text: the first time,
 * when it changes, and at most every CONN_ERR_REPEAT seconds while it
 * stays the same (with the count since), it is logged as a warning; it is
 * kept for the "cannot connect" error (zkclient_conn_error). */
#define CONN_ERR_REPEAT 30.0

void zkc_note_conn_err(zkclient *s, const char *text)
{
    struct zkc_log *l = &s->log;
    snprintf(l->conn_err, sizeof l->conn_err, "%s", text);
    double now = zkc_loop_now(s);
    if (strcmp(l->conn_err_said, l->conn_err) == 0 && now - l->conn_err_said_at < CONN_ERR_REPEAT) {
        l->conn_err_repeats++;
        return;
    }
    if (strcmp(l->conn_err_said, l->conn_err) == 0)
        zkc_log(s, ZKE_LOG_WARN, "%s (%u more failed attempts in %.0f s); retrying", l->conn_err,
                 l->conn_err_repeats, now - l->conn_err_said_at);
    else
        zkc_log(s, ZKE_LOG_WARN, "%s; retrying", l->conn_err);
    snprintf(l->conn_err_said, sizeof l->conn_err_said, "%s", l->conn_err);
    l->conn_err_said_at = now;
    l->conn_err_repeats = 0;
}

/* The client's line about a failed socket ("Socket 127.0.0.1:2181 zk
 * retcode=-4, errno=111(Connection refused): server refused to accept the
 * client", "connection to 127.0.0.1:2181 timed out (exceeded timeout by
 * 3ms)") as "ZooKeeper 127.0.0.1:2181: connection refused" in out; 0, or
 * -1 when the line is none of those. */
static int socket_error(const char *line, char *out, size_t outlen)
{
    const char *a = strstr(line, "Socket "), *end;
    if (a != NULL && (end = strstr(a, " zk retcode=")) != NULL) {
        a += strlen("Socket ");
        if (*a == '[' && end > a + 1 && end[-1] == ']') {
            a++;
            end--;
        }
        const char *e = strstr(end, "errno=");
        long n = e != NULL ? strtol(e + strlen("errno="), NULL, 10) : 0;
        const char *why = strstr(end, "): ");
        char reason[96];
        if (n > 0 && n < 4096)
            snprintf(reason, sizeof reason, "%s", strerror((int)n));
        else
            snprintf(reason, sizeof reason, "%s", why != NULL ? why + 3 : "connection lost");
        /* strerror's capital, in the middle of our line */
        if (reason[0] >= 'A' && reason[0] <= 'Z' && !(reason[1] >= 'A' && reason[1] <= 'Z'))
            reason[0] = (char)(reason[0] - 'A' + 'a');
        snprintf(out, outlen, "ZooKeeper %.*s: %s", (int)(end - a < 100 ? end - a : 100), a, reason);
        return 0;
    }
    a = strstr(line, "connection to ");
    if (a != NULL && (end = strstr(a, " timed out")) != NULL) {
        a += strlen("connection to ");
        snprintf(out, outlen, "ZooKeeper %.*s: timed out (no answer within two thirds of the "
                 "session timeout)", (int)(end - a < 100 ? end - a : 100), a);
        return 0;
    }
    return -1;
}

/* The client's own lines are debug. A failed connect (each attempt, many
 * a second during an outage) is folded into one reason (zkc_note_conn_err);
 * its "delaying connection" between rounds says nothing more; any other
 * ERROR or WARN line ("Exceeded deadline") is passed on as a warning, at
 * most one a second. */
void zkc_zk_log(const char *message)
{
    zkclient *s = routed;
    enum zke_log_level lvl = ZKE_LOG_DEBUG;
    char err[sizeof s->log.conn_err];
    if (s == NULL)
        return;
    int loud = strstr(message, ":ZOO_ERROR@") != NULL || strstr(message, ":ZOO_WARN@") != NULL;
    if (loud && socket_error(message, err, sizeof err) == 0) {
        zkc_log(s, ZKE_LOG_DEBUG, "zookeeper: %s", message);
        zkc_note_conn_err(s, err);
        return;
    }
    if (loud && strstr(message, "Delaying connection after exhaustively") == NULL) {
        double now = zkc_loop_now(s);
        if (now - s->log.last_loud >= 1.0) {
            s->log.last_loud = now;
            lvl = ZKE_LOG_WARN;
        }
    }
    zkc_log(s, lvl, "zookeeper: %s", message);
}
