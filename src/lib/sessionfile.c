/*
 * sessionfile.c - the session file (see sessionfile.h).
 */
#include "sessionfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sessionfile_write(const char *file, uint64_t id, const unsigned char passwd[16], int password)
{
    /* a new inode that we create (mkstemp: O_CREAT|O_EXCL, so never
     * through a link someone planted, never a file someone pre-created
     * with other modes), made 0600 whatever the umask, then renamed over
     * the file: rename replaces a link at FILE, never its target */
    size_t fl = strlen(file);
    char *tmp = malloc(fl + sizeof ".XXXXXX");
    if (tmp == NULL)
        return -1;
    memcpy(tmp, file, fl);
    memcpy(tmp + fl, ".XXXXXX", sizeof ".XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return -1;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    char line[128];
    int n = snprintf(line, sizeof line, "0x%" PRIx64, id);
    if (password) {
        line[n++] = ' ';
        for (int i = 0; i < 16; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%02x", passwd[i]);
    }
    line[n++] = '\n';
    int ok = fchmod(fd, 0600) == 0 && write(fd, line, (size_t)n) == n;
    ok = close(fd) == 0 && ok;
    volatile char *v = line;            /* (the password, if any) */
    for (size_t i = 0; i < sizeof line; i++)
        v[i] = 0;
    if (!ok || rename(tmp, file) != 0) {
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

uint64_t sessionfile_read(const char *file)
{
    char line[128];
    FILE *f = file != NULL ? fopen(file, "re") : NULL;
    if (f == NULL)
        return 0;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (got == NULL || strncmp(line, "0x", 2) != 0)
        return 0;
    char *end;
    errno = 0;
    unsigned long long id = strtoull(line + 2, &end, 16);
    return errno == 0 && end > line + 2 && (*end == ' ' || *end == '\n' || *end == '\0')
               ? (uint64_t)id : 0;
}
