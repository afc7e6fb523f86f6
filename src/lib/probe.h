/*
 * probe.h - how long the servers' tick can be at most, learned from the
 * session timeout that a throwaway session is granted.
 *
 * A ZooKeeper server grants no session timeout below its minSessionTimeout,
 * by default 2 x tickTime: a grant of g ms bounds the tick by g/2. The lease
 * already assumes this of the main session's grant (docs/design.md, (Z));
 * a session that asks for less than the main one (a quarter of it) is
 * granted less wherever the servers allow it, and the bound is tighter:
 * with the default minSessionTimeout it is the tick itself, or a quarter
 * of the asked timeout / 2, whichever is longer. The probe opens one such
 * session next to the main one, reads the grant from the handshake and
 * closes it: a session created and closed on the servers, nothing else.
 *
 * Loop thread only.
 */
#ifndef ZKELECT_PROBE_H
#define ZKELECT_PROBE_H

struct ev_loop;
struct probe;
typedef struct zkclient zkclient;   /* zkclient.h */

/* granted_ms: the timeout the servers granted the probe's session, or 0
 * when nothing was learned (no handshake within the deadline, a refusal,
 * or the probe was freed first). */
typedef void probe_done_fn(void *ud, int granted_ms);

/* Connects to `hosts` (a ZooKeeper connect string) asking for a session
 * timeout of ask_ms; done() is called exactly once: from the loop after
 * the handshake, at deadline_ms at the latest, or from probe_free() (never
 * from probe_start). like: the session whose TLS it uses
 * (zkclient_copy_tls). NULL (nothing will be called) when out of memory or
 * when the client library refuses the hosts. */
struct probe *probe_start(struct ev_loop *loop, const char *hosts, const zkclient *like,
                          int ask_ms, int deadline_ms, probe_done_fn *done, void *ud);
/* Closes its session if it is still open and frees; calls done() first if
 * it was not called yet. Any time except from inside done(). NULL is a
 * no-op. */
void probe_free(struct probe *p);

#endif
