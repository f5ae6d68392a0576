/* fuzz_hwfile.c - hardware files: decode with knowledge-base completion,
 * encode, decode again. */
#include "crater/hwfile.h"
#include "fuzz_common.h"

static crater_kb_t *kb;

static json_t *decode_hw(crater_dec_t *d, json_t *root)
{
    crater_cluster_t *cl = NULL;
    json_t *out = NULL;

    if (crater_hw_decode(d, root, kb, &cl) == 0)
        out = crater_hw_encode(cl);
    crater_cluster_destroy(cl);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!kb)
        kb = crater_kb_create();
    return fuzz_run(data, size, decode_hw);
}
