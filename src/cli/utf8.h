/*
 * utf8.h - making outside strings (ids, paths, leader data of foreign
 * nodes: any bytes) fit for JSON strings, Prometheus labels and terminals.
 *
 * Pure function; any thread.
 */
#ifndef ZKELECT_UTF8_H
#define ZKELECT_UTF8_H

#include <stddef.h>

/* A malloc'd copy of the NUL-terminated v (the caller frees it) with every
 * invalid UTF-8 sequence (overlong forms, surrogates, above U+10FFFF, cut
 * sequences) replaced by U+FFFD, cut once max bytes are written ("..."
 * appended): at most max + 6 bytes before the NUL. NULL when out of memory. */
char *utf8_clean(const char *v, size_t max);

/* The length (1-4) of the valid UTF-8 sequence at p[0..n), n >= 1; 0 if
 * the bytes there are not one (overlong, surrogate, above U+10FFFF, cut). */
size_t utf8_seq(const unsigned char *p, size_t n);

/* A malloc'd copy of v for a terminal or a line-oriented reader: valid
 * UTF-8 is kept, but every byte of a control character (C0, DEL, C1) and
 * every invalid byte is written \xNN, and a backslash \\, so no byte can
 * move the cursor, start an escape sequence or a new line. Cut once max
 * bytes are written ("..." appended): at most max + 20 bytes before the
 * NUL. NULL when out of memory. */
char *utf8_printable(const char *v, size_t max);

#endif
