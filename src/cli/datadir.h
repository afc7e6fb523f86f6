/*
 * datadir.h - where the zkelect binary finds its data: the Lua modules that
 * a policy's require() loads (lua/zke.lua...).
 *
 * The install is relocatable: an installed binary looks in
 * <its own directory>/ZKELECT_LUA_RELDIR (../share/zkelect/lua for the
 * default GNU layout), so a tree installed under any prefix (or DESTDIR, or
 * moved) finds its own modules; if that directory is missing it falls back
 * to the configured absolute install location. The binary in the build
 * tree (its directory is the CMake build directory) uses the source tree's
 * lua/ instead, so tests and developers run the modules they edit.
 */
#ifndef ZKELECT_DATADIR_H
#define ZKELECT_DATADIR_H

/* The directory to pass as script_opts.lua_dir. Returns a static string
 * (computed once, never NULL). Main thread only. */
const char *datadir_lua(void);

#endif
