/*
 * utf8.h - making outside strings (ids, paths, leader data of foreign
 * nodes: any bytes) fit for JSON strings and Prometheus labels.
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

#endif
