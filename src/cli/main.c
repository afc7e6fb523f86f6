/*
 * main.c - the zkelect command line: read the options (options.c), pick
 * the command (commands.h) and return its exit code. Everything else lives
 * in the commands and in the library.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "exits.h"
#include "options.h"
#include "zkelect.h"

/* The standard three open (on /dev/null where they were closed), so that
 * no descriptor we open (the guard's page, a socket) is one of them, where
 * a print or a log line would land in it. */
static void std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0) {
            int null = open("/dev/null", O_RDWR);
            if (null >= 0 && null != fd) {
                (void)dup2(null, fd);
                (void)close(null);
            }
        }
}

/* run ... -- CMD [ARGS...]: the words after "--" (options.c); check takes
 * them to check them as run would (runs: the command is one of those two). */
static void command_words(struct opts *o, int runs)
{
    if (o->cmd_sep && !runs)
        die(EX_USAGE, "'-- %s': only zkelect run runs a command",
            o->cmd_argc > 0 ? o->cmd_argv[0] : "");
    /* ZKELECT_COMMAND: "-- /bin/sh -c TEXT" unless "--" was given; the
     * other commands (a CMD's own zkelect status) leave it alone */
    static char *shell[] = { "/bin/sh", "-c", NULL, NULL };
    if (!o->cmd_sep && o->command_env != NULL && runs) {
        shell[2] = (char *)o->command_env;
        o->cmd_sep = o->cmd_shell = 1;
        o->cmd_argc = 3;
        o->cmd_argv = shell;
    }
    if (o->cmd_sep && o->cmd_argc == 0)
        die(EX_USAGE, "'--' with no command after it (zkelect run ... -- CMD [ARGS...])");
    if (o->cmd_sep && o->cmd_argv[0][0] == '\0')
        die(EX_USAGE, "'--' followed by an empty command name");
}

int main(int argc, char **argv)
{
    static const struct { const char *name; int (*run)(struct opts *); } commands[] = {
        { "run", cmd_run }, { "watch", cmd_watch }, { "status", cmd_status }, { "check", cmd_check },
        { "ctl", cmd_ctl }, { "demo", cmd_demo },
        { "history", cmd_history }, { "audit", cmd_audit },
    };
    struct opts o;
    char *msg = NULL;
    options_init(&o);
    std_fds();

    if (argc < 2)
        die(EX_USAGE, "missing command (run, check, status, watch, history, audit, ctl or demo)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        options_usage(stdout);
        return EX_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("zkelect %s\n", zke_version());
        return EX_OK;
    }
    int (*command)(struct opts *) = NULL;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            command = commands[i].run;
    /* the environment first, the command line over it */
    enum options_outcome rc = options_env(&o, &msg);
    if (rc == OPTIONS_OK && command == NULL) {
        if (argv[1][0] == '-')
            die(EX_USAGE, "unknown option '%s' (a command comes first: run or check)", argv[1]);
        die(EX_USAGE, "unknown command '%s'", argv[1]);
    }
    o.words_ok = command == cmd_ctl;    /* ctl COMMAND [--to ID] */
    o.command = argv[1];
    if (rc == OPTIONS_OK)
        rc = options_argv(&o, argc - 1, argv + 1, &msg);
    switch (rc) {
    case OPTIONS_OK:
        command_words(&o, command == cmd_run || command == cmd_check);
        if (o.foreign != NULL) {
            int nomem;
            char *why = options_refusal(&o, &nomem);
            if (why != NULL)
                die(EX_USAGE, "%s", why);
            break;      /* out of memory */
        }
        return command(&o);
    case OPTIONS_HELP:
        options_usage(stdout);
        return EX_OK;
    case OPTIONS_USAGE:
        if (msg != NULL)
            die(EX_USAGE, "%s", msg);
        break;
    case OPTIONS_NOMEM:
        break;
    }
    die(EX_SOFTWARE, "out of memory");
}
