/* fuzz_jobspec_json.c - job specs as JSON, the API's format. Inputs are
 * wrapped in braces when they do not open one, so every run exercises the
 * jansson path rather than YAML. */
#include <string.h>

#include "fuzz_jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf;

    fuzz_jobspec_init();
    if (size > 0 && data[0] == '{')
        return fuzz_run(data, size, decode_job);
    if (!(buf = malloc(size + 2)))
        return 0;
    buf[0] = '{';
    memcpy(buf + 1, data, size);
    buf[size + 1] = '}';
    fuzz_run(buf, size + 2, decode_job);
    free(buf);
    return 0;
}
