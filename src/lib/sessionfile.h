/*
 * sessionfile.h - the session file (--session-file): the id of the
 * session an agent holds, for tooling ("0x<id>\n"), or with the password
 * too ("0x<id> <password hex>\n") for tooling that must resume or expire
 * it (whoever holds both can close it). The conn writes it at each new
 * session and reads it once when it is made (the session a restarted
 * agent had before).
 *
 * No session, no loop: the caller passes the credentials (zkclient.h's
 * zkclient_credentials). Any thread; the caller owns every buffer.
 */
#ifndef ZKELECT_SESSIONFILE_H
#define ZKELECT_SESSIONFILE_H

#include <stdint.h>

/* Writes the file: always a new mode-0600 inode created here (a unique
 * temporary name, O_EXCL) renamed over file, never written through a
 * link; the password only when `password`. 0, or -1 (errno from the failed
 * call). */
int sessionfile_write(const char *file, uint64_t id, const unsigned char passwd[16], int password);
/* The session id at the start of the file, written by an earlier run; 0
 * when there is none (no file, NULL) or it is not one. */
uint64_t sessionfile_read(const char *file);

#endif
