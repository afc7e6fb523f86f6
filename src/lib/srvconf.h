/*
 * srvconf.h - what the servers say of their configuration, read and judged
 * (pure: no I/O; srvask.h asks them).
 *
 * Each server of the connect string is asked two four-letter words on its
 * client port: `conf` (ZooKeeperServer.dumpConf: "key=value" lines, among
 * them tickTime, minSessionTimeout and maxSessionTimeout) and `srvr`
 * (StatCommand: a "Mode: " line, the server's state: standalone, leader,
 * follower, observer, read-only). A word not in the server's
 * 4lw.commands.whitelist is answered "<word> is not executed because it is
 * not in the whitelist." and the connection closed. The replies are hints
 * from the network: any bytes parse, and whatever does not say a value in
 * the expected form is "unknown".
 *
 * The judgement (srvconf_judge) decides which tick the lease may pair its
 * renewals with (docs/design.md, (Z) and assumption (0)), or refuses.
 */
#ifndef ZKELECT_SRVCONF_H
#define ZKELECT_SRVCONF_H

#include <stddef.h>

/* A server's state, from srvr's "Mode: " line. */
enum srv_mode { SRV_MODE_UNKNOWN, SRV_MODE_STANDALONE, SRV_MODE_LEADER, SRV_MODE_FOLLOWER,
                SRV_MODE_OBSERVER, SRV_MODE_READONLY };
const char *srv_mode_name(enum srv_mode m);

/* What `conf` told: every value > 0, or all 0 (unknown). */
struct srv_conf {
    int tick_ms, min_ms, max_ms;
};

/* Parses a `conf` reply (len bytes, not NUL-terminated, any bytes): 0 when
 * tickTime, minSessionTimeout and maxSessionTimeout each came on a line of
 * their own as a decimal in [1, 2^31), else -1 with *out all 0. A key
 * given twice keeps its last value (as a properties file would). */
int srvconf_parse_conf(const char *buf, size_t len, struct srv_conf *out);
/* Parses a `srvr` reply: the "Mode: " line's state, else UNKNOWN. */
enum srv_mode srvconf_parse_mode(const char *buf, size_t len);
/* 1 when buf (len bytes, any bytes) is a server's refusal of a four-letter
 * word that its 4lw.commands.whitelist leaves out ("... is not executed
 * because it is not in the whitelist."): an answer, not asked again. An
 * empty reply or another text (a server still starting: "This ZooKeeper
 * instance is not currently serving requests") is not: asked again. */
int srvconf_refused(const char *buf, size_t len);

/* One server, as asked so far: conf's answer, srvr's mode. */
enum srv_told { SRV_UNASKED, SRV_UNREACHED, SRV_NO_CONF, SRV_CONF };
const char *srv_told_name(enum srv_told t);

struct srv_info {
    char name[72];              /* host:port as the connect string gives it */
    enum srv_told told;
    struct srv_conf conf;       /* when told == SRV_CONF */
    enum srv_mode mode;
};

/* The judgement of what n servers told, stated_ms being the longest tick an
 * agent states (--server-tick; 0: none).
 *   SRV_J_STATED    a tick is stated and no server tells a longer one:
 *                   pair with it (tick_ms the longest told, or 0)
 *   SRV_J_TOLD      no tick stated; every server told the same tickTime:
 *                   pair with it (tick_ms), no inference needed
 *   SRV_J_UNCHECKED no tick stated; some server told nothing (conf not
 *                   whitelisted, not reached) and none that told has a
 *                   minSessionTimeout below 2 x tickTime: the grant's
 *                   inference stands, at least tick_ms (the longest told,
 *                   or 0); `line` says what is unchecked and how to check it
 *   SRV_J_REFUSED   what the lease must assume cannot be established: the
 *                   servers disagree on tickTime (with none stated at least
 *                   the longest), a stated tick is shorter than one told,
 *                   or a server's minimum is below 2 x its tick while the
 *                   tick is not told by all: `line` names the values and
 *                   the fix
 * observer: some server is an observer (its touches reach the quorum
 * leader a ping later): the session pairs one more tick back. */
enum srv_judgement { SRV_J_STATED, SRV_J_TOLD, SRV_J_UNCHECKED, SRV_J_REFUSED };
const char *srv_judgement_name(enum srv_judgement j);

struct srv_verdict {
    enum srv_judgement j;
    int tick_ms;
    int observer;
    char line[768];             /* UNCHECKED, REFUSED: one line; else "" */
};

void srvconf_judge(const struct srv_info *sv, int n, int stated_ms, struct srv_verdict *v);

/* The judgement where the servers are not asked (a TLS session: srvask
 * speaks plain TCP, and a secureClientPort answers only after a TLS
 * handshake): nothing they would tell is known, so the worst case is
 * planned. SRV_J_STATED where stated_ms > 0 (the stated tick, unchecked),
 * else SRV_J_UNCHECKED (the grant's inference, unchecked); always
 * observer = 1 (an observer may be among the servers: one tick more);
 * tick_ms 0; `line` says what goes unchecked and what the plan assumes
 * instead, for a warning at every start. */
void srvconf_judge_unasked(int stated_ms, struct srv_verdict *v);

/* The servers not reached yet (SRV_UNASKED, SRV_UNREACHED): a refusal of
 * conf (SRV_NO_CONF) is an answer. */
int srvconf_unreached(const struct srv_info *sv, int n);

/* While the session is connected, the servers not reached are asked again
 * (a slow conf answer would otherwise leave the inference standing for the
 * session): the k-th later round (k >= 0, from each connection) goes
 * *delay_ms after the last one ended (2 s doubling to 30 s) and waits for
 * answers *deadline_ms (as long as the delay, at most 5 s: no holding
 * connection waits for it). One round at a time (srvask.h). */
#define SRVCONF_RETRY_FIRST_MS 2000
#define SRVCONF_RETRY_MAX_MS 30000
#define SRVCONF_RETRY_DEADLINE_MS 5000
void srvconf_retry(int k, int *delay_ms, int *deadline_ms);

#endif
