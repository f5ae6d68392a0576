/* sched_fixture.h - the fixture the scheduling-core tests share: a
 * knowledge base and default config per test (Check runs each test in a
 * fork), a cluster loaded from a hardware file, and a simple request.
 * Header-only; functions are static inline so a test that does not use
 * one does not warn. */
#ifndef CRATER_TEST_SCHED_FIXTURE_H
#define CRATER_TEST_SCHED_FIXTURE_H

#include <check.h>

#include "crater/hwfile.h"
#include "crater/sched.h"

#define EX(f) CRATER_SOURCE_DIR "/examples/hardware/" f

static crater_kb_t *kb;
static crater_config_t cfg;

static inline void setup(void)
{
    kb = crater_kb_create();
    ck_assert_int_eq(crater_config_defaults(&cfg), 0);
}

static inline void teardown(void)
{
    crater_config_clear(&cfg);
    crater_kb_destroy(kb);
}

/* A sched holding every node of the hardware file at path. */
static inline crater_sched_t *load(const char *path)
{
    crater_sched_t *s = crater_sched_create(&cfg, kb, NULL);
    crater_cluster_t *cl = NULL;
    crater_error_t err;

    ck_assert_msg(crater_hw_load(path, kb, &cl, &err) == 0, "%s", err.text);
    for (size_t i = 0; i < cl->nnodes; i++)
        ck_assert_msg(crater_sched_add_node(s, &cl->nodes[i], &err) >= 0,
                      "%s",
                      err.text);
    crater_cluster_destroy(cl);
    return s;
}

/* gpus GPUs with a slice of mib MiB each (0: whole GPUs), 1 CPU, 1 GiB. */
static inline crater_request_t req_slice(uint32_t gpus, uint32_t mib)
{
    crater_request_t r = {.gpus = gpus,
                          .slice_mib = mib,
                          .cpu_milli = 1000,
                          .mem_bytes = 1ull << 30,
                          .numa = CRATER_NUMA_PREFERRED};
    return r;
}

#endif /* CRATER_TEST_SCHED_FIXTURE_H */
