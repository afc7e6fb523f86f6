/*
 * httpd.c - libmicrohttpd driven by libev (see httpd.h).
 *
 * MHD runs in "external polling" mode with epoll: it hands us one epoll fd
 * that is readable whenever any of its sockets (listening or connected) has
 * work, and a timeout (MHD_get_timeout) after which it must be run even
 * without I/O (idle-connection expiry, buffered data). After every
 * MHD_run() the timer is set again from MHD_get_timeout().
 *
 * libmicrohttpd is not linked: the first httpd_new() loads it with dlopen()
 * (MHD_SONAME) and resolves the few functions used here into `mhd`. Its
 * dependencies (gnutls, p11-kit, nettle, gmp, idn2, unistring...) cost about
 * 2 MiB of resident pages and some start-up time that an agent without
 * --status never pays. microhttpd.h is still used for the types and
 * constants; MHD_FN makes the compiler check every pointer type against
 * the header's prototype. The library stays loaded until exit (no dlclose:
 * gnutls keeps process-wide state).
 */
#define _GNU_SOURCE
#include "httpd.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>
#include <microhttpd.h>

/* The soname of libmicrohttpd 0.9.x (Debian 12: libmicrohttpd12). */
#define MHD_SONAME "libmicrohttpd.so.12"

/* The types of the functions this file calls, as microhttpd.h declares
 * them; MHD_FN checks each against the header at compile time (_Generic
 * does not evaluate its operand: nothing of libmicrohttpd is referenced at
 * link time). */
typedef struct MHD_Daemon *mhd_start_daemon_fn(unsigned int, uint16_t, MHD_AcceptPolicyCallback,
                                               void *, MHD_AccessHandlerCallback, void *, ...);
typedef void mhd_stop_daemon_fn(struct MHD_Daemon *);
typedef const union MHD_DaemonInfo *mhd_get_daemon_info_fn(struct MHD_Daemon *,
                                                           enum MHD_DaemonInfoType, ...);
typedef enum MHD_Result mhd_get_timeout_fn(struct MHD_Daemon *, MHD_UNSIGNED_LONG_LONG *);
typedef enum MHD_Result mhd_run_fn(struct MHD_Daemon *);
typedef struct MHD_Response *mhd_create_response_from_buffer_fn(size_t, void *,
                                                                enum MHD_ResponseMemoryMode);
typedef enum MHD_Result mhd_add_response_header_fn(struct MHD_Response *, const char *,
                                                   const char *);
typedef enum MHD_Result mhd_queue_response_fn(struct MHD_Connection *, unsigned int,
                                              struct MHD_Response *);
typedef void mhd_destroy_response_fn(struct MHD_Response *);

