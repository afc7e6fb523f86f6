/*
 * srvask.h - asks every server of a connect string what srvconf.h reads:
 * `conf` and `srvr` on its client port, over plain non-blocking TCP on the
 * loop (not a ZooKeeper session: the four-letter words are answered on a
 * fresh connection, which the server closes after the reply).
 *
 * The table of servers lives as long as the srvask: a round asks the
 * servers not reached yet (the first round: all), each with a deadline; a
 * server that answered is not asked again. The host names are resolved
 * once, at srvask_new, with getaddrinfo (blocking, as the ZooKeeper client
 * library resolves them at zookeeper_init); each address is a server.
 *
 * Loop thread only.
 */
#ifndef ZKELECT_SRVASK_H
#define ZKELECT_SRVASK_H

#include "srvconf.h"

struct ev_loop;
struct srvask;

/* A round is over: every server asked answered, failed, or the deadline
 * came. Called from the loop (never from srvask_new or srvask_round). */
typedef void srvask_done_fn(void *ud);

/* The servers of `hosts` ("host:port,...[/chroot]"; a host without a port
 * is on 2181), at most SRVASK_MAX. NULL when out of memory or when no
 * server could be read from hosts (none resolves). */
#define SRVASK_MAX 32
struct srvask *srvask_new(struct ev_loop *loop, const char *hosts, srvask_done_fn *done, void *ud);
/* Starts a round over the servers not reached yet (SRV_UNASKED,
 * SRV_UNREACHED), with deadline_ms for all of it. 1: started (done()
 * follows), 0: nothing left to ask or a round is under way. */
int srvask_round(struct srvask *q, int deadline_ms);
/* A round is under way. */
int srvask_busy(const struct srvask *q);
/* Ends a round under way without calling done(); the servers not answered
 * stay as they were. */
void srvask_cancel(struct srvask *q);
/* The table (borrowed, valid until the next round or srvask_free). */
const struct srv_info *srvask_servers(const struct srvask *q, int *n);
/* Closes everything; done() is not called. NULL is a no-op. */
void srvask_free(struct srvask *q);

#endif
