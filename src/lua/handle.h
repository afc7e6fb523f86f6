/*
 * handle.h - the metatable of a Lua handle userdata (a timer, a process).
 */
#ifndef ZKELECT_HANDLE_H
#define ZKELECT_HANDLE_H

struct lua_State;
struct luaL_Reg;

/* Registers a handle userdata type: methods as __index, and one idempotent
 * close as :close (if listed), __gc and __close; the metatable is hidden
 * from getmetatable(). Leaves the stack as it was. May raise (memory). */
void handle_type(struct lua_State *L, const char *name, const struct luaL_Reg *methods,
                 int (*close)(struct lua_State *L));

#endif
