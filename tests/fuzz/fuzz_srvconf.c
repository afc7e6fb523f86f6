/*
 * fuzz_srvconf - a server's `conf` and `srvr` replies (srvconf_parse_conf,
 * srvconf_parse_mode): any bytes, NULs included; the whole input is one
 * reply of each. A conf that parses has every value in [1, 2^31) and comes
 * from the input's own lines; the judgement of what parsed is one line.
 */
#include "fuzz.h"
#include "srvconf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct srv_conf c;
    const char *buf = (const char *)data;
    if (srvconf_parse_conf(buf, size, &c) == 0) {
        FZ_ASSERT(c.tick_ms > 0 && c.min_ms > 0 && c.max_ms > 0);
        FZ_ASSERT(size >= sizeof "tickTime=1\nminSessionTimeout=1\nmaxSessionTimeout=1\n" - 1);
    } else {
        FZ_ASSERT(c.tick_ms == 0 && c.min_ms == 0 && c.max_ms == 0);
    }
    enum srv_mode m = srvconf_parse_mode(buf, size);
    FZ_ASSERT(m >= SRV_MODE_UNKNOWN && m <= SRV_MODE_READONLY);
    struct srv_info sv[2];
    memset(sv, 0, sizeof sv);
    snprintf(sv[0].name, sizeof sv[0].name, "a:1");
    snprintf(sv[1].name, sizeof sv[1].name, "b:2");
    sv[0].told = c.tick_ms > 0 ? SRV_CONF : SRV_NO_CONF;
    sv[0].conf = c;
    sv[0].mode = m;
    sv[1].told = SRV_UNREACHED;
    struct srv_verdict v;
    for (int stated = 0; stated <= 2000; stated += 1000) {
        srvconf_judge(sv, 2, stated, &v);
        FZ_ASSERT(strlen(v.line) < sizeof v.line && strchr(v.line, '\n') == NULL);
        FZ_ASSERT(v.j != SRV_J_TOLD);           /* b told nothing */
        FZ_ASSERT(v.observer == (m == SRV_MODE_OBSERVER));
    }
    return 0;
}
