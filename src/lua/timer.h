/*
 * timer.h - zkelect.after / zkelect.every: Lua timer userdata on the loop,
 * owned by the scope current when they are created (the term, inside leader
 * hooks and their timers' callbacks; the script otherwise). A lower module
 * of the script: it reaches the runtime only through struct host.
 */
#ifndef ZKELECT_TIMER_H
#define ZKELECT_TIMER_H

#include "host.h"

struct lua_State;
/* Registers zkelect.after and zkelect.every in the table on top of the
 * stack. Their timers belong to h->scope() at creation and call back
 * through h->call; h is borrowed (host.h: it outlives the state). */
void timer_open_lua(struct lua_State *L, const struct host *h);

#endif
