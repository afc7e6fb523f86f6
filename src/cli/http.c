/*
 * http.c - HTTP/1.1 request heads in, response heads out (see http.h).
 *
 * The parser is strict where leniency would let two readers of the same
 * bytes disagree (RFC 9112): no whitespace before a header's colon, no
 * obsolete line folding, no control bytes, one Host for HTTP/1.1, a
 * Content-Length of digits only. Lines end in LF with an optional CR before
 * it; blank lines before the request line are skipped.
 */
#include "http.h"

#include <stdio.h>
#include <string.h>

static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* s[0..n) equals the lower-case word w, ignoring case. */
static int word_is(const char *s, size_t n, const char *w)
{
    size_t i = 0;
    for (; i < n && w[i] != '\0'; i++)
        if (lower((unsigned char)s[i]) != w[i])
            return 0;
    return i == n && w[i] == '\0';
}

/* The line starting at buf[at]: its length without CR/LF in *n, and the
 * offset just past its LF; 0 if there is no LF yet. */
static size_t line_at(const char *buf, size_t len, size_t at, size_t *n)
{
    const char *nl = memchr(buf + at, '\n', len - at);
    if (nl == NULL)
        return 0;
    size_t e = (size_t)(nl - buf);
    *n = e - at;
    if (*n > 0 && buf[e - 1] == '\r')
        (*n)--;
    return e + 1;
}

/* A line's bytes: no control byte but HT (tab_ok), no DEL; bytes >= 0x80
 * (obs-text) are allowed. */
static int clean(const char *s, size_t n, int tab_ok)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && !(tab_ok && c == '\t')) || c == 0x7f)
            return 0;
    }
    return 1;
}

/* The length of an absolute-form target's "http://" or "https://", else 0. */
static size_t scheme_len(const char *t, size_t tlen)
{
    static const char *const schemes[] = { "http://", "https://" };
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i]);
        if (tlen >= n && word_is(t, n, schemes[i]))
            return n;
    }
    return 0;
}

static int request_line(const char *s, size_t n, struct http_req *r, int *minor)
{
    if (!clean(s, n, 0))
        return 400;
    const char *sp1 = memchr(s, ' ', n);
    if (sp1 == NULL)
        return 400;
    const char *sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s));
    if (sp2 == NULL || memchr(sp2 + 1, ' ', n - (size_t)(sp2 + 1 - s)) != NULL)
        return 400;
    size_t mlen = (size_t)(sp1 - s);
    const char *t = sp1 + 1, *v = sp2 + 1;
    size_t tlen = (size_t)(sp2 - t), vlen = n - (size_t)(v - s);
    if (mlen == 0 || tlen == 0)
        return 400;
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)s[i]))
            return 400;
    if (mlen >= HTTP_METHOD_MAX)
        return 501;
    memcpy(r->method, s, mlen);         /* also for an error: a HEAD gets no body */
    r->method[mlen] = '\0';
    if (vlen != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9')
        return 400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return 505;
    *minor = v[7] - '0';

    /* origin-form "/path?query", asterisk-form "*", absolute-form
     * "http://host/path": the path is what the handler sees */
    const char *p = t, *end = t + tlen;
    if (tlen == 1 && *t == '*') {
        r->path[0] = '*';
        r->path[1] = '\0';
        return 0;
    }
    if (*t != '/') {
        size_t skip = scheme_len(t, tlen);
        if (skip == 0)
            return 400;
        /* the authority ends at the first '/', '?' or '#' */
        p = t + skip;
        while (p < end && *p != '/' && *p != '?' && *p != '#')
            p++;
        if (p < end && *p != '/')
            p = end;                    /* "http://host?q": the path is "/" */
    }
    size_t plen = 0;
    while (p + plen < end && p[plen] != '?' && p[plen] != '#')
        plen++;
    if (plen + 2 > HTTP_PATH_MAX)
        return 414;
    if (plen == 0) {
        r->path[0] = '/';
        r->path[1] = '\0';
    } else {
        memcpy(r->path, p, plen);
        r->path[plen] = '\0';
    }
    return 0;
}

struct head_state {
    int hosts;
    int have_len;
    unsigned long long len;
    int conn_close, conn_keep;
};

