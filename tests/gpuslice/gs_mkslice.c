/*
 * gs_mkslice - test helper: create or read a slice file through the agent
 * API (crater/gpuslice.h).
 *   gs_mkslice create PATH UUID LIMIT [UUID LIMIT]...
 *   gs_mkslice used PATH      one line per GPU: "UUID LIMIT USED"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/gpuslice.h"

static int create(int argc, char **argv)
{
    crater_gpuslice_limit_t g[CRATER_GPUSLICE_MAX_GPUS] = {0};
    crater_error_t err;
    size_t n = 0;
    for (int i = 3; i + 1 < argc && n < CRATER_GPUSLICE_MAX_GPUS; i += 2) {
        if (crater_gpuslice_uuid_parse(argv[i], g[n].uuid, &err) < 0) {
            fprintf(stderr, "gs_mkslice: %s\n", err.text);
            return 1;
        }
        g[n++].limit = strtoull(argv[i + 1], NULL, 10);
    }
    if (crater_gpuslice_create(argv[2], g, n, (uid_t)-1, (gid_t)-1, &err) < 0) {
        fprintf(stderr, "gs_mkslice: %s\n", err.text);
        return 1;
    }
    return 0;
}

static int used(const char *path)
{
    crater_gpuslice_limit_t g[CRATER_GPUSLICE_MAX_GPUS];
    crater_error_t err;
    size_t n;
    char buf[41];
    if (crater_gpuslice_read(path, g, CRATER_GPUSLICE_MAX_GPUS, &n, &err) < 0) {
        fprintf(stderr, "gs_mkslice: %s\n", err.text);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        printf("%s %llu %llu\n",
               crater_gpuslice_uuid_format(g[i].uuid, buf),
               (unsigned long long)g[i].limit,
               (unsigned long long)g[i].used);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "create") == 0)
        return create(argc, argv);
    if (argc == 3 && strcmp(argv[1], "used") == 0)
        return used(argv[2]);
    fprintf(stderr,
            "usage: gs_mkslice create PATH UUID LIMIT... | used "
            "PATH\n");
    return 2;
}
