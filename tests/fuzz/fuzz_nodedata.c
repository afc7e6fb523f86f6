/*
 * fuzz_nodedata - a node's data as read from ZooKeeper (any bytes: ours,
 * Curator's, kazoo's, anyone's) through nodedata_decode, and what decodes
 * as ours back through nodedata_encode.
 */
#include "fuzz.h"
#include "nodedata.h"
#include "zkelect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nodedata nd;
    if (size > 1 << 20)
        return 0;
    if (nodedata_decode((const char *)data, (int)size, &nd) != 0)
        return 0;                   /* out of memory */
    FZ_ASSERT(nd.id != NULL && nd.data != NULL);
    FZ_ASSERT(nd.epoch >= 0 && nd.epoch < (INT64_C(1) << 53));
    FZ_ASSERT(nd.priority >= 0 && nd.priority <= ZKE_PRIORITY_MAX);
    if (!nd.ours) {
        /* a foreign node: its bytes are both id and data */
        FZ_ASSERT(nd.epoch == 0);
        FZ_ASSERT(strncmp(nd.id, (const char *)data, size) == 0);
        FZ_ASSERT(strcmp(nd.id, nd.data) == 0);
    } else {
        char *enc = nodedata_encode(nd.id, nd.data, nd.epoch, nd.priority);
        if (enc != NULL) {
            struct nodedata back;
            if (nodedata_decode(enc, (int)strlen(enc), &back) == 0) {
                FZ_ASSERT(back.ours);
                FZ_ASSERT(strcmp(back.id, nd.id) == 0);
                FZ_ASSERT(strcmp(back.data, nd.data) == 0);
                FZ_ASSERT(back.epoch == nd.epoch);
                FZ_ASSERT(back.priority == nd.priority);
                nodedata_clear(&back);
            }
            free(enc);
        }
    }
    nodedata_clear(&nd);
    FZ_ASSERT(nd.id == NULL && nd.data == NULL);
    return 0;
}
