/* cmd_history.c - zkelect history: one reading of the terms the leaders
 * recorded (zke_history_reader, once), printed as a table or one JSON
 * object, with the audit's findings. It never joins nor writes. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "commands.h"
#include "credentials.h"
#include "exits.h"
#include "histview.h"
#include "zkelect.h"

struct history_run {
    const char *path;
    int json, code, done;
    int64_t skew_ms;
};

static void on_history(zke_history_reader *r, const struct zke_history *h, void *ud)
{
    struct history_run *hr = ud;
    (void)r;
    hr->done = 1;
    if (h->reason != NULL) {
        error_line(h->msg, "");
        hr->code = exit_code_for(h->reason);
        return;
    }
    if (hr->json) {
        char *txt = histview_json(h, hr->path, hr->skew_ms);
        if (txt == NULL) {
            error_line("out of memory", "");
            hr->code = EX_SOFTWARE;
            return;
        }
        printf("%s\n", txt);
        free(txt);
    } else {
        histview_text(stdout, h, hr->path, hr->skew_ms);
    }
    hr->code = EX_OK;
}

static void on_fatal(zke_history_reader *r, const char *reason, const char *msg, void *ud)
{
    struct history_run *hr = ud;
    (void)r;
    hr->done = 1;
    error_line(msg, "");
    hr->code = exit_code_for(reason);
}

int cmd_history(struct opts *o)
{
    struct history_run hr = { o->path, o->json, 0, 0, o->skew_ms };
    require_election(o);
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    if (loop == NULL)
        die(EX_SOFTWARE, "cannot initialise the event loop");
    struct zke_observer_settings s;
    struct reader_creds creds;
    resolve_reader(o, &s, &creds);
    s.connect_timeout_ms = options_status_timeout(o);
    struct zke_history_callbacks cb = { on_history, on_fatal, NULL };
    zke_history_reader *r = zke_history_reader_new(loop, &s, 0, &cb, &hr);
    forget_reader(o, &creds);
    if (r == NULL)
        die(EX_SOFTWARE, "out of memory");
    if (zke_history_reader_start(r) != 0)
        die(EX_USAGE, "%s", zke_history_reader_errstr(r));
    while (!hr.done && ev_run(loop, EVRUN_ONCE))
        ;
    zke_history_reader_free(r);
    if (!hr.done)
        die(EX_SOFTWARE, "the event loop ended early");
    return hr.code;
}