#define MHD_FN(name) \
    _Static_assert(_Generic(&MHD_##name, mhd_##name##_fn *: 1, default: 0), \
                   "mhd_" #name "_fn differs from microhttpd.h's MHD_" #name)
MHD_FN(start_daemon);
MHD_FN(stop_daemon);
MHD_FN(get_daemon_info);
MHD_FN(get_timeout);
MHD_FN(run);
MHD_FN(create_response_from_buffer);
MHD_FN(add_response_header);
MHD_FN(queue_response);
MHD_FN(destroy_response);

/* The functions this file calls, filled by mhd_load(); loop thread only. */
static struct {
    void *lib;                  /* dlopen handle; NULL until loaded */
    mhd_start_daemon_fn *start_daemon;
    mhd_stop_daemon_fn *stop_daemon;
    mhd_get_daemon_info_fn *get_daemon_info;
    mhd_get_timeout_fn *get_timeout;
    mhd_run_fn *run;
    mhd_create_response_from_buffer_fn *create_response_from_buffer;
    mhd_add_response_header_fn *add_response_header;
    mhd_queue_response_fn *queue_response;
    mhd_destroy_response_fn *destroy_response;
} mhd;

/* POSIX: a function pointer has the size and representation of void *
 * (what dlsym() returns); memcpy() converts without a pedantic cast. */
_Static_assert(sizeof(void (*)(void)) == sizeof(void *),
               "dlsym needs code and data pointers alike");

/* Resolves name into the function pointer at fn (loop thread, while loading). */
static int mhd_sym(const char *name, void *fn, char *err, size_t errlen)
{
    void *p = dlsym(mhd.lib, name);
    if (p == NULL) {
        snprintf(err, errlen, "--status: %s has no %s (libmicrohttpd too old?)", MHD_SONAME, name);
        return -1;
    }
    memcpy(fn, &p, sizeof p);
    return 0;
}

/* Loads libmicrohttpd, once per process (loop thread). 0, or -1 with a
 * one-line reason in err (the library or one of its functions missing);
 * a later call tries again. */
static int mhd_load(char *err, size_t errlen)
{
    if (mhd.lib != NULL)
        return 0;
    mhd.lib = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (mhd.lib == NULL) {
        const char *why = dlerror();
        snprintf(err, errlen, "--status needs libmicrohttpd (Debian: apt-get install "
                 "libmicrohttpd12), which could not be loaded: %s", why != NULL ? why : MHD_SONAME);
        return -1;
    }
    if (mhd_sym("MHD_start_daemon", &mhd.start_daemon, err, errlen) != 0 ||
        mhd_sym("MHD_stop_daemon", &mhd.stop_daemon, err, errlen) != 0 ||
        mhd_sym("MHD_get_daemon_info", &mhd.get_daemon_info, err, errlen) != 0 ||
        mhd_sym("MHD_get_timeout", &mhd.get_timeout, err, errlen) != 0 ||
        mhd_sym("MHD_run", &mhd.run, err, errlen) != 0 ||
        mhd_sym("MHD_create_response_from_buffer", &mhd.create_response_from_buffer, err,
                errlen) != 0 ||
        mhd_sym("MHD_add_response_header", &mhd.add_response_header, err, errlen) != 0 ||
        mhd_sym("MHD_queue_response", &mhd.queue_response, err, errlen) != 0 ||
        mhd_sym("MHD_destroy_response", &mhd.destroy_response, err, errlen) != 0) {
        dlclose(mhd.lib);
        mhd.lib = NULL;
        return -1;
    }
    return 0;
}

struct httpd {
    struct ev_loop *loop;
    struct MHD_Daemon *d;
    int lfd;
    ev_io io;
    ev_timer tm;
    httpd_handler *fn;
    httpd_log_fn *log;
    void *ud;
    char addr[64];
};

struct parsed {
    struct sockaddr_storage ss;
    socklen_t len;
    int loopback;
};

static int parse_addr(const char *spec, struct parsed *p, char *err, size_t errlen)
{
    char host[64];
    const char *port;
    memset(p, 0, sizeof *p);
    if (spec == NULL || *spec == '\0') {
        snprintf(err, errlen, "--status: empty address (expected PORT or HOST:PORT)");
        return -1;
    }
    for (const char *c = spec; *c; c++) {
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) {
            /* the reason is one line: the value is not shown */
            snprintf(err, errlen, "--status: the address contains a space or a control character");
            return -1;
        }
    }
    const char *colon = strrchr(spec, ':');
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (close == NULL || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof host) {
            snprintf(err, errlen, "--status '%s': expected [IPV6]:PORT", spec);
            return -1;
        }
        memcpy(host, spec + 1, (size_t)(close - spec - 1));
        host[close - spec - 1] = '\0';
        port = close + 2;
    } else if (colon == NULL) {
        snprintf(host, sizeof host, "127.0.0.1");
        port = spec;
    } else {
        if (strchr(spec, ':') != colon || (size_t)(colon - spec) >= sizeof host) {
            snprintf(err, errlen, "--status '%s': expected HOST:PORT (IPv6 as [ADDR]:PORT)", spec);
            return -1;
        }
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = '\0';
        port = colon + 1;
    }
    char *end;
    errno = 0;
    long pn = strtol(port, &end, 10);
    if (!isdigit((unsigned char)port[0]) || *end != '\0' || errno != 0 || pn < 0 || pn > 65535) {
        snprintf(err, errlen, "--status '%s': port '%s' is not a number from 0 to 65535", spec, port);
        return -1;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)&p->ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&p->ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)pn);
        p->len = sizeof *v4;
        p->loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)pn);
        p->len = sizeof *v6;
        p->loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    } else {
        snprintf(err, errlen, "--status '%s': '%s' is not a numeric IPv4 or IPv6 address", spec,
                 host);
        return -1;
    }
    return 0;
}

int httpd_check_addr(const char *spec, int *loopback, char *err, size_t errlen)
{
    struct parsed p;
    if (parse_addr(spec, &p, err, errlen) != 0)
        return -1;
    if (loopback != NULL)
        *loopback = p.loopback;
    return 0;
}

