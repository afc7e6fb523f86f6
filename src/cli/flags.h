/*
 * flags.h - the command line's value parsers (src/main.c), apart from
 * main.c so that they can be tested and fuzzed (tests/fuzz/fuzz_flags.c)
 * without exiting: each returns 0, or -1 with a one-line reason naming the
 * flag and the value in err (the caller prints it and exits). Values longer
 * than about 3 KiB are cut in the message.
 *
 * Pure functions (no I/O, no globals); any thread. Strings are borrowed for
 * the call; nothing is allocated.
 */
#ifndef ZKELECT_FLAGS_H
#define ZKELECT_FLAGS_H

#include <stddef.h>

/* A whole number from min to max; unit ("ms", or "") names it in the reason. */
int flag_int(const char *flag, const char *v, int min, int max, const char *unit, int *out,
             char *err, size_t errlen);
/* flag_int with unit "ms". */
int flag_ms(const char *flag, const char *v, int min, int max, int *out, char *err, size_t errlen);
/* A fraction above 0 and below 0.5 (--drift). */
int flag_fraction(const char *flag, const char *v, double *out, char *err, size_t errlen);

/* --auth's value: how many leading bytes of arg stay visible in ps once
 * the rest is blanked: "scheme:" (digest: "digest:user:"), or 0 when arg
 * has no ':' (all of it is blanked). */
size_t flag_auth_visible(const char *arg);
/* The contents of an auth file (buf[0..*n), buf has room for *n + 1 bytes):
 * trailing CR/LF dropped, NUL-terminated, *n updated. -1 with a reason
 * (without the file's name or contents) for a NUL byte or nothing left. */
int flag_auth_text(char *buf, size_t *n, char *err, size_t errlen);
/* Splits "scheme:credentials" in place (the first ':' becomes NUL) and
 * checks both (zke_check_auth). *scheme and *cred point into auth. The
 * reason never contains the credentials. */
int flag_auth_split(char *auth, const char **scheme, const char **cred, char *err, size_t errlen);
/* Names the credentials without the secret: "digest:USER" (user cut at 100
 * bytes) or "scheme 'S'", into who (always NUL-terminated when wholen > 0). */
void flag_auth_who(const char *scheme, const char *cred, char *who, size_t wholen);

#endif
