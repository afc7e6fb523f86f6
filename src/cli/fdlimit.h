/*
 * fdlimit.h - the descriptor limit of zkelect run: the soft RLIMIT_NOFILE
 * raised to the hard one at start (the processes it starts get the soft
 * limit it was started with back), and the share of it that connections
 * from outside (the status endpoint's, the control socket's) may take, so
 * that FDLIMIT_RESERVE descriptors stay for the ZooKeeper connection (a
 * new socket at every reconnect), the hooks' processes and pipes, the
 * notify calls, -- CMD and the keeper: a flood of connections can cost
 * answers, never the session.
 *
 * Called from the main thread before the loop runs; fdlimit_raise once.
 */
#ifndef ZKELECT_FDLIMIT_H
#define ZKELECT_FDLIMIT_H

/* Descriptors kept free of outside connections. */
#define FDLIMIT_RESERVE 16

/* Raises the soft limit to the hard one (at most fs.nr_open) and arranges
 * (pthread_atfork) that every child forked from now on starts with the
 * soft limit of before: a program it runs may use select() or close every
 * descriptor up to the limit. Best effort: a refusal leaves the limit. */
void fdlimit_raise(void);

/* The soft limit now (a large value for none). */
long fdlimit_soft(void);

/* How many descriptors are open now (/proc/self/fd), or -1 when unknown. */
int fdlimit_open(void);

/* The shares of the descriptors left over the reserve: at most http of the
 * status endpoint's connections (at most http_max), ctl of the control
 * socket's (at most ctl_max), each at least 1; *ceiling: an accepted
 * descriptor at or above it is closed at once (the reserve is being used
 * by something else). Returns the descriptors that were spare (may be 0
 * or less on a limit too low for the reserve). */
long fdlimit_shares(int http_max, int ctl_max, int *http, int *ctl, long *ceiling);

#endif
