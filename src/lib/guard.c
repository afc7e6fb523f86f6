/*
 * guard.c - the fail-stop guard: see zkelect.h ("Fail-stop guard") for the
 * public side and guard.h for the agent's.
 *
 * The page (struct zke_guard) is shared between the agent's process and
 * the watcher; every field both sides touch is a lock-free C11 atomic
 * (checked in zke_guard_new), so no lock ever spans the two processes and a
 * process frozen or killed half-way leaves nothing held.
 *
 * Wake-ups, without polling:
 *  - the watcher waits on the futex word `seq` (FUTEX_WAIT, until the
 *    earliest end, at most its heartbeat's 100 ms: it stores the time in
 *    `beat` each time round, and an agent counts a beat 1 s old, confirmed
 *    for 200 ms after waking it, as no watcher: guard_watcher_live);
 *  - the agent bumps `seq` and wakes it only when the earliest hard end is
 *    now sooner than the time the watcher waits until (`waiting_for`: an
 *    end, or its next beat): a term starts, or an end moved earlier. Each side
 *    writes its own word before it reads the other's (sequentially
 *    consistent atomics), so one of them sees the other: either the
 *    watcher sees the new end before it sleeps, or the agent sees that it
 *    must wake it;
 *  - an agent that may start a term any moment (the next in line) is on
 *    standby: the watcher then looks again every half of the shortest time
 *    a term's hard end can be from its start (where that is sooner than
 *    its beat), so that
 *    the term's arming needs no wake-up (a FUTEX_WAKE there preempted the
 *    new leader on its way to on_leader: 20-60 us on a two-core machine);
 *  - the agent's death: the watcher's parent-death signal (PR_SET_PDEATHSIG)
 *    runs a handler that bumps `seq`, so a FUTEX_WAIT entered after it
 *    returns at once, and the watcher then sees getppid() changed.
 */
#define _DEFAULT_SOURCE     /* syscall(), MAP_ANONYMOUS */
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "closer.h"

/* The watcher's parent-death signal: a handled one (a hang-up of the
 * terminal only makes it look again). */
#define WAKE_SIGNAL SIGHUP

/* A group entry: the pgid, with this bit for a term's group; or a term
 * cgroup's id with both bits (a term cgroup is always a term's). */
#define GROUP_TERM_BIT 0x80000000u
#define GROUP_CGROUP_BIT 0x40000000u
#define GROUP_ID(v) ((v) & ~(GROUP_TERM_BIT | GROUP_CGROUP_BIT))

#define GUARD_BASES 64      /* sessions whose agents arm relative to their lease base */

/* The watcher's heartbeat: it stores the time in the page at least every
 * GUARD_BEAT_NS, and the agent counts it gone (stopped, or dead without a
 * word) once the last beat is GUARD_LATE_NS old (guard_watcher_live). */
#define GUARD_BEAT_NS 100000000LL
#define GUARD_LATE_NS 1000000000LL
#define GUARD_MAGIC 0x7a6b6732u    /* "zkg2": a page made by zke_guard_new_for */
/* A stale beat counts once the agent side has seen it stale this long
 * (having woken the watcher): a watcher thawed or resumed together with
 * the agent (a frozen cgroup, a suspended host) beats again first. */
#define GUARD_CONFIRM_NS 200000000LL
/* A watcher that has not beaten yet is starting (exec, dynamic linking,
 * mlockall; a sanitizer's start-up on a loaded machine took over 300 ms):
 * it gets this long from the first look instead. The lease still ends a
 * term meanwhile; only a freeze of the agent in that second goes unwatched,
 * and only until the watcher's first beat. */
#define GUARD_START_NS 1000000000LL
/* Once the agent is gone, how long its process groups get to exit after
 * their SIGKILL before its sessions are left to expire (a process in an
 * uninterruptible sleep dies only when the call returns). */
#define GUARD_GONE_WAIT_NS 2000000000LL

/* An agent's slot. Its ends are absolute (base 0) or offsets from one of
 * the guard's bases (base k: bases[k - 1]), the lease base of the session
 * the agent shares with others: a renewal then moves one base, not the
 * ends of every agent of the session. */
struct gslot {
    atomic_int used;                    /* taken (guard_slot_take) */
    atomic_int base;                    /* 0: the ends are absolute, k: offsets from bases[k-1] */
    atomic_llong hard;                  /* the hard end (SIGKILL), 0: no term */
    atomic_llong soft;                  /* the soft end (SIGTERM), 0: none (the term is
                                         * ending: its step-down runs) */
    atomic_llong standby;               /* a term may start: its hard end will be at least this
                                         * far (ns) from its start; 0: none */
    atomic_llong epoch;                 /* the armed term's epoch (for its fence) */
    atomic_llong fenced;                /* the last epoch fenced (by any watcher) */
    atomic_llong fence_bad;             /* the last epoch whose fence failed (any watcher) */
};

/* A session the watcher closes once the agent is gone and its terms are
 * over (one per base: the session of the agents that share it). Written by
 * the agent side only (a seqlock: gen odd while written, so that one cut
 * short by the agent's death is never used); read by the watcher once the
 * agent is gone. */
struct gsess {
    atomic_uint gen;                    /* odd while written */
    atomic_int live;                    /* 1: published, 0: none (or wiped) */
    uint64_t id;
    unsigned char passwd[CLOSER_PASSWD_LEN];
    int timeout_ms;                     /* negotiated */
    int naddr;
    struct gaddr {
        unsigned short len;
        union {                         /* (aligned: the watcher passes it to connect) */
            struct sockaddr any;
            struct sockaddr_in in;
            struct sockaddr_in6 in6;
        } sa;
    } addr[GUARD_SESSION_ADDRS];        /* the connected server first */
};

struct zke_guard {
    unsigned magic;                     /* GUARD_MAGIC, set once by its maker */
    unsigned layout;                    /* the sizes of this struct and a slot (layout_of) */
    int fd;                             /* the maker's descriptor of the page (-1: none);
                                         * meaningless in any other process */
    const void *made_at;                /* the maker's mapping (its other mappings are attached) */
    int64_t made_ns;                    /* when it was made (CLOCK_BOOTTIME) */
    atomic_llong beat;                  /* the watcher's last heartbeat, 0: none yet */
    atomic_llong silent_since;          /* the agent side saw the beat stale since, 0: fresh
                                         * (written by the agent side only) */
    atomic_llong silent_beat;           /* ... that beat (0: none yet) */
    atomic_uint seq;                    /* futex word: bumped when the watcher must look again */
    atomic_uint wakes;                  /* FUTEX_WAKEs the agent side sent (guard_wakes) */
    atomic_llong waiting_for;           /* the hard end the watcher sleeps until, 0: none */
    atomic_int agent_pid;               /* the process that made the guard */
    int nslots;                         /* set at zke_guard_new_for, then read only */
    atomic_int hint;                    /* where guard_slot_take looks first */
    atomic_int top;                     /* slots [0, top) may be taken: what the watcher scans */
    atomic_llong bases[GUARD_BASES];    /* CLOCK_BOOTTIME ns, 0: none yet */
    atomic_ullong bases_used;           /* bases taken (bit k - 1: base k) */
    atomic_uint group[ZKE_GUARD_GROUPS];        /* pgid | GROUP_TERM_BIT, 0: free */
    atomic_int cg_set;                  /* cg_path is set (zke_guard_set_cgroups) */
    atomic_int unheld;                  /* a group or cgroup could not be registered (the table
                                         * was full): the watcher cannot vouch that the terms
                                         * are over, so it closes no session */
    char cg_path[ZKE_CGROUPS_PATH_MAX]; /* the term cgroups' folder */
    atomic_uint fence_gen;              /* odd while the fence is written (a seqlock) */
    atomic_int fence_len;               /* bytes of fence in use, 0: no fence */
    atomic_int fence_ms;                /* its budget */
    atomic_int fence_argc;              /* its argv's words; its environment's follow */
    char fence[ZKE_GUARD_FENCE_MAX];    /* its words, each NUL-terminated */
    struct gsess sess[GUARD_BASES];     /* base k's session: sess[k - 1] */
    struct gslot slot[];                /* nslots of them */
};

/* The layout's fingerprint: a page of another layout is not attached. */
static unsigned layout_of(void)
{
    return (unsigned)(sizeof(struct zke_guard) << 8 ^ sizeof(struct gslot));
}

