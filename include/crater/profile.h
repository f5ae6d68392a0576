/* profile.h - versioned profiles: named templates ("bert-train-infer@1.0")
 * with a training and an inference variant, each a partial job spec.
 *
 * A job that names `profile: NAME@VERSION` gets the variant matching its
 * workloadType merged under its own fields (the job's fields win; mappings
 * merge key by key, lists and scalars replace). A legacy spec such as
 * {gpu: 2} (a bare top-level gpu count) is translated to the built-in
 * default profile with resources.gpu.count = 2. Expansion works on the
 * JSON tree, before crater_jobspec_decode(), so every error still names
 * the user's field path.
 *
 * The registry owns its profiles. A registry always holds the built-in
 * "default@1".
 */
#ifndef CRATER_PROFILE_H
#define CRATER_PROFILE_H

#include <jansson.h>

#include "crater/dec.h"

#define CRATER_PROFILE_DEFAULT "default@1"

typedef struct crater_profile {
    char *name;    /* "bert-train-infer" */
    char *version; /* "1.0" (as written; YAML 1.0 stays "1.0") */
    char *description;
    json_t *training;  /* partial job spec (owned reference) or NULL */
    json_t *inference; /* partial job spec (owned reference) or NULL */
} crater_profile_t;

typedef struct crater_profiles crater_profiles_t;

crater_profiles_t *crater_profiles_create(void);
/* A tenant's registry: empty (no built-in default). */
crater_profiles_t *crater_profiles_create_tenant(void);
/* Put shared (borrowed; it must outlive reg) before reg: a name shared
 * holds resolves there whatever reg holds, and decoding a profile whose
 * name shared holds into reg is CRATER_EEXIST at "name" (a tenant
 * cannot shadow an admin's profile). A store loads a tenant's profiles
 * before it calls this: an admin may publish a name a tenant had. */
void crater_profiles_share(crater_profiles_t *reg,
                           const crater_profiles_t *shared);
void crater_profiles_destroy(crater_profiles_t *reg);

/* Decode a Profile document (kind: Profile) and add it. Each variant is
 * checked by decoding it as a job spec fragment. Adding a name@version
 * that exists is an error (profiles are immutable once published). */
int crater_profile_decode(crater_dec_t *d,
                          json_t *root,
                          crater_profiles_t *reg);

/* "name@version" or "name" (the highest version, compared numerically by
 * dot-separated parts). NULL when unknown. Borrowed. */
const crater_profile_t *crater_profiles_get(const crater_profiles_t *reg,
                                            const char *ref);
size_t crater_profiles_count(const crater_profiles_t *reg);
const crater_profile_t *crater_profiles_at(const crater_profiles_t *reg,
                                           size_t i);

/* Expand a job document: legacy translation, then profile merge. Returns
 * a new reference (the input is not modified) or NULL with the error in d. */
json_t *crater_profiles_expand(const crater_profiles_t *reg,
                               crater_dec_t *d,
                               json_t *job);

json_t *crater_profile_encode(const crater_profile_t *p);

#endif /* CRATER_PROFILE_H */
