/*
 * handle.c - see handle.h.
 */
#include "handle.h"

#include <lauxlib.h>
#include <lua.h>

void handle_type(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction close)
{
    if (luaL_newmetatable(L, name)) {
        lua_newtable(L);
        luaL_setfuncs(L, methods, 0);
        lua_setfield(L, -2, "__index");
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, close);
        lua_setfield(L, -2, "__close");
        lua_pushboolean(L, 0);       /* getmetatable() must not strip __gc */
        lua_setfield(L, -2, "__metatable");
    }
    lua_pop(L, 1);
}