static size_t map_size(int nslots)
{
    long p = sysconf(_SC_PAGESIZE);
    size_t n = p > 0 ? (size_t)p : 4096;
    size_t want = sizeof(struct zke_guard) + (size_t)nslots * sizeof(struct gslot);
    return (want + n - 1) / n * n;
}

static int64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long futex(atomic_uint *word, int op, unsigned val, const struct timespec *rel)
{
    /* shared between processes: not the _PRIVATE operations */
    return syscall(SYS_futex, (unsigned *)word, op, val, rel, NULL, 0);
}

zke_guard *zke_guard_new_for(int agents, char *err, size_t errlen)
{
    struct zke_guard probe;
    memset(&probe, 0, sizeof probe);
    if (!atomic_is_lock_free(&probe.waiting_for) || !atomic_is_lock_free(&probe.seq)) {
        snprintf(err, errlen, "fail-stop guard: 64-bit atomics are not lock-free here");
        return NULL;
    }
    if (agents < 1 || agents > ZKE_GUARD_AGENTS_MAX) {
        snprintf(err, errlen, "fail-stop guard: %d agents (1..%d)", agents, ZKE_GUARD_AGENTS_MAX);
        return NULL;
    }
    /* a memory file, so that a watcher that is another program (exec'd)
     * can map it from the descriptor it inherits (zke_guard_attach);
     * anonymous shared memory, for a forked watcher only, where there is
     * no memfd_create */
    size_t size = map_size(agents);
    int fd = (int)syscall(SYS_memfd_create, "zkelect-guard", 1u /* MFD_CLOEXEC */);
    if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
        (void)close(fd);
        fd = -1;
    }
    if (fd >= 0 && fd < 3) {
        /* never one of the standard three (one that was closed: a write
         * to stdout or stderr would land in the page) */
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        (void)close(fd);
        fd = high;
        if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
            (void)close(fd);
            fd = -1;
        }
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, fd >= 0 ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS,
                   fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "fail-stop guard: mmap of a shared page: %s", strerror(errno));
        if (fd >= 0)
            (void)close(fd);
        return NULL;
    }
    zke_guard *g = m;       /* zero-filled: disarmed, no slot, no group */
    g->nslots = agents;
    g->fd = fd;
    g->made_at = g;
    g->made_ns = boot_ns();
    atomic_store(&g->agent_pid, (int)getpid());
    g->layout = layout_of();
    g->magic = GUARD_MAGIC;
    return g;
}

int zke_guard_fd(const zke_guard *g)
{
    return g != NULL && atomic_load(&g->agent_pid) == (int)getpid() && g->made_at == (const void *)g
           ? g->fd : -1;
}

zke_guard *zke_guard_attach(int fd, char *err, size_t errlen)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "fail-stop guard: descriptor %d: %s", fd,
                 fd < 0 ? "not valid" : strerror(errno));
        return NULL;
    }
    if (st.st_size < (off_t)sizeof(struct zke_guard)) {
        snprintf(err, errlen, "fail-stop guard: descriptor %d is no guard's page (%lld bytes)", fd,
                 (long long)st.st_size);
        return NULL;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "fail-stop guard: mmap of descriptor %d: %s", fd, strerror(errno));
        return NULL;
    }
    zke_guard *g = m;
    if (g->magic != GUARD_MAGIC || g->layout != layout_of() || g->nslots < 1 || g->nslots > ZKE_GUARD_AGENTS_MAX ||
        map_size(g->nslots) != (size_t)st.st_size) {
        (void)munmap(m, (size_t)st.st_size);
        snprintf(err, errlen, "fail-stop guard: descriptor %d is no guard's page (not made by "
                 "this version's zke_guard_new_for)", fd);
        return NULL;
    }
    return g;
}

int guard_watcher_live(zke_guard *g, int64_t now)
{
    int64_t b = atomic_load(&g->beat);
    if (b != 0 && now - b < GUARD_LATE_NS) {
        if (atomic_load(&g->silent_since) != 0)
            atomic_store(&g->silent_since, 0);
        return 1;
    }
    int64_t since = atomic_load(&g->silent_since);
    if (since == 0 || atomic_load(&g->silent_beat) != b) {
        /* (the window is this beat's: one that came and went stale again
         * since, while nobody looked, gets a window of its own) */
        atomic_store(&g->silent_beat, b);
        /* first seen stale (or not beaten yet: a watcher just started):
         * wake it (a watcher that ran late, or was frozen or suspended with
         * us, beats at once) and give it a while */
        atomic_store(&g->silent_since, now);
        atomic_fetch_add(&g->seq, 1);
        (void)futex(&g->seq, FUTEX_WAKE, 1, NULL);
        return 1;
    }
    return now - since < (b == 0 ? GUARD_START_NS : GUARD_CONFIRM_NS);
}

int64_t guard_watcher_pending(zke_guard *g)
{
    int64_t since = atomic_load(&g->silent_since);
    return since == 0 ? 0 : since + (atomic_load(&g->beat) == 0 ? GUARD_START_NS : GUARD_CONFIRM_NS);
}

void guard_watcher_forget(zke_guard *g)
{
    atomic_store(&g->beat, 0);      /* the new one is starting: its start-up allowance */
    atomic_store(&g->silent_since, 0);
}

zke_guard *zke_guard_new(char *err, size_t errlen)
{
    return zke_guard_new_for(ZKE_GUARD_AGENTS, err, errlen);
}

void zke_guard_free(zke_guard *g)
{
    if (g == NULL)
        return;
    int fd = zke_guard_fd(g);       /* (the maker's only) */
    (void)munmap(g, map_size(g->nslots));
    if (fd >= 0)
        (void)close(fd);
}

static int add_entry(zke_guard *g, unsigned v)
{
    for (int i = 0; i < ZKE_GUARD_GROUPS; i++) {
        unsigned free_slot = 0;
        if (atomic_compare_exchange_strong(&g->group[i], &free_slot, v))
            return 0;
    }
    atomic_store(&g->unheld, 1);
    return -1;
}

static void remove_entry(zke_guard *g, unsigned v)
{
    for (int i = 0; i < ZKE_GUARD_GROUPS; i++) {
        if (atomic_load(&g->group[i]) == v) {
            atomic_store(&g->group[i], 0);
            return;
        }
    }
}

int zke_guard_add_group(zke_guard *g, pid_t pgid, int flags)
{
    if (g == NULL || pgid <= 0 || (unsigned)pgid >= GROUP_CGROUP_BIT)
        return -1;
    return add_entry(g, (unsigned)pgid | ((flags & ZKE_GUARD_GROUP_TERM) ? GROUP_TERM_BIT : 0));
}

void zke_guard_remove_group(zke_guard *g, pid_t pgid)
{
    if (g == NULL || pgid <= 0 || (unsigned)pgid >= GROUP_CGROUP_BIT)
        return;
    remove_entry(g, (unsigned)pgid | GROUP_TERM_BIT);
    remove_entry(g, (unsigned)pgid);
}

int zke_guard_set_cgroups(zke_guard *g, const zke_cgroups *c)
{
    const char *p = zke_cgroups_path(c);
    if (g == NULL || p == NULL || strlen(p) >= sizeof g->cg_path)
        return -1;
    snprintf(g->cg_path, sizeof g->cg_path, "%s", p);
    atomic_store(&g->cg_set, 1);
    return 0;
}

int zke_guard_add_cgroup(zke_guard *g, int id)
{
    if (g == NULL || id <= 0 || (unsigned)id >= GROUP_CGROUP_BIT || !atomic_load(&g->cg_set))
        return -1;
    return add_entry(g, (unsigned)id | GROUP_TERM_BIT | GROUP_CGROUP_BIT);
}

void zke_guard_remove_cgroup(zke_guard *g, int id)
{
    if (g != NULL && id > 0 && (unsigned)id < GROUP_CGROUP_BIT)
        remove_entry(g, (unsigned)id | GROUP_TERM_BIT | GROUP_CGROUP_BIT);
}

/* The bytes the words of v (NULL: none) take, NULs included; how many
 * words in *k; -1 when more than max. */
static long words_size(const char *const v[], int max, int *k)
{
    long n = 0;
    for (*k = 0; v != NULL && v[*k] != NULL; (*k)++) {
        if (*k >= max)
            return -1;
        n += (long)strlen(v[*k]) + 1;
    }
    return n;
}

