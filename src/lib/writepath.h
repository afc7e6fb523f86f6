/*
 * writepath.h - where a leader-guarded write (zke_agent_write) may write:
 * the allow-list, pure (no I/O; any thread).
 *
 * Anywhere: never at or below a candidate's node of any election (a
 * component with a trailing sequence in zkelect's n_<16 hex>- form or its
 * compat forms, Curator LeaderLatch's [_c_<uuid>-]latch-, kazoo's
 * __lock__; a sequential create's last component counts with the sequence
 * it gets), and never at or below a component ending in ".history" (an
 * election's history, history.h: the audit's evidence; a check only is
 * allowed there): a prefix above the election reaches other elections.
 * Inside the election folder: below its direct children only, never the
 * folder itself (a check is allowed) nor a direct child (a check is
 * allowed where the name carries no sequence): Curator's LeaderLatch
 * (--compat curator) counts every child as a candidate, and the writer
 * cannot know the folder's other members. Outside it: at or under one of
 * the prefixes (comma-separated absolute paths). Every path
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
