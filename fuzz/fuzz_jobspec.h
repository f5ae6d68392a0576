/* fuzz_jobspec.h - the job-spec decode path shared by the JSON and YAML
 * targets: profile expansion, decode, validation against the knowledge
 * base, normalised encoding. */
#ifndef CRATER_FUZZ_JOBSPEC_H
#define CRATER_FUZZ_JOBSPEC_H

#include "crater/jobspec.h"
#include "crater/profile.h"
#include "fuzz_common.h"

static crater_kb_t *kb;
static crater_profiles_t *profiles;

static json_t *decode_job(crater_dec_t *d, json_t *root)
{
    json_t *job = crater_profiles_expand(profiles, d, root);
    crater_jobspec_t *spec = NULL;
    json_t *out = NULL;

    if (job && crater_jobspec_decode(d, job, &spec) == 0) {
        (void)crater_jobspec_validate(spec, kb, d->err);
        out = crater_jobspec_encode(spec);
    }
    crater_jobspec_destroy(spec);
    json_decref(job);
    return out;
}

static void fuzz_jobspec_init(void)
{
    if (!kb) {
        kb = crater_kb_create();
        profiles = crater_profiles_create();
    }
}

#endif /* CRATER_FUZZ_JOBSPEC_H */
