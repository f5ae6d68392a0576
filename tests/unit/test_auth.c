/* test_auth.c - token primitives: roles, token format and uniqueness,
 * SHA-256 vectors, constant-time equality, record JSON round trips, the
 * strict decoder's errors and Authorization header parsing. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "crater/auth.h"

static crater_error_t err;

#define SHA_ABC \
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA_EMPTY \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "abcdefghijklmnopqrstuvwxyz0123456789-_";

START_TEST(test_roles)
{
    crater_role_t r = CRATER_ROLE_ADMIN;

    ck_assert_str_eq(crater_role_name(CRATER_ROLE_ADMIN), "admin");
    ck_assert_str_eq(crater_role_name(CRATER_ROLE_USER), "user");
    ck_assert_str_eq(crater_role_name(CRATER_ROLE_AGENT), "agent");
    ck_assert_str_eq(crater_role_name((crater_role_t)7), "unknown");
    ck_assert_int_eq(crater_role_parse("agent", &r, &err), 0);
    ck_assert_int_eq(r, CRATER_ROLE_AGENT);
    ck_assert_int_eq(crater_role_parse("Admin", &r, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.text,
                     "unknown role 'Admin' (valid: admin, user, agent)");
    ck_assert_int_eq(r, CRATER_ROLE_AGENT); /* untouched on failure */
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(test_token_format_unique)
{
    enum {
        N = 1000
    };
    char *tok[N];
    bool seen[64] = {false};

    for (int i = 0; i < N; i++) {
        tok[i] = malloc(CRATER_TOKEN_LEN + 1);
        ck_assert_int_eq(crater_token_generate(tok[i],
                                               CRATER_TOKEN_LEN + 1,
                                               &err),
                         0);
        ck_assert_uint_eq(strlen(tok[i]), 47);
        ck_assert_int_eq(strncmp(tok[i], "crt_", 4), 0);
        ck_assert_uint_eq(strspn(tok[i] + 4, B64URL), 43);
        /* 32 bytes end in 16 bits spread over 3 characters: the last
         * character carries 4 data bits and 2 zero bits. */
        ck_assert_int_eq((strchr(B64URL, tok[i][46]) - B64URL) & 3, 0);
        for (int k = 4; k < 46; k++)
            seen[strchr(B64URL, tok[i][k]) - B64URL] = true;
    }
    for (int c = 0; c < 64; c++)
        ck_assert_msg(seen[c], "'%c' never generated", B64URL[c]);
    qsort(tok, N, sizeof(tok[0]), cmp_str);
    for (int i = 1; i < N; i++)
        ck_assert_str_ne(tok[i - 1], tok[i]);
    for (int i = 0; i < N; i++)
        free(tok[i]);
}
END_TEST

