/* fuzz_http.c - the HTTP request paths we own (not libmicrohttpd's):
 * the router (path splitting, percent-decoding, matching, precedence,
 * Allow lists), the number parser every path id and query value goes
 * through (offset, limit, attempt, after, wait_ms), and the
 * Authorization header's bearer parser.
 *
 * The first byte picks the part (modulo 3); the rest is its input:
 *   0  "METHOD PATH": matched against the API's own route table. A match
 *      must come back identical when its decoded segments are
 *      percent-encoded again (a round trip through the decoder), every
 *      parameter is non-empty, and a 405 names at least one method.
 *   1  8 bytes of maximum, then the text: crater_http_parse_uint must
 *      agree with a 128-bit reference (1 to 20 digits, at most max).
 *   2  a header value: a bearer token found must lie inside it, be
 *      non-empty and follow "Bearer " (any case).
 * Seeds in fuzz/corpus/http start with '0', '1' or '2' accordingly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crater/auth.h"
#include "crater/http.h"

#define PATH_MAX_FUZZ 4096

static void h_dummy(crater_http_req_t *r, crater_http_resp_t *resp, void *a)
{
    (void)r;
    (void)resp;
    (void)a;
}

/* The API's routes (src/daemon/api*.c), as registered. */
static const char *const routes[][2] = {
    {"GET", "/healthz"},
    {"GET", "/readyz"},
    {"GET", "/metrics"},
    {"DELETE", "/api/v1/jobs/{id}"},
    {"DELETE", "/api/v1/tokens/{hash}"},
    {"GET", "/api/v1/agents/{node}/work"},
    {"GET", "/api/v1/arrays/{id}"},
    {"GET", "/api/v1/jobs"},
    {"GET", "/api/v1/jobs/{id}"},
    {"GET", "/api/v1/jobs/{id}/events"},
    {"GET", "/api/v1/jobs/{id}/explain"},
    {"GET", "/api/v1/jobs/{id}/logs"},
    {"GET", "/api/v1/jobs/{id}/metrics"},
    {"GET", "/api/v1/nodes"},
    {"GET", "/api/v1/nodes/{name}"},
    {"GET", "/api/v1/profiles"},
    {"GET", "/api/v1/profiles/{ref}"},
    {"GET", "/api/v1/resources"},
    {"GET", "/api/v1/resources/{uuid}/capabilities"},
    {"GET", "/api/v1/tenants"},
    {"GET", "/api/v1/tokens"},
    {"POST", "/api/v1/agents/{node}/events"},
    {"POST", "/api/v1/agents/{node}/heartbeat"},
    {"POST", "/api/v1/agents/{node}/logs/{job}"},
    {"POST", "/api/v1/agents/{node}/register"},
    {"POST", "/api/v1/arrays/{id}/cancel"},
    {"POST", "/api/v1/jobs"},
    {"POST", "/api/v1/jobs/{id}/cancel"},
    {"POST", "/api/v1/nodes/{name}/cordon"},
    {"POST", "/api/v1/nodes/{name}/drain"},
    {"POST", "/api/v1/nodes/{name}/uncordon"},
    {"POST", "/api/v1/profiles"},
    {"POST", "/api/v1/resources/force-release"},
    {"POST", "/api/v1/schedule"},
    {"POST", "/api/v1/tokens"},
    {"PUT", "/api/v1/tenants/{name}"},
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static crater_router_t *router(void)
{
    static crater_router_t *rt;
    crater_error_t err;

    if (rt != NULL)
        return rt;
    rt = crater_router_create();
    for (size_t i = 0; rt != NULL && i < NROUTES; i++)
        if (crater_router_add(rt,
                              routes[i][0],
                              routes[i][1],
                              h_dummy,
                              (void *)(routes + i),
                              &err)
            < 0) {
            fprintf(stderr, "route %s: %s\n", routes[i][1], err.text);
            abort();
        }
    if (rt == NULL)
        abort();
    return rt;
}

/* "/" + each value percent-encoded, in place of the {params} of the
 * route matched; static segments are taken from the decoded path. */
static void encode_seg(char *out, size_t *o, const char *seg)
{
    static const char hex[] = "0123456789ABCDEF";

    out[(*o)++] = '/';
    for (const unsigned char *p = (const unsigned char *)seg; *p; p++) {
        out[(*o)++] = '%';
        out[(*o)++] = hex[*p >> 4];
        out[(*o)++] = hex[*p & 15];
    }
}

/* Encode the decoded segments of buf (n NUL-separated strings). */
static char *reencode(const char *buf, int nsegs)
{
    size_t cap = PATH_MAX_FUZZ * 3 + 8, o = 0;
    char *out = malloc(cap);

    if (out == NULL)
        abort();
    for (int i = 0; i < nsegs; i++) {
        encode_seg(out, &o, buf);
        buf += strlen(buf) + 1;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return out;
}

static int count_segs(const char *path)
{
    int n = 0;
    size_t len = strlen(path);

    if (len == 1)
        return 0; /* "/" has no segment */
    if (len > 1 && path[len - 1] == '/')
        len--; /* one trailing slash is tolerated */
    for (size_t i = 0; i < len; i++)
        n += path[i] == '/';
    return n;
}

static void check_match(const char *method,
                        const char *path,
                        const char *buf,
                        const crater_route_match_t *m)
{
    char buf2[PATH_MAX_FUZZ * 3 + 8], allow[64];
    crater_route_match_t m2;
    char *again = reencode(buf, count_segs(path));
    int rc = crater_router_match(router(),
                                 method,
                                 again,
                                 buf2,
                                 sizeof buf2,
                                 &m2,
                                 allow,
                                 sizeof allow);

    if (rc != 200 || m2.arg != m->arg || m2.nparams != m->nparams) {
        fprintf(stderr, "round trip: %s -> %s: %d\n", path, again, rc);
        abort();
    }
    for (unsigned i = 0; i < m->nparams; i++)
        if (m->values[i][0] == '\0' || strcmp(m->values[i], m2.values[i]) != 0
            || strcmp(m->names[i], m2.names[i]) != 0)
            abort();
    free(again);
}

static void fuzz_router(const char *s)
{
    char method[16], buf[PATH_MAX_FUZZ], allow[64];
    const char *sp = strchr(s, ' ');
    const char *path = sp != NULL ? sp + 1 : s;
    size_t mlen = sp != NULL ? (size_t)(sp - s) : 0;
    crater_route_match_t m;
    int rc;

    if (mlen >= sizeof method || strlen(path) >= PATH_MAX_FUZZ)
        return;
    memcpy(method, s, mlen);
    method[mlen] = '\0';
    rc = crater_router_match(router(),
                             method,
                             path,
                             buf,
                             sizeof buf,
                             &m,
                             allow,
                             sizeof allow);
    if (rc == 200)
        check_match(method, path, buf, &m);
    else if (rc == 405 && (allow[0] == '\0' || strlen(allow) >= sizeof allow))
        abort();
    else if (rc != 200 && rc != 400 && rc != 404 && rc != 405)
        abort();
}

static void fuzz_uint(const uint8_t *data, size_t size)
{
    uint64_t max = 0, got = 12345;
    unsigned __int128 ref = 0;
    char *s;
    size_t len;
    int ok = 1, rc;

    if (size < 8)
        return;
    memcpy(&max, data, 8);
    s = strndup((const char *)data + 8, size - 8);
    if (s == NULL)
        return;
    len = strlen(s);
    ok = len >= 1 && len <= 20;
    for (size_t i = 0; ok && i < len; i++) {
        ok = s[i] >= '0' && s[i] <= '9';
        ref = ref * 10 + (unsigned)(s[i] - '0');
    }
    ok = ok && ref <= max;
    rc = crater_http_parse_uint(s, max, &got);
    if (ok ? rc != 0 || got != (uint64_t)ref : rc != -1 || got != 12345) {
        fprintf(stderr,
                "parse_uint('%s', %llu) = %d\n",
                s,
                (unsigned long long)max,
                rc);
        abort();
    }
    free(s);
}

static void fuzz_bearer(const char *s)
{
    const char *tok = crater_auth_bearer(s);
    const char *p = s + strspn(s, " \t");

    if (tok == NULL)
        return;
    if (tok < s || tok >= s + strlen(s) || tok[0] == '\0'
        || strncasecmp(p, "bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t'))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;

    if (size < 1)
        return 0;
    if (data[0] % 3 == 1) {
        fuzz_uint(data + 1, size - 1);
        return 0;
    }
    s = strndup((const char *)data + 1, size - 1);
    if (s == NULL)
        return 0;
    if (data[0] % 3 == 0)
        fuzz_router(s);
    else
        fuzz_bearer(s);
    free(s);
    return 0;
}
