/* profile.c - versioned profiles and job expansion (see profile.h).
 *
 * A profile is kept as raw JSON fragments (one per variant) rather than as
 * decoded job specs, because expansion merges them into the user's job
 * document *before* the job is decoded: that way the job's own fields win
 * key by key, and every error the job decoder reports still names a path
 * the user can find in their file. Each variant is nevertheless decoded
 * once as a job spec when the profile is loaded, so a broken profile is
 * rejected at publication ("training.resources.gpu.memory: ...") and not
 * at the first submission that uses it.
 *
 * The registry is a small array of pointers (so that borrowed pointers stay
 * valid as profiles are added); clusters hold tens of profiles, so lookups
 * are linear scans. Versions are dot-separated integers compared part by
 * part ("1.10" > "1.9"); numerically equal versions ("1" and "1.0") are the
 * same version.
 */
#include "crater/profile.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/jobspec.h"

#define NAME_MAX_LEN 63
#define VERSION_MAX_LEN 32
#define DESCRIPTION_MAX_LEN 1024

struct crater_profiles {
    crater_profile_t **v;
    size_t n, cap;
    const crater_profiles_t *shared; /* a tenant's: the admin's profiles */
};

/* ---- profiles and versions ---------------------------------------------- */

static void profile_free(crater_profile_t *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->version);
    free(p->description);
    json_decref(p->training);
    json_decref(p->inference);
    free(p);
}

/* [a-z0-9]([-a-z0-9.]*[a-z0-9])?, at most 63 characters (as job names). */
static int valid_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > NAME_MAX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        int alnum =
            islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]);
        if (!alnum && ((s[i] != '-' && s[i] != '.') || i == 0 || i == n - 1))
            return 0;
    }
    return 1;
}

/* Dot-separated decimal integers: "1", "1.0", "2.10.3". */
static int valid_version(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > VERSION_MAX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (isdigit((unsigned char)s[i]))
            continue;
        if (s[i] != '.' || i == 0 || i == n - 1 || s[i + 1] == '.')
            return 0;
    }
    return 1;
}

/* Compare the next numeric part of *a and *b and advance both; a missing
 * part counts as 0. Digits are compared as strings after dropping leading
 * zeros, so no part can overflow. */
static int part_cmp(const char **a, const char **b)
{
    const char *pa = *a, *pb = *b;
    size_t la, lb;
    int c;

    while (*pa == '0' && isdigit((unsigned char)pa[1]))
        pa++;
    while (*pb == '0' && isdigit((unsigned char)pb[1]))
        pb++;
    la = strspn(pa, "0123456789");
    lb = strspn(pb, "0123456789");
    *a = pa + la + (pa[la] == '.');
    *b = pb + lb + (pb[lb] == '.');
    if (!la) {
        pa = "0";
        la = 1;
    }
    if (!lb) {
        pb = "0";
        lb = 1;
    }
    if (la != lb)
        return la < lb ? -1 : 1;
    c = strncmp(pa, pb, la);
    return (c > 0) - (c < 0);
}

static int version_cmp(const char *a, const char *b)
{
    while (*a || *b) {
        int c = part_cmp(&a, &b);
        if (c)
            return c;
    }
    return 0;
}

/* ---- registry ----------------------------------------------------------- */

static int reg_add(crater_profiles_t *reg, crater_profile_t *p)
{
    if (reg->n == reg->cap) {
        size_t cap = reg->cap ? reg->cap * 2 : 8;
        crater_profile_t **v = realloc(reg->v, cap * sizeof(*v));
        if (!v)
            return -1;
        reg->v = v;
        reg->cap = cap;
    }
    reg->v[reg->n++] = p;
    return 0;
}

/* default@1: what a legacy {gpu: N} spec and a job naming "default" get.
 * Built here rather than parsed so that creating a registry can fail only
 * for lack of memory; test_profile.c checks that it decodes as a profile. */
static crater_profile_t *default_profile(void)
{
    crater_profile_t *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->name = strdup("default");
    p->version = strdup("1");
    p->description = strdup("Built-in profile for legacy specs such as "
                            "{gpu: 2}");
    p->training = json_pack("{s:{s:i,s:s},s:s}",
                            "resources",
                            "cpu",
                            4,
                            "memory",
                            "16Gi",
                            "ioProfile",
                            "training");
    p->inference = json_pack("{s:{s:i,s:s},s:s}",
                             "resources",
                             "cpu",
                             2,
                             "memory",
                             "8Gi",
                             "ioProfile",
                             "inference");
    if (!p->name || !p->version || !p->description || !p->training
        || !p->inference) {
        profile_free(p);
        return NULL;
    }
    return p;
}

