/* test_profile.c - versioned profiles: decoding the examples, literal
 * versions, version ordering, immutability, legacy {gpu: N} translation,
 * merge precedence, variant choice and the errors a user sees. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/doc.h"
#include "crater/jobspec.h"
#include "crater/kb.h"
#include "crater/profile.h"

#define SRC CRATER_SOURCE_DIR

static crater_error_t err;

/* Decode every document of text (named "p.yaml") into reg. */
static int add_text(crater_profiles_t *reg, const char *text)
{
    crater_doc_t *doc;
    crater_dec_t d;
    int rc = 0;

    memset(&err, 0, sizeof(err));
    if (crater_doc_parse(text, strlen(text), "p.yaml", &doc, &err) < 0)
        return -1;
    for (size_t i = 0; rc == 0 && i < crater_doc_count(doc); i++) {
        crater_dec_init(&d, doc, i, &err);
        rc = crater_profile_decode(&d, crater_doc_root(doc, i), reg);
    }
    crater_doc_destroy(doc);
    return rc;
}

static int add_file(crater_profiles_t *reg, const char *path)
{
    crater_doc_t *doc;
    crater_dec_t d;
    int rc = 0;

    memset(&err, 0, sizeof(err));
    if (crater_doc_load(path, &doc, &err) < 0)
        return -1;
    for (size_t i = 0; rc == 0 && i < crater_doc_count(doc); i++) {
        crater_dec_init(&d, doc, i, &err);
        rc = crater_profile_decode(&d, crater_doc_root(doc, i), reg);
    }
    crater_doc_destroy(doc);
    return rc;
}

static crater_profiles_t *reg_with_bert(void)
{
    crater_profiles_t *reg = crater_profiles_create();

    ck_assert_ptr_nonnull(reg);
    ck_assert_msg(add_file(reg, SRC "/examples/profiles/bert-train-infer.yaml")
                      == 0,
                  "%s",
                  err.text);
    return reg;
}

/* Expand a YAML job; NULL on error (message in err). */
static json_t *expand_text(const crater_profiles_t *reg, const char *yaml)
{
    crater_doc_t *doc;
    crater_dec_t d;
    json_t *out, *before;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(crater_doc_parse(yaml, strlen(yaml), "job.yaml", &doc, &err)
                      == 0,
                  "%s",
                  err.text);
    before = json_deep_copy(crater_doc_root(doc, 0));
    crater_dec_init(&d, doc, 0, &err);
    out = crater_profiles_expand(reg, &d, crater_doc_root(doc, 0));
    ck_assert(json_equal(before, crater_doc_root(doc, 0))); /* untouched */
    json_decref(before);
    crater_doc_destroy(doc);
    return out;
}

