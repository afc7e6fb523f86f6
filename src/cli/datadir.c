/* datadir.c - see datadir.h. */
#define _DEFAULT_SOURCE         /* realpath, readlink */
#include "datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#if !defined(ZKELECT_LUA_DIR) || !defined(ZKELECT_LUA_RELDIR) || !defined(ZKELECT_BUILD_DIR) || \
    !defined(ZKELECT_SOURCE_LUA_DIR)
#error "CMake defines ZKELECT_LUA_DIR, ZKELECT_LUA_RELDIR, ZKELECT_BUILD_DIR, ZKELECT_SOURCE_LUA_DIR"
#endif

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *datadir_lua(void)
{
    static char found[PATH_MAX];
    char exe[PATH_MAX], build[PATH_MAX], cand[PATH_MAX + 64];
    if (found[0] != '\0')
        return found;
    snprintf(found, sizeof found, "%s", ZKELECT_LUA_DIR);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return found;                   /* no /proc: the configured location */
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return found;
    *slash = '\0';                      /* the binary's directory (symlinks resolved) */
    if (realpath(ZKELECT_BUILD_DIR, build) != NULL && strcmp(build, exe) == 0) {
        snprintf(found, sizeof found, "%s", ZKELECT_SOURCE_LUA_DIR);
        return found;
    }
    snprintf(cand, sizeof cand, "%s/%s", exe, ZKELECT_LUA_RELDIR);
    if (is_dir(cand) && realpath(cand, build) != NULL)
        snprintf(found, sizeof found, "%s", build);
    return found;
}
