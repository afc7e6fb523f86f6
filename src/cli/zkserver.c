/* zkserver.c - see zkserver.h. */
#define _GNU_SOURCE         /* asprintf */
#include "zkserver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "interrupt.h"

/* a path names a regular file that may be executed / read */
static int is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

static int is_readable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, R_OK) == 0;
}

/* "java" in one of $PATH's directories, allocated, or NULL */
static char *java_on_path(void)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path != NULL ? path : "/usr/local/bin:/usr/bin:/bin");
    char *found = NULL, *save = NULL;
    for (char *d = copy != NULL ? strtok_r(copy, ":", &save) : NULL; d != NULL && found == NULL;
         d = strtok_r(NULL, ":", &save)) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/java", *d != '\0' ? d : ".") < 0)
            break;
        if (is_executable(cand))
            found = cand;
        else
            free(cand);
    }
    free(copy);
    return found;
}

static enum zkserver_outcome find_java(struct zkserver *zs, const char *java_flag, char **why)
{
    const char *home = getenv("JAVA_HOME");
    if (java_flag != NULL) {
        if (is_executable(java_flag))
            return (zs->java = strdup(java_flag)) != NULL ? ZKSERVER_OK : ZKSERVER_NOMEM;
        return asprintf(why, "--java %s: no java there; install a Java runtime: apt-get install "
                        ZKSERVER_JAVA_PACKAGE, java_flag) < 0 ? ZKSERVER_NOMEM : ZKSERVER_MISSING;
    }
    if (home != NULL && *home != '\0') {
        if (asprintf(&zs->java, "%s/bin/java", home) < 0)
            return ZKSERVER_NOMEM;
        if (is_executable(zs->java))
            return ZKSERVER_OK;
        int n = asprintf(why, "no java at $JAVA_HOME/bin/java (%s): install a Java runtime: "
                         "apt-get install " ZKSERVER_JAVA_PACKAGE ", or fix JAVA_HOME", zs->java);
        return n < 0 ? ZKSERVER_NOMEM : ZKSERVER_MISSING;
    }
    zs->java = java_on_path();
    if (zs->java == NULL && is_executable("/usr/lib/jvm/default-java/bin/java"))
        zs->java = strdup("/usr/lib/jvm/default-java/bin/java");
    if (zs->java != NULL)
        return ZKSERVER_OK;
    return asprintf(why, "no java on PATH (and no JAVA_HOME): install a Java runtime: apt-get "
                    "install " ZKSERVER_JAVA_PACKAGE) < 0 ? ZKSERVER_NOMEM : ZKSERVER_MISSING;
}

enum zkserver_outcome zkserver_find(struct zkserver *zs, const char *java_flag,
                                    const char *jar_flag, char **why)
{
    const char *jar = jar_flag != NULL ? jar_flag : ZKSERVER_DEFAULT_JAR;
    *why = NULL;
    if (!is_readable(jar))
        return asprintf(why, "no ZooKeeper server at %s%s: apt-get install " ZKSERVER_JAR_PACKAGE,
                        jar, jar_flag != NULL ? " (--zk-jar)" : "") < 0 ? ZKSERVER_NOMEM
                                                                         : ZKSERVER_MISSING;
    zs->jar = strdup(jar);
    if (zs->jar == NULL)
        return ZKSERVER_NOMEM;
    /* slf4j-simple beside the jar (Debian: libslf4j-java) gives the server
     * a log; without it slf4j logs nothing */
    char *simple = NULL;
    const char *slash = strrchr(jar, '/');
    int dirlen = slash != NULL ? (int)(slash - jar) : 1;
    if (asprintf(&simple, "%.*s/slf4j-simple.jar", dirlen, slash != NULL ? jar : ".") < 0)
        return ZKSERVER_NOMEM;
    int n = is_readable(simple) ? asprintf(&zs->classpath, "%s:%s", jar, simple)
                                : asprintf(&zs->classpath, "%s", jar);
    free(simple);
    if (n < 0)
        return ZKSERVER_NOMEM;
    return find_java(zs, java_flag, why);
}

/* A port on 127.0.0.1 that nobody listens on right now (the kernel's
 * choice for port 0), or -1. */
static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0
        && getsockname(s, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0)
        close(s);
    return port;
}

