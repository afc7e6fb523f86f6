/*
 * xstr.h - the library's string helpers: copies, allocated messages, and
 * strings packed behind a struct (one allocation for an event and its
 * strings). Any thread; no state.
 */
#ifndef ZKELECT_XSTR_H
#define ZKELECT_XSTR_H

#include <stdarg.h>
#include <stddef.h>

/* A malloc'd copy of s, which the caller frees; NULL when s is NULL or
 * out of memory (a caller that passed a non-NULL s checks for it). */
char *xstrdup(const char *s);

/* The formatted message, malloc'd (the caller frees it), or NULL when out
 * of memory: no message is cut by a buffer's size. */
char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

/* Packing: xstr_size(s) is the room s takes (0 for NULL, else its length
 * and the NUL); xstr_put(&p, s) copies s to *p, moves *p past it and
 * returns where it now is (NULL for NULL). The caller sizes the room as
 * the sum of xstr_size of what it puts. */
size_t xstr_size(const char *s);
const char *xstr_put(char **p, const char *s);

#endif
