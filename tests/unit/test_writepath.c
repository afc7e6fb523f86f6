/* test_writepath.c - where a leader-guarded write may write
 * (src/lib/writepath.c): inside the election folder below its direct
 * children (never the folder itself nor a direct child), outside it only
 * at or under a write prefix; never at or below a candidate's node of any
 * election (zkelect's, Curator's, kazoo's) nor a *.history node;
 * relative paths, '.', '..', empty components, /zookeeper refused. */
#include <string.h>

#include "check.h"
#include "writepath.h"

static char err[512];

static int ok(const char *prefixes, const char *path, int seq, int check)
{
    return writepath_allowed("/app/el", prefixes, path, seq, check, err, sizeof err) == 0;
}

static void test_inside_the_folder_but_not_a_candidate(void)
{
    CHECK(ok(NULL, "/app/el/state/counter", 0, 0));
    CHECK(ok(NULL, "/app/el/state/counter", 0, 1));
    CHECK(ok(NULL, "/app/el/state/c-0000000001", 1, 0));   /* deeper: never a candidate */
    CHECK(!ok(NULL, "/app/el/n_0123456789abcdef-0000000003", 0, 0));
    CHECK(strstr(err, "candidate") != NULL);
    CHECK(!ok(NULL, "/app/el/_c_x-latch-0000000001", 0, 1));
    CHECK(!ok(NULL, "/app/el/job-", 1, 0));                /* the sequence comes with it */
    CHECK(!ok(NULL, "/app/el", 0, 0));
    CHECK(ok(NULL, "/app/el", 0, 1));                      /* a check of the folder */
    CHECK(!ok(NULL, "/app/el/n_0123456789abcdef-0000000003/x", 0, 0));   /* below one */
    CHECK(!ok(NULL, "/app/elsewhere", 0, 0));              /* a name that only starts alike */
}

/* Every direct child of the folder is a candidate to Curator's LeaderLatch
 * (--compat curator): a policy's "config" there would be ordered, and
 * watched, as one. So none is written (a check of one is harmless). */
static void test_no_direct_child_of_the_folder(void)
{
    CHECK(!ok(NULL, "/app/el/config", 0, 0));
    CHECK(strstr(err, "direct child") != NULL);
    CHECK(!ok("/app", "/app/el/config", 0, 0));            /* a prefix above does not open it */
    CHECK(!ok(NULL, "/app/el/state", 0, 0));
    CHECK(ok(NULL, "/app/el/state", 0, 1));                /* a check only */
    CHECK(!ok(NULL, "/app/el/job-0000000001", 0, 1));      /* ordered by the election */
}

/* A prefix above the election (or above another election) reaches other
 * elections' nodes: their candidates' nodes and histories are refused
 * wherever they are. */
static void test_never_another_elections_nodes(void)
{
    CHECK(!ok("/app", "/app/b/n_0123456789abcdef-0000000003", 0, 0));
    CHECK(strstr(err, "candidate") != NULL);
    CHECK(!ok("/app", "/app/b/n_0123456789abcdef--000000003", 0, 0));  /* a negative one */
    CHECK(!ok("/app", "/app/b/n_0123456789abcdef-", 1, 0));            /* made by the create */
    CHECK(!ok("/app", "/app/b/n_0123456789abcdef-0000000003/x", 0, 0));
    CHECK(!ok("/app", "/app/b/n_0123456789abcdef-0000000003", 0, 1));  /* not even a check */
    CHECK(!ok("/app", "/app/b/_c_0f1e2d3c-aaaa-bbbb-cccc-0123456789ab-latch-0000000007", 0, 0));
    CHECK(!ok("/app", "/app/b/latch-0000000007", 0, 0));               /* unprotected Curator */
    CHECK(!ok("/app", "/app/b/_c_zke01234-aaaa-bbbb-cccc-0123456789ab-latch-", 1, 0));
    CHECK(!ok("/app", "/app/b/0123456789abcdef0123456789abcdef__lock__0000000002", 0, 0));
    CHECK(!ok("/app", "/app/b/x__lock__", 1, 0));
    CHECK(!ok("/app", "/app/b.history", 0, 0));
    CHECK(strstr(err, "history") != NULL);
    CHECK(!ok("/app", "/app/b.history/term-0000000000000000011", 0, 0));
    CHECK(!ok("/app", "/app/x/el.history/y", 0, 0));
    CHECK(ok("/app", "/app/b.history", 0, 1));             /* a check only */
    CHECK(ok("/app", "/app/b/config", 0, 0));              /* other names stay open */
    CHECK(ok("/app", "/app/b/v-0000000004", 0, 0));
    CHECK(ok("/app", "/app/b/v-", 1, 0));
    CHECK(ok("/app", "/app/b/n_0123-0000000004", 0, 0));   /* not 16 hex */
    CHECK(ok("/app", "/app/b/latch-x", 0, 0));             /* no sequence */
    CHECK(ok("/app", "/app/b.historyx", 0, 0));
}

