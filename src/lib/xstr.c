/*
 * xstr.c - see xstr.h.
 */
#include "xstr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *xstrdup(const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p != NULL)
        memcpy(p, s, n);
    return p;
}

char *xvprintf(const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf != NULL)
        vsnprintf(buf, (size_t)n + 1, fmt, again);
    va_end(again);
    return buf;
}

char *xprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *buf = xvprintf(fmt, ap);
    va_end(ap);
    return buf;
}

size_t xstr_size(const char *s)
{
    return s != NULL ? strlen(s) + 1 : 0;
}

const char *xstr_put(char **p, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*p, s, n);
    const char *r = *p;
    *p += n;
    return r;
}
