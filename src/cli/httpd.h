/*
 * httpd.h - a small HTTP/1.1 server on the caller's libev loop, for the
 * status and metrics endpoints. No threads, no library: its watchers run at
 * the loop's lowest priority, after the election's own.
 *
 * Calling rules: everything from the loop's thread. The handler is called
 * from the loop, once per request, and must not block: it builds the whole
 * reply in memory. httpd_free() may not be called from inside the handler.
 * An open server keeps the loop alive.
 *
 * Protection: at most HTTPD_MAX_CONNS connections (fewer: httpd_set_limit); at the limit a new one
 * closes the connection that has waited longest for a request (or, when
 * all are being answered, the one that kept its answers waiting longest),
 * so held, half-sent or unread connections cannot lock out a check; at
 * most 8 pipelined answers per loop iteration. A request head is at most HTTP_HEAD_MAX bytes and must arrive
 * within 5 s; idle keep-alive connections close after 10 s; malformed
 * requests are answered 4xx and closed; request bodies are never read (the
 * connection closes after the answer). A client that closes is forgotten at
 * once.
 */
#ifndef ZKELECT_HTTPD_H
#define ZKELECT_HTTPD_H

#include <stddef.h>
#include "zkelect.h"

struct ev_loop;
typedef struct httpd httpd;

#define HTTPD_MAX_CONNS 64
#define HTTPD_HEADERS_MAX 256   /* the handler's own header lines, in bytes */

struct httpd_reply {
    int status;                 /* default 200 */
    const char *type;           /* Content-Type; default text/plain; charset=utf-8 */
    char *body;                 /* malloc'd; the server frees it. NULL: an empty body */
    size_t len;
    const char *allow;          /* Allow header (for 405 and OPTIONS), or NULL */
    char headers[HTTPD_HEADERS_MAX];  /* more header lines, each "Name: value\r\n" (trusted:
                                 * the handler writes them); starts empty */
};

/* method and url (path only, no query) are borrowed for the call. A HEAD
 * request's reply is sent without its body (its Content-Length stays). */
typedef void httpd_handler(void *ud, const char *method, const char *url, struct httpd_reply *r);
typedef void httpd_log_fn(void *ud, enum zke_log_level lvl, const char *msg);

/* Lowers the connection limit to max_conns (1..HTTPD_MAX_CONNS) and closes
 * at once a connection accepted on a descriptor at or above fd_ceiling
 * (the descriptors above are kept for others: fdlimit.h), pausing
 * accepting for a moment as when out of descriptors. */
void httpd_set_limit(httpd *h, int max_conns, long fd_ceiling);

/* Checks a listen address: "PORT", "HOST:PORT" or "[V6]:PORT", HOST a
 * numeric address or "localhost", PORT 0-65535 (0: any free port). Sets
 * *loopback. Returns 0, or -1 with a one-line reason naming the value. */
int httpd_check_addr(const char *spec, int *loopback, char *err, size_t errlen);

/* Binds and starts serving. NULL with a one-line reason in err (bad
 * address, address in use, out of memory) and the errno of a failed
 * socket call in *sys_err (0 otherwise). log may be NULL; it gets warnings
 * (accepting paused: out of file descriptors) and debug lines. */
httpd *httpd_new(struct ev_loop *loop, const char *spec, httpd_handler *fn, void *ud,
                 httpd_log_fn *log, char *err, size_t errlen, int *sys_err);
/* The bound address, "127.0.0.1:PORT" (the real port when 0 was asked). */
const char *httpd_addr(const httpd *h);
/* Open connections now, and connections closed to make room so far. */
int httpd_connections(const httpd *h);
unsigned long long httpd_evicted(const httpd *h);
/* Closes the listening socket and every connection. NULL is a no-op. */
void httpd_free(httpd *h);

#endif
