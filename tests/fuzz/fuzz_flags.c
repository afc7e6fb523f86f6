/*
 * fuzz_flags - the command line's value parsers (src/flags.c): whole
 * numbers and milliseconds with their ranges, --drift, --auth's visible
 * part, an auth file's contents, and "scheme:credentials". The first byte
 * picks the parser, the rest is the value.
 */
#include <limits.h>

#include "flags.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct { int min, max; const char *unit; } ranges[] = {
        { 1, 600000, "ms" }, { 0, INT_MAX, "ms" }, { 1, 3600000, "ms" }, { 1, 86400000, "ms" },
        { 10, 86400000, "ms" }, { 1, 1000, "" }, { INT_MIN, INT_MAX, "" },
    };
    if (size < 1 || size > 8192)
        return 0;
    unsigned which = data[0];
    size_t n = size - 1;
    char *v = malloc(n + 2);          /* + 1: flag_auth_text's NUL */
    if (v == NULL)
        return 0;
    memcpy(v, data + 1, n);
    v[n] = '\0';
    char err[4096] = "";
    switch (which % 5) {
    case 0: {
        int out = 12345;
        unsigned r = (which / 5) % (sizeof ranges / sizeof ranges[0]);
        if (flag_int("--x", v, ranges[r].min, ranges[r].max, ranges[r].unit, &out, err,
                     sizeof err) == 0) {
            FZ_ASSERT(out >= ranges[r].min && out <= ranges[r].max);
            char back[32];
            snprintf(back, sizeof back, "%d", out);
            FZ_ASSERT(strtol(v, NULL, 10) == out);
        } else {
            FZ_ASSERT(out == 12345 && err[0] != '\0' && strncmp(err, "--x", 3) == 0);
        }
        break;
    }
    case 1: {
        double d = -1;
        if (flag_fraction("--drift", v, &d, err, sizeof err) == 0)
            FZ_ASSERT(d > 0 && d < 0.5);
        else
            FZ_ASSERT(d == -1 && err[0] != '\0');
        break;
    }
    case 2: {
        size_t k = flag_auth_visible(v);
        size_t len = strlen(v);
        FZ_ASSERT(k <= len);
        if (k > 0)
            FZ_ASSERT(v[k - 1] == ':');
        /* what stays visible is the scheme, and for digest the user: never
         * a part after the second ':' */
        if (k > 0 && strncmp(v, "digest:", 7) == 0) {
            int colons = 0;
            for (size_t i = 0; i < k; i++)
                colons += v[i] == ':';
            FZ_ASSERT(colons <= 2);
        } else if (k > 0) {
            FZ_ASSERT(memchr(v, ':', k - 1) == NULL);
        }
        break;
    }
    case 3: {
        size_t m = n;
        if (flag_auth_text(v, &m, err, sizeof err) == 0) {
            FZ_ASSERT(m > 0 && m <= n && strlen(v) == m);
            FZ_ASSERT(v[m - 1] != '\n' && v[m - 1] != '\r');
        } else {
            FZ_ASSERT(err[0] != '\0');
        }
        break;
    }
    default: {
        const char *scheme = NULL, *cred = NULL;
        if (flag_auth_split(v, &scheme, &cred, err, sizeof err) == 0) {
            char who[200];
            FZ_ASSERT(scheme == v && cred > scheme && *cred != '\0');
            flag_auth_who(scheme, cred, who, sizeof who);
            /* the secret (after the user) never shows */
            const char *pw = strchr(cred, ':');
            FZ_ASSERT(strcmp(scheme, "digest") != 0 || pw == NULL || strlen(pw + 1) < 4 ||
                      strstr(who + 7, pw + 1) == NULL || strstr(cred, pw + 1) < pw);
        } else {
            FZ_ASSERT(err[0] != '\0');
        }
        break;
    }
    }
    free(v);
    return 0;
}