/* Copies the words of v to the fence's buffer at *n (they fit). */
static void put_words(zke_guard *g, const char *const v[], size_t *n)
{
    for (int k = 0; v != NULL && v[k] != NULL; k++) {
        size_t l = strlen(v[k]) + 1;
        memcpy(g->fence + *n, v[k], l);
        *n += l;
    }
}

int zke_guard_set_fence(zke_guard *g, const char *const argv[], const char *const env[],
                        int timeout_ms)
{
    int words = 0, vars = 0;
    long na = argv != NULL ? words_size(argv, ZKE_GUARD_FENCE_WORDS, &words) : 0;
    long ne = words_size(env, ZKE_GUARD_FENCE_WORDS, &vars);
    if (g == NULL || (argv != NULL && (na < 0 || ne < 0 || words == 0 || argv[0][0] == '\0' ||
                                       na + ne > (long)sizeof g->fence)))
        return -1;      /* (the fence set before stays) */
    /* a seqlock: the watcher copies the words only between two equal, even
     * generations, so it never runs a half-written fence */
    atomic_fetch_add(&g->fence_gen, 1);
    size_t n = 0;
    if (argv != NULL) {
        put_words(g, argv, &n);
        put_words(g, env, &n);
    }
    atomic_store(&g->fence_argc, words);
    atomic_store(&g->fence_ms, timeout_ms > 0 ? timeout_ms : 5000);
    atomic_store(&g->fence_len, (int)n);
    atomic_fetch_add(&g->fence_gen, 1);
    return 0;
}

/* --- agent side (guard.h) ---------------------------------------------- */

int guard_slot_take(zke_guard *g)
{
    int n = g->nslots, h = atomic_load(&g->hint);
    for (int k = 0; k < n; k++) {
        int i = (h + k) % n, free_slot = 0;
        if (atomic_compare_exchange_strong(&g->slot[i].used, &free_slot, 1)) {
            struct gslot *s = &g->slot[i];
            atomic_store(&s->hard, 0);
            atomic_store(&s->soft, 0);
            atomic_store(&s->standby, 0);
            atomic_store(&s->base, 0);
            atomic_store(&s->epoch, 0);
            atomic_store(&s->fenced, 0);    /* a new owner's terms are fenced afresh */
            atomic_store(&s->fence_bad, 0);
            atomic_store(&g->hint, (i + 1) % n);
            int top = atomic_load(&g->top);
            while (top < i + 1 && !atomic_compare_exchange_weak(&g->top, &top, i + 1))
                ;
            return i;
        }
    }
    return -1;
}

void guard_slot_release(zke_guard *g, int slot)
{
    if (slot < 0 || slot >= g->nslots)
        return;
    struct gslot *s = &g->slot[slot];
    atomic_store(&s->hard, 0);
    atomic_store(&s->soft, 0);
    atomic_store(&s->standby, 0);
    atomic_store(&s->used, 0);
}

int guard_base_take(zke_guard *g)
{
    unsigned long long used = atomic_load(&g->bases_used);
    for (;;) {
        int k = 0;
        while (k < GUARD_BASES && (used & (1ull << k)))
            k++;
        if (k == GUARD_BASES)
            return 0;
        if (atomic_compare_exchange_weak(&g->bases_used, &used, used | (1ull << k))) {
            atomic_store(&g->bases[k], 0);
            return k + 1;
        }
    }
}

void guard_base_release(zke_guard *g, int base)
{
    guard_session_clear(g, base);
    if (base >= 1 && base <= GUARD_BASES)
        atomic_fetch_and(&g->bases_used, ~(1ull << (base - 1)));
}

/* Overwrites a secret (a volatile loop is not optimised away). */
static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n-- > 0)
        *v++ = 0;
}

void guard_session_set(zke_guard *g, int base, uint64_t id,
                       const unsigned char passwd[CLOSER_PASSWD_LEN], int timeout_ms,
                       const struct closer_addr *addrs, int naddrs)
{
    if (base < 1 || base > GUARD_BASES)
        return;
    struct gsess *e = &g->sess[base - 1];
    atomic_fetch_add(&e->gen, 1);           /* odd: being written */
    atomic_store(&e->live, 0);
    int n = 0;
    for (int i = 0; i < naddrs && n < GUARD_SESSION_ADDRS; i++) {
        if (addrs[i].len == 0 || addrs[i].len > sizeof e->addr[n].sa)
            continue;
        e->addr[n].len = (unsigned short)addrs[i].len;
        memcpy(&e->addr[n].sa, &addrs[i].sa, addrs[i].len);
        n++;
    }
    e->naddr = n;
    e->timeout_ms = timeout_ms;
    e->id = n > 0 ? id : 0;
    if (n > 0)
        memcpy(e->passwd, passwd, CLOSER_PASSWD_LEN);
    else
        wipe(e->passwd, sizeof e->passwd);  /* (nowhere to close it: no secret kept) */
    atomic_store(&e->live, n > 0);
    atomic_fetch_add(&e->gen, 1);
}

void guard_session_clear(zke_guard *g, int base)
{
    if (base < 1 || base > GUARD_BASES)
        return;
    struct gsess *e = &g->sess[base - 1];
    if (!atomic_load(&e->live) && e->id == 0)
        return;
    atomic_fetch_add(&e->gen, 1);
    atomic_store(&e->live, 0);
    wipe(e->passwd, sizeof e->passwd);
    e->id = 0;
    atomic_fetch_add(&e->gen, 1);
}

int guard_session_live(zke_guard *g, int base)
{
    return base >= 1 && base <= GUARD_BASES && atomic_load(&g->sess[base - 1].live);
}

/* An end of slot s (hard or soft: its field v) as a CLOCK_BOOTTIME time,
 * 0 when not set (or its base is not known). The base index is read before
 * and after the value: a slot switched between relative and absolute
 * meanwhile (guard_slot_arm_at zeroes the value around the switch) is read
 * again, never as an offset taken for a time or the reverse. */
static int64_t end_of(const zke_guard *g, const struct gslot *s, const atomic_llong *v)
{
    for (;;) {
        int b = atomic_load(&s->base);
        int64_t x = atomic_load(v);
        if (atomic_load(&s->base) != b)
            continue;
        if (x == 0 || b == 0)
            return x;
        int64_t base = atomic_load(&g->bases[b - 1]);
        return base > 0 ? base + x : 0;
    }
}

/* Wakes the watcher, if it sleeps until later than `end` (or for nothing). */
static void wake_for(zke_guard *g, int64_t end)
{
    int64_t w = atomic_load(&g->waiting_for);
    if (end != 0 && (w == 0 || end < w)) {
        atomic_fetch_add(&g->seq, 1);
        atomic_fetch_add(&g->wakes, 1);
        (void)futex(&g->seq, FUTEX_WAKE, 1, NULL);
    }
}

void guard_base_freeze(zke_guard *g, int base)
{
    if (base < 1 || base > GUARD_BASES)
        return;
    for (int i = 0, top = atomic_load(&g->top); i < top; i++) {
        struct gslot *s = &g->slot[i];
        if (atomic_load(&s->base) != base)
            continue;
        int64_t hard = end_of(g, s, &s->hard), soft = end_of(g, s, &s->soft);
        guard_slot_arm_at(g, i, 0, atomic_load(&s->epoch), soft, hard);
    }
    atomic_store(&g->bases[base - 1], 0);
}

int64_t guard_slot_end(zke_guard *g, int slot, int soft)
{
    if (slot < 0 || slot >= g->nslots)
        return 0;
    struct gslot *s = &g->slot[slot];
    return end_of(g, s, soft ? &s->soft : &s->hard);
}

void guard_base_set(zke_guard *g, int base, int64_t ns)
{
    if (base < 1 || base > GUARD_BASES || ns <= 0)
        return;
    int64_t old = atomic_exchange(&g->bases[base - 1], ns);
    /* later (a renewal) moves every end of the base later: nobody to wake;
     * earlier (time lost: touch_lost) may move one before what the watcher
     * waits for: it looks again (rare) */
    if (old != 0 && ns < old) {
        atomic_fetch_add(&g->seq, 1);
        atomic_fetch_add(&g->wakes, 1);
        (void)futex(&g->seq, FUTEX_WAKE, 1, NULL);
    }
}