/* One header line. 0, or the status that refuses the request. */
static int header_line(const char *s, size_t n, struct http_req *r, struct head_state *st)
{
    if (s[0] == ' ' || s[0] == '\t')
        return 400;                     /* obsolete line folding */
    const char *colon = memchr(s, ':', n);
    if (colon == NULL || colon == s)
        return 400;
    size_t nlen = (size_t)(colon - s);
    for (size_t i = 0; i < nlen; i++)
        if (!is_tchar((unsigned char)s[i]))
            return 400;                 /* includes whitespace before the colon */
    const char *v = colon + 1, *e = s + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t vlen = (size_t)(e - v);
    if (!clean(v, vlen, 1))
        return 400;
    if (word_is(s, nlen, "host")) {
        st->hosts++;
    } else if (word_is(s, nlen, "content-length")) {
        unsigned long long x = 0;
        if (v == e)
            return 400;                 /* empty */
        for (size_t i = 0; i < vlen; i++) {
            if (v[i] < '0' || v[i] > '9')
                return 400;
            if (x > 1000000000000000ULL)
                return 413;
            x = x * 10 + (unsigned)(v[i] - '0');
        }
        if (st->have_len && st->len != x)
            return 400;
        st->have_len = 1;
        st->len = x;
        if (x > 0)
            r->has_body = 1;
    } else if (word_is(s, nlen, "transfer-encoding")) {
        r->has_body = 1;
    } else if (word_is(s, nlen, "connection")) {
        const char *w = v;
        while (w < e) {
            const char *c = memchr(w, ',', (size_t)(e - w));
            const char *we = c != NULL ? c : e;
            const char *a = w, *b = we;
            while (a < b && (*a == ' ' || *a == '\t'))
                a++;
            while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            if (word_is(a, (size_t)(b - a), "close"))
                st->conn_close = 1;
            else if (word_is(a, (size_t)(b - a), "keep-alive"))
                st->conn_keep = 1;
            w = c != NULL ? c + 1 : e;
        }
    }
    return 0;
}

size_t http_parse_head(const char *buf, size_t len, struct http_req *r)
{
    r->status = 0;
    r->method[0] = '\0';
    r->path[0] = '\0';
    r->keep_alive = 0;
    r->has_body = 0;

    size_t at = 0, n = 0;
    /* blank lines before the request line are skipped (RFC 9112 2.2) */
    for (;;) {
        size_t next = line_at(buf, len, at, &n);
        if (next == 0 || n != 0)
            break;
        at = next;
    }
    /* find the blank line that ends the head */
    size_t start = at, pos = at, end = 0;
    for (;;) {
        size_t next = line_at(buf, len, pos, &n);
        if (next == 0)
            break;
        if (n == 0 && pos > start) {
            end = next;
            break;
        }
        pos = next;
    }
    if (end == 0 || end > HTTP_HEAD_MAX) {
        if (len < HTTP_HEAD_MAX && end == 0)
            return 0;
        r->status = 431;
        return end != 0 ? end : len;
    }

    /* every line's CR sits right before its LF: a bare CR elsewhere is
     * refused, as readers that took it as a line end would differ */
    for (size_t i = start; i < end; i++)
        if (buf[i] == '\r' && buf[i + 1] != '\n')
            return r->status = 400, end;

    int minor = 1;
    size_t next = line_at(buf, end, start, &n);
    r->status = request_line(buf + start, n, r, &minor);
    if (r->status != 0)
        return end;
    struct head_state st = { 0, 0, 0, 0, 0 };
    for (pos = next; (next = line_at(buf, end, pos, &n)) != 0 && n != 0; pos = next) {
        r->status = header_line(buf + pos, n, r, &st);
        if (r->status != 0)
            return end;
    }
    if ((minor == 1 && st.hosts != 1) || st.hosts > 1)
        return r->status = 400, end;
    r->keep_alive = !st.conn_close && (minor == 1 || st.conn_keep) && !r->has_body;
    return end;
}

const char *http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

size_t http_format_head(char *out, size_t cap, int status, const char *type, size_t body_len,
                        const char *allow, const char *extra, int close_after)
{
    int n = snprintf(out, cap,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Cache-Control: no-store\r\n"
                     "%s%s%s"
                     "%s"
                     "%s"
                     "\r\n",
                     status, http_reason(status), type, body_len,
                     allow != NULL ? "Allow: " : "", allow != NULL ? allow : "",
                     allow != NULL ? "\r\n" : "", extra != NULL ? extra : "",
                     close_after ? "Connection: close\r\n" : "");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