START_TEST(test_token_small_buffer)
{
    char buf[CRATER_TOKEN_LEN] = "untouched";

    ck_assert_int_eq(crater_token_generate(buf, sizeof(buf), &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(buf, "untouched");
    ck_assert_int_eq(crater_token_generate(NULL, 100, &err), -1);
}
END_TEST

START_TEST(test_sha256_vectors)
{
    char hex[65];

    crater_token_hash("abc", hex);
    ck_assert_str_eq(hex, SHA_ABC);
    crater_token_hash("", hex);
    ck_assert_str_eq(hex, SHA_EMPTY);
    crater_token_hash(NULL, hex);
    ck_assert_str_eq(hex, SHA_EMPTY);
    crater_token_hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnop"
                      "q",
                      hex);
    ck_assert_str_eq(hex,
                     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd41"
                     "9db06c1");
}
END_TEST

START_TEST(test_hash_equal)
{
    char a[65], b[65];

    crater_token_hash("crt_one", a);
    crater_token_hash("crt_one", b);
    ck_assert(crater_token_hash_equal(a, b));
    b[63] = b[63] == '0' ? '1' : '0'; /* differ in the last digit only */
    ck_assert(!crater_token_hash_equal(a, b));
    crater_token_hash("crt_two", b);
    ck_assert(!crater_token_hash_equal(a, b));
    ck_assert(!crater_token_hash_equal(a, "abc"));
    ck_assert(!crater_token_hash_equal(a, NULL));
    ck_assert(!crater_token_hash_equal(NULL, a));
    ck_assert(crater_token_hash_equal("", ""));
}
END_TEST

static void round_trip(const crater_token_rec_t *in, const char *want_json)
{
    json_t *j = crater_token_rec_to_json(in);
    crater_token_rec_t out;
    char *text;

    ck_assert_ptr_nonnull(j);
    text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_str_eq(text, want_json);
    free(text);
    ck_assert_msg(crater_token_rec_from_json(j, &out, &err) == 0,
                  "%s",
                  err.text);
    ck_assert_str_eq(out.hash, in->hash);
    ck_assert_int_eq(out.role, in->role);
    ck_assert_pstr_eq(out.tenant, in->tenant);
    ck_assert_pstr_eq(out.node, in->node);
    ck_assert_pstr_eq(out.name, in->name);
    ck_assert_int_eq(out.created_ms, in->created_ms);
    ck_assert(out.read_only == in->read_only);
    crater_token_rec_free(&out);
    ck_assert_ptr_null(out.tenant);
    json_decref(j);
}

START_TEST(test_record_round_trip)
{
    crater_token_rec_t user = {.role = CRATER_ROLE_USER,
                               .tenant = "team-a",
                               .name = "alice \"laptop\"",
                               .created_ms = 1764452663123};
    crater_token_rec_t agent = {.role = CRATER_ROLE_AGENT,
                                .node = "gpu-h100-2.rack1",
                                .created_ms = 0};
    crater_token_rec_t admin = {.role = CRATER_ROLE_ADMIN, .created_ms = 5};

    crater_token_hash("abc", user.hash);
    crater_token_hash("", agent.hash);
    crater_token_hash("abc", admin.hash);
    round_trip(&user,
               "{\"created_ms\":1764452663123,\"hash\":\"" SHA_ABC "\","
               "\"name\":\"alice \\\"laptop\\\"\",\"role\":\"user\","
               "\"tenant\":\"team-a\"}");
    round_trip(&agent,
               "{\"created_ms\":0,\"hash\":\"" SHA_EMPTY "\","
               "\"node\":\"gpu-h100-2.rack1\",\"role\":\"agent\"}");
    round_trip(&admin,
               "{\"created_ms\":5,\"hash\":\"" SHA_ABC "\","
               "\"role\":\"admin\"}");
    admin.read_only = user.read_only = true;
    round_trip(&admin,
               "{\"created_ms\":5,\"hash\":\"" SHA_ABC "\","
               "\"read_only\":true,\"role\":\"admin\"}");
    round_trip(&user,
               "{\"created_ms\":1764452663123,\"hash\":\"" SHA_ABC "\","
               "\"name\":\"alice \\\"laptop\\\"\",\"read_only\":true,"
               "\"role\":\"user\",\"tenant\":\"team-a\"}");
}
END_TEST

static int decode(const char *text, crater_token_rec_t *out)
{
    json_error_t jerr;
    json_t *j = json_loads(text, 0, &jerr);
    int rc;

    ck_assert_msg(j != NULL, "%s", jerr.text);
    memset(&err, 0, sizeof(err));
    rc = crater_token_rec_from_json(j, out, &err);
    json_decref(j);
    return rc;
}

#define H64                                                            \
    "\""                                                               \
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" \
    "\""

static void expect_error(const char *text,
                         crater_errno_t e,
                         const char *field,
                         const char *msg)
{
    crater_token_rec_t out = {.name = NULL, .created_ms = -42};

    ck_assert_int_eq(decode(text, &out), -1);
    ck_assert_int_eq(err.errnum, e);
    ck_assert_str_eq(err.field, field);
    if (msg)
        ck_assert_str_eq(err.text, msg);
    ck_assert_int_eq(out.created_ms, -42); /* untouched */
}

START_TEST(test_decode_errors)
{
    expect_error("{\"hash\":" H64 ",\"role\":\"user\",\"tenent\":\"a\","
                 "\"created_ms\":1}",
                 CRATER_EFIELD,
                 "tenent",
                 "tenent: unknown field 'tenent' (did you mean 'tenant'?)");
    expect_error("{\"hash\":" H64 ",\"role\":\"user\",\"created_ms\":1}",
                 CRATER_EMISSING,
                 "tenant",
                 "tenant: a user token needs a tenant");
    expect_error("{\"hash\":" H64 ",\"role\":\"agent\",\"created_ms\":1}",
                 CRATER_EMISSING,
                 "node",
                 "node: an agent token needs a node");
    expect_error("{\"hash\":" H64 ",\"role\":\"root\",\"created_ms\":1}",
                 CRATER_EINVAL,
                 "role",
                 "role: 'root' is not one of: admin, user, agent");
    expect_error("{\"hash\":" H64 ",\"role\":\"admin\",\"tenant\":\"a\","
                 "\"created_ms\":1}",
                 CRATER_ECONFLICT,
                 "tenant",
                 "tenant: only user tokens have a tenant");
    expect_error("{\"hash\":" H64 ",\"role\":\"user\",\"tenant\":\"a\","
                 "\"node\":\"n1\",\"created_ms\":1}",
                 CRATER_ECONFLICT,
                 "node",
                 "node: only agent tokens have a node");
    expect_error("{\"hash\":" H64 ",\"role\":\"agent\",\"node\":\"n1\","
                 "\"read_only\":true,\"created_ms\":1}",
                 CRATER_ECONFLICT,
                 "read_only",
                 "read_only: an agent token cannot be read-only (it reports "
                 "its node's state)");
    expect_error("{\"hash\":" H64 ",\"role\":\"admin\","
                 "\"read_only\":\"yes\",\"created_ms\":1}",
                 CRATER_ETYPE,
                 "read_only",
                 "read_only: expected true or false, got a string");
    expect_error("{\"hash\":\"ABC\",\"role\":\"admin\",\"created_ms\":1}",
                 CRATER_EINVAL,
                 "hash",
                 "hash: expected a SHA-256 as 64 lowercase hex digits");
    expect_error("{\"hash\":" H64 ",\"role\":\"user\",\"tenant\":\"\","
                 "\"created_ms\":1}",
                 CRATER_EINVAL,
                 "tenant",
                 "tenant: '' is not a valid name: use 1-63 of a-z 0-9 - . "
                 "starting and ending with a-z or 0-9");
    expect_error("{\"hash\":" H64 ",\"role\":\"admin\",\"created_ms\":-1}",
                 CRATER_ERANGE,
                 "created_ms",
                 NULL);
    expect_error("{\"hash\":" H64 ",\"role\":\"admin\"}",
                 CRATER_EMISSING,
                 "",
                 "missing required field 'created_ms'");
    expect_error("[]", CRATER_ETYPE, "", "expected a mapping, got a list");
}
END_TEST

START_TEST(test_bearer)
{
    const char *v = "Bearer crt_abc-_";

    ck_assert_ptr_eq(crater_auth_bearer(v), v + 7);
    ck_assert_pstr_eq(crater_auth_bearer("Bearer  x"), "x");
    ck_assert_pstr_eq(crater_auth_bearer("bearer x"), "x");
    ck_assert_pstr_eq(crater_auth_bearer("BEARER\tx"), "x");
    ck_assert_pstr_eq(crater_auth_bearer("  Bearer x"), "x");
    ck_assert_pstr_eq(crater_auth_bearer("Bearer a.b~c+d/e=="), "a.b~c+d/e==");
    ck_assert_ptr_null(crater_auth_bearer("Basic x"));
    ck_assert_ptr_null(crater_auth_bearer(""));
    ck_assert_ptr_null(crater_auth_bearer(NULL));
    ck_assert_ptr_null(crater_auth_bearer("Bearer"));
    ck_assert_ptr_null(crater_auth_bearer("Bearer "));
    ck_assert_ptr_null(crater_auth_bearer("Bearerx"));
    ck_assert_ptr_null(crater_auth_bearer("Bearer a b"));
    ck_assert_ptr_null(crater_auth_bearer("Bearer x "));
    ck_assert_ptr_null(crater_auth_bearer("Bearer =x"));
    ck_assert_ptr_null(crater_auth_bearer("Bearer x=y"));
    ck_assert_ptr_null(crater_auth_bearer("Bearer x,y"));
}
END_TEST

static Suite *auth_suite(void)
{
    Suite *s = suite_create("auth");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_roles);
    tcase_add_test(tc, test_token_format_unique);
    tcase_add_test(tc, test_token_small_buffer);
    tcase_add_test(tc, test_sha256_vectors);
    tcase_add_test(tc, test_hash_equal);
    tcase_add_test(tc, test_record_round_trip);
    tcase_add_test(tc, test_decode_errors);
    tcase_add_test(tc, test_bearer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(auth_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
