/*
 * fuzz_status_addr - the --status value (httpd_check_addr): "PORT",
 * "HOST:PORT", "[V6]:PORT". Each NUL-separated field is one value.
 */
#include "fuzz.h"
#include "httpd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *fields[16];
    int n;
    char *buf = fz_fields(data, size, fields, 16, &n);
    for (int i = 0; i < n; i++) {
        char err[256] = "";
        int loopback = -1;
        if (httpd_check_addr(fields[i], &loopback, err, sizeof err) == 0) {
            FZ_ASSERT(loopback == 0 || loopback == 1);
            FZ_ASSERT(!fz_has_ctl(fields[i]));
            FZ_ASSERT(strchr(fields[i], '.') != NULL || strchr(fields[i], ':') == NULL ||
                      fields[i][0] == '[' || strncmp(fields[i], "localhost:", 10) == 0);
        } else {
            FZ_ASSERT(err[0] != '\0' && !fz_has_ctl(err));   /* one line, no terminal escapes */
        }
    }
    free(buf);
    return 0;
}