crater_profiles_t *crater_profiles_create(void)
{
    crater_profiles_t *reg = calloc(1, sizeof(*reg));
    crater_profile_t *def = default_profile();

    if (!reg || !def || reg_add(reg, def) < 0) {
        profile_free(def);
        crater_profiles_destroy(reg);
        return NULL;
    }
    return reg;
}

crater_profiles_t *crater_profiles_create_tenant(void)
{
    return calloc(1, sizeof(crater_profiles_t));
}

void crater_profiles_share(crater_profiles_t *reg,
                           const crater_profiles_t *shared)
{
    reg->shared = shared;
}

void crater_profiles_destroy(crater_profiles_t *reg)
{
    if (!reg)
        return;
    for (size_t i = 0; i < reg->n; i++)
        profile_free(reg->v[i]);
    free(reg->v);
    free(reg);
}

size_t crater_profiles_count(const crater_profiles_t *reg)
{
    return reg ? reg->n : 0;
}

const crater_profile_t *crater_profiles_at(const crater_profiles_t *reg,
                                           size_t i)
{
    return reg && i < reg->n ? reg->v[i] : NULL;
}

/* Name and version of a reference: "name@version" or "name" (version
 * NULL). False when the name does not fit. */
static int split_ref(const char *ref,
                     char *name,
                     size_t size,
                     const char **version)
{
    const char *at = strrchr(ref, '@');
    size_t n = at ? (size_t)(at - ref) : strlen(ref);

    if (n >= size)
        return 0;
    memcpy(name, ref, n);
    name[n] = '\0';
    *version = at ? at + 1 : NULL;
    return 1;
}

/* Does reg hold a version of profile name? */
static bool has_name(const crater_profiles_t *reg, const char *name)
{
    for (size_t i = 0; reg && i < reg->n; i++)
        if (strcmp(reg->v[i]->name, name) == 0)
            return true;
    return false;
}

const crater_profile_t *crater_profiles_get(const crater_profiles_t *reg,
                                            const char *ref)
{
    char name[NAME_MAX_LEN + 1];
    const char *version;
    const crater_profile_t *best = NULL;

    if (!reg || !ref || !split_ref(ref, name, sizeof(name), &version))
        return NULL;
    if (version && !valid_version(version))
        return NULL;
    /* a shared name is the shared profile's, whatever the tenant holds */
    if (has_name(reg->shared, name))
        return crater_profiles_get(reg->shared, ref);
    for (size_t i = 0; i < reg->n; i++) {
        const crater_profile_t *p = reg->v[i];
        if (strcmp(p->name, name) != 0)
            continue;
        if (version ? version_cmp(p->version, version) == 0
                    : !best || version_cmp(p->version, best->version) > 0)
            best = p;
    }
    return best;
}

/* ---- decoding a Profile document --------------------------------------- */

struct pdec {
    crater_profile_t *p;
};

static int dec_api_version(crater_dec_t *d, json_t *v, void *obj)
{
    (void)obj;
    return crater_dec_literal(d, v, "crater/v1");
}

static int dec_kind(crater_dec_t *d, json_t *v, void *obj)
{
    (void)obj;
    return crater_dec_literal(d, v, "Profile");
}

static int dec_name(crater_dec_t *d, json_t *v, void *obj)
{
    struct pdec *pd = obj;

    if (crater_dec_str(d, v, NAME_MAX_LEN, &pd->p->name) < 0)
        return -1;
    if (!valid_name(pd->p->name))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a valid name: lowercase letters, "
                               "digits, '-' and '.', starting and ending "
                               "with a letter or digit",
                               pd->p->name);
    return 0;
}

/* The version as written: YAML `version: 1.0` is the number 1.0 to the
 * parser, but the literal text "1.0" is what the user means. */
static int dec_version(crater_dec_t *d, json_t *v, void *obj)
{
    struct pdec *pd = obj;
    char buf[64];
    const char *text;

    if (!json_is_string(v) && !json_is_number(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a version such as 1.0, got %s",
                               crater_dec_typename(v));
    text = crater_dec_text(d, v, buf, sizeof(buf));
    if (!text || !valid_version(text))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a version: dot-separated numbers "
                               "such as 1, 1.0 or 2.10.3",
                               text ? text : "");
    free(pd->p->version);
    if (!(pd->p->version = strdup(text)))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return 0;
}

