/* srvask.c - see srvask.h. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE             /* SOCK_NONBLOCK, SOCK_CLOEXEC, NI_MAXHOST */
#include "srvask.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#define REPLY_MAX 4096              /* conf's reply is some 350 bytes, srvr's 250 */

static const char *const WORDS[2] = { "conf", "srvr" };

struct job {
    struct srvask *q;
    int srv, word;                  /* index in q->info; 0 conf, 1 srvr */
    int connected;
    ev_io io;
    size_t len;
    char buf[REPLY_MAX];
};

struct srvask {
    struct ev_loop *loop;
    int n;
    struct srv_info info[SRVASK_MAX];
    struct sockaddr_storage addr[SRVASK_MAX];
    socklen_t alen[SRVASK_MAX];
    struct job *jobs;               /* the round's, 2 per server asked */
    int njobs, active;
    ev_timer deadline, report;
    srvask_done_fn *done;
    void *ud;
};

/* --- the connect string ------------------------------------------------- */

static void add_entry(struct srvask *q, const char *entry)
{
    char host[256], name[72];
    const char *port = "2181";
    size_t hl;
    const char *colon = strrchr(entry, ':');
    if (entry[0] == '[') {
        const char *rb = strchr(entry, ']');
        if (rb == NULL)
            return;
        hl = (size_t)(rb - entry - 1);
        if (hl >= sizeof host)
            return;
        memcpy(host, entry + 1, hl);
        if (rb[1] == ':')
            port = rb + 2;
    } else {
        hl = colon != NULL ? (size_t)(colon - entry) : strlen(entry);
        if (hl >= sizeof host)
            return;
        memcpy(host, entry, hl);
        if (colon != NULL)
            port = colon + 1;
    }
    host[hl] = '\0';
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    if (hl == 0 || getaddrinfo(host, port, &hints, &res) != 0)
        return;
    int many = res != NULL && res->ai_next != NULL;
    for (struct addrinfo *r = res; r != NULL && q->n < SRVASK_MAX; r = r->ai_next) {
        if (r->ai_addrlen > sizeof q->addr[0])
            continue;
        char num[NI_MAXHOST] = "?";
        if (many)
            (void)getnameinfo(r->ai_addr, r->ai_addrlen, num, sizeof num, NULL, 0, NI_NUMERICHOST);
        snprintf(name, sizeof name, many ? "%s (%s)" : "%s", entry, num);
        struct srv_info *s = &q->info[q->n];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%s", name);
        memcpy(&q->addr[q->n], r->ai_addr, r->ai_addrlen);
        q->alen[q->n] = (socklen_t)r->ai_addrlen;
        q->n++;
    }
    freeaddrinfo(res);
}

static void read_hosts(struct srvask *q, const char *hosts)
{
    size_t len = strcspn(hosts, "/");
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return;
    memcpy(copy, hosts, len);
    copy[len] = '\0';
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e != NULL; e = strtok_r(NULL, ",", &save)) {
        while (*e == ' ')
            e++;
        size_t el = strlen(e);
        while (el > 0 && e[el - 1] == ' ')
            e[--el] = '\0';
        if (el > 0)
            add_entry(q, e);
    }
    free(copy);
}

/* --- one word asked of one server ---------------------------------------- */

/* The job is over: eof, the server closed after its reply. */
static void job_end(struct job *j, int eof)
{
    struct srvask *q = j->q;
    struct srv_info *s = &q->info[j->srv];
    if (j->io.fd < 0)
        return;
    ev_io_stop(q->loop, &j->io);
    close(j->io.fd);
    j->io.fd = -1;
    if (j->word == 0) {
        struct srv_conf c;
        if (srvconf_parse_conf(j->buf, j->len, &c) == 0) {
            s->told = SRV_CONF;
            s->conf = c;
        } else {
            /* refused by the whitelist: an answer; anything else (an
             * empty reply, a server still starting) is asked again */
            s->told = j->connected && eof && srvconf_refused(j->buf, j->len) ? SRV_NO_CONF
                                                                             : SRV_UNREACHED;
        }
    } else if (j->connected) {
        enum srv_mode m = srvconf_parse_mode(j->buf, j->len);
        if (m != SRV_MODE_UNKNOWN || s->mode == SRV_MODE_UNKNOWN)
            s->mode = m;
    }
    if (--q->active == 0) {
        ev_timer_stop(q->loop, &q->deadline);
        ev_timer_start(q->loop, &q->report);
    }
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    struct job *j = w->data;
    (void)loop;
    if (!j->connected && (revents & EV_WRITE)) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0 ||
            send(w->fd, WORDS[j->word], 4, MSG_NOSIGNAL) != 4) {
            job_end(j, 0);
            return;
        }
        j->connected = 1;
        ev_io_stop(j->q->loop, w);
        ev_io_set(w, w->fd, EV_READ);
        ev_io_start(j->q->loop, w);
        return;
    }
    ssize_t r = recv(w->fd, j->buf + j->len, sizeof j->buf - j->len, 0);
    if (r > 0) {
        j->len += (size_t)r;
        if (j->len == sizeof j->buf)
            job_end(j, 1);          /* longer than any reply: what came is all we read */
    } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        job_end(j, r == 0);
    }
}

