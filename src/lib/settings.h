/*
 * settings.h - the checks of a host's settings (struct zke_settings,
 * struct zke_conn_settings) and the lease plan made from them. The public
 * ones (zke_check_path, _id, _hosts, _auth, zke_lease_check, zke_acl_name)
 * are declared in zkelect.h; these are the library's own. Pure functions:
 * any thread, no state; err gets one line (no control characters).
 */
#ifndef ZKELECT_SETTINGS_H
#define ZKELECT_SETTINGS_H

#include <stddef.h>

#include "zkelect.h"

#define SETTINGS_MAX_SESSION_TIMEOUT_MS 600000
#define SETTINGS_MAX_DATA ((size_t)512 * 1024)  /* a candidate's data (bytes) */
#define SETTINGS_MAX_PATH 1024                  /* an election path (bytes) */
#define SETTINGS_MAX_ID 128                     /* a candidate id (bytes) */
/* Holds any prefix of a valid election path, its NUL included. */
#define SETTINGS_PATH_BUF (SETTINGS_MAX_PATH + 1)

/* Any of the values zke_lease_check can blame set explicitly. */
int settings_lease_given(const struct zke_settings *s);
/* zke_lease_check with the tick a session pairs its renewals with
 * (zkclient_pair_tick_ms: the longest its agents state, or learned from the
 * servers, probe.h), which replaces the settings' (0: the settings', else
 * half of T). */
int settings_lease_plan(const struct zke_settings *s, int T, int tick_ms,
                        struct zke_lease_plan *out, char *err, size_t errlen);
/* Any of the connection members of s set (an agent on a shared connection
 * must leave them zero). */
int settings_conn_given(const struct zke_settings *s);
/* The connection members of s, as a private connection's settings; the
 * strings are s's (borrowed). */
void settings_conn_of(const struct zke_settings *s, struct zke_conn_settings *out);
/* The connection settings: hosts, credentials, ACL, session timeout.
 * 0, or -1 with the reason in err. */
int settings_check_conn(const struct zke_conn_settings *s, char *err, size_t errlen);
/* The candidate's election path, id and data (none NULL). 0, or -1 with the
 * reason in err. */
int settings_check_candidate(const char *path, const char *id, const char *data, char *err,
                             size_t errlen);

#endif
