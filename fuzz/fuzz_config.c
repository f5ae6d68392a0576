/* fuzz_config.c - craterd config files: decode over the defaults, apply
 * knowledge-base overrides to a scratch kb, encode, decode again. */
#include "crater/config.h"
#include "crater/kb.h"
#include "fuzz_common.h"

static json_t *decode_config(crater_dec_t *d, json_t *root)
{
    crater_config_t cfg;
    json_t *out = NULL;

    if (crater_config_defaults(&cfg) < 0)
        return NULL;
    if (crater_config_decode(d, root, &cfg) == 0) {
        crater_kb_t *kb = crater_kb_create();
        if (kb
            && (!cfg.kb_override
                || crater_kb_override(kb, d, cfg.kb_override) == 0))
            out = crater_config_encode(&cfg);
        crater_kb_destroy(kb);
    }
    crater_config_clear(&cfg);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_run(data, size, decode_config);
}