static json_t *at(json_t *v, const char *path)
{
    char buf[128], *save = NULL;

    strcpy(buf, path);
    for (char *k = strtok_r(buf, ".", &save); v && k;
         k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    return v;
}

static const char *str_at(json_t *v, const char *path)
{
    return json_string_value(at(v, path));
}

START_TEST(default_profile_builtin)
{
    crater_profiles_t *reg = crater_profiles_create();
    const crater_profile_t *p =
        crater_profiles_get(reg, CRATER_PROFILE_DEFAULT);

    ck_assert_uint_eq(crater_profiles_count(reg), 1);
    ck_assert_ptr_eq(crater_profiles_at(reg, 0), p);
    ck_assert_ptr_eq(crater_profiles_get(reg, "default"), p);
    ck_assert_str_eq(p->name, "default");
    ck_assert_str_eq(p->version, "1");
    ck_assert_int_eq(json_integer_value(at(p->training, "resources.cpu")), 4);
    ck_assert_str_eq(str_at(p->training, "resources.memory"), "16Gi");
    ck_assert_str_eq(str_at(p->training, "ioProfile"), "training");
    ck_assert_int_eq(json_integer_value(at(p->inference, "resources.cpu")), 2);
    ck_assert_str_eq(str_at(p->inference, "resources.memory"), "8Gi");
    ck_assert_str_eq(str_at(p->inference, "ioProfile"), "inference");
    crater_profiles_destroy(reg);
}
END_TEST

/* The built-in variants are valid job-spec fragments: its encoding, under
 * another name, decodes as a profile. */
START_TEST(default_profile_decodes)
{
    crater_profiles_t *reg = crater_profiles_create();
    json_t *enc = crater_profile_encode(crater_profiles_at(reg, 0));
    crater_dec_t d;

    json_object_set_new(enc, "name", json_string("default-copy"));
    crater_dec_init(&d, NULL, 0, &err);
    ck_assert_msg(crater_profile_decode(&d, enc, reg) == 0, "%s", err.text);
    ck_assert_uint_eq(crater_profiles_count(reg), 2);
    json_decref(enc);
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(example_profile)
{
    crater_profiles_t *reg = reg_with_bert();
    const crater_profile_t *p = crater_profiles_get(reg, "bert-train-infer");

    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_eq(crater_profiles_get(reg, "bert-train-infer@1.0"), p);
    ck_assert_ptr_eq(crater_profiles_get(reg, "bert-train-infer@1"), p);
    ck_assert_str_eq(p->version, "1.0"); /* literal, not "1" */
    ck_assert_str_eq(p->description,
                     "BERT fine-tuning and serving on A100 40GB GPUs");
    ck_assert_str_eq(str_at(p->training, "resources.gpu.model"),
                     "a100-sxm4-40gb");
    ck_assert_int_eq(json_integer_value(at(p->training, "resources.cpu")), 8);
    ck_assert_str_eq(str_at(p->training, "numa"), "strict");
    ck_assert_str_eq(str_at(p->inference, "resources.gpu.memory"), "12Gi");
    ck_assert_str_eq(str_at(p->inference, "inference.batchTimeout"), "10ms");
    ck_assert_ptr_null(json_object_get(p->training, "name")); /* no stand-in */
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(literal_versions)
{
    crater_profiles_t *reg = crater_profiles_create();
    static const char *const cases[][2] = {
        {"1.0", "1.0"},
        {"1.10", "1.10"},
        {"\"2\"", "2"},
        {"3", "3"},
        {"4.00", "4.00"},
        {"'5.1.2'", "5.1.2"},
        {"6.0.0", "6.0.0"},
    };
    char text[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text,
                 sizeof(text),
                 "kind: Profile\nname: v%zu\nversion: %s\n"
                 "training: {resources: {cpu: 1}}\n",
                 i,
                 cases[i][0]);
        ck_assert_msg(add_text(reg, text) == 0,
                      "%s: %s",
                      cases[i][0],
                      err.text);
        ck_assert_str_eq(crater_profiles_at(reg, i + 1)->version, cases[i][1]);
    }
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1.x\n"
                              "training: {}\n"),
                     -1);
    ck_assert_str_eq(err.text,
                     "p.yaml:3:1: version: '1.x' is not a version: "
                     "dot-separated numbers such as 1, 1.0 or "
                     "2.10.3");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: true\n"
                              "training: {}\n"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ETYPE);
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: -1\n"
                              "training: {}\n"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(highest_version)
{
    crater_profiles_t *reg = crater_profiles_create();

    ck_assert_msg(add_file(reg, SRC "/tests/data/profiles/versions.yaml") == 0,
                  "%s",
                  err.text);
    ck_assert_uint_eq(crater_profiles_count(reg), 4);
    ck_assert_str_eq(crater_profiles_get(reg, "multi")->version, "1.10");
    ck_assert_str_eq(crater_profiles_get(reg, "multi@1.9")->version, "1.9");
    ck_assert_str_eq(crater_profiles_get(reg, "multi@1.09")->version, "1.9");
    ck_assert_str_eq(crater_profiles_get(reg, "multi@1.2")->version, "1.2");
    ck_assert_ptr_null(crater_profiles_get(reg, "multi@2"));
    ck_assert_ptr_null(crater_profiles_get(reg, "multi@"));
    ck_assert_ptr_null(crater_profiles_get(reg, "multi@1..2"));
    ck_assert_ptr_null(crater_profiles_get(reg, "mult"));
    ck_assert_ptr_null(crater_profiles_get(reg, ""));
    /* 1.10.1 > 1.10 > 1.9.99 */
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: multi\n"
                              "version: 1.10.1\ntraining: {}\n---\n"
                              "kind: Profile\nname: multi\n"
                              "version: 1.9.99\ntraining: {}\n"),
                     0);
    ck_assert_str_eq(crater_profiles_get(reg, "multi")->version, "1.10.1");
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(duplicates_rejected)
{
    crater_profiles_t *reg = reg_with_bert();

    ck_assert_int_eq(add_file(reg,
                              SRC "/examples/profiles/bert-train-infer.yaml"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_str_eq(err.field, "version");
    ck_assert_str_eq(err.text,
                     SRC "/examples/profiles/bert-train-infer.yaml:10:1: "
                         "version: profile bert-train-infer@1.0 already "
                         "exists; publish a new version instead");
    /* "1" and "1.0" are the same version */
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: bert-train-infer\n"
                              "version: 1\ntraining: {}\n"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: default\n"
                              "version: 1.0\ntraining: {}\n"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_uint_eq(crater_profiles_count(reg), 2); /* nothing added */
    crater_profiles_destroy(reg);
}
END_TEST

/* A tenant's registry: its own names, the shared ones first and never
 * shadowed; a store loads a tenant's before linking it. */
START_TEST(tenant_registry)
{
    crater_profiles_t *shared = reg_with_bert();
    crater_profiles_t *t = crater_profiles_create_tenant();
    const crater_profile_t *p;

    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(crater_profiles_count(t), 0); /* no built-in */
    /* loaded before it is linked: a name the admin published later */
    ck_assert_int_eq(add_text(t,
                              "kind: Profile\nname: bert-train-infer\n"
                              "version: 7\ntraining: {}\n"),
                     0);
    crater_profiles_share(t, shared);
    p = crater_profiles_get(t, "bert-train-infer");
    ck_assert_str_eq(p->version, "1.0"); /* the shared one wins */
    ck_assert_ptr_null(crater_profiles_get(t, "bert-train-infer@7"));
    ck_assert_ptr_nonnull(crater_profiles_get(t, "default"));
    ck_assert_int_eq(add_text(t,
                              "kind: Profile\nname: default\n"
                              "version: 99\ntraining: {}\n"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_str_eq(err.field, "name");
    ck_assert_int_eq(add_text(t,
                              "kind: Profile\nname: mine\n"
                              "version: 1\ntraining: {}\n"),
                     0);
    ck_assert_ptr_nonnull(crater_profiles_get(t, "mine@1"));
    ck_assert_ptr_null(crater_profiles_get(shared, "mine"));
    crater_profiles_destroy(t);
    crater_profiles_destroy(shared);
}
END_TEST

START_TEST(document_errors)
{
    crater_profiles_t *reg = crater_profiles_create();

    ck_assert_int_eq(add_text(reg, "name: x\nversion: 1\ntraining: {}\n"), -1);
    ck_assert_int_eq(err.errnum, CRATER_EMISSING);
    ck_assert_int_eq(add_text(reg,
                              "kind: Job\nname: x\nversion: 1\n"
                              "training: {}\n"),
                     -1);
    ck_assert_str_eq(err.text,
                     "p.yaml:1:1: kind: 'Job' is not supported here (expected "
                     "Profile)");
    ck_assert_int_eq(add_text(reg, "kind: Profile\nname: x\nversion: 1\n"), -1);
    ck_assert_int_eq(err.errnum, CRATER_EMISSING);
    ck_assert_ptr_nonnull(strstr(err.text,
                                 "a profile needs a training or an "
                                 "inference variant"));
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: Bert_1\nversion: 1\n"
                              "training: {}\n"),
                     -1);
    ck_assert_str_eq(err.field, "name");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "trainig: {}\n"),
                     -1);
    ck_assert_str_eq(err.text,
                     "p.yaml:4:1: trainig: unknown field 'trainig' "
                     "(did you mean 'training'?)");
    ck_assert_int_eq(add_text(reg,
                              "apiVersion: crater/v2\nkind: Profile\n"
                              "name: x\nversion: 1\ntraining: {}\n"),
                     -1);
    ck_assert_str_eq(err.field, "apiVersion");
    ck_assert_uint_eq(crater_profiles_count(reg), 1);
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(variant_errors)
{
    crater_profiles_t *reg = crater_profiles_create();

    ck_assert_int_eq(add_file(reg, SRC "/tests/data/profiles/bad-variant.yaml"),
                     -1);
    ck_assert_str_eq(err.field, "training.resources.gpu.memory");
    ck_assert_msg(strncmp(err.text,
                          SRC "/tests/data/profiles/bad-variant.yaml:9:7: "
                              "training.resources.gpu.memory: ",
                          strlen(SRC) + 64)
                      == 0,
                  "%s",
                  err.text);
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "training:\n  name: y\n"),
                     -1);
    ck_assert_str_eq(err.text,
                     "p.yaml:5:3: training.name: a profile variant "
                     "may not set 'name'");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "inference:\n  profile: default@1\n"),
                     -1);
    ck_assert_str_eq(err.field, "inference.profile");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "inference:\n  workloadType: training\n"),
                     -1);
    ck_assert_str_eq(err.text,
                     "p.yaml:5:3: inference.workloadType: the "
                     "inference variant may not set workloadType "
                     "training");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "training:\n  inference: {port: 80}\n"),
                     -1);
    ck_assert_str_eq(err.field, "training.inference");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "training:\n  resourses: {cpu: 1}\n"),
                     -1);
    ck_assert_str_eq(err.field, "training.resourses");
    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: x\nversion: 1\n"
                              "training: [cpu]\n"),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ETYPE);
    ck_assert_uint_eq(crater_profiles_count(reg), 1);
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(legacy_translation)
{
    crater_profiles_t *reg = reg_with_bert();
    json_t *job = expand_text(reg,
                              "name: legacy-train\ngpu: 2\n"
                              "command: [python3, train.py]\n");

    ck_assert_msg(job != NULL, "%s", err.text);
    ck_assert_ptr_null(json_object_get(job, "gpu"));
    ck_assert_int_eq(json_integer_value(at(job, "resources.gpu.count")), 2);
    ck_assert_int_eq(json_integer_value(at(job, "resources.cpu")), 4);
    ck_assert_str_eq(str_at(job, "resources.memory"), "16Gi");
    ck_assert_str_eq(str_at(job, "ioProfile"), "training");
    ck_assert_str_eq(str_at(job, "profile"), "default@1");
    ck_assert_str_eq(str_at(job, "name"), "legacy-train");
    json_decref(job);

    /* gpu: 0 is a CPU-only job; a named profile replaces default@1 */
    job = expand_text(reg,
                      "name: a\ngpu: 0\nprofile: bert-train-infer\n"
                      "resources: {cpu: 2}\n");
    ck_assert_msg(job != NULL, "%s", err.text);
    ck_assert_int_eq(json_integer_value(at(job, "resources.gpu.count")), 0);
    ck_assert_str_eq(str_at(job, "resources.gpu.model"), "a100-sxm4-40gb");
    ck_assert_int_eq(json_integer_value(at(job, "resources.cpu")), 2);
    ck_assert_str_eq(str_at(job, "profile"), "bert-train-infer@1.0");
    json_decref(job);

    ck_assert_ptr_null(expand_text(reg, "name: a\ngpu: -1\n"));
    ck_assert_str_eq(err.text, "job.yaml:2:1: gpu: -1 is out of range [0, 64]");
    ck_assert_ptr_null(expand_text(reg, "name: a\ngpu: '2'\n"));
    ck_assert_str_eq(err.text,
                     "job.yaml:2:1: gpu: expected a whole number "
                     "of GPUs (the legacy form of "
                     "resources.gpu.count), got a string");
    ck_assert_ptr_null(expand_text(reg, "name: a\ngpu: 1.5\n"));
    ck_assert_int_eq(err.errnum, CRATER_ETYPE);
    ck_assert_ptr_null(expand_text(reg,
                                   "name: a\ngpu: 2\nresources:\n"
                                   "  gpu: {count: 2}\n"));
    ck_assert_int_eq(err.errnum, CRATER_ECONFLICT);
    ck_assert_str_eq(err.text,
                     "job.yaml:2:1: gpu: the legacy gpu count "
                     "conflicts with resources.gpu; keep only "
                     "resources.gpu.count");
    ck_assert_ptr_null(expand_text(reg, "name: a\ngpu: 2\nresources: 4\n"));
    ck_assert_str_eq(err.field, "resources");
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(merge_precedence)
{
    crater_profiles_t *reg = reg_with_bert();
    json_t *job;

    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: lists\nversion: 2\n"
                              "training:\n  command: [a, b]\n"
                              "  env: {A: '1', B: '2'}\n"
                              "  resources: {cpu: 1, memory: 1Gi}\n"),
                     0);
    job = expand_text(reg,
                      "name: j\nprofile: lists\ncommand: [c]\n"
                      "env: {B: '3'}\nresources: {memory: 2Gi}\n");
    ck_assert_msg(job != NULL, "%s", err.text);
    ck_assert_uint_eq(json_array_size(at(job, "command")), 1); /* replaced */
    ck_assert_str_eq(json_string_value(json_array_get(at(job, "command"), 0)),
                     "c");
    ck_assert_str_eq(str_at(job, "env.A"), "1"); /* mappings merge */
    ck_assert_str_eq(str_at(job, "env.B"), "3"); /* the job wins */
    ck_assert_int_eq(json_integer_value(at(job, "resources.cpu")), 1);
    ck_assert_str_eq(str_at(job, "resources.memory"), "2Gi");
    ck_assert_str_eq(str_at(job, "profile"), "lists@2");
    json_decref(job);

    /* the example job over the example profile */
    job = expand_text(reg,
                      "name: bert-large-finetune\n"
                      "profile: bert-train-infer@1.0\n"
                      "command: [torchrun, train_bert.py]\n"
                      "resources:\n  gpu:\n    count: 2\n  cpu: 16\n");
    ck_assert_msg(job != NULL, "%s", err.text);
    ck_assert_int_eq(json_integer_value(at(job, "resources.gpu.count")), 2);
    ck_assert_str_eq(str_at(job, "resources.gpu.model"), "a100-sxm4-40gb");
    ck_assert_int_eq(json_integer_value(at(job, "resources.gpu.minSmCount")),
                     108);
    ck_assert_int_eq(json_integer_value(at(job, "resources.cpu")), 16);
    ck_assert_str_eq(str_at(job, "resources.memory"), "64Gi");
    ck_assert_str_eq(str_at(job, "numa"), "strict");
    ck_assert_ptr_null(at(job, "inference"));
    json_decref(job);

    /* no profile, no legacy gpu: an equal copy */
    job = expand_text(reg, "name: plain\nresources: {cpu: 1}\n");
    ck_assert_msg(job != NULL, "%s", err.text);
    ck_assert_uint_eq(json_object_size(job), 2);
    json_decref(job);
    crater_profiles_destroy(reg);
}
END_TEST

