/* nodedata.c - see nodedata.h. JSON through cJSON (Debian libcjson). */
#include "nodedata.h"

#include "zkelect.h"

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

char *nodedata_encode(const char *id, const char *data, int64_t epoch, int priority)
{
    cJSON *o = cJSON_CreateObject();
    char *out = NULL;
    if (o == NULL)
        return NULL;
    if (cJSON_AddNumberToObject(o, "zkelect", 1) != NULL &&
        cJSON_AddStringToObject(o, "id", id ? id : "") != NULL &&
        cJSON_AddStringToObject(o, "data", data ? data : "") != NULL &&
        (epoch <= 0 || cJSON_AddNumberToObject(o, "epoch", (double)epoch) != NULL) &&
        (priority <= 0 || cJSON_AddNumberToObject(o, "priority", priority) != NULL))
        out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return out;
}

/* Another node's priority is untrusted: an integer within range, else 0. */
static int priority_of(const cJSON *p)
{
    if (!cJSON_IsNumber(p) || !(p->valuedouble >= 0 && p->valuedouble <= ZKE_PRIORITY_MAX))
        return 0;
    int v = (int)p->valuedouble;
    return (double)v == p->valuedouble ? v : 0;
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
    memset(nd, 0, sizeof *nd);
}
