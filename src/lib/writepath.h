/*
 * writepath.h - where a leader-guarded write (zke_agent_write) may write:
 * the allow-list, pure (no I/O; any thread).
 *
 * Inside the election folder: any depth, but not the folder itself, nor a
 * direct child whose name carries a sequence (el_parse_seq: a candidate's
 * node, or a name the election would order as one), nor a sequential
 * create directly in it (ZooKeeper would append one). Outside it: at or
 * under one of the prefixes (comma-separated absolute paths), but never
 * the election's history (<election>.history and below, history.h: the
 * audit's evidence; a check only is allowed there). Every path
 * is checked as a path: absolute, no empty, '.' or '..' component, no
 * trailing '/', no control character, not under /zookeeper.
 */
#ifndef ZKELECT_WRITEPATH_H
#define ZKELECT_WRITEPATH_H

#include <stddef.h>

/* The longest path a write may name (ZooKeeper's own limit is its packet
 * size; this keeps messages and copies bounded). */
#define WRITEPATH_MAX 1024

/* 0 when path is a valid path, else -1 with a one-line reason in err
 * (what: how to name it, "write path"). */
int writepath_check(const char *path, const char *what, char *err, size_t errlen);
/* 0 when prefixes (NULL or "": none) is a valid comma-separated list of
 * paths, else -1 with the reason. */
int writepath_check_prefixes(const char *prefixes, char *err, size_t errlen);
/* 0 when a write of this kind to path is allowed for an agent of election
 * folder `election` with these prefixes; else -1 with the reason.
 * sequential: a create with ZooKeeper's sequence flag; check: a version
 * check only (allowed on the election folder itself). */
int writepath_allowed(const char *election, const char *prefixes, const char *path,
                      int sequential, int check, char *err, size_t errlen);

#endif
