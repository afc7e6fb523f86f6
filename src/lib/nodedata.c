/* nodedata.c - see nodedata.h. JSON read through cJSON (Debian libcjson), written
 * directly. */
#include "nodedata.h"

#include "zkelect.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static char *dupn(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* s as a JSON string (quotes included) at out, escaped as cJSON escapes:
 * the quote, the backslash and control characters; other bytes as they
 * are. Returns the end. out has room for 6 x strlen(s) + 2. */
static char *put_string(char *out, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    *out++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            *out++ = '\\';
            *out++ = (char)c;
        } else if (c < 32) {
            *out++ = '\\';
            switch (c) {
            case '\b': *out++ = 'b'; break;
            case '\f': *out++ = 'f'; break;
            case '\n': *out++ = 'n'; break;
            case '\r': *out++ = 'r'; break;
            case '\t': *out++ = 't'; break;
            default:
                *out++ = 'u';
                *out++ = '0';
                *out++ = '0';
                *out++ = hex[c >> 4];
                *out++ = hex[c & 15];
            }
        } else {
            *out++ = (char)c;
        }
    }
    *out++ = '"';
    return out;
}

/* Written directly (one allocation, no number formatting round trip): it
 * runs on the failover path, in the callback that makes a leader, before
 * the host hears of it. The text reads back with any JSON parser (cJSON in
 * nodedata_decode); integers are written whole. */
char *nodedata_encode(const char *id, const char *data, int64_t epoch, int priority)
{
    return nodedata_encode_aside(id, data, epoch, priority, NULL);
}

char *nodedata_encode_aside(const char *id, const char *data, int64_t epoch, int priority,
                            const char *aside)
{
    if (id == NULL)
        id = "";
    if (data == NULL)
        data = "";
    size_t n = 6 * (strlen(id) + strlen(data) + (aside != NULL ? strlen(aside) : 0)) + 112;
    char *buf = malloc(n);
    if (buf == NULL)
        return NULL;
    char *p = buf;
    static const char head[] = "{\"zkelect\":1,\"id\":", mid[] = ",\"data\":";
    memcpy(p, head, sizeof head - 1);
    p = put_string(p + sizeof head - 1, id);
    memcpy(p, mid, sizeof mid - 1);
    p = put_string(p + sizeof mid - 1, data);
    if (epoch > 0)
        p += snprintf(p, 40, ",\"epoch\":%" PRId64, epoch);
    if (priority > 0)
        p += snprintf(p, 40, ",\"priority\":%d", priority);
    if (aside != NULL) {
        static const char key[] = ",\"aside\":";
        memcpy(p, key, sizeof key - 1);
        p = put_string(p + sizeof key - 1, aside);
    }
    *p++ = '}';
    *p = '\0';
    return buf;
}

/* Another node's priority is untrusted: an integer within range, else 0. */
static int priority_of(const cJSON *p)
{
    if (!cJSON_IsNumber(p) || !(p->valuedouble >= 0 && p->valuedouble <= ZKE_PRIORITY_MAX))
        return 0;
    int v = (int)p->valuedouble;
    return (double)v == p->valuedouble ? v : 0;
}

/* Another node's "aside" is untrusted: a copy when it is a plausible child
 * name (nodedata.h), else NULL. */
static char *aside_of(const cJSON *v)
{
    if (!cJSON_IsString(v) || v->valuestring == NULL)
        return NULL;
    const char *s = v->valuestring;
    size_t n = strlen(s);
    if (n == 0 || n > NODEDATA_ASIDE_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '/')
            return NULL;
    return dupn(s, n);
}

int nodedata_decode(const char *buf, int len, struct nodedata *out)
{
    memset(out, 0, sizeof *out);
    if (buf == NULL || len < 0)
        len = 0;
    if (len > 0 && buf[0] == '{') {
        cJSON *o = cJSON_ParseWithLength(buf, (size_t)len);
        const cJSON *mark = o ? cJSON_GetObjectItemCaseSensitive(o, "zkelect") : NULL;
        const cJSON *id = o ? cJSON_GetObjectItemCaseSensitive(o, "id") : NULL;
        if (cJSON_IsNumber(mark) && id != NULL && cJSON_IsString(id)) {
            const cJSON *data = cJSON_GetObjectItemCaseSensitive(o, "data");
            const cJSON *ep = cJSON_GetObjectItemCaseSensitive(o, "epoch");
            out->ours = 1;
            out->id = dupn(id->valuestring, strlen(id->valuestring));
            out->data = cJSON_IsString(data) ? dupn(data->valuestring, strlen(data->valuestring))
                                             : dupn("", 0);
            /* zxids stay below 2^53 (exact in a double) until the ensemble's
             * own epoch passes 2^21 */
            if (cJSON_IsNumber(ep) && ep->valuedouble > 0 && ep->valuedouble < 9007199254740992.0)
                out->epoch = (int64_t)ep->valuedouble;
            out->priority = priority_of(cJSON_GetObjectItemCaseSensitive(o, "priority"));
            out->aside = aside_of(cJSON_GetObjectItemCaseSensitive(o, "aside"));
            cJSON_Delete(o);
            if (out->id == NULL || out->data == NULL) {
                nodedata_clear(out);
                return -1;
            }
            return 0;
        }
        cJSON_Delete(o);
    }
    out->id = dupn(buf ? buf : "", (size_t)len);
    out->data = dupn(buf ? buf : "", (size_t)len);
    if (out->id == NULL || out->data == NULL) {
        nodedata_clear(out);
        return -1;
    }
    return 0;
}

void nodedata_clear(struct nodedata *nd)
{
    free(nd->id);
    free(nd->data);
    free(nd->aside);
    memset(nd, 0, sizeof *nd);
}
