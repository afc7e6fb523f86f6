/*
 * zkwrite.h - zkelect.zk: leader-guarded ZooKeeper writes from a policy's
 * hooks (zke_agent_write on the script's agent, in the hook's term).
 * docs/policy.md "Guarded writes". Loop thread only.
 */
#ifndef ZKELECT_ZKWRITE_H
#define ZKELECT_ZKWRITE_H

#include "host.h"

struct lua_State;

/* Sets zkelect.zk (create, set, delete, check, multi) in the table on top
 * of L's stack. h outlives L. */
void zkwrite_open_lua(struct lua_State *L, const struct host *h);

#endif
