/*
 * interrupt.h - SIGINT, SIGTERM and SIGHUP for a foreground command that
 * must clean up what it started before it exits (zkelect demo): the three
 * are blocked, except while the command waits in interrupt_poll(), which
 * then returns at once. So a signal is never lost and never lands between
 * a check and a wait. Children started with child_spawn get an empty mask.
 *
 * Single-threaded; interrupt_setup() once, before the first child.
 */
#ifndef ZKELECT_INTERRUPT_H
#define ZKELECT_INTERRUPT_H

#include <poll.h>

/* Catches the three signals (a flag) and blocks them; SIGPIPE is ignored
 * (a closed stdout must not kill the command before it cleans up). */
void interrupt_setup(void);
/* The first of the signals that arrived, or 0. */
int interrupt_signal(void);
/* poll(2) with the signals unblocked: returns what poll returns; -1 with
 * errno EINTR when a signal arrived (interrupt_signal() says which). A
 * signal that came before the call makes it return at once. */
int interrupt_poll(struct pollfd *fds, nfds_t n, int timeout_ms);

#endif
