/* interrupt.c - see interrupt.h. */
#define _GNU_SOURCE         /* ppoll */
#include "interrupt.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t caught;
static sigset_t waiting;    /* the mask inside interrupt_poll: the three unblocked */

static void on_signal(int sig)
{
    if (caught == 0)
        caught = sig;
}

void interrupt_setup(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa;
    sigset_t block;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        (void)sigaction(sigs[i], &sa, NULL);
        sigaddset(&block, sigs[i]);
    }
    (void)signal(SIGPIPE, SIG_IGN);
    (void)sigprocmask(SIG_BLOCK, &block, &waiting);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigdelset(&waiting, sigs[i]);
}

int interrupt_signal(void)
{
    return caught;
}

int interrupt_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    if (caught != 0) {
        errno = EINTR;
        return -1;
    }
    struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };
    return ppoll(fds, n, timeout_ms < 0 ? NULL : &ts, &waiting);
}