static void test_outside_only_under_a_prefix(void)
{
    CHECK(!ok(NULL, "/app/config", 0, 0));
    CHECK(strstr(err, "none is set") != NULL);
    CHECK(!ok("", "/app/config", 0, 0));
    CHECK(ok("/app/config", "/app/config", 0, 0));
    CHECK(ok("/x,/app/config", "/app/config/a/b", 0, 0));
    CHECK(!ok("/app/config", "/app/configs", 0, 0));
    CHECK(!ok("/app/config", "/app", 0, 0));
    CHECK(ok("/app/config", "/app/config/x-0000000001", 1, 0));   /* no election there */
}

static void test_never_the_history(void)
{
    CHECK(!ok("/app", "/app/el.history", 0, 0));
    CHECK(strstr(err, "history") != NULL);
    CHECK(!ok("/app", "/app/el.history/term-0000000000000000011", 0, 0));
    CHECK(!ok("/app/el.history", "/app/el.history/x", 1, 0));
    CHECK(ok("/app", "/app/el.history", 0, 1));            /* a check only */
    CHECK(ok(NULL, "/app/el.history", 0, 1));              /* read without a prefix */
    CHECK(ok(NULL, "/app/el.history/term-0000000000000000011", 0, 1));
    CHECK(!ok(NULL, "/app/el.historyx", 0, 1));
    CHECK(ok("/app", "/app/el.historyx", 0, 0));           /* a name that only starts alike */
}

static void test_bad_paths_are_refused(void)
{
    const char *bad[] = { "", "app/el/x", "/app/el/../config", "/app/el/./x", "/app/el//x",
                          "/app/el/x/", "/", "/zookeeper/quota", "/app/el/a\nb", "/app/el/..",
                          NULL };
    for (int i = 0; bad[i] != NULL; i++)
        CHECK(!ok("/", bad[i], 0, 0) && !ok("/app", bad[i], 0, 0));
    char longp[WRITEPATH_MAX + 10];
    memset(longp, 'a', sizeof longp);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    CHECK(!ok("/a", longp, 0, 0));
    CHECK(ok("/app/..x", "/app/..x/y", 0, 0));            /* "..x" is a name, not ".." */
}

static void test_prefix_lists_are_checked(void)
{
    CHECK(writepath_check_prefixes(NULL, err, sizeof err) == 0);
    CHECK(writepath_check_prefixes("", err, sizeof err) == 0);
    CHECK(writepath_check_prefixes("/a,/b/c", err, sizeof err) == 0);
    CHECK(writepath_check_prefixes("/a,,/b", err, sizeof err) != 0);
    CHECK(writepath_check_prefixes("/a,", err, sizeof err) != 0);
    CHECK(writepath_check_prefixes("a", err, sizeof err) != 0);
    CHECK(writepath_check_prefixes("/a/../b", err, sizeof err) != 0);
    CHECK(writepath_check_prefixes("/", err, sizeof err) != 0);
}

int main(void)
{
    RUN(test_inside_the_folder_but_not_a_candidate);
    RUN(test_no_direct_child_of_the_folder);
    RUN(test_never_another_elections_nodes);
    RUN(test_outside_only_under_a_prefix);
    RUN(test_never_the_history);
    RUN(test_bad_paths_are_refused);
    RUN(test_prefix_lists_are_checked);
    return check_done();
}
