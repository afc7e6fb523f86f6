/* utf8.c - see utf8.h. */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4 : 0;
    int ok = len > 0 && len <= n && !(len == 2 && c < 0xc2) && !(len == 4 && c > 0xf4);
    for (size_t k = 1; ok && k < len; k++)
        ok = (p[k] & 0xc0) == 0x80;
    if (ok && len == 3)         /* no overlong forms, no surrogates */
        ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
    if (ok && len == 4)
        ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
    return ok ? len : 0;
}

/* The copy both functions make: valid UTF-8 kept, cut at max bytes with
 * "..."; an invalid byte becomes U+FFFD (clean) or \xNN (printable), which
 * also escapes control characters and backslashes. */
static char *rewrite(const char *v, size_t max, int printable)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(v), o = 0;
    char *out = malloc((n < max ? n : max) * 4 + 16);
    const unsigned char *p = (const unsigned char *)v;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n;) {
        if (o >= max) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        size_t len = utf8_seq(p + i, n - i);
        int ctl = printable && (len == 1 ? p[i] < 0x20 || p[i] == 0x7f
                                : len == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0);  /* C1 */
        if (printable && len == 1 && p[i] == '\\') {
            out[o++] = '\\';
            out[o++] = '\\';
            i++;
        } else if (len > 0 && !ctl) {
            memcpy(out + o, p + i, len);
            o += len;
            i += len;
        } else if (!printable) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            /* an invalid byte, or every byte of a control character */
            for (size_t k = 0; k < (len > 0 ? len : 1); k++, i++) {
                out[o++] = '\\';
                out[o++] = 'x';
                out[o++] = hex[p[i] >> 4];
                out[o++] = hex[p[i] & 15];
            }
        }
    }
    out[o] = '\0';
    return out;
}

char *utf8_clean(const char *v, size_t max)
{
    return rewrite(v, max, 0);
}

char *utf8_printable(const char *v, size_t max)
{
    return rewrite(v, max, 1);
}
