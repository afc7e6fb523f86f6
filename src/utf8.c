/* utf8.c - see utf8.h. */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

char *utf8_clean(const char *v, size_t max)
{
    size_t n = strlen(v), o = 0;
    char *out = malloc((n < max ? n : max) * 3 + 8);
    const unsigned char *p = (const unsigned char *)v;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n;) {
        if (o >= max) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        unsigned c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4 : 0;
        int ok = len > 0 && i + len <= n && !(len == 2 && c < 0xc2) && !(len == 4 && c > 0xf4);
        for (size_t k = 1; ok && k < len; k++)
            ok = (p[i + k] & 0xc0) == 0x80;
        if (ok && len == 3)     /* no overlong forms, no surrogates */
            ok = !(c == 0xe0 && p[i + 1] < 0xa0) && !(c == 0xed && p[i + 1] >= 0xa0);
        if (ok && len == 4)
            ok = !(c == 0xf0 && p[i + 1] < 0x90) && !(c == 0xf4 && p[i + 1] >= 0x90);
        if (ok) {
            memcpy(out + o, p + i, len);
            o += len;
            i += len;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    return out;
}
