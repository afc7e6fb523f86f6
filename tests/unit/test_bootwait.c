/* Unit tests of bootwait.c on a real libev loop: a bootwait is a timerfd on
 * CLOCK_BOOTTIME set to an absolute time (so that an end that passed while
 * the host was suspended wakes the loop at resume: a real suspend cannot
 * run here, so the clock it waits on is checked in /proc/self/fdinfo); it
 * fires once, never before its time, replaces the time set before, fires
 * at once for a time passed, keeps the loop alive only while set; the
 * fallback (no descriptor left) does the same. A clockstep reports a
 * setting of the wall clock (the test sets it to the time it reads, a step
 * of microseconds, as root with CAP_SYS_TIME). Bounds are loose (ASan, a
 * loaded machine): each checks an order, never a speed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "bootwait.h"
#include "check.h"

static int64_t boot_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int fired;
static int64_t fired_at;

static void on_due(struct bootwait *w)
{
    (void)w;
    fired++;
    fired_at = boot_ns();
}

/* The clock id of a timerfd, from fdinfo ("clockid: 7" is CLOCK_BOOTTIME). */
static int fd_clock(int fd)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *k = strstr(buf, "clockid:");
    return k != NULL ? (int)strtol(k + 8, NULL, 10) : -1;
}

static void test_fires_at_an_absolute_boot_time(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct bootwait w;
    bootwait_init(&w, loop, on_due);
    CHECK(w.fd >= 0);
    CHECK(fd_clock(w.fd) == CLOCK_BOOTTIME);
    fired = 0;
    int64_t at = boot_ns() + 300000000;
    bootwait_at(&w, boot_ns() + 5000000000LL);
    bootwait_at(&w, at);                        /* replaces the one before */
    CHECK(bootwait_armed(&w));
    ev_run(loop, 0);                            /* returns once nothing is set */
    CHECK(fired == 1 && fired_at >= at);
    CHECK(!bootwait_armed(&w));
    printf("  fired %.1f ms after its time\n", (double)(fired_at - at) / 1e6);

    /* a time already passed: at the next iteration */
    bootwait_at(&w, boot_ns() - 1000000000LL);
    ev_run(loop, 0);
    CHECK(fired == 2);
    /* stopped: nothing, and the loop is not kept */
    bootwait_at(&w, boot_ns() + 100000000);
    bootwait_stop(&w);
    ev_run(loop, 0);
    CHECK(fired == 2);
    bootwait_close(&w);
    CHECK(w.fd == -1);
    ev_loop_destroy(loop);
}

static void test_the_fallback_without_a_descriptor(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct rlimit old, none;
    CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
    /* no descriptor may be opened: timerfd_create fails (EMFILE) */
    none = old;
    none.rlim_cur = 0;
    struct bootwait w;
    CHECK(setrlimit(RLIMIT_NOFILE, &none) == 0);
    bootwait_init(&w, loop, on_due);
    CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
    CHECK(w.fd == -1);
    fired = 0;
    int64_t at = boot_ns() + 200000000;
    bootwait_at(&w, at);
    ev_run(loop, 0);
    CHECK(fired == 1 && fired_at >= at - 2000000);  /* (libev's timer: ms resolution) */
    bootwait_close(&w);
    ev_loop_destroy(loop);
}

static int steps;
static int64_t step_seen;

static void on_step(struct clockstep *w, int64_t step_ns)
{
    (void)w;
    steps++;
    step_seen = step_ns;
}

static void test_a_setting_of_the_wall_clock_is_seen(void)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct clockstep cs;
    clockstep_init(&cs, loop, on_step);
    CHECK(cs.fd >= 0);
    steps = 0;
    ev_run(loop, EVRUN_NOWAIT);
    CHECK(steps == 0);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (clock_settime(CLOCK_REALTIME, &now) != 0) {
        printf("  info: clock_settime: %s: the step is not exercised here\n", strerror(errno));
    } else {
        for (int i = 0; i < 100 && steps == 0; i++)
            ev_run(loop, EVRUN_NOWAIT | EVRUN_ONCE);
        CHECK(steps == 1);
        /* set to the time read before: a step of microseconds, backward
         * (or forward by a preemption between the init's two clock reads) */
        CHECK(step_seen < 50000000 && step_seen > -1000000000LL);
        printf("  the wall clock set: a step of %.3f ms seen\n", (double)step_seen / 1e6);
    }
    clockstep_close(&cs);
    CHECK(cs.fd == -1);
    ev_loop_destroy(loop);
}

int main(void)
{
    RUN(test_fires_at_an_absolute_boot_time);
    RUN(test_the_fallback_without_a_descriptor);
    RUN(test_a_setting_of_the_wall_clock_is_seen);
    return check_done();
}
