/*
 * log.h - the binary's log sink: one line per record, text or JSON lines.
 * Library code never writes here directly; main.c connects the library's
 * log callback and events to it. Not thread-safe (one loop thread).
 *
 * It never blocks: a sink that does not take a line at once (a full pipe,
 * journald under pressure, a stopped `| logger`) gets it later, from a
 * bounded buffer (256 KiB), or, when that is full, not at all: the line is
 * counted (log_dropped, the metric zkelect_log_dropped_lines_total) and one
 * "log_dropped" line says how many once the sink drains.
 */
#ifndef ZKELECT_LOG_H
#define ZKELECT_LOG_H

#include <stdint.h>
#include <stdio.h>
#include <ev.h>
#include "zkelect.h"

enum log_format { LOG_TEXT, LOG_JSON };

#define LOG_PENDING_MAX ((size_t)256 * 1024)    /* bytes of lines waiting for the sink */
/* LF_BYTES: i bytes at s, any bytes (NUL included), written like a string */
enum logf_type { LF_STR, LF_INT, LF_HEX, LF_BYTES };

struct logf {
    const char *key;
    enum logf_type type;
    const char *s;     /* LF_STR, LF_BYTES; NULL: field omitted */
    int64_t i;         /* LF_INT, LF_HEX; LF_BYTES: the length */
};

void log_setup(FILE *out, enum log_format fmt, enum zke_log_level min, const char *id);
/* The loop that writes waiting lines when the sink can take them (an
 * ev_io, active only while lines wait); NULL: none (lines wait for the
 * next log call). */
void log_attach_loop(struct ev_loop *loop);
/* In a child that goes on without exec (the fail-stop watcher), after it
 * closed the descriptors it inherited: a sink of its own on the same
 * stderr, nothing of the parent's waiting lines or loop. */
void log_forked(void);
/* After the loop: writes what waits, waiting at most ms for the sink. */
void log_drain(int ms);
/* Bytes of lines waiting for the sink (at most LOG_PENDING_MAX). */
size_t log_pending(void);
int log_parse_level(const char *s, enum zke_log_level *out);
int log_enabled(enum zke_log_level lvl);
/* The least level written (log_setup's min). */
enum zke_log_level log_min_level(void);
/* What log_setup was given (for a program that logs like us: the keeper). */
enum log_format log_get_format(void);
const char *log_get_id(void);
void log_line(enum zke_log_level lvl, const char *event, const struct logf *f, int n);
void log_msg(enum zke_log_level lvl, const char *event, const char *msg);
void log_event(const struct zke_event *ev);
/* A policy script's log line (the script runtime's log callback): event
 * with the hook and the message as fields. ud is unused. */
void log_script(void *ud, enum zke_log_level lvl, const char *event, const char *hook,
                const char *msg);
/* Lines that could not be written (disk full, a closed pipe, a sink that
 * stayed full: the agent goes on without them); once writing works again
 * one "log_dropped" line says how many were lost. */
uint64_t log_dropped(void);

#endif