/* The expanded job decodes and validates as a job spec. */
static void check_valid(json_t *job)
{
    crater_kb_t *kb = crater_kb_create();
    crater_jobspec_t *spec = NULL;
    crater_dec_t d;

    crater_dec_init(&d, NULL, 0, &err);
    ck_assert_msg(crater_jobspec_decode(&d, job, &spec) == 0, "%s", err.text);
    ck_assert_msg(crater_jobspec_validate(spec, kb, &err) == 0, "%s", err.text);
    crater_jobspec_destroy(spec);
    crater_kb_destroy(kb);
}

START_TEST(variant_choice)
{
    crater_profiles_t *reg = reg_with_bert();
    json_t *job;

    job = expand_text(reg,
                      "name: s\nprofile: bert-train-infer\n"
                      "workloadType: inference\n"
                      "command: [python3, serve.py]\n");
    ck_assert_str_eq(str_at(job, "resources.gpu.memory"), "12Gi");
    ck_assert_int_eq(json_integer_value(at(job, "inference.port")), 8000);
    check_valid(job);
    json_decref(job);
    job = expand_text(reg,
                      "name: s\nprofile: bert-train-infer\n"
                      "inference: {port: 9000}\n");
    ck_assert_str_eq(str_at(job, "resources.gpu.memory"), "12Gi");
    ck_assert_int_eq(json_integer_value(at(job, "inference.port")), 9000);
    ck_assert_int_eq(json_integer_value(at(job, "inference.maxReplicas")), 4);
    json_decref(job);
    job = expand_text(reg,
                      "name: s\nprofile: bert-train-infer\n"
                      "command: [vllm, serve, bert]\n");
    ck_assert_str_eq(str_at(job, "ioProfile"), "model-loading");
    json_decref(job);
    job = expand_text(reg,
                      "name: s\nprofile: bert-train-infer\n"
                      "workloadType: batch\n");
    ck_assert_str_eq(str_at(job, "ioProfile"), "training");
    json_decref(job);

    ck_assert_int_eq(add_text(reg,
                              "kind: Profile\nname: train-only\n"
                              "version: 1\ntraining: {}\n"),
                     0);
    ck_assert_ptr_null(expand_text(reg,
                                   "name: s\nprofile: train-only\n"
                                   "workloadType: inference\n"));
    ck_assert_str_eq(err.text,
                     "job.yaml:2:1: profile: profile train-only@1 "
                     "has no inference variant");
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(unknown_profile)
{
    crater_profiles_t *reg = reg_with_bert();

    ck_assert_ptr_null(
        expand_text(reg, "name: s\nprofile: bert-train-infr@1.0\n"));
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_str_eq(err.field, "profile");
    ck_assert_str_eq(err.text,
                     "job.yaml:2:1: profile: unknown profile "
                     "'bert-train-infr@1.0' (did you mean "
                     "'bert-train-infer@1.0'?)");
    ck_assert_ptr_null(
        expand_text(reg, "name: s\nprofile: bert-train-infer@2\n"));
    ck_assert_str_eq(err.text,
                     "job.yaml:2:1: profile: unknown profile "
                     "'bert-train-infer@2' (did you mean "
                     "'bert-train-infer@1.0'?)");
    ck_assert_ptr_null(expand_text(reg, "name: s\nprofile: resnet\n"));
    ck_assert_str_eq(err.text,
                     "job.yaml:2:1: profile: unknown profile "
                     "'resnet' (known: 'default@1', "
                     "'bert-train-infer@1.0')");
    ck_assert_ptr_null(expand_text(reg, "name: s\nprofile: 3\n"));
    ck_assert_int_eq(err.errnum, CRATER_ETYPE);
    ck_assert_ptr_null(expand_text(reg, "[1, 2]\n"));
    ck_assert_int_eq(err.errnum, CRATER_ETYPE);
    crater_profiles_destroy(reg);
}
END_TEST

START_TEST(encode_roundtrip)
{
    crater_profiles_t *reg = reg_with_bert(), *reg2 = crater_profiles_create();
    const crater_profile_t *p = crater_profiles_get(reg, "bert-train-infer");
    json_t *enc = crater_profile_encode(p), *enc2;
    crater_dec_t d;

    ck_assert_str_eq(str_at(enc, "version"), "1.0");
    ck_assert_str_eq(str_at(enc, "kind"), "Profile");
    ck_assert_str_eq(str_at(enc, "apiVersion"), "crater/v1");
    crater_dec_init(&d, NULL, 0, &err);
    ck_assert_msg(crater_profile_decode(&d, enc, reg2) == 0, "%s", err.text);
    enc2 = crater_profile_encode(crater_profiles_get(reg2, "bert-train-infer"));
    ck_assert(json_equal(enc, enc2));
    json_decref(enc);
    json_decref(enc2);
    crater_profiles_destroy(reg);
    crater_profiles_destroy(reg2);
    crater_profiles_destroy(NULL);
}
END_TEST

/* Expand, decode and validate an example job file. */
static crater_jobspec_t *example_job(const crater_profiles_t *reg,
                                     const char *path)
{
    crater_kb_t *kb = crater_kb_create();
    crater_jobspec_t *spec = NULL;
    crater_doc_t *doc;
    crater_dec_t d;
    json_t *job;

    ck_assert_msg(crater_doc_load(path, &doc, &err) == 0, "%s", err.text);
    crater_dec_init(&d, doc, 0, &err);
    job = crater_profiles_expand(reg, &d, crater_doc_root(doc, 0));
    ck_assert_msg(job != NULL, "%s", err.text);
    crater_dec_init(&d, doc, 0, &err);
    ck_assert_msg(crater_jobspec_decode(&d, job, &spec) == 0, "%s", err.text);
    ck_assert_msg(crater_jobspec_validate(spec, kb, &err) == 0, "%s", err.text);
    json_decref(job);
    crater_doc_destroy(doc);
    crater_kb_destroy(kb);
    return spec;
}

START_TEST(example_jobs)
{
    crater_profiles_t *reg = reg_with_bert();
    crater_jobspec_t *s;

    s = example_job(reg, SRC "/examples/jobs/legacy.yaml");
    ck_assert_str_eq(s->name, "legacy-train");
    ck_assert_uint_eq(s->resources.gpu.count, 2);
    ck_assert_uint_eq(s->resources.gpu.memory_bytes, 0); /* whole GPUs */
    ck_assert_uint_eq(s->resources.cpu_milli, 4000);
    ck_assert_uint_eq(s->resources.memory_bytes, 16ull << 30);
    ck_assert_int_eq(s->io_profile, CRATER_IO_TRAINING);
    ck_assert_str_eq(s->profile, "default@1");
    crater_jobspec_destroy(s);

    s = example_job(reg, SRC "/examples/jobs/bert-with-profile.yaml");
    ck_assert_str_eq(s->name, "bert-large-finetune");
    ck_assert_int_eq(s->workload_type, CRATER_WORKLOAD_TRAINING);
    ck_assert_uint_eq(s->resources.gpu.count, 2);
    ck_assert_str_eq(s->resources.gpu.models[0], "a100-sxm4-40gb");
    ck_assert_uint_eq(s->resources.gpu.min_sm_count, 108);
    ck_assert_uint_eq(s->resources.cpu_milli, 16000);
    ck_assert_uint_eq(s->resources.memory_bytes, 64ull << 30);
    ck_assert_int_eq(s->numa, CRATER_NUMA_STRICT);
    ck_assert_uint_eq(s->grace_period_ms, 60000);
    ck_assert_str_eq(s->profile, "bert-train-infer@1.0");
    crater_jobspec_destroy(s);
    crater_profiles_destroy(reg);
}
END_TEST

static Suite *profile_suite(void)
{
    Suite *s = suite_create("profile");
    TCase *tc = tcase_create("profile");

    tcase_add_test(tc, default_profile_builtin);
    tcase_add_test(tc, default_profile_decodes);
    tcase_add_test(tc, example_profile);
    tcase_add_test(tc, literal_versions);
    tcase_add_test(tc, highest_version);
    tcase_add_test(tc, duplicates_rejected);
    tcase_add_test(tc, tenant_registry);
    tcase_add_test(tc, document_errors);
    tcase_add_test(tc, variant_errors);
    tcase_add_test(tc, legacy_translation);
    tcase_add_test(tc, merge_precedence);
    tcase_add_test(tc, variant_choice);
    tcase_add_test(tc, unknown_profile);
    tcase_add_test(tc, encode_roundtrip);
    tcase_add_test(tc, example_jobs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(profile_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