static void logf_mhd(void *cls, const char *fmt, va_list ap)
{
    httpd *h = cls;
    char buf[256];
    if (h->log == NULL)
        return;
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    h->log(h->ud, ZKE_LOG_DEBUG, buf);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    httpd *h = cls;
    static int seen;
    (void)version;
    (void)upload_data;
    /* GET and HEAD are answered on the second call, once MHD has the whole
     * request (an answer queued on the first call makes MHD close the
     * connection, so no keep-alive). Other methods are answered (405) on
     * the first call: their bodies are never read, and MHD closes such a
     * connection after the reply. A body sent with a GET is discarded. */
    int plain = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (plain && *con_cls == NULL) {
        *con_cls = &seen;
        return MHD_YES;
    }
    if (plain && *upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct httpd_reply r = { 200, NULL, NULL, 0, NULL };
    h->fn(h->ud, method, url, &r);
    struct MHD_Response *resp =
        r.body != NULL ? mhd.create_response_from_buffer(r.len, r.body, MHD_RESPMEM_MUST_FREE)
                       : mhd.create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (resp == NULL) {
        free(r.body);
        return MHD_NO;              /* closes the connection */
    }
    (void)mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                  r.type ? r.type : "text/plain; charset=utf-8");
    (void)mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r.allow != NULL)
        (void)mhd.add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r.allow);
    enum MHD_Result rc = mhd.queue_response(c, (unsigned)(r.status ? r.status : 200), resp);
    mhd.destroy_response(resp);
    return rc;
}

static void arm(httpd *h)
{
    MHD_UNSIGNED_LONG_LONG ms;
    ev_timer_stop(h->loop, &h->tm);
    if (mhd.get_timeout(h->d, &ms) == MHD_YES) {
        ev_timer_set(&h->tm, (double)ms / 1000.0, 0.);
        ev_timer_start(h->loop, &h->tm);
    }
}

static void io_cb(struct ev_loop *loop, ev_io *w, int revents)
{
    httpd *h = w->data;
    (void)loop;
    (void)revents;
    (void)mhd.run(h->d);
    arm(h);
}

static void tm_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    httpd *h = w->data;
    (void)loop;
    (void)revents;
    (void)mhd.run(h->d);
    arm(h);
}

httpd *httpd_new(struct ev_loop *loop, const char *spec, httpd_handler *fn, void *ud,
                 httpd_log_fn *log, char *err, size_t errlen, int *sys_err)
{
    struct parsed p;
    *sys_err = 0;
    if (parse_addr(spec, &p, err, errlen) != 0 || mhd_load(err, errlen) != 0)
        return NULL;
    httpd *h = calloc(1, sizeof *h);
    if (h == NULL) {
        snprintf(err, errlen, "--status: out of memory");
        return NULL;
    }
    h->loop = loop;
    h->fn = fn;
    h->ud = ud;
    h->log = log;
    h->lfd = socket(p.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (h->lfd < 0 || setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(h->lfd, (struct sockaddr *)&p.ss, p.len) != 0 || listen(h->lfd, 64) != 0) {
        *sys_err = errno;
        snprintf(err, errlen, "--status '%s': cannot listen: %s", spec, strerror(*sys_err));
        if (h->lfd >= 0)
            close(h->lfd);
        free(h);
        return NULL;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    memset(&got, 0, sizeof got);
    got.ss_family = p.ss.ss_family;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (getsockname(h->lfd, (struct sockaddr *)&got, &gl) == 0) {
        if (got.ss_family == AF_INET) {
            struct sockaddr_in *v4 = (struct sockaddr_in *)&got;
            inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
            port = ntohs(v4->sin_port);
        } else {
            struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&got;
            inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
            port = ntohs(v6->sin6_port);
        }
    }
    snprintf(h->addr, sizeof h->addr, got.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", host, port);

    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    if (p.ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = mhd.start_daemon(flags, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_EXTERNAL_LOGGER, logf_mhd, h,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->lfd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
                            MHD_OPTION_STRICT_FOR_CLIENT, (int)1,
                            MHD_OPTION_END);
    const union MHD_DaemonInfo *info =
        h->d != NULL ? mhd.get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    if (info == NULL) {
        snprintf(err, errlen, "--status '%s': cannot start the HTTP server (libmicrohttpd)", spec);
        if (h->d != NULL)
            mhd.stop_daemon(h->d);      /* closes the listening socket too */
        else
            close(h->lfd);
        free(h);
        return NULL;
    }
    ev_io_init(&h->io, io_cb, info->epoll_fd, EV_READ);
    h->io.data = h;
    ev_set_priority(&h->io, EV_MINPRI);
    ev_io_start(loop, &h->io);
    ev_init(&h->tm, tm_cb);
    h->tm.data = h;
    ev_set_priority(&h->tm, EV_MINPRI);
    arm(h);
    return h;
}

const char *httpd_addr(const httpd *h)
{
    return h->addr;
}

void httpd_free(httpd *h)
{
    if (h == NULL)
        return;
    ev_io_stop(h->loop, &h->io);
    ev_timer_stop(h->loop, &h->tm);
    mhd.stop_daemon(h->d);
    free(h);
}
