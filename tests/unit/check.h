/* check.h - the unit tests' few assertions. Each failed CHECK prints its
 * location and counts; check_done() prints "N passed, N failed". */
#ifndef ZKELECT_CHECK_H
#define ZKELECT_CHECK_H
#include <stdio.h>

static int check_pass, check_fail;

#define CHECK(c)                                                              \
    do {                                                                      \
        if (c) {                                                              \
            check_pass++;                                                     \
        } else {                                                              \
            check_fail++;                                                     \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
        }                                                                     \
    } while (0)

#define RUN(t)                                                                \
    do {                                                                      \
        int before = check_fail;                                              \
        t();                                                                  \
        printf("%s %s\n", check_fail == before ? "ok  " : "FAIL", #t);        \
    } while (0)

static int check_done(void)
{
    printf("%d passed, %d failed\n", check_pass, check_fail);
    return check_fail ? 1 : 0;
}
#endif