/* The earliest armed hard end, 0 if none. */
static int64_t earliest(zke_guard *g)
{
    int64_t m = 0;
    for (int i = 0, top = atomic_load(&g->top); i < top; i++) {
        int64_t d = end_of(g, &g->slot[i], &g->slot[i].hard);
        if (d != 0 && (m == 0 || d < m))
            m = d;
    }
    return m;
}

/* The earliest soft end of a term still acting, 0 if none;
 * its slot in *slot. */
static int64_t earliest_soft(zke_guard *g, int *slot)
{
    int64_t m = 0;
    for (int i = 0, top = atomic_load(&g->top); i < top; i++) {
        int64_t d = end_of(g, &g->slot[i], &g->slot[i].soft);
        if (d != 0 && (m == 0 || d < m)) {
            m = d;
            *slot = i;
        }
    }
    return m;
}

unsigned guard_wakes(zke_guard *g)
{
    return atomic_load(&g->wakes);
}

/* The shortest standby gap of any slot, 0 if none. */
static int64_t standby_gap(zke_guard *g)
{
    int64_t m = 0;
    for (int i = 0, top = atomic_load(&g->top); i < top; i++) {
        int64_t d = atomic_load(&g->slot[i].standby);
        if (d > 0 && (m == 0 || d < m))
            m = d;
    }
    return m;
}

void guard_slot_standby(zke_guard *g, int slot, int64_t gap_ns)
{
    if (slot < 0 || slot >= g->nslots)
        return;
    int64_t old = atomic_load(&g->slot[slot].standby);
    if (gap_ns < 0)
        gap_ns = 0;
    atomic_store(&g->slot[slot].standby, gap_ns);
    /* a watcher asleep longer than the standby's period (nothing to wait
     * for but its heartbeat) looks again at once, to wait by that period
     * from now on (once per standby) */
    int64_t w = atomic_load(&g->waiting_for);
    if (gap_ns > 0 && (old == 0 || gap_ns < old) && (w == 0 || w > boot_ns() + gap_ns / 2)) {
        atomic_fetch_add(&g->seq, 1);
        atomic_fetch_add(&g->wakes, 1);
        (void)futex(&g->seq, FUTEX_WAKE, 1, NULL);
    }
}

void guard_slot_arm_at(zke_guard *g, int slot, int base, int64_t epoch, int64_t soft,
                       int64_t hard)
{
    if (slot < 0 || slot >= g->nslots || base < 0 || base > GUARD_BASES)
        return;
    struct gslot *s = &g->slot[slot];
    if (hard == 0)
        soft = 0;
    atomic_store(&s->epoch, epoch);     /* before the end the watcher may fire for */
    /* disarmed while the base changes, so that no end is read half-moved;
     * the soft end first: a step-down that begins (soft 0) is never sent
     * the SIGTERM of the end it no longer has */
    if (atomic_load(&s->base) != base) {
        atomic_store(&s->soft, 0);
        atomic_store(&s->hard, 0);
        atomic_store(&s->base, base);
    }
    atomic_store(&s->soft, soft);
    atomic_store(&s->hard, hard);
    if (hard == 0)
        return;     /* the watcher finds out when it wakes for the old end */
    int64_t sd = end_of(g, s, &s->soft), hd = end_of(g, s, &s->hard);
    wake_for(g, sd != 0 && (hd == 0 || sd < hd) ? sd : hd);
}

void guard_slot_arm(zke_guard *g, int slot, int64_t epoch, int64_t soft_ns, int64_t deadline_ns)
{
    guard_slot_arm_at(g, slot, 0, epoch, soft_ns, deadline_ns);
}

/* --- the watcher ------------------------------------------------------- */

/* The guard the wake-up handler pokes (one watcher per process). */
static zke_guard *volatile watched;
/* zke_guard_end_now: who asked (a pid, -1 unknown), 0 nobody; the watcher's
 * own process's (lock-free: a signal handler may set it) */
static atomic_int end_asked;

/* WAKE_SIGNAL: the agent died (the parent-death signal), or the boot-clock
 * timer of the end waited for went off. */
static void on_wake(int sig)
{
    (void)sig;
    zke_guard *g = watched;
    if (g != NULL)
        atomic_fetch_add(&g->seq, 1);   /* lock-free: async-signal-safe */
}

void zke_guard_end_now(zke_guard *g, pid_t by)
{
    if (g == NULL)
        return;
    atomic_store(&end_asked, by > 0 ? (int)by : -1);
    atomic_fetch_add(&g->seq, 1);       /* a wait entered after this returns at once */
    (void)futex(&g->seq, FUTEX_WAKE, 1, NULL);
}

/* <folder>/term-<id>/<file> (or the folder's own file for id 0) in buf,
 * without allocating; 0, or -1 when the guard has no folder. */
static int cg_file(zke_guard *g, unsigned id, const char *file, char *buf, size_t len)
{
    if (!atomic_load(&g->cg_set))
        return -1;
    int n = id != 0 ? snprintf(buf, len, "%s/term-%u/%s", g->cg_path, id, file)
                    : snprintf(buf, len, "%s/%s", g->cg_path, file);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Writes "1" to the cgroup.kill of term cgroup id (0: the whole folder):
 * 0 when it was written. */
static int cg_kill(zke_guard *g, unsigned id)
{
    char p[ZKE_CGROUPS_PATH_MAX + 48];
    if (cg_file(g, id, "cgroup.kill", p, sizeof p) != 0)
        return -1;
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int ok = write(fd, "1", 1) == 1;
    close(fd);
    return ok ? 0 : -1;
}

/* sig (and SIGCONT) to each process listed in the term cgroup's
 * cgroup.procs, read into a buffer on the stack; how many got it. */
static int cg_signal(zke_guard *g, unsigned id, int sig)
{
    char p[ZKE_CGROUPS_PATH_MAX + 48], buf[1024];
    if (cg_file(g, id, "cgroup.procs", p, sizeof p) != 0)
        return 0;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int n = 0;
    long pid = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = pid * 10 + (buf[i] - '0');
            } else if (pid > 0) {
                if (kill((pid_t)pid, sig) == 0)
                    n++;
                (void)kill((pid_t)pid, SIGCONT);
                pid = 0;
            }
        }
    }
    close(fd);
    return n;
}

/* 1 while the folder (id 0) or a term cgroup has a process. */
static int cg_populated(zke_guard *g, unsigned id)
{
    char p[ZKE_CGROUPS_PATH_MAX + 48], buf[256];
    if (cg_file(g, id, "cgroup.events", p, sizeof p) != 0)
        return 0;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[r > 0 ? r : 0] = '\0';
    const char *k = strstr(buf, "populated ");
    return k != NULL && k[10] == '1';
}

/* SIGKILL to every registered group (only the terms' unless all) and term
 * cgroup; how many there were. */
static int kill_groups(zke_guard *g, int all)
{
    int n = 0;
    for (int i = 0; i < ZKE_GUARD_GROUPS; i++) {
        unsigned v = atomic_load(&g->group[i]);
        if (v == 0 || (!all && !(v & GROUP_TERM_BIT)))
            continue;
        if (v & GROUP_CGROUP_BIT) {
            int pop = cg_populated(g, GROUP_ID(v));     /* (written even when unreadable) */
            if (cg_kill(g, GROUP_ID(v)) == 0 && pop)
                n++;
        } else if (kill(-(pid_t)GROUP_ID(v), SIGKILL) == 0) {
            n++;
        }
    }
    return n;
}

/* The first phase: SIGTERM (and SIGCONT: a stopped group would not see it)
 * to the terms' groups, while the slot's soft end is still the one that
 * passed. Each group is read before that check: a group registered after
 * the agent cleared the soft end (a process its on_stepdown starts to undo
 * the term's state) comes after the clear in the order of the atomics, so
 * the check sees the clear and the group is spared. How many there were. */
static int term_groups(zke_guard *g, int slot, int64_t soft)
{
    int n = 0;
    for (int i = 0; i < ZKE_GUARD_GROUPS; i++) {
        unsigned v = atomic_load(&g->group[i]);
        if (v == 0 || !(v & GROUP_TERM_BIT))
            continue;
        if (end_of(g, &g->slot[slot], &g->slot[slot].soft) != soft)
            break;
        if (v & GROUP_CGROUP_BIT) {
            n += cg_signal(g, GROUP_ID(v), SIGTERM) > 0;
            continue;
        }
        pid_t pg = -(pid_t)GROUP_ID(v);
        if (kill(pg, SIGTERM) == 0)
            n++;
        (void)kill(pg, SIGCONT);
    }
    return n;
}

