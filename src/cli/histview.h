/*
 * histview.h - a reading of the history of terms (zkelect.h, struct
 * zke_history) as one JSON object (zkelect history --json, the agent's and
 * the audit's /history) or as text (zkelect history), with the audit's
 * findings (zke_history_judge). Every string in it is another client's
 * bytes: made valid UTF-8 (JSON) or printable (text). Pure but for the
 * FILE written; any thread.
 */
#ifndef ZKELECT_HISTVIEW_H
#define ZKELECT_HISTVIEW_H

#include <stdint.h>
#include <stdio.h>

#include "zkelect.h"

/* The findings that histview shows at most (the count is always whole). */
#define HISTVIEW_FINDINGS_MAX 64

/* The JSON document (malloc'd, NUL-terminated), or NULL when out of memory.
 * skew_ms: the judgement's (zke_history_judge). */
char *histview_json(const struct zke_history *h, const char *path, int64_t skew_ms);
/* The table and the findings on out. */
void histview_text(FILE *out, const struct zke_history *h, const char *path, int64_t skew_ms);
/* One finding as a sentence, into buf. */
void histview_finding(const struct zke_finding *f, char *buf, size_t len);

#endif