static int write_cfg(const struct zkserver *zs, int tick_ms, int max_session_ms)
{
    FILE *f = fopen(zs->cfg, "we");
    if (f == NULL)
        return -1;
    fprintf(f, "# zkelect demo: a throwaway standalone server\n"
            "tickTime=%d\ninitLimit=10\nsyncLimit=5\ndataDir=%s/data\n"
            "clientPort=%d\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat,mntr,cons\n"
            "minSessionTimeout=%d\nmaxSessionTimeout=%d\nautopurge.purgeInterval=0\n",
            tick_ms, zs->dir, zs->port, 2 * tick_ms, max_session_ms);
    return fclose(f) == 0 ? 0 : -1;
}

/* Starts the JVM (zs->cfg written); 0 or -1 with errno. */
static int spawn(struct zkserver *zs)
{
    char *tmp = NULL, *logdir = NULL, *errfile = NULL;
    int fd = open(zs->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    int rc = -1;
    if (fd >= 0 && asprintf(&tmp, "-Djava.io.tmpdir=%s", zs->dir) >= 0
        && asprintf(&logdir, "-Dzookeeper.log.dir=%s", zs->dir) >= 0
        && asprintf(&errfile, "-XX:ErrorFile=%s/hs_err_%%p.log", zs->dir) >= 0) {
        /* small and quick to start: a demo's server holds a few nodes */
        char *argv[] = { zs->java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                         "-Xshare:auto", "-XX:-UsePerfData", errfile, tmp, logdir,
                         "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                         "-Dorg.slf4j.simpleLogger.showDateTime=true",
                         "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
                         "-cp", zs->classpath, "org.apache.zookeeper.server.ZooKeeperServerMain",
                         zs->cfg, NULL };
        pid_t pid = child_spawn_io(zs->java, argv, NULL, fd, fd, NULL, NULL);
        if (pid > 0) {
            zs->pid = pid;
            rc = 0;
        }
    }
    int e = errno;
    if (fd >= 0)
        close(fd);
    free(tmp);
    free(logdir);
    free(errfile);
    errno = e;
    return rc;
}

/* Sends a four-letter word; the whole answer, allocated, or NULL. */
static char *four(int port, const char *word)
{
    struct sockaddr_in a;
    struct timeval tv = { 1, 0 };
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char *out = NULL;
    size_t len = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0)
        return NULL;
    (void)setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0 && write(s, word, 4) == 4) {
        char chunk[4096];
        ssize_t n;
        /* a bounded answer: srvr's is a few hundred bytes */
        while (len < 65536 && (n = read(s, chunk, sizeof chunk)) > 0) {
            char *grown = realloc(out, len + (size_t)n + 1);
            if (grown == NULL)
                break;
            out = grown;
            memcpy(out + len, chunk, (size_t)n);
            len += (size_t)n;
            out[len] = '\0';
        }
    }
    close(s);
    return out;
}

/* 1 serving, 0 not yet */
static int serving(const struct zkserver *zs)
{
    char *ok = four(zs->port, "ruok");
    char *srvr = ok != NULL && strncmp(ok, "imok", 4) == 0 ? four(zs->port, "srvr") : NULL;
    int yes = srvr != NULL && strstr(srvr, "Mode:") != NULL;
    free(ok);
    free(srvr);
    return yes;
}

char *zkserver_version(const struct zkserver *zs)
{
    char *srvr = four(zs->port, "srvr");
    char *line = srvr != NULL ? strstr(srvr, "version: ") : NULL;
    char *v = NULL;
    if (line != NULL) {
        line += strlen("version: ");
        v = strndup(line, strcspn(line, "-,\r\n"));
    }
    free(srvr);
    return v;
}

int zkserver_exited(struct zkserver *zs)
{
    if (zs->pid <= 0)
        return 1;
    int st;
    if (waitpid(zs->pid, &st, WNOHANG) != zs->pid)
        return 0;
    zs->status = st;
    zs->pid = 0;
    return 1;
}

