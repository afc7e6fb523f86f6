/*
 * warm.c - the standby's warm-up (script_int.h's struct warm): a follower
 * touches heap pages a takeover would fault in; next in line, the
 * takeover's own path (the leader event's table) is rebuilt and dropped;
 * at a loop wake-up, at most every WARM_EVERY, so that both are ready when
 * the term comes. Calls sandbox.c (the ev table) and hookrun.c (busy).
 */
#define _POSIX_C_SOURCE 200809L
#include "script.h"
#include "script_int.h"

#include <stdlib.h>
#include <string.h>

#include <ev.h>
#include <lauxlib.h>
#include <lua.h>

/* At most this often (s), and only at a wake-up the loop has anyway (its
 * renewals, a read): no timer of its own. */
#define WARM_EVERY 0.1

/* The next in line's takeover goes through code and data nothing else
 * touches (the leader event's Lua table, the string table, the registry):
 * cold, on a machine that runs other things, building it took 25-200 us,
 * the largest share of the way from the ZooKeeper message to on_leader;
 * warm, 1-3 us. While on standby, build one and drop it now and then. */
static void warm_up(script *sc)
{
    const char *id = script_id(sc), *path = script_path(sc);
    struct zke_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = ZKE_EV_LEADER;
    ev.id = id ? id : "";
    ev.path = path ? path : "";
    ev.node = "n_0000000000000000-0000000000";
    ev.reason = "elected";
    ev.previous = ev.id;
    ev.session = 1;
    ev.epoch = 1;
    ev.lease_ms = 1;
    ev.cause_ns = 1;
    int ref = LUA_NOREF;
    lua_State *L = sc->L;
    lua_pushcfunction(L, sandbox_build_ev);
    lua_pushlightuserdata(L, &ev);
    lua_pushlightuserdata(L, &ref);
    if (lua_pcall(L, 2, 1, 0) == LUA_OK && ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, ref);
    lua_pop(L, 1);
}

/* Heap pages for a takeover. A candidate that never led has not used its
 * heap as far as a term's allocations reach (the term, the leader event's
 * table, the hook's coroutine, the policy's own): a takeover's malloc then
 * splits the heap's top into a page the process never touched, and that
 * first touch is a page fault: 20-90 us on a VM (bench/run: 31 of 42
 * measured takeovers had one), as much as the whole rest of the way from
 * the ZooKeeper message to on_leader. Touching HEADROOM bytes past the
 * heap's use ahead of time takes that fault while nothing waits; the block
 * is freed at once and glibc's allocator keeps its pages (below its trim
 * threshold, 128 KiB unless MALLOC_TRIM_THRESHOLD_ lowers it). A
 * follower's resident size grows by at most HEADROOM. Not under
 * AddressSanitizer: its quarantine would hand out a new block each time. */
#define HEADROOM ((size_t)16 * 1024)

#if defined(__SANITIZE_ADDRESS__)
#define ZKE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZKE_ASAN 1
#endif
#endif

static void touch_headroom(void)
{
#ifndef ZKE_ASAN
    volatile char *p = malloc(HEADROOM);
    if (p == NULL)
        return;
    for (size_t i = 0; i < HEADROOM; i += 4096)
        p[i] = 0;
    free((void *)p);
#endif
}

static void warm_cb(struct ev_loop *loop, ev_check *w, int revents)
{
    script *sc = w->data;
    struct zke_status st;
    (void)revents;
    double now = ev_now(loop);
    if (now - sc->warm.at < WARM_EVERY || sc->agent == NULL ||
        sc->refs[ZKE_EV_LEADER] == LUA_NOREF || hookrun_busy(sc) ||
        sc->budget.state != BUDGET_OFF)
        return;
    sc->warm.at = now;
    if (zke_agent_status(sc->agent, &st) != 0 || st.role != ZKE_ROLE_FOLLOWER)
        return;
    /* any follower may be next (a SIGKILL takes the leader and the next in
     * line's turn comes with a deletion it does not see coming) */
    touch_headroom();
    /* next in line: the agent's view (a follower learns it from its
     * predecessor's data, with no event of its own) */
    if (st.position == 1)
        warm_up(sc);
}

void warm_init(script *sc)
{
    ev_check_init(&sc->warm.check, warm_cb);
    ev_set_priority(&sc->warm.check, EV_MINPRI);
    sc->warm.check.data = sc;
}

void warm_start(script *sc)
{
    if (sc->loop != NULL && sc->agent != NULL && !ev_is_active(&sc->warm.check)) {
        ev_check_start(sc->loop, &sc->warm.check);
        ev_unref(sc->loop);     /* it keeps nothing alive */
    }
}

void warm_stop(script *sc)
{
    if (sc->loop != NULL && ev_is_active(&sc->warm.check)) {
        ev_ref(sc->loop);       /* started unreferenced */
        ev_check_stop(sc->loop, &sc->warm.check);
    }
}
