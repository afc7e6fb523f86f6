/* credentials.c - see credentials.h. */
#define _POSIX_C_SOURCE 200809L
#include "credentials.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exits.h"
#include "flags.h"

/* Reads "scheme:credentials" from FILE (one line; trailing CR/LF dropped).
 * 66: missing or not a regular file; 77: not readable by us; 78: empty or
 * too long. Warns when the group or others may read it. */
static char *read_auth_file(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0)
        die(errno == EACCES || errno == EPERM ? EX_NOPERM : EX_NOINPUT, "auth file %s: %s", file,
            strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        die(EX_NOINPUT, "auth file %s: not a regular file", file);
    }
    if (st.st_size > 4200) {
        close(fd);
        die(EX_CONFIG, "auth file %s: longer than 4200 bytes (expected one line, "
            "SCHEME:CREDENTIALS)", file);
    }
    if (st.st_mode & (S_IRGRP | S_IROTH))
        fprintf(stderr, "zkelect: warning: auth file %s may be read by its %s (mode %04o): "
                "chmod 600 it\n", file, (st.st_mode & S_IROTH) ? "group and others" : "group",
                (unsigned)(st.st_mode & 07777));
    char *buf = calloc(1, 4202);
    size_t n = 0;
    if (buf == NULL)
        die(EX_SOFTWARE, "out of memory");
    for (int i = 0; i < 64 && n < 4201; i++) {
        ssize_t r = read(fd, buf + n, 4201 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            die(e == EACCES ? EX_NOPERM : EX_NOINPUT, "auth file %s: %s", file, strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    char err[2048];
    if (flag_auth_text(buf, &n, err, sizeof err) != 0)
        die(EX_CONFIG, "auth file %s: %s", file, err);
    return buf;
}

/* The credentials from --auth or --auth-file (ZKELECT_AUTH_FILE), checked;
 * *scheme and *cred point into o->auth. "who" names them without the
 * secret. Exits on errors (64 for a flag, 78 for a file's content). */
void resolve_auth(struct opts *o, const char **scheme, const char **cred, char *who,
                         size_t wholen)
{
    char err[2048];
    *scheme = *cred = NULL;
    snprintf(who, wholen, "none");
    if (o->auth_from_argv && o->auth_file_flag)
        die(EX_USAGE, "--auth and --auth-file exclude each other");
    if (o->auth != NULL || (o->auth_file != NULL && o->auth_file[0] != '\0')) {
        /* the credentials stay in memory for the process's life (every new
         * session adds them again): no core dump holds them, and no other
         * process of our uid reads /proc/PID/mem or environ. Programs the
         * policy starts are dumpable again after their exec. */
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    if (!o->auth_from_argv && o->auth_file != NULL && o->auth_file[0] != '\0')
        o->auth = read_auth_file(o->auth_file);
    if (o->auth == NULL)
        return;
    if (flag_auth_split(o->auth, scheme, cred, err, sizeof err) != 0)
        die(o->auth_from_argv ? EX_USAGE : EX_CONFIG, "%s%s: %s",
            o->auth_from_argv ? "--auth" : "auth file ", o->auth_from_argv ? "" : o->auth_file, err);
    flag_auth_who(*scheme, *cred, who, wholen);
}

/* Drops our copy of the credentials once the library has its own. */
void forget_auth(struct opts *o, const char *scheme, const char *cred)
{
    if (o->auth == NULL)
        return;
    options_wipe((char *)cred);
    options_wipe((char *)scheme);
    options_wipe(o->auth);
    free(o->auth);
    o->auth = NULL;
}

const struct zke_tls *resolve_tls_of(const struct opts *o, struct zke_tls *buf, int64_t *expiry)
{
    if (o->tls_ca == NULL && o->tls_cert == NULL && o->tls_key == NULL)
        return NULL;
    char err[512];
    *buf = (struct zke_tls){ .ca = o->tls_ca, .cert = o->tls_cert, .key = o->tls_key };
    if (zke_check_tls(buf, expiry, err, sizeof err) != 0)
        die(EX_CONFIG, "%s", err);
    return buf;
}

void require_election(const struct opts *o)
{
    char err[2048];
    if (o->zk == NULL || o->zk[0] == '\0')
        die(EX_USAGE, "missing --zk HOST:PORT (or ZKELECT_ZK)");
    if (o->path == NULL || o->path[0] == '\0')
        die(EX_USAGE, "missing --path /election/path (or ZKELECT_PATH)");
    if (zke_check_hosts(o->zk, err, sizeof err) != 0 || zke_check_path(o->path, err, sizeof err) != 0)
        die(EX_USAGE, "%s", err);
}

void resolve_reader(struct opts *o, struct zke_observer_settings *s, struct reader_creds *c)
{
    memset(s, 0, sizeof *s);
    memset(c, 0, sizeof *c);
    resolve_auth(o, &c->scheme, &c->cred, c->who, sizeof c->who);
    s->zk = o->zk;
    s->path = o->path;
    s->auth_scheme = c->scheme;
    s->auth_credentials = c->cred;
    s->tls = resolve_tls_of(o, &c->tls, &c->tls_expiry);
}

void forget_reader(struct opts *o, struct reader_creds *c)
{
    forget_auth(o, c->scheme, c->cred);
    c->scheme = c->cred = NULL;
}
