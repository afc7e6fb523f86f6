/*
 * fuzz_http_head - request heads for the status endpoint (http_parse_head):
 * any bytes from any client. The whole input is one connection's buffer,
 * parsed head after head as the server does (pipelining).
 */
#include "fuzz.h"
#include "http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size < HTTP_HEAD_MAX ? size : HTTP_HEAD_MAX;
    char *buf = malloc(n + 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, n);
    size_t at = 0;
    for (int i = 0; i < 64 && at < n; i++) {
        struct http_req r;
        size_t used = http_parse_head(buf + at, n - at, &r);
        if (used == 0) {
            FZ_ASSERT(n - at < HTTP_HEAD_MAX);
            break;
        }
        FZ_ASSERT(used <= n - at);
        FZ_ASSERT(r.status == 0 || (r.status >= 400 && r.status <= 505));
        if (r.status == 0) {
            /* a request to serve: a token method and a path the handler can
             * compare, with no byte a log or a terminal would misread */
            FZ_ASSERT(r.method[0] != '\0' && strlen(r.method) < HTTP_METHOD_MAX);
            FZ_ASSERT(r.path[0] == '/' || strcmp(r.path, "*") == 0);
            FZ_ASSERT(strlen(r.path) < HTTP_PATH_MAX && !fz_has_ctl(r.path));
            FZ_ASSERT(strchr(r.path, ' ') == NULL && strchr(r.path, '?') == NULL);
            FZ_ASSERT(!(r.keep_alive && r.has_body));
        } else {
            FZ_ASSERT(!r.keep_alive);
            break;                  /* the server answers and closes */
        }
        at += used;
    }
    char head[1024];
    size_t hl = http_format_head(head, sizeof head, 200, "text/plain", size, "GET, HEAD, OPTIONS",
                                 "X-Zkelect-Role: follower\r\nX-Zkelect-Epoch: 9223372036854775807\r\n",
                                 1);
    FZ_ASSERT(hl > 0 && hl < sizeof head && memcmp(head + hl - 4, "\r\n\r\n", 4) == 0);
    free(buf);
    return 0;
}