/* The agent is gone: its folder of term cgroups is killed whole, and once
 * empty (at most 2 s) its term cgroups and the folder are removed. 1 when
 * it is empty (or there is none), 0 when a process is still in it. */
static int cg_clean(zke_guard *g)
{
    char p[ZKE_CGROUPS_PATH_MAX + 48];
    if (!atomic_load(&g->cg_set))
        return 1;
    (void)cg_kill(g, 0);
    for (int k = 0; k < 400 && cg_populated(g, 0); k++) {
        struct timespec five_ms = { 0, 5000000 };
        (void)nanosleep(&five_ms, NULL);
    }
    int empty = !cg_populated(g, 0);
    /* every term-* in the folder (also those the agent no longer listed),
     * read with getdents64 into the stack: nothing is allocated */
    int dfd = open(g->cg_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        char buf[4096];
        long got;
        while ((got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < got;) {
                /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
                unsigned short reclen;
                memcpy(&reclen, buf + off + 16, sizeof reclen);
                const char *name = buf + off + 19;
                if (strncmp(name, "term-", 5) == 0 &&
                    snprintf(p, sizeof p, "%s/%s", g->cg_path, name) < (int)sizeof p)
                    (void)rmdir(p);
                if (reclen == 0)
                    break;
                off += reclen;
            }
        }
        close(dfd);
    }
    (void)rmdir(g->cg_path);
    return empty;
}

static void say(zke_log_fn *log, void *ud, enum zke_log_level lvl, const char *msg)
{
    if (log != NULL)
        log(ud, lvl, msg);
}

extern char **environ;

/* The fence's child: default signals (the watcher ignores some, and an
 * ignored signal stays ignored across exec), an empty mask, the OOM score
 * of an ordinary process (not the watcher's), stdin from /dev/null, stdout
 * on stderr, the variables over the inherited environment (an array on the
 * stack: nothing allocated in a child of a process that may have threads),
 * then exec. */
static void fence_child(char *const argv[], char *const vars[], int out) __attribute__((noreturn));
static void fence_child(char *const argv[], char *const vars[], int out)
{
    sigset_t none;
    char *envp[512];
    (void)setpgid(0, 0);
    int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj >= 0) {
        (void)!write(adj, "0", 1);
        (void)close(adj);
    }
    for (int sig = 1; sig < 65; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)signal(sig, SIG_DFL);
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)dup2(fd, 0);
        (void)close(fd);
    }
    /* its output goes to the watcher, which reads it as it comes: never
     * to the agent's stderr, which may be a pipe nobody reads (the fence
     * would block on it while the successor waits) */
    if (out >= 0) {
        (void)dup2(out, 1);
        (void)dup2(out, 2);
        if (out > 2)
            (void)close(out);
    } else {
        (void)dup2(2, 1);
    }
    int n = 0;
    for (int i = 0; vars[i] != NULL && n < 64; i++)
        envp[n++] = vars[i];
    for (char **e = environ; e != NULL && *e != NULL && n < (int)(sizeof envp / sizeof *envp) - 1;
         e++) {
        const char *eq = strchr(*e, '=');
        size_t kl = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        int shadowed = 0;       /* (the variables come first and win) */
        for (int i = 0; vars[i] != NULL && !shadowed; i++)
            shadowed = strncmp(vars[i], *e, kl) == 0 && vars[i][kl] == '=';
        if (!shadowed)
            envp[n++] = *e;
    }
    envp[n] = NULL;
    environ = envp;
    execvp(argv[0], argv);
    _exit(127);
}

/* Reads what the fence wrote so far (fd non-blocking; -1: none): the first
 * len bytes are kept in buf (*n), the rest counted in *more. */
static void drain_output(int fd, char *buf, size_t len, size_t *n, long long *more)
{
    char chunk[512];
    for (int k = 0; fd >= 0 && k < 64; k++) {
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r <= 0)
            return;
        size_t take = *n < len ? len - *n : 0;
        if (take > (size_t)r)
            take = (size_t)r;
        memcpy(buf + *n, chunk, take);
        *n += take;
        *more += (long long)((size_t)r - take);
    }
}

/* The fence's command as the agent set it (zke_guard_set_fence), read
 * under its seqlock into words, and its argv (the command's words, the
 * epoch, the reason) and environment additions (its own, then
 * ZKELECT_EVENT/EPOCH/REASON) pointing into words and the caller's buffers
 * of struct fence_cmd. 0 when there is no fence. */
struct fence_cmd {
    char words[ZKE_GUARD_FENCE_MAX], ep[24], v_ep[48], v_reason[48];
    char v_event[sizeof "ZKELECT_EVENT=fence"];
    char *argv[ZKE_GUARD_FENCE_WORDS + 3], *vars[ZKE_GUARD_FENCE_WORDS + 4];
    int budget;             /* ms */
};

static int fence_read(zke_guard *g, int64_t epoch, const char *reason, struct fence_cmd *f)
{
    int len = 0, argc = 0, k = 0, nv = 0;
    for (int tries = 0; tries < 1000; tries++) {
        unsigned gen = atomic_load(&g->fence_gen);
        len = atomic_load(&g->fence_len);
        f->budget = atomic_load(&g->fence_ms);
        argc = atomic_load(&g->fence_argc);
        if (!(gen & 1) && len > 0 && len <= (int)sizeof f->words)
            memcpy(f->words, g->fence, (size_t)len);
        atomic_thread_fence(memory_order_seq_cst);
        if (!(gen & 1) && atomic_load(&g->fence_gen) == gen)
            break;
        len = 0;
    }
    if (len <= 0 || len > (int)sizeof f->words)
        return 0;
    f->words[len - 1] = '\0';
    for (int off = 0; off < len && k + nv < 2 * ZKE_GUARD_FENCE_WORDS;
         off += (int)strlen(f->words + off) + 1) {
        if (k < argc)
            f->argv[k++] = f->words + off;
        else
            f->vars[nv++] = f->words + off;
    }
    snprintf(f->ep, sizeof f->ep, "%lld", (long long)epoch);
    f->argv[k++] = f->ep;
    f->argv[k++] = (char *)reason;
    f->argv[k] = NULL;
    snprintf(f->v_ep, sizeof f->v_ep, "ZKELECT_EPOCH=%lld", (long long)epoch);
    snprintf(f->v_reason, sizeof f->v_reason, "ZKELECT_REASON=%s", reason);
    memcpy(f->v_event, "ZKELECT_EVENT=fence", sizeof f->v_event);
    f->vars[nv++] = f->v_event;
    f->vars[nv++] = f->v_ep;
    f->vars[nv++] = f->v_reason;
    f->vars[nv] = NULL;
    return 1;
}

/* How a fence's run went (fence_run). */
struct fence_run {
    pid_t r;                /* waitpid's answer: the pid once it was reaped */
    int st, timed_out;
    long long ms;
    char text[600];         /* the first of its output, for the log */
    size_t tn;
    long long more;         /* bytes past that */
};

/* Runs f in a process group of its own and waits for it within its budget
 * (then SIGKILLs the group), keeping the first of its output. -1 (errno)
 * when it could not start. */
static int fence_run(const struct fence_cmd *f, struct fence_run *o)
{
    int pfd[2];
    if (pipe(pfd) != 0) {
        pfd[0] = pfd[1] = -1;
    } else {
        (void)fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
        (void)fcntl(pfd[1], F_SETFD, FD_CLOEXEC);
    }
    int64_t t0 = boot_ns();
    pid_t pid = fork();
    if (pid == 0)
        fence_child(f->argv, f->vars, pfd[1]);
    int saved = errno;
    if (pfd[1] >= 0)
        (void)close(pfd[1]);
    if (pfd[0] >= 0)
        (void)fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    o->tn = 0;
    o->more = 0;
    o->st = 0;
    o->timed_out = 0;
    if (pid < 0) {
        if (pfd[0] >= 0)
            (void)close(pfd[0]);
        errno = saved;
        return -1;
    }
    (void)setpgid(pid, pid);
    while ((o->r = waitpid(pid, &o->st, WNOHANG)) == 0 && !o->timed_out) {
        if (boot_ns() - t0 >= (int64_t)f->budget * 1000000) {
            o->timed_out = 1;
            (void)kill(-pid, SIGKILL);
            do
                o->r = waitpid(pid, &o->st, 0);
            while (o->r < 0 && errno == EINTR);
            break;
        }
        /* (no heartbeat meanwhile: it watches nothing else, so a silence
         * of more than 1 s leaves the agents without a lease) */
        drain_output(pfd[0], o->text, sizeof o->text, &o->tn, &o->more);
        struct timespec two_ms = { 0, 2000000 };
        (void)nanosleep(&two_ms, NULL);
    }
    (void)kill(-pid, SIGKILL);          /* what it left in its group */
    drain_output(pfd[0], o->text, sizeof o->text, &o->tn, &o->more);
    if (pfd[0] >= 0)
        (void)close(pfd[0]);
    o->ms = (long long)((boot_ns() - t0) / 1000000);
    if (o->r != pid)
        o->r = -1;
    return 0;
}

