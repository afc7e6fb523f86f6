/*
 * http.h - the HTTP/1.1 messages of the status endpoint: parsing a request
 * head (RFC 9112) and writing a response head. Pure functions over byte
 * buffers: no I/O, no allocation, any thread. httpd.c drives them.
 *
 * A request head is untrusted bytes from any local or remote client: every
 * input gives either "need more bytes" or a consumed length with a status
 * (0 for a request to serve, else the 4xx/5xx to answer before closing).
 */
#ifndef ZKELECT_HTTP_H
#define ZKELECT_HTTP_H

#include <stddef.h>

enum {
    HTTP_HEAD_MAX = 8192,       /* request line and headers, in bytes */
    HTTP_METHOD_MAX = 16,       /* longer method tokens are answered 501 */
    HTTP_PATH_MAX = 2048,       /* longer targets are answered 414 */
};

struct http_req {
    int status;                 /* 0: serve it; else the status to answer, then close */
    char method[HTTP_METHOD_MAX];   /* NUL-terminated token */
    char path[HTTP_PATH_MAX];   /* the target's path, without query or fragment */
    int keep_alive;             /* the client allows another request on the connection */
    int has_body;               /* Content-Length > 0 or Transfer-Encoding: bodies are not
                                 * read, so the connection closes after the answer */
};

/* Parses the request head at the start of buf[0..len). Returns 0 when the
 * head is incomplete and len < HTTP_HEAD_MAX (read more); otherwise the
 * number of bytes the head takes (leading blank lines included) and *r
 * filled, r->status telling whether to serve it. A head longer than
 * HTTP_HEAD_MAX returns len with status 431. */
size_t http_parse_head(const char *buf, size_t len, struct http_req *r);

/* The standard reason phrase of a status ("Unknown" for others). */
const char *http_reason(int status);

/* Writes a response head into out[0..cap): status line, Content-Type,
 * Content-Length (body_len, also for HEAD), Cache-Control: no-store, Allow
 * when allow is not NULL, the header lines in extra (each "Name: value\r\n";
 * NULL or "" for none), Connection: close when close_after. Returns its
 * length, or 0 if it does not fit (type, allow and extra are trusted
 * strings). */
size_t http_format_head(char *out, size_t cap, int status, const char *type, size_t body_len,
                        const char *allow, const char *extra, int close_after);

#endif
