/*
 * fuzz_utf8 - utf8_clean (ids, paths and leader data in /status and
 * /metrics) and utf8_printable (`zkelect status`, `watch` and text logs):
 * the output is valid UTF-8, within its bound, and valid input that fits is
 * copied unchanged (printable: unless it has controls or backslashes); the
 * printable one has no control character at all. Input: 2 bytes of max,
 * then the string.
 */
#include "fuzz.h"
#include "utf8.h"

/* An independent check (RFC 3629): 1 if s is valid UTF-8. */
static int valid(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s;
        int len;
        unsigned lo = 0x80, hi = 0xbf;
        if (c < 0x80) { s++; continue; }
        else if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0;
            if (c == 0xed) hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else
            return 0;
        if (s[1] < lo || s[1] > hi)
            return 0;
        for (int k = 2; k < len; k++)
            if ((s[k] & 0xc0) != 0x80)
                return 0;
        s += len;
    }
    return 1;
}

/* 1 if the valid UTF-8 s has a C1 control (U+0080-U+009F: C2 80-9F). */
static int has_c1(const unsigned char *s)
{
    for (; *s; s++)
        if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] < 0xa0)
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fz f = { data, size };
    size_t max = fz_byte(&f) << 8;
    max |= fz_byte(&f);
    max %= 4100;
    char *in = malloc(f.n + 1);
    if (in == NULL)
        return 0;
    memcpy(in, f.p, f.n);
    in[f.n] = '\0';
    char *out = utf8_clean(in, max);
    if (out != NULL) {
        size_t n = strlen(in), o = strlen(out);
        FZ_ASSERT(valid((const unsigned char *)out));
        FZ_ASSERT(o <= max + 6);
        FZ_ASSERT(o <= 3 * n + 3);
        if (valid((const unsigned char *)in) && n <= max)
            FZ_ASSERT(strcmp(in, out) == 0);
        free(out);
    }
    out = utf8_printable(in, max);
    if (out != NULL) {
        size_t n = strlen(in), o = strlen(out);
        const unsigned char *u = (const unsigned char *)out;
        FZ_ASSERT(valid(u));
        FZ_ASSERT(o <= max + 20);
        FZ_ASSERT(o <= 4 * n + 3);
        for (size_t i = 0; i < o; i++) {
            FZ_ASSERT(u[i] >= 0x20 && u[i] != 0x7f);
            FZ_ASSERT(!(u[i] == 0xc2 && u[i + 1] < 0xa0));     /* no C1 */
        }
        if (valid((const unsigned char *)in) && n <= max && !strchr(in, '\\') &&
            !fz_has_ctl(in) && !has_c1((const unsigned char *)in))
            FZ_ASSERT(strcmp(in, out) == 0);
        free(out);
    }
    free(in);
    return 0;
}
