/*
 * credentials.h - the ZooKeeper credentials of a command: from --auth
 * (options.c keeps a copy and blanks argv) or from --auth-file /
 * ZKELECT_AUTH_FILE, checked, handed to the library and wiped.
 *
 * Called from the commands before their loop runs; these exit on errors
 * (exits.h), since nothing is running yet.
 */
#ifndef ZKELECT_CREDENTIALS_H
#define ZKELECT_CREDENTIALS_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* --zk-tls-ca/-cert/-key (run, check, status, watch, history, audit): NULL when none is
 * given, else buf filled (strings borrowed from o) and checked with
 * zke_check_tls (*expiry: the certificate's end, Unix seconds); exits 78
 * with the reason when they are not usable, or in a build without TLS. */
const struct zke_tls *resolve_tls_of(const struct opts *o, struct zke_tls *buf, int64_t *expiry);

/* The credentials from --auth or --auth-file (ZKELECT_AUTH_FILE), checked;
 * *scheme and *cred point into o->auth (NULL: none). who names them without
 * the secret ("none" without). Exits 64 for --auth with --auth-file or a
 * malformed --auth, 66/77/78 for an unreadable, unreadable-by-us or
 * malformed file. Makes the process non-dumpable while it holds them. */
void resolve_auth(struct opts *o, const char **scheme, const char **cred, char *who,
                  size_t wholen);
/* Wipes and frees our copy once the library has its own. */
void forget_auth(struct opts *o, const char *scheme, const char *cred);

/* --zk and --path given and well formed, else exits 64 with the reason
 * (every command that names an election). */
void require_election(const struct opts *o);

/* A reading command's (status, watch, history, audit) connection: what
 * resolve_reader fills and forget_reader wipes. */
struct reader_creds {
    const char *scheme, *cred;          /* into o->auth (NULL: none) */
    struct zke_tls tls;                 /* s->tls points here (or NULL) */
    int64_t tls_expiry;
    char who[160];
};
/* After require_election: *s zeroed and given the election, the credentials
 * (resolve_auth) and the TLS files (resolve_tls_of), with the exits those
 * say; the caller sets the timeouts. *s borrows from o and c: call
 * forget_reader once the library has taken its copies (its _new). */
void resolve_reader(struct opts *o, struct zke_observer_settings *s, struct reader_creds *c);
void forget_reader(struct opts *o, struct reader_creds *c);

#endif
