/* auth.c - API token primitives (see crater/auth.h).
 *
 * Tokens carry 256 bits from getrandom(2), so a fast unsalted SHA-256 is
 * enough for storage: there is nothing to brute-force that a password hash
 * would slow down, and a per-request lookup must stay cheap. Hashes are
 * compared with an accumulate-the-XOR loop so the time does not reveal
 * how long a prefix matched.
 *
 * Records decode through the strict dec helpers into a local record that
 * moves to the caller only when every check passed, so a failed decode
 * leaves *out alone and leaks nothing.
 */
#include "crater/auth.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "crater/dec.h"
#include "crater/model.h"

#define RAW_LEN 32         /* random bytes in a token */
#define TENANT_MAX 63      /* as job spec tenant names */
#define TOKEN_NAME_MAX 256 /* human label */

static const char *const role_names[] = {"admin", "user", "agent"};
#define NROLES (sizeof(role_names) / sizeof(role_names[0]))

const char *crater_role_name(crater_role_t r)
{
    return (unsigned)r < NROLES ? role_names[r] : "unknown";
}

int crater_role_parse(const char *s, crater_role_t *out, crater_error_t *err)
{
    for (size_t i = 0; s && i < NROLES; i++) {
        if (strcmp(s, role_names[i]) == 0) {
            *out = (crater_role_t)i;
            return 0;
        }
    }
    return crater_errorf(err,
                         CRATER_EINVAL,
                         "unknown role '%s' (valid: admin, user, agent)",
                         s ? s : "(null)");
}

/* ---- tokens ---------------------------------------------------------- */