static int dec_description(crater_dec_t *d, json_t *v, void *obj)
{
    struct pdec *pd = obj;

    return crater_dec_str(d, v, DESCRIPTION_MAX_LEN, &pd->p->description);
}

/* Fields a variant may not set: they belong to the job or the document. */
static int variant_forbidden(crater_dec_t *d, json_t *v)
{
    static const char *const keys[] = {"name", "profile", "kind", "apiVersion"};

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (json_object_get(v, keys[i])) {
            crater_dec_push_key(d, keys[i]);
            return crater_dec_fail(d,
                                   CRATER_EFIELD,
                                   "a profile variant may not set '%s'",
                                   keys[i]);
        }
    }
    return 0;
}

/* A training variant must not turn a job into an inference service and
 * an inference variant must not turn it into anything else. */
static int variant_workload(crater_dec_t *d, json_t *v, int inference)
{
    json_t *wt = json_object_get(v, "workloadType");
    const char *s = json_is_string(wt) ? json_string_value(wt) : NULL;

    if (s && inference != (strcmp(s, "inference") == 0)) {
        crater_dec_push_key(d, "workloadType");
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "the %s variant may not set workloadType %s",
                               inference ? "inference" : "training",
                               s);
    }
    if (!inference && json_object_get(v, "inference")) {
        crater_dec_push_key(d, "inference");
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "the training variant may not have an "
                               "inference section");
    }
    return 0;
}

/* Decode the variant as a job spec (with the profile's name standing in
 * for the job's) so that its errors name "training.resources.gpu.memory".
 * Stores a private deep copy. */
static int dec_variant(crater_dec_t *d,
                       json_t *v,
                       crater_profile_t *p,
                       json_t **out,
                       int inference)
{
    crater_jobspec_t *spec = NULL;
    json_t *copy;
    int rc;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping (a partial job spec), "
                               "got %s",
                               crater_dec_typename(v));
    if (variant_forbidden(d, v) < 0 || variant_workload(d, v, inference) < 0)
        return -1;
    if (!(copy = json_deep_copy(v))
        || json_object_set_new(copy,
                               "name",
                               json_string(p->name ? p->name : "profile"))
               < 0) {
        json_decref(copy);
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    }
    rc = crater_jobspec_decode(d, copy, &spec);
    crater_jobspec_destroy(spec);
    json_object_del(copy, "name");
    if (rc == 0) {
        json_decref(*out);
        *out = copy;
    } else {
        json_decref(copy);
    }
    return rc;
}

static int dec_training(crater_dec_t *d, json_t *v, void *obj)
{
    struct pdec *pd = obj;

    return dec_variant(d, v, pd->p, &pd->p->training, 0);
}

static int dec_inference(crater_dec_t *d, json_t *v, void *obj)
{
    struct pdec *pd = obj;

    return dec_variant(d, v, pd->p, &pd->p->inference, 1);
}

/* Fields are decoded in document order, so a variant listed before `name`
 * is checked with a placeholder job name (see dec_variant). */
static const crater_dec_field_t profile_fields[] = {
    {"apiVersion", dec_api_version, 0},
    {"kind", dec_kind, CRATER_FIELD_REQUIRED},
    {"name", dec_name, CRATER_FIELD_REQUIRED},
    {"version", dec_version, CRATER_FIELD_REQUIRED},
    {"description", dec_description, 0},
    {"training", dec_training, 0},
    {"inference", dec_inference, 0},
    {NULL, NULL, 0},
};

static int check_new(crater_dec_t *d,
                     const crater_profiles_t *reg,
                     const crater_profile_t *p)
{
    if (!p->training && !p->inference)
        return crater_dec_fail(d,
                               CRATER_EMISSING,
                               "a profile needs a training or an inference "
                               "variant");
    if (has_name(reg->shared, p->name)) {
        crater_dec_push_key(d, "name");
        return crater_dec_fail(d,
                               CRATER_EEXIST,
                               "profile '%s' is a shared profile (an admin's): "
                               "a tenant's profile cannot shadow it; choose "
                               "another name",
                               p->name);
    }
    for (size_t i = 0; i < reg->n; i++) {
        const crater_profile_t *q = reg->v[i];
        if (strcmp(q->name, p->name) == 0
            && version_cmp(q->version, p->version) == 0) {
            crater_dec_push_key(d, "version");
            return crater_dec_fail(d,
                                   CRATER_EEXIST,
                                   "profile %s@%s already exists; publish a "
                                   "new version instead",
                                   q->name,
                                   q->version);
        }
    }
    return 0;
}