/* the log says the port was taken (someone bound it after free_port) */
static int port_clash(const struct zkserver *zs)
{
    FILE *f = fopen(zs->log, "re");
    char line[1024];            /* a line cut here is only searched in parts */
    int clash = 0;
    while (f != NULL && !clash && fgets(line, sizeof line, f) != NULL)
        clash = strstr(line, "Address already in use") != NULL;
    if (f != NULL)
        fclose(f);
    return clash;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* *why = the formatted reason (NULL when out of memory); returns -1 */
static int fail(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char **why, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(why, fmt, ap) < 0)
        *why = NULL;
    va_end(ap);
    return -1;
}

/* One start: 1 serving, 0 exited on a port clash (try again), -1 failed
 * (*why), -2 interrupted. */
static int start_once(struct zkserver *zs, int tick_ms, int max_session_ms, int timeout_ms,
                      char **why)
{
    if ((zs->port = free_port()) < 0 || write_cfg(zs, tick_ms, max_session_ms) != 0 || spawn(zs) != 0)
        return fail(why, "cannot start ZooKeeper (%s in %s): %s", zs->java, zs->dir,
                    strerror(errno));
    for (int64_t end = mono_ms() + timeout_ms; mono_ms() < end;) {
        if (serving(zs))
            return 1;
        if (zkserver_exited(zs)) {
            if (port_clash(zs))
                return 0;
            int code = WIFEXITED(zs->status) ? WEXITSTATUS(zs->status) : 128 + WTERMSIG(zs->status);
            return fail(why, "ZooKeeper exited during start-up (code %d); see its log below", code);
        }
        if (interrupt_poll(NULL, 0, 50) < 0 && interrupt_signal() != 0)
            return -2;
    }
    return fail(why, "ZooKeeper on 127.0.0.1:%d did not serve within %d ms; see its log below",
                zs->port, timeout_ms);
}

enum zkserver_outcome zkserver_run(struct zkserver *zs, const char *dir, int tick_ms,
                                   int max_session_ms, int timeout_ms, char **why)
{
    *why = NULL;
    zs->dir = dir;
    if (zs->cfg == NULL && (asprintf(&zs->cfg, "%s/zoo.cfg", dir) < 0
                            || asprintf(&zs->log, "%s/zookeeper.log", dir) < 0))
        return ZKSERVER_NOMEM;
    for (int attempt = 0; attempt < 3; attempt++) {
        int r = start_once(zs, tick_ms, max_session_ms, timeout_ms, why);
        if (r == 1)
            return ZKSERVER_OK;
        zkserver_stop(zs, 2000);
        if (r == -2)
            return ZKSERVER_INTERRUPTED;
        if (r == -1)
            return ZKSERVER_FAILED;
    }
    fail(why, "ZooKeeper found its port taken by another program three times");
    return ZKSERVER_FAILED;
}

void zkserver_log_tail(const struct zkserver *zs, int max, FILE *out)
{
    FILE *f = zs->log != NULL ? fopen(zs->log, "re") : NULL;
    if (f == NULL || max <= 0) {
        if (f != NULL)
            fclose(f);
        return;
    }
    long *starts = calloc((size_t)max, sizeof *starts);     /* a ring of line offsets */
    long n = 0, at = 0;
    int c, bol = 1;
    while (starts != NULL && (c = getc(f)) != EOF) {
        if (bol)
            starts[n++ % max] = at;
        bol = c == '\n';
        at++;
    }
    if (starts != NULL && n > 0 && fseek(f, starts[n > max ? n % max : 0], SEEK_SET) == 0)
        while ((c = getc(f)) != EOF)
            putc(c, out);
    free(starts);
    fclose(f);
}

void zkserver_stop(struct zkserver *zs, int grace_ms)
{
    if (zs->pid <= 0)
        return;
    (void)kill(-zs->pid, SIGTERM);
    for (int64_t end = mono_ms() + grace_ms; mono_ms() < end && !zkserver_exited(zs);) {
        struct timespec nap = { 0, 20 * 1000000L };
        nanosleep(&nap, NULL);
    }
    if (zs->pid > 0) {
        (void)kill(-zs->pid, SIGKILL);
        if (waitpid(zs->pid, &zs->status, 0) == zs->pid)
            zs->pid = 0;
    }
}

void zkserver_free(struct zkserver *zs)
{
    free(zs->java);
    free(zs->jar);
    free(zs->classpath);
    free(zs->cfg);
    free(zs->log);
    memset(zs, 0, sizeof *zs);
}
