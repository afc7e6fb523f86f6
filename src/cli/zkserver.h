/*
 * zkserver.h - a throwaway standalone ZooKeeper server for zkelect demo:
 * finding the Debian server (its jar and java), writing a zoo.cfg in a
 * directory the caller owns, starting java there (its own process group,
 * stdin /dev/null, stdout and stderr to DIR/zookeeper.log, killed if we
 * die: child.h), waiting until it serves, and stopping it.
 *
 * Single-threaded, before or between the caller's waits; interrupt.h's
 * signals end zkserver_run's wait. The struct is the caller's; the strings
 * in it are allocated here and freed by zkserver_free.
 */
#ifndef ZKELECT_ZKSERVER_H
#define ZKELECT_ZKSERVER_H

#include <stdio.h>
#include <sys/types.h>

/* Debian's server and where its packages put it. */
#define ZKSERVER_DEFAULT_JAR "/usr/share/java/zookeeper.jar"
#define ZKSERVER_JAR_PACKAGE "zookeeper"
#define ZKSERVER_JAVA_PACKAGE "default-jre-headless"

struct zkserver {
    char *java;                 /* the java executable */
    char *jar;                  /* the server's jar (its manifest's Class-Path has the rest) */
    char *classpath;            /* jar, plus slf4j-simple.jar beside it if there (a log) */
    const char *dir;            /* borrowed: zoo.cfg, data/ and zookeeper.log go there */
    char *cfg, *log;            /* dir/zoo.cfg, dir/zookeeper.log */
    int port;                   /* its client port on 127.0.0.1 */
    pid_t pid;                  /* the JVM, also its process group; 0: not running */
    int status;                 /* its wait status, once reaped */
};

/* What zkserver_run and zkserver_find report. */
enum zkserver_outcome {
    ZKSERVER_OK = 0,
    ZKSERVER_MISSING,           /* not installed: *why names the package (exit 69) */
    ZKSERVER_FAILED,            /* did not start or serve in time: *why says so (exit 69) */
    ZKSERVER_INTERRUPTED,       /* a signal (interrupt.h) ended the wait; stopped */
    ZKSERVER_NOMEM,
};

/* Fills zs->java and zs->jar: java is java_flag (--java) if given, else
 * $JAVA_HOME/bin/java, else "java" on $PATH, else Debian's default-java;
 * jar is jar_flag (--zk-jar) if given, else ZKSERVER_DEFAULT_JAR. Not
 * ZKSERVER_OK: *why is an allocated one-line message that names what is
 * missing and the package to install. */
enum zkserver_outcome zkserver_find(struct zkserver *zs, const char *java_flag,
                                    const char *jar_flag, char **why);
/* Writes dir/zoo.cfg (a free port on 127.0.0.1, tick_ms, sessions of up to
 * max_session_ms granted, the four-letter words on, no admin server),
 * starts the server and waits until it answers ruok and srvr, at most
 * timeout_ms; a port taken meanwhile by someone else is retried with
 * another (3 tries). After zkserver_find. Not ZKSERVER_OK: nothing is left
 * running, and for ZKSERVER_FAILED *why is an allocated reason. */
enum zkserver_outcome zkserver_run(struct zkserver *zs, const char *dir, int tick_ms,
                                   int max_session_ms, int timeout_ms, char **why);
/* "Zookeeper version: ..." from srvr, allocated, or NULL. Blocks at most
 * about a second. */
char *zkserver_version(const struct zkserver *zs);
/* 1 when the server has exited (reaped now or before), 0 while it runs. */
int zkserver_exited(struct zkserver *zs);
/* Writes the last lines (at most max) of its log to out. */
void zkserver_log_tail(const struct zkserver *zs, int max, FILE *out);
/* SIGTERM to its process group; SIGKILL after grace_ms; reaped. Nothing
 * when it is not running. Blocks up to grace_ms and a little more. */
void zkserver_stop(struct zkserver *zs, int grace_ms);
/* Frees the strings (after zkserver_stop). */
void zkserver_free(struct zkserver *zs);

#endif