int crater_profile_decode(crater_dec_t *d, json_t *root, crater_profiles_t *reg)
{
    struct pdec pd = {.p = calloc(1, sizeof(crater_profile_t))};

    if (!pd.p)
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    if (crater_dec_object(d, root, profile_fields, &pd) < 0
        || check_new(d, reg, pd.p) < 0) {
        profile_free(pd.p);
        return -1;
    }
    if (reg_add(reg, pd.p) < 0) {
        profile_free(pd.p);
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    }
    return 0;
}

json_t *crater_profile_encode(const crater_profile_t *p)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s}",
                          "apiVersion",
                          "crater/v1",
                          "kind",
                          "Profile",
                          "name",
                          p->name,
                          "version",
                          p->version);

    if (o && p->description
        && json_object_set_new(o, "description", json_string(p->description))
               < 0)
        goto fail;
    if (o && p->training
        && json_object_set_new(o, "training", json_deep_copy(p->training)) < 0)
        goto fail;
    if (o && p->inference
        && json_object_set_new(o, "inference", json_deep_copy(p->inference))
               < 0)
        goto fail;
    return o;
fail:
    json_decref(o);
    return NULL;
}

/* ---- expansion ---------------------------------------------------------- */

/* Legacy {gpu: N}: a bare top-level GPU count becomes resources.gpu.count
 * under the default profile (unless the job names one). */
static int legacy_gpu(crater_dec_t *d, json_t *job)
{
    json_t *g = json_object_get(job, "gpu"), *res;
    size_t mark;
    uint64_t n;

    if (!g)
        return 0;
    mark = crater_dec_push_key(d, "gpu");
    if (!json_is_integer(g))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a whole number of GPUs (the legacy "
                               "form of resources.gpu.count), got %s",
                               crater_dec_typename(g));
    if (crater_dec_uint(d, g, 0, CRATER_JOB_MAX_GPUS, &n) < 0)
        return -1;
    res = json_object_get(job, "resources");
    if (res && !json_is_object(res)) {
        crater_dec_pop(d, mark);
        crater_dec_push_key(d, "resources");
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(res));
    }
    if (res && json_object_get(res, "gpu"))
        return crater_dec_fail(d,
                               CRATER_ECONFLICT,
                               "the legacy gpu count conflicts with "
                               "resources.gpu; keep only resources.gpu.count");
    crater_dec_pop(d, mark);
    if (!res && json_object_set_new(job, "resources", res = json_object()) < 0)
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    if (json_object_set_new(res,
                            "gpu",
                            json_pack("{s:I}", "count", (json_int_t)n))
            < 0
        || json_object_del(job, "gpu") < 0
        || (!json_object_get(job, "profile")
            && json_object_set_new(job,
                                   "profile",
                                   json_string(CRATER_PROFILE_DEFAULT))
                   < 0))
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return 0;
}

/* Whether the command/image look like a server (crater_workload_infer), for
 * jobs that neither set workloadType nor have an inference section. */
static int inferred_inference(json_t *job)
{
    json_t *cmd = json_object_get(job, "command"), *img, *el;
    const char *image;
    char **argv = NULL;
    size_t i;
    int yes;

    if (json_is_array(cmd))
        argv = calloc(json_array_size(cmd) + 1, sizeof(*argv));
    if (argv) {
        json_array_foreach(cmd, i, el)
        {
            argv[i] = (char *)(json_is_string(el) ? json_string_value(el) : "");
        }
    }
    img = json_object_get(job, "image");
    image = json_is_string(img) ? json_string_value(img) : NULL;
    yes = crater_workload_infer(argv, image) == CRATER_WORKLOAD_INFERENCE;
    free(argv);
    return yes;
}

/* 1 for the inference variant, 0 for the training one: an explicit
 * workloadType decides, then an inference section, then what the job's
 * decoder would infer from its command. */
static int wants_inference(json_t *job)
{
    json_t *wt = json_object_get(job, "workloadType"), *inf;

    if (json_is_string(wt))
        return strcmp(json_string_value(wt), "inference") == 0;
    inf = json_object_get(job, "inference");
    if (inf && !json_is_null(inf))
        return 1;
    return inferred_inference(job);
}