/* Runs the fence (zke_guard_set_fence) for a term that ended without its
 * step-down, and waits for it within its budget; logs the outcome. 1 when
 * it succeeded or there is none, 0 when it failed (or could not run). */
static int run_fence(zke_guard *g, int64_t epoch, const char *reason, zke_log_fn *log,
                      void *ud)
{
    char msg[400];
    struct fence_cmd f;
    struct fence_run o;
    if (!fence_read(g, epoch, reason, &f))
        return 1;
    if (fence_run(&f, &o) != 0) {
        snprintf(msg, sizeof msg, "fail-stop: the fence for term %lld (%s) could not start: "
                 "fork: %s", (long long)epoch, reason, strerror(errno));
        say(log, ud, ZKE_LOG_ERROR, msg);
        return 0;
    }
    int exited = o.r > 0 && WIFEXITED(o.st);
    int ok = !o.timed_out && exited && WEXITSTATUS(o.st) == 0;
    if (o.timed_out)
        snprintf(msg, sizeof msg, "fail-stop: the fence for term %lld (%s) ran past its %d ms "
                 "and was killed", (long long)epoch, reason, f.budget);
    else if (ok)
        snprintf(msg, sizeof msg, "fail-stop: the fence for term %lld (%s) succeeded in %lld ms",
                 (long long)epoch, reason, o.ms);
    else if (exited)
        snprintf(msg, sizeof msg, "fail-stop: the fence for term %lld (%s) failed: exit %d in "
                 "%lld ms%s", (long long)epoch, reason, WEXITSTATUS(o.st), o.ms,
                 WEXITSTATUS(o.st) == 127 ? " (127: it could not be run?)" : "");
    else
        snprintf(msg, sizeof msg, "fail-stop: the fence for term %lld (%s) failed: signal %d "
                 "in %lld ms", (long long)epoch, reason, o.r > 0 ? WTERMSIG(o.st) : 0, o.ms);
    say(log, ud, ok ? ZKE_LOG_WARN : ZKE_LOG_ERROR, msg);
    while (o.tn > 0 && (o.text[o.tn - 1] == '\n' || o.text[o.tn - 1] == '\r'))
        o.tn--;
    if (o.tn > 0) {
        char out[sizeof o.text + 160];
        snprintf(out, sizeof out, "fail-stop: the fence for term %lld wrote: %.*s%s",
                 (long long)epoch, (int)o.tn, o.text, o.more > 0 ? " [...]" : "");
        if (o.more > 0)
            snprintf(out + strlen(out), sizeof out - strlen(out), " (%lld bytes more)", o.more);
        say(log, ud, ZKE_LOG_INFO, out);
    }
    return ok;
}

/* The fence of slot i's term, unless that epoch was fenced already (by
 * this watcher or one before it): 0 when it ran and failed, else 1. */
static int fence_once(zke_guard *g, int i, const char *reason, zke_log_fn *log, void *ud)
{
    int64_t epoch = atomic_load(&g->slot[i].epoch);
    if (atomic_exchange(&g->slot[i].fenced, epoch) != epoch && !run_fence(g, epoch, reason, log, ud))
        atomic_store(&g->slot[i].fence_bad, epoch);
    return atomic_load(&g->slot[i].fence_bad) != epoch;
}

/* The state letter and process group of /proc/<path>/stat (path: "PID" or
 * "PID/task/TID"), read into the stack: 0, or -1 when it is gone. */
static int proc_stat(const char *path, char *state, long *pgrp)
{
    char file[96], buf[512];
    if (snprintf(file, sizeof file, "/proc/%s/stat", path) >= (int)sizeof file)
        return -1;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[r > 0 ? r : 0] = '\0';
    /* "pid (comm) S ppid pgrp ...": after the last ')' (a comm may hold any) */
    const char *rp = strrchr(buf, ')');
    if (rp == NULL || rp[1] != ' ' || rp[2] == '\0' || rp[3] != ' ')
        return -1;
    char *end = NULL;
    (void)strtol(rp + 4, &end, 10);                             /* ppid */
    if (end == NULL || *end != ' ')
        return -1;
    *state = rp[2];
    *pgrp = strtol(end + 1, NULL, 10);
    return 0;
}

static int dead_state(char st)
{
    return st == 'Z' || st == 'X' || st == 'x';
}

/* Calls fn(ud, name) for each numeric entry of the folder (getdents64 into
 * the stack: nothing allocated) until it returns nonzero: that value, or 0. */