static int job_start(struct srvask *q, struct job *j, int srv, int word)
{
    j->q = q;
    j->srv = srv;
    j->word = word;
    int fd = socket(q->addr[srv].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (const struct sockaddr *)&q->addr[srv], q->alen[srv]) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    ev_io_init(&j->io, io_cb, fd, EV_WRITE);
    j->io.data = j;
    ev_io_start(q->loop, &j->io);
    q->active++;
    return 0;
}

/* --- rounds ------------------------------------------------------------- */

static void end_round(struct srvask *q)
{
    for (int i = 0; i < q->njobs; i++)
        if (q->jobs[i].io.fd >= 0)
            job_end(&q->jobs[i], 0);
    ev_timer_stop(q->loop, &q->deadline);
    ev_timer_stop(q->loop, &q->report);
    free(q->jobs);
    q->jobs = NULL;
    q->njobs = q->active = 0;
}

static void deadline_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct srvask *q = w->data;
    (void)loop;
    (void)revents;
    end_round(q);
    q->done(q->ud);
}

static void report_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct srvask *q = w->data;
    (void)loop;
    (void)revents;
    end_round(q);
    q->done(q->ud);
}

struct srvask *srvask_new(struct ev_loop *loop, const char *hosts, srvask_done_fn *done, void *ud)
{
    struct srvask *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    q->loop = loop;
    q->done = done;
    q->ud = ud;
    read_hosts(q, hosts);
    if (q->n == 0) {
        free(q);
        return NULL;
    }
    ev_timer_init(&q->deadline, deadline_cb, 0., 0.);
    ev_timer_init(&q->report, report_cb, 0., 0.);
    q->deadline.data = q->report.data = q;
    return q;
}

int srvask_round(struct srvask *q, int deadline_ms)
{
    int ask = 0;
    if (q->jobs != NULL)
        return 0;
    for (int i = 0; i < q->n; i++)
        ask += q->info[i].told == SRV_UNASKED || q->info[i].told == SRV_UNREACHED;
    if (ask == 0)
        return 0;
    q->jobs = calloc((size_t)ask * 2, sizeof *q->jobs);
    if (q->jobs == NULL)
        return 0;
    for (int i = 0; i < q->n; i++) {
        if (q->info[i].told != SRV_UNASKED && q->info[i].told != SRV_UNREACHED)
            continue;
        q->info[i].told = SRV_UNREACHED;        /* until it answers */
        for (int w = 0; w < 2; w++) {
            struct job *j = &q->jobs[q->njobs++];
            j->io.fd = -1;
            (void)job_start(q, j, i, w);        /* a socket refused: not reached */
        }
    }
    ev_timer_set(&q->deadline, deadline_ms > 0 ? deadline_ms / 1000.0 : 0., 0.);
    ev_timer_start(q->loop, &q->deadline);
    if (q->active == 0)
        ev_timer_start(q->loop, &q->report);
    return 1;
}

int srvask_busy(const struct srvask *q)
{
    return q != NULL && q->jobs != NULL;
}

void srvask_cancel(struct srvask *q)
{
    if (q != NULL && q->jobs != NULL)
        end_round(q);
}

const struct srv_info *srvask_servers(const struct srvask *q, int *n)
{
    *n = q->n;
    return q->info;
}

void srvask_free(struct srvask *q)
{
    if (q == NULL)
        return;
    srvask_cancel(q);
    free(q);
}