/* Merge src under dst: keys dst lacks are copied from src, mappings
 * present in both are merged recursively, anything else in dst stays. */
static int merge_under(json_t *dst, json_t *src)
{
    const char *key;
    json_t *sv, *dv;

    json_object_foreach(src, key, sv)
    {
        dv = json_object_get(dst, key);
        if (!dv) {
            if (json_object_set_new(dst, key, json_deep_copy(sv)) < 0)
                return -1;
        } else if (json_is_object(dv) && json_is_object(sv)) {
            if (merge_under(dv, sv) < 0)
                return -1;
        }
    }
    return 0;
}

/* Up to four "'name@version'" entries, those whose name is within edit
 * distance 3 of name (close) or all of them. Returns how many. */
static size_t list_profiles(const crater_profiles_t *reg,
                            const char *name,
                            int close,
                            char *list,
                            size_t size)
{
    size_t len = 0, shown = 0;

    list[0] = '\0';
    for (size_t i = 0; i < reg->n && shown < 4 && len < size; i++) {
        const crater_profile_t *p = reg->v[i];
        if (close && crater_edit_distance(name, p->name) > 3)
            continue;
        len += (size_t)snprintf(list + len,
                                size - len,
                                "%s'%s@%s'",
                                shown ? ", " : "",
                                p->name,
                                p->version);
        shown++;
    }
    return shown;
}

/* "unknown profile 'x' (did you mean 'a@1', 'b@2'?)", or, when nothing
 * is close and there are few profiles, "(known: ...)". */
static int unknown_profile(const crater_profiles_t *reg,
                           crater_dec_t *d,
                           const char *ref)
{
    char name[NAME_MAX_LEN + 1], list[120];
    const char *version;

    if (!split_ref(ref, name, sizeof(name), &version))
        name[0] = '\0';
    if (reg->shared && !list_profiles(reg, name, 1, list, sizeof(list)))
        return unknown_profile(reg->shared, d, ref);
    if (list_profiles(reg, name, 1, list, sizeof(list)))
        return crater_dec_fail(d,
                               CRATER_ENOENT,
                               "unknown profile '%s' (did you mean %s?)",
                               ref,
                               list);
    if (reg->n <= 4 && list_profiles(reg, name, 0, list, sizeof(list)))
        return crater_dec_fail(d,
                               CRATER_ENOENT,
                               "unknown profile '%s' (known: %s)",
                               ref,
                               list);
    return crater_dec_fail(d, CRATER_ENOENT, "unknown profile '%s'", ref);
}

static int apply_profile(const crater_profiles_t *reg,
                         crater_dec_t *d,
                         json_t *job)
{
    json_t *pv = json_object_get(job, "profile"), *variant;
    const crater_profile_t *p;
    char resolved[NAME_MAX_LEN + VERSION_MAX_LEN + 2];
    int inference;

    if (!pv)
        return 0;
    crater_dec_push_key(d, "profile");
    if (!json_is_string(pv))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected NAME@VERSION or NAME, got %s",
                               crater_dec_typename(pv));
    if (!(p = crater_profiles_get(reg, json_string_value(pv))))
        return unknown_profile(reg, d, json_string_value(pv));
    inference = wants_inference(job);
    variant = inference ? p->inference : p->training;
    if (!variant)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "profile %s@%s has no %s variant",
                               p->name,
                               p->version,
                               inference ? "inference" : "training");
    snprintf(resolved, sizeof(resolved), "%s@%s", p->name, p->version);
    if (merge_under(job, variant) < 0
        || json_object_set_new(job, "profile", json_string(resolved)) < 0)
        return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
    return 0;
}

json_t *crater_profiles_expand(const crater_profiles_t *reg,
                               crater_dec_t *d,
                               json_t *job)
{
    size_t mark = d->len;
    json_t *out;

    if (!json_is_object(job)) {
        crater_dec_fail(d,
                        CRATER_ETYPE,
                        "expected a mapping, got %s",
                        crater_dec_typename(job));
        return NULL;
    }
    if (!(out = json_deep_copy(job))) {
        crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (legacy_gpu(d, out) < 0 || apply_profile(reg, d, out) < 0) {
        json_decref(out);
        return NULL;
    }
    crater_dec_pop(d, mark);
    return out;
}
