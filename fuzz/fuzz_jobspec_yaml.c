/* fuzz_jobspec_yaml.c - job specs as YAML (files, crater validate). Inputs
 * that would be read as JSON are skipped: the JSON target covers those. */
#include "fuzz_jobspec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t i = 0;

    while (i < size
           && (data[i] == ' ' || data[i] == '\n' || data[i] == '\t'
               || data[i] == '\r'))
        i++;
    if (i < size && (data[i] == '{' || data[i] == '['))
        return 0;
    fuzz_jobspec_init();
    return fuzz_run(data, size, decode_job);
}
