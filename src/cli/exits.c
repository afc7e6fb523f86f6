/* exits.c - see exits.h. */
#define _POSIX_C_SOURCE 200809L
#include "exits.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes "zkelect: error: MSG[SUFFIX]" as one line on stderr: control
 * characters in MSG (from a flag value, a path, a node) are written as \xNN,
 * so the message stays one line whatever the input. */
void error_line(const char *msg, const char *suffix)
{
    size_t n = strlen(msg);
    char *out = malloc(n * 4 + 1);
    size_t o = 0;
    if (out == NULL) {
        fprintf(stderr, "zkelect: error: (out of memory)%s\n", suffix);
        return;
    }
    for (const unsigned char *p = (const unsigned char *)msg; *p != '\0'; p++) {
        if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, 5, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
    fprintf(stderr, "zkelect: error: %s%s\n", out, suffix);     /* one write: stderr is unbuffered */
    free(out);
}

void die(int code, const char *fmt, ...)
{
    char small[2048];
    char *big = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (big = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    error_line(big != NULL ? big : small, code == EX_USAGE ? "; see zkelect --help" : "");
    exit(code);
}

/* The exit code for a reason the library gave (zkelect.h: on_stopped,
 * an observer's on_fatal, a census; NULL: done): the only place reasons become
 * sysexits codes. */
int exit_code_for(const char *reason)
{
    static const struct { const char *reason; int code; } map[] = {
        { "unreachable", EX_UNAVAILABLE }, { "auth", EX_NOPERM }, { "config", EX_CONFIG },
        { "no_election", EX_NO_LEADER },   /* an empty election's folder is removed */ { "internal", EX_SOFTWARE },
        { "stop", EX_OK }, { "free", EX_OK },
        /* zkelect demo: a package to install (ZooKeeper, java); a step that
         * did not happen within its bound on a loaded machine */
        { "not_installed", EX_UNAVAILABLE }, { "timeout", EX_TEMPFAIL },
    };
    if (reason == NULL)
        return EX_OK;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(reason, map[i].reason) == 0)
            return map[i].code;
    return EX_SOFTWARE;
}

int exit_code_for_policy(enum zke_policy_error why)
{
    switch (why) {
    case ZKE_POLICY_NO_FILE: return EX_NOINPUT;
    case ZKE_POLICY_PERMISSION: return EX_NOPERM;
    case ZKE_POLICY_NO_MEMORY: return EX_SOFTWARE;
    default: return EX_CONFIG;
    }
}

int exit_code_for_signal(int sig)
{
    return 128 + sig;
}

char *xprintf(const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf == NULL)
        die(EX_SOFTWARE, "out of memory");
    vsnprintf(buf, (size_t)n + 1, fmt, again);
    va_end(again);
    va_end(ap);
    return buf;
}