/* All n bytes from the kernel; retries short reads and EINTR. */
static int fill_random(unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

/* RFC 4648 section 5 without padding; out holds 4 * ceil(n / 3) + 1. */
static void base64url(const unsigned char *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "abcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t i = 0, rest;

    for (; i + 3 <= n; i += 3) {
        uint32_t v =
            (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        for (int k = 3; k >= 0; k--)
            *out++ = abc[(v >> (6 * k)) & 63];
    }
    rest = n - i;
    if (rest > 0) {
        uint32_t v =
            (uint32_t)in[i] << 16 | (rest == 2 ? (uint32_t)in[i + 1] << 8 : 0);
        for (size_t k = 0; k <= rest; k++)
            *out++ = abc[(v >> (18 - 6 * k)) & 63];
    }
    *out = '\0';
}

int crater_token_generate(char *buf, size_t size, crater_error_t *err)
{
    unsigned char raw[RAW_LEN];
    char text[CRATER_TOKEN_LEN + 1];
    int e;

    if (!buf || size < CRATER_TOKEN_LEN + 1)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "token buffer needs %d bytes, got %zu",
                             CRATER_TOKEN_LEN + 1,
                             buf ? size : 0);
    if (fill_random(raw, sizeof(raw)) < 0) {
        e = errno;
        return crater_errorf(err,
                             CRATER_EIO,
                             "getrandom: %s",
                             strerror(e ? e : EIO));
    }
    memcpy(text, CRATER_TOKEN_PREFIX, 4);
    base64url(raw, sizeof(raw), text + 4);
    memcpy(buf, text, sizeof(text));
    explicit_bzero(raw, sizeof(raw));
    explicit_bzero(text, sizeof(text));
    return 0;
}

void crater_token_hash(const char *token, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    struct sha256_ctx ctx;
    uint8_t md[SHA256_DIGEST_SIZE];
    const char *t = token ? token : "";

    sha256_init(&ctx);
    sha256_update(&ctx, strlen(t), (const uint8_t *)t);
    sha256_digest(&ctx, sizeof(md), md);
    for (size_t i = 0; i < sizeof(md); i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

bool crater_token_hash_equal(const char *a, const char *b)
{
    size_t n;
    unsigned char diff = 0;

    if (!a || !b || (n = strlen(a)) != strlen(b))
        return false;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* ---- records --------------------------------------------------------- */

void crater_token_rec_free(crater_token_rec_t *r)
{
    if (!r)
        return;
    free(r->tenant);
    free(r->node);
    free(r->name);
    r->tenant = r->node = r->name = NULL;
}

static int set_str(json_t *o, const char *key, const char *val)
{
    return val ? json_object_set_new(o, key, json_string(val)) : 0;
}

static int set_time(json_t *o, const char *key, int64_t ms)
{
    return ms ? json_object_set_new(o, key, json_integer(ms)) : 0;
}

bool crater_token_expired(const crater_token_rec_t *r, int64_t now_ms)
{
    return r->expires_ms > 0 && now_ms >= r->expires_ms;
}

json_t *crater_token_rec_to_json(const crater_token_rec_t *r)
{
    json_t *o = json_object();

    if (!o || set_str(o, "hash", r->hash) < 0
        || set_str(o, "role", crater_role_name(r->role)) < 0
        || set_str(o, "tenant", r->tenant) < 0
        || set_str(o, "node", r->node) < 0 || set_str(o, "name", r->name) < 0
        || json_object_set_new(o, "created_ms", json_integer(r->created_ms)) < 0
        || set_time(o, "expires_ms", r->expires_ms) < 0
        || set_time(o, "last_used_ms", r->last_used_ms) < 0
        || (r->read_only
            && json_object_set_new(o, "read_only", json_true()) < 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Lowercase DNS name as in job specs: a-z 0-9, '-' and '.' inside. */
static bool dns_name_ok(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '.') && i > 0 && i < n - 1))
            return false;
    }
    return true;
}

static int dec_dns(crater_dec_t *d, json_t *v, size_t max, char **out)
{
    if (crater_dec_str(d, v, max, out) < 0)
        return -1;
    if (!dns_name_ok(*out, max))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not a valid name: use 1-%zu of a-z "
                               "0-9 - . starting and ending with a-z or 0-9",
                               *out,
                               max);
    return 0;
}

static int f_hash(crater_dec_t *d, json_t *v, void *obj)
{
    crater_token_rec_t *r = obj;
    const char *s;

    if (!json_is_string(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a string, got %s",
                               crater_dec_typename(v));
    s = json_string_value(v);
    if (json_string_length(v) != 64 || strspn(s, "0123456789abcdef") != 64)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "expected a SHA-256 as 64 lowercase hex digits");
    memcpy(r->hash, s, 65);
    return 0;
}

static int f_role(crater_dec_t *d, json_t *v, void *obj)
{
    int i;

    if (crater_dec_enum(d, v, role_names, NROLES, &i) < 0)
        return -1;
    ((crater_token_rec_t *)obj)->role = (crater_role_t)i;
    return 0;
}

static int f_tenant(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_dns(d, v, TENANT_MAX, &((crater_token_rec_t *)obj)->tenant);
}

static int f_node(crater_dec_t *d, json_t *v, void *obj)
{
    return dec_dns(d, v, CRATER_NAME_MAX, &((crater_token_rec_t *)obj)->node);
}

static int f_name(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_str(d,
                          v,
                          TOKEN_NAME_MAX,
                          &((crater_token_rec_t *)obj)->name);
}

static int f_created(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_int(d,
                          v,
                          0,
                          INT64_MAX,
                          &((crater_token_rec_t *)obj)->created_ms);
}

static int f_expires(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_int(d,
                          v,
                          1,
                          INT64_MAX,
                          &((crater_token_rec_t *)obj)->expires_ms);
}

static int f_last_used(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_int(d,
                          v,
                          1,
                          INT64_MAX,
                          &((crater_token_rec_t *)obj)->last_used_ms);
}

static int f_read_only(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_bool(d, v, &((crater_token_rec_t *)obj)->read_only);
}

static const crater_dec_field_t rec_fields[] = {
    {"hash", f_hash, CRATER_FIELD_REQUIRED},
    {"role", f_role, CRATER_FIELD_REQUIRED},
    {"tenant", f_tenant, 0},
    {"node", f_node, 0},
    {"name", f_name, 0},
    {"created_ms", f_created, CRATER_FIELD_REQUIRED},
    {"expires_ms", f_expires, 0},
    {"last_used_ms", f_last_used, 0},
    {"read_only", f_read_only, 0},
    {NULL, NULL, 0},
};

/* Fail at field key (the root is the current path). */
static int fail_at(crater_dec_t *d,
                   const char *key,
                   crater_errno_t e,
                   const char *msg)
{
    crater_dec_push_key(d, key);
    return crater_dec_fail(d, e, "%s", msg);
}

/* tenant exactly for users, node exactly for agents. */
static int check_binding(crater_dec_t *d, const crater_token_rec_t *r)
{
    if (r->role == CRATER_ROLE_USER && !r->tenant)
        return fail_at(d,
                       "tenant",
                       CRATER_EMISSING,
                       "a user token needs a tenant");
    if (r->role != CRATER_ROLE_USER && r->tenant)
        return fail_at(d,
                       "tenant",
                       CRATER_ECONFLICT,
                       "only user tokens have a tenant");
    if (r->role == CRATER_ROLE_AGENT && !r->node)
        return fail_at(d,
                       "node",
                       CRATER_EMISSING,
                       "an agent token needs a node");
    if (r->role != CRATER_ROLE_AGENT && r->node)
        return fail_at(d,
                       "node",
                       CRATER_ECONFLICT,
                       "only agent tokens have a node");
    if (r->role == CRATER_ROLE_AGENT && r->read_only)
        return fail_at(d,
                       "read_only",
                       CRATER_ECONFLICT,
                       "an agent token cannot be read-only (it reports its "
                       "node's state)");
    return 0;
}

int crater_token_rec_from_json(const json_t *j,
                               crater_token_rec_t *out,
                               crater_error_t *err)
{
    crater_token_rec_t r = {0};
    crater_dec_t d;

    crater_dec_init(&d, NULL, 0, err);
    /* The dec API takes non-const trees; decoding only reads them. */
    if (crater_dec_object(&d, (json_t *)j, rec_fields, &r) < 0
        || check_binding(&d, &r) < 0) {
        crater_token_rec_free(&r);
        return -1;
    }
    *out = r;
    return 0;
}

/* ---- Authorization header -------------------------------------------- */

/* RFC 7235 token68: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
 * "/" ) *"=" and nothing after. */
static bool token68_ok(const char *s)
{
    static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "abcdefghijklmnopqrstuvwxyz0123456789-._~+/";
    size_t n = strspn(s, set);

    return n > 0 && s[n + strspn(s + n, "=")] == '\0';
}

const char *crater_auth_bearer(const char *header_value)
{
    const char *p = header_value;

    if (!p)
        return NULL;
    p += strspn(p, " \t");
    if (strncasecmp(p, "bearer", 6) != 0)
        return NULL;
    p += 6;
    if (*p != ' ' && *p != '\t')
        return NULL;
    p += strspn(p, " \t");
    return token68_ok(p) ? p : NULL;
}
