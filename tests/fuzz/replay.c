/*
 * replay.c - main() for a fuzz target in the normal builds: runs
 * LLVMFuzzerTestOneInput once on every file named on the command line, and
 * on every regular file of every directory named (in name order). Exits 0
 * when all ran (a finding aborts), 1 when a path cannot be read or no input
 * was found.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (buf == NULL) {
            fclose(f);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    fclose(f);
    (void)LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[i]) != 0;
            files++;
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, NULL);
        if (n < 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        char **paths = calloc((size_t)n + 1, sizeof *paths);
        int k = 0;
        for (int j = 0; j < n; j++) {
            if (names[j]->d_name[0] != '.' && paths != NULL) {
                size_t len = strlen(argv[i]) + strlen(names[j]->d_name) + 2;
                paths[k] = malloc(len);
                if (paths[k] != NULL)
                    snprintf(paths[k++], len, "%s/%s", argv[i], names[j]->d_name);
            }
            free(names[j]);
        }
        free(names);
        if (paths != NULL)
            qsort(paths, (size_t)k, sizeof *paths, cmp);
        for (int j = 0; j < k; j++) {
            struct stat fs;
            if (stat(paths[j], &fs) == 0 && S_ISREG(fs.st_mode)) {
                bad |= run_file(paths[j]) != 0;
                files++;
            }
            free(paths[j]);
        }
        free(paths);
    }
    printf("replayed %d inputs\n", files);
    return bad || files == 0 ? 1 : 0;
}