static int each_number(const char *folder, int (*fn)(void *ud, const char *name), void *ud)
{
    int dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    char buf[4096];
    long got;
    int r = 0;
    while (r == 0 && (got = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && r == 0;) {
            /* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            if (name[0] >= '1' && name[0] <= '9')
                r = fn(ud, name);
            if (reclen == 0)
                break;
            off += reclen;
        }
    }
    close(dfd);
    return r;
}

struct task_look { const char *pid; };

static int task_runs(void *ud, const char *tid)
{
    const struct task_look *t = ud;
    char path[64], st = 0;
    long pg = 0;
    snprintf(path, sizeof path, "%s/task/%s", t->pid, tid);
    return proc_stat(path, &st, &pg) == 0 && !dead_state(st);
}

struct group_look { pid_t pgid; int seen; };

/* A member of the group that has not exited: its main thread, or (a
 * zombie main thread: it called pthread_exit, or the process is being
 * killed) any other of its threads, which may still be in a call. */
static int member_runs(void *ud, const char *pid)
{
    struct group_look *l = ud;
    char st = 0;
    long pg = 0;
    if (proc_stat(pid, &st, &pg) != 0 || pg != (long)l->pgid)
        return 0;
    l->seen = 1;
    if (!dead_state(st))
        return 1;
    char folder[64];
    struct task_look t = { pid };
    snprintf(folder, sizeof folder, "/proc/%s/task", pid);
    return each_number(folder, task_runs, &t);
}

int guard_group_lives(pid_t pgid)
{
    errno = 0;
    int r = kill(-pgid, 0), e = errno;
    if (r != 0 && e == ESRCH)
        return 0;
    /* kill(2) reaches zombies too (a dead agent's children wait for their
     * new parent to reap them): the group is looked for in /proc */
    struct group_look l = { pgid, 0 };
    if (each_number("/proc", member_runs, &l))
        return 1;
    /* a member we may not signal that /proc does not show us (hidepid):
     * it may run */
    return !l.seen && r != 0 && e == EPERM;
}

/* Waits until no registered group (only the terms' unless all) has a
 * process that has not exited and no term cgroup has a process, until
 * deadline: 0, or the pgid of a group that still has one (-1: a cgroup). */
static pid_t wait_gone(zke_guard *g, int all, int64_t deadline)
{
    for (;;) {
        pid_t left = 0;
        for (int i = 0; i < ZKE_GUARD_GROUPS && left == 0; i++) {
            unsigned v = atomic_load(&g->group[i]);
            if (v == 0 || (!all && !(v & GROUP_TERM_BIT)))
                continue;
            if (v & GROUP_CGROUP_BIT)
                left = cg_populated(g, GROUP_ID(v)) ? -1 : 0;
            else if (guard_group_lives((pid_t)GROUP_ID(v)))
                left = (pid_t)GROUP_ID(v);
        }
        if (left == 0 || boot_ns() >= deadline)
            return left;
        struct timespec five_ms = { 0, 5000000 };
        (void)nanosleep(&five_ms, NULL);
    }
}

/* Each session the agent published (guard_session_set): closed when its
 * terms are over (over NULL), else left to expire with the reason `over`;
 * one line each. The session's remaining time is at most its timeout from
 * the agent's death (gone_ns): no try outlasts it. The entries are wiped. */
/* The longest session timeout the watcher believes (a value from a page a
 * crashing agent may have scribbled on must not keep it trying for days). */
#define GUARD_SESSION_MAX_MS 600000

/* One published session: closed, or why not; one line. */
static void close_one(struct gsess *e, int64_t gone_ns, zke_log_fn *log, void *ud)
{
    char msg[1024], why[300] = "", first[300] = "";
    uint64_t id = e->id;
    int timeout_ms = e->timeout_ms, naddr = e->naddr;
    if (timeout_ms <= 0 || timeout_ms > GUARD_SESSION_MAX_MS)
        timeout_ms = timeout_ms <= 0 ? 1000 : GUARD_SESSION_MAX_MS;
    if (naddr < 0 || naddr > GUARD_SESSION_ADDRS)
        naddr = 0;
    int64_t deadline = gone_ns + (int64_t)timeout_ms * 1000000;
    enum closer_outcome o = CLOSER_UNREACHED;
    int tries = 0;
    while (o == CLOSER_UNREACHED && naddr > 0 && boot_ns() < deadline) {
        for (int i = 0; i < naddr && o == CLOSER_UNREACHED && boot_ns() < deadline; i++) {
            const struct sockaddr *sa = &e->addr[i].sa.any;
            socklen_t len = e->addr[i].len;
            if (!(sa->sa_family == AF_INET && len == sizeof(struct sockaddr_in)) &&
                !(sa->sa_family == AF_INET6 && len == sizeof(struct sockaddr_in6)))
                continue;
            int64_t try_end = boot_ns() + 1000000000LL;
            o = closer_close_at(sa, len, id, e->passwd, try_end < deadline ? try_end : deadline, why,
                                sizeof why);
            tries++;
            if (first[0] == '\0' && o != CLOSER_CLOSED)
                snprintf(first, sizeof first, "%s", why);
        }
        if (o == CLOSER_UNREACHED) {
            struct timespec pause = { 0, 50000000 };   /* between rounds */
            (void)nanosleep(&pause, NULL);
        }
    }
    long long ms = (long long)((boot_ns() - gone_ns) / 1000000);
    if (o == CLOSER_CLOSED)
        snprintf(msg, sizeof msg, "fail-stop: the agent's session 0x%llx is closed (at %s, %lld ms "
                 "after the agent was gone, its terms over): its nodes are gone and the next in "
                 "line takes over now", (unsigned long long)id, why, ms);
    else if (o == CLOSER_GONE)
        snprintf(msg, sizeof msg, "fail-stop: the agent's session 0x%llx is not closed: it had "
                 "expired or was closed already (%s)", (unsigned long long)id, why);
    else if (o == CLOSER_REFUSED)
        snprintf(msg, sizeof msg, "fail-stop: the agent's session 0x%llx is not closed: the server "
                 "refused the close (%s; one that requires authentication refuses a client without "
                 "it); it expires as usual", (unsigned long long)id, why);
    else if (tries == 0)
        snprintf(msg, sizeof msg, "fail-stop: the agent's session 0x%llx is not closed: %s; it "
                 "expires as usual", (unsigned long long)id,
                 naddr == 0 ? "no server address to try" : "no time left of the session's timeout");
    else
        snprintf(msg, sizeof msg, "fail-stop: the agent's session 0x%llx is not closed: no server "
                 "took the close within the session's remaining %d ms (%d tr%s; first: %.200s; "
                 "last: %.200s); it expires as usual", (unsigned long long)id, timeout_ms, tries,
                 tries == 1 ? "y" : "ies", first, why);
    say(log, ud, o == CLOSER_CLOSED ? ZKE_LOG_INFO : ZKE_LOG_WARN, msg);
}

/* Each session the agent published (guard_session_set): closed when its
 * terms are over (over NULL), else left to expire with the reason `over`;
 * one line each. The session's remaining time is at most its timeout from
 * the agent's death (gone_ns): no try outlasts it. The entries are wiped. */
static void close_sessions(zke_guard *g, int64_t gone_ns, const char *over, zke_log_fn *log,
                           void *ud)
{
    char msg[600];
    for (int k = 0; k < GUARD_BASES; k++) {
        struct gsess *e = &g->sess[k];
        unsigned gen = atomic_load(&e->gen);
        if (gen == 0)
            continue;       /* never published */
        if (gen & 1) {
            snprintf(msg, sizeof msg, "fail-stop: the agent died while it published a session: "
                     "not closed; it expires as usual");
            say(log, ud, ZKE_LOG_WARN, msg);
        } else if (atomic_load(&e->live) && over != NULL) {
            snprintf(msg, sizeof msg, "fail-stop: the agent's session 0x%llx is not closed: %s; "
                     "it expires as usual", (unsigned long long)e->id, over);
            say(log, ud, ZKE_LOG_WARN, msg);
        } else if (atomic_load(&e->live)) {
            close_one(e, gone_ns, log, ud);
        }
        /* (the agent is gone: nobody writes the entry any more) */
        wipe(e->passwd, sizeof e->passwd);
        e->id = 0;
        atomic_store(&e->live, 0);
    }
}

/* One watcher's state (zke_guard_watch), on its stack. */
struct watch {
    zke_guard *g;
    pid_t agent;
    int flags;
    zke_log_fn *log;
    void *ud;
    timer_t boot_timer;
    int have_timer;
    int64_t fired;          /* the hard end it fired for (it fires once per end) */
    int64_t termed;         /* the soft end it sent SIGTERM for */
    int killed_agent;
    int ended;              /* it acted on zke_guard_end_now */
};

/* The wake-up signal, the parent's death as that signal, and the timer on
 * CLOCK_BOOTTIME. -1 when the signal cannot be had. */
static int watch_setup(struct watch *w)
{
    char msg[400];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wake;             /* no SA_RESTART: the futex wait returns */
    sigemptyset(&sa.sa_mask);
    watched = w->g;
    if (sigaction(WAKE_SIGNAL, &sa, NULL) != 0 ||
        prctl(PR_SET_PDEATHSIG, WAKE_SIGNAL) != 0)
        return -1;
    /* the futex's timeout is relative, on CLOCK_MONOTONIC, which stops
     * while the host is suspended: a timer at the absolute end on
     * CLOCK_BOOTTIME sends WAKE_SIGNAL instead, as soon as the host runs
     * again after an end passed during a suspend */
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = WAKE_SIGNAL;
    w->have_timer = timer_create(CLOCK_BOOTTIME, &sev, &w->boot_timer) == 0;
    if (!w->have_timer) {
        snprintf(msg, sizeof msg, "fail-stop: no timer on CLOCK_BOOTTIME (%s): an end that "
                 "passes while the host is suspended is acted on late", strerror(errno));
        say(w->log, w->ud, ZKE_LOG_WARN, msg);
    }
    return 0;
}

/* A hard end `d` passed (now): every group (and the agent, with
 * ZKE_GUARD_KILL_AGENT) SIGKILLed, then each term whose hard end passed
 * fenced once its processes are gone. */
static void watch_hard_end(struct watch *w, int64_t d, int64_t now)
{
    char msg[400];
    zke_guard *g = w->g;
    int kill_agent = (w->flags & ZKE_GUARD_KILL_AGENT) != 0;
    int n = kill_groups(g, kill_agent);
    if (kill_agent)
        w->killed_agent = kill(w->agent, SIGKILL) == 0;     /* also when it is stopped */
    w->fired = d;
    snprintf(msg, sizeof msg, "fail-stop: a term outlived its lease: its hard end "
             "(lease end + step-down budget) passed %lld ms ago and the agent has not "
             "ended it (its loop is stalled in one call, or the process is frozen): "
             "SIGKILL to %d process group%s%s", (long long)((now - d) / 1000000), n,
             n == 1 ? "" : "s", kill_agent ? " and to the agent" : "");
    if (kill_agent)
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (pid %d)", (int)w->agent);
    say(w->log, w->ud, ZKE_LOG_ERROR, msg);
    /* each term whose hard end passed: its state's undoing, once its
     * processes are gone (at most 1 s: a process in an uninterruptible
     * call dies only when it returns) */
    (void)wait_gone(g, kill_agent, boot_ns() + GUARD_GONE_WAIT_NS / 2);
    for (int i = 0, top = atomic_load(&g->top); i < top; i++) {
        int64_t di = end_of(g, &g->slot[i], &g->slot[i].hard);
        if (di != 0 && di <= now)
            (void)fence_once(g, i, "hard_end", w->log, w->ud);
    }
}

/* zke_guard_end_now: every group and the agent SIGKILLed at once,
 * whatever the flags (the loop then sees the agent gone: the fence and
 * the close follow, as after any death). */
static void watch_end_asked(struct watch *w, int by)
{
    char msg[400];
    int n = kill_groups(w->g, 1);
    w->killed_agent = kill(w->agent, SIGKILL) == 0;     /* also when it is stopped */
    w->ended = w->killed_agent;
    if (!w->ended)
        atomic_store(&end_asked, 0);    /* it watches on, as before the request */
    char who[32] = "an unknown pid";     /* -1 in end_asked: zke_guard_end_now's 0 */
    if (by > 0)
        snprintf(who, sizeof who, "pid %d", by);
    snprintf(msg, sizeof msg, "fail-stop: an end of the agent's terms was asked (by %s: "
             "zkelect ctl resign --force): SIGKILL to %d process group%s and to the agent "
             "(pid %d%s)", who, n, n == 1 ? "" : "s", (int)w->agent,
             w->killed_agent ? "" : ": it could not be signalled");
    say(w->log, w->ud, ZKE_LOG_ERROR, msg);
}

/* A soft end `sd` (slot soft_slot's) passed: SIGTERM to its groups. */
static void watch_soft_end(struct watch *w, int soft_slot, int64_t sd, int64_t now)
{
    char msg[400];
    zke_guard *g = w->g;
    int n = term_groups(g, soft_slot, sd);
    w->termed = sd;
    if (end_of(g, &g->slot[soft_slot], &g->slot[soft_slot].soft) == sd) {
        snprintf(msg, sizeof msg, "fail-stop: a term's lease ran out and the agent has "
                 "not begun its step-down %lld ms past its soft end (lease end + half the "
                 "margin; its loop is stalled in one call, or the process is frozen): "
                 "SIGTERM to %d process group%s; SIGKILL at the hard end",
                 (long long)((now - sd) / 1000000), n, n == 1 ? "" : "s");
        say(w->log, w->ud, ZKE_LOG_ERROR, msg);
    }
}

/* Sleeps until the next end to act on (d: the hard end, sd: the soft one,
 * as read under seq s), a standby's look or a heartbeat, whichever comes
 * first, or until a change of the page wakes it. */
static void watch_sleep(struct watch *w, unsigned s, int64_t d, int64_t sd, int64_t now)
{
    zke_guard *g = w->g;
    int soft_slot = 0;
    int64_t target = d != 0 && d != w->fired ? d : 0;
    if (sd != 0 && sd != w->termed && (target == 0 || sd < target))
        target = sd;
    /* on standby, with no end to wait for (or one further than the
     * standby's period), look again within half the shortest gap a
     * starting term's hard end has: the term's arming then needs no
     * wake-up (guard_slot_arm wakes only for an end before this one) */
    int64_t gap = standby_gap(g);
    if (gap > 0 && (target == 0 || target > now + gap / 2))
        target = now + gap / 2;
    /* and within a heartbeat, however far the end */
    if (target == 0 || target > now + GUARD_BEAT_NS)
        target = now + GUARD_BEAT_NS;
    atomic_store(&g->waiting_for, target);
    if (atomic_load(&g->seq) != s || earliest(g) != d || earliest_soft(g, &soft_slot) != sd)
        return;             /* moved meanwhile */
    struct timespec rel, *tp = NULL;
    if (target != 0) {
        int64_t left = target - boot_ns();
        if (left <= 0)
            return;
        rel.tv_sec = (time_t)(left / 1000000000);
        rel.tv_nsec = (long)(left % 1000000000);
        tp = &rel;
    }
    if (w->have_timer) {
        /* (a target of 0 disarms it) */
        struct itimerspec at = { { 0, 0 }, { (time_t)(target / 1000000000),
                                             (long)(target % 1000000000) } };
        (void)timer_settime(w->boot_timer, TIMER_ABSTIME, &at, NULL);
    }
    /* woken early (the timer, a signal) or late, the loop compares with
     * CLOCK_BOOTTIME again */
    int e = futex(&g->seq, FUTEX_WAIT, s, tp) != 0 ? errno : 0;
    if (w->have_timer) {
        /* disarmed while it acts: no stray signal in a fence's wait */
        struct itimerspec off = { { 0, 0 }, { 0, 0 } };
        (void)timer_settime(w->boot_timer, 0, &off, NULL);
    }
    if (e != 0 && e != EAGAIN && e != EINTR && e != ETIMEDOUT) {
        struct timespec pause = { 0, 20000000 };  /* unexpected: do not spin */
        (void)nanosleep(&pause, NULL);
    }
}

/* The agent is gone (killed, crashed, exited): what it left dies now;
 * once its processes are gone (at most 2 s), each term it held (not
 * fenced at its hard end already) is fenced, then its sessions closed:
 * only once every term is over (order is the promise: the successor may
 * start the moment the nodes go). */
static void watch_agent_gone(struct watch *w)
{
    char msg[400];
    zke_guard *g = w->g;
    int64_t gone_ns = boot_ns();
    int n = kill_groups(g, 1);
    int cg_empty = cg_clean(g);
    if (n > 0 && !w->killed_agent) {    /* (if it did, its line said it all) */
        snprintf(msg, sizeof msg, "fail-stop: the agent (pid %d) is gone: SIGKILL to the %d "
                 "process group%s it left", (int)w->agent, n, n == 1 ? "" : "s");
        say(w->log, w->ud, ZKE_LOG_WARN, msg);
    }
    pid_t left = wait_gone(g, 1, boot_ns() + GUARD_GONE_WAIT_NS);
    int64_t bad_epoch = 0;
    for (int i = 0, top = atomic_load(&g->top); i < top; i++)
        if (atomic_load(&g->slot[i].hard) != 0 && !fence_once(g, i, "agent_gone", w->log, w->ud))
            bad_epoch = atomic_load(&g->slot[i].epoch);
    char over[200];
    if (!cg_empty || left < 0)
        snprintf(over, sizeof over, "its term cgroups did not empty within 2 s of their SIGKILL");
    else if (left > 0)
        snprintf(over, sizeof over, "process group %d still had a process 2 s after its SIGKILL",
                 (int)left);
    else if (bad_epoch != 0)
        snprintf(over, sizeof over, "a fence failed (term %lld), so the term's state may still be "
                 "in place", (long long)bad_epoch);
    else if (atomic_load(&g->unheld))
        snprintf(over, sizeof over, "a process group could not be registered with the watcher "
                 "(its table was full), so it cannot vouch that the terms are over");
    close_sessions(g, gone_ns, !cg_empty || left != 0 || bad_epoch != 0 ||
                   atomic_load(&g->unheld) ? over : NULL, w->log, w->ud);
}

int zke_guard_watch(zke_guard *g, int flags, zke_log_fn *log, void *ud)
{
    if (g == NULL)
        return -1;
    struct watch w = { .g = g, .agent = (pid_t)atomic_load(&g->agent_pid), .flags = flags,
                       .log = log, .ud = ud };
    if (watch_setup(&w) != 0)
        return -1;
    while (getppid() == w.agent) {
        atomic_store(&g->beat, boot_ns());
        unsigned s = atomic_load(&g->seq);
        int soft_slot = 0;
        int64_t d = earliest(g), now = boot_ns(), sd = earliest_soft(g, &soft_slot);
        int by = atomic_load(&end_asked);
        if (w.ended) {
            /* the agent was SIGKILLed: until it is gone (the parent-death
             * signal cuts the pause short) */
            struct timespec pause = { 0, 20000000 };
            (void)nanosleep(&pause, NULL);
        } else if (by != 0)
            watch_end_asked(&w, by);
        else if (d != 0 && d != w.fired && now >= d)
            watch_hard_end(&w, d, now);
        else if (sd != 0 && sd != w.termed && now >= sd)
            watch_soft_end(&w, soft_slot, sd, now);
        else
            watch_sleep(&w, s, d, sd, now);
    }
    watch_agent_gone(&w);
    if (w.have_timer)
        (void)timer_delete(w.boot_timer);
    watched = NULL;
    return 0;
}
