/*
 * fuzz_utf8 - utf8_clean (ids, paths and leader data in /status and
 * /metrics): the output is valid UTF-8, within its bound, and valid input
 * that fits is copied unchanged. Input: 2 bytes of max, then the string.
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
    free(in);
    return 0;
}
