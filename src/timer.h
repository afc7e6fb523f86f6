/*
 * timer.h - zkelect.after / zkelect.every: Lua timer userdata on the loop,
 * owned by the scope current when they are created (the term, inside leader
 * hooks and their timers' callbacks; the script otherwise).
 */
#ifndef ZKELECT_TIMER_H
#define ZKELECT_TIMER_H

struct lua_State;
/* Registers zkelect.after and zkelect.every in the table on top of the stack. */
void timer_open_lua(struct lua_State *L);

#endif
