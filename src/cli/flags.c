/* flags.c - see flags.h. */
#define _POSIX_C_SOURCE 200809L
#include "flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zkelect.h"

int flag_int(const char *flag, const char *v, int min, int max, const char *unit, int *out,
             char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || (errno != 0 && errno != ERANGE)) {
        snprintf(err, errlen, "%s '%.3000s': not a whole number%s%s", flag, v, *unit ? " of " : "",
                 unit);
        return -1;
    }
    if (errno == ERANGE) {
        snprintf(err, errlen, "%s '%.3000s': out of range (%d..%d%s%s)", flag, v, min, max,
                 *unit ? " " : "", unit);
        return -1;
    }
    if (n < min || n > max) {
        snprintf(err, errlen, "%s %ld: out of range (%d..%d%s%s)", flag, n, min, max,
                 *unit ? " " : "", unit);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int flag_ms(const char *flag, const char *v, int min, int max, int *out, char *err, size_t errlen)
{
    return flag_int(flag, v, min, max, "ms", out, err, errlen);
}

int flag_fraction(const char *flag, const char *v, double *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno != 0 || !(d > 0 && d < 0.5)) {
        snprintf(err, errlen, "%s '%.3000s': expected a fraction above 0 and below 0.5 (e.g. 0.01)",
                 flag, v);
        return -1;
    }
    *out = d;
    return 0;
}

size_t flag_auth_visible(const char *arg)
{
    const char *keep = strchr(arg, ':');
    if (keep != NULL && strncmp(arg, "digest:", 7) == 0 && strchr(keep + 1, ':') != NULL)
        keep = strchr(keep + 1, ':');
    return keep != NULL ? (size_t)(keep + 1 - arg) : 0;
}

int flag_auth_text(char *buf, size_t *n, char *err, size_t errlen)
{
    size_t k = *n;
    if (memchr(buf, '\0', k) != NULL) {
        snprintf(err, errlen, "contains a NUL byte (expected one line, SCHEME:CREDENTIALS)");
        return -1;
    }
    while (k > 0 && (buf[k - 1] == '\n' || buf[k - 1] == '\r'))
        k--;
    buf[k] = '\0';
    *n = k;
    if (k == 0) {
        snprintf(err, errlen, "empty (expected SCHEME:CREDENTIALS, e.g. digest:user:password)");
        return -1;
    }
    return 0;
}

int flag_auth_split(char *auth, const char **scheme, const char **cred, char *err, size_t errlen)
{
    char *colon = strchr(auth, ':');
    *scheme = *cred = NULL;
    if (colon == NULL) {
        snprintf(err, errlen, "expected SCHEME:CREDENTIALS (e.g. digest:user:password), found no ':'");
        return -1;
    }
    *colon = '\0';
    *scheme = auth;
    *cred = colon + 1;
    return zke_check_auth(*scheme, *cred, err, errlen);
}

void flag_auth_who(const char *scheme, const char *cred, char *who, size_t wholen)
{
    const char *c2 = strchr(cred, ':');
    if (strcmp(scheme, "digest") == 0 && c2 != NULL)
        snprintf(who, wholen, "digest:%.*s", (int)(c2 - cred < 100 ? c2 - cred : 100), cred);
    else
        snprintf(who, wholen, "scheme '%.64s'", scheme);
}
