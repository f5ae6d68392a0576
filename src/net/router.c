/* router.c - method + path pattern -> handler, for the HTTP server.
 *
 * A route is its pattern split into segments, each either static text or a
 * {param}. A request path is split and percent-decoded segment by segment
 * into a caller buffer (no allocation per request), then compared with every
 * route of the same length. The API has a few dozen routes, so a linear scan
 * of flat arrays beats a trie in simplicity and is no slower in practice.
 *
 * Precedence: among matching routes the one with a static segment at the
 * first position where they differ wins ("/jobs/search" beats "/jobs/{id}");
 * the rank is a bit string with the highest bit for the first segment, so
 * comparing two ranks is one integer comparison. An exact method beats the
 * GET route that also serves HEAD.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crater/http.h"

#define MAX_SEGS 32

typedef struct route {
    char *method;
    char *text; /* pattern copy; segs point into it */
    unsigned nseg;
    const char *seg[MAX_SEGS];
    uint32_t is_param; /* bit i set: segment i is a {param} */
    crater_http_handler_f fn;
    void *arg;
} route_t;

struct crater_router {
    route_t **routes;
    size_t n, cap;
    crater_http_handler_f fallback; /* no route matched; NULL: 404/405 */
    void *fallback_arg;
};

crater_router_t *crater_router_create(void)
{
    return calloc(1, sizeof(crater_router_t));
}

static void route_free(route_t *r)
{
    if (r == NULL)
        return;
    free(r->method);
    free(r->text);
    free(r);
}

void crater_router_destroy(crater_router_t *rt)
{
    if (rt == NULL)
        return;
    for (size_t i = 0; i < rt->n; i++)
        route_free(rt->routes[i]);
    free(rt->routes);
    free(rt);
}

static bool param_name_ok(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

/* Classify one NUL-terminated pattern segment, stripping braces in place. */
static int parse_segment(
    route_t *r, char *s, const char *pattern, int *np, crater_error_t *err)
{
    size_t len = strlen(s);
    unsigned i = r->nseg;

    if (s[0] == '{') {
        if (len < 2 || s[len - 1] != '}' || !param_name_ok(s + 1, len - 2))
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "route '%s': bad parameter segment '%s'",
                                 pattern,
                                 s);
        if (++*np > CRATER_HTTP_MAX_PARAMS)
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "route '%s': more than %d parameters",
                                 pattern,
                                 CRATER_HTTP_MAX_PARAMS);
        s[len - 1] = '\0';
        s++;
        for (unsigned j = 0; j < i; j++)
            if ((r->is_param >> j & 1u) && strcmp(r->seg[j], s) == 0)
                return crater_errorf(err,
                                     CRATER_EINVAL,
                                     "route '%s': parameter '%s' repeated",
                                     pattern,
                                     s);
        r->is_param |= 1u << i;
    } else if (len == 0 || strpbrk(s, "{}?#%") != NULL) {
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "route '%s': bad segment '%s'",
                             pattern,
                             s);
    }
    r->seg[i] = s;
    r->nseg++;
    return 0;
}

static int parse_pattern(route_t *r, const char *pattern, crater_error_t *err)
{
    char *p = r->text;
    int np = 0;
    size_t len = strlen(p);

    if (p[0] != '/')
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "route '%s': pattern must start with '/'",
                             pattern);
    if (len > 1 && p[len - 1] == '/')
        p[--len] = '\0'; /* "/jobs/" is "/jobs" */
    p++;
    while (*p != '\0') {
        char *slash = strchr(p, '/');
        if (r->nseg == MAX_SEGS)
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "route '%s': more than %d segments",
                                 pattern,
                                 MAX_SEGS);
        if (slash != NULL)
            *slash = '\0';
        if (parse_segment(r, p, pattern, &np, err) < 0)
            return -1;
        if (slash == NULL)
            break;
        p = slash + 1;
        if (*p == '\0')
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "route '%s': empty segment",
                                 pattern);
    }
    return 0;
}

static bool same_shape(const route_t *a, const route_t *b)
{
    if (a->nseg != b->nseg || a->is_param != b->is_param
        || strcmp(a->method, b->method) != 0)
        return false;
    for (unsigned i = 0; i < a->nseg; i++)
        if (!(a->is_param >> i & 1u) && strcmp(a->seg[i], b->seg[i]) != 0)
            return false;
    return true;
}

static int router_push(crater_router_t *rt,
                       route_t *r,
                       const char *pattern,
                       crater_error_t *err)
{
    for (size_t i = 0; i < rt->n; i++)
        if (same_shape(rt->routes[i], r))
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "route %s '%s' is already registered",
                                 r->method,
                                 pattern);
    if (rt->n == rt->cap) {
        size_t cap = rt->cap ? rt->cap * 2 : 16;
        route_t **v = realloc(rt->routes, cap * sizeof(*v));
        if (v == NULL)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        rt->routes = v;
        rt->cap = cap;
    }
    rt->routes[rt->n++] = r;
    return 0;
}

int crater_router_add(crater_router_t *rt,
                      const char *method,
                      const char *pattern,
                      crater_http_handler_f fn,
                      void *arg,
                      crater_error_t *err)
{
    route_t *r;

    if (rt == NULL || method == NULL || method[0] == '\0' || pattern == NULL
        || fn == NULL)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "router: missing method, pattern or handler");
    r = calloc(1, sizeof(*r));
    if (r == NULL || (r->method = strdup(method)) == NULL
        || (r->text = strdup(pattern)) == NULL) {
        route_free(r);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    r->fn = fn;
    r->arg = arg;
    if (parse_pattern(r, pattern, err) < 0
        || router_push(rt, r, pattern, err) < 0) {
        route_free(r);
        return -1;
    }
    return 0;
}

void crater_router_fallback(crater_router_t *rt,
                            crater_http_handler_f fn,
                            void *arg)
{
    rt->fallback = fn;
    rt->fallback_arg = arg;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Split the raw path into decoded, NUL-terminated segments in buf.
 * Returns the segment count, or -400 / -404 / -500. */
static int split_path(const char *path,
                      char *buf,
                      size_t cap,
                      const char **segs)
{
    size_t o = 0;
    int n = 0;

    if (path[0] != '/')
        return -404;
    if (strlen(path) >= cap)
        return -500;
    for (const char *p = path + 1; *p != '\0';) {
        if (n == MAX_SEGS)
            return -404;
        segs[n++] = buf + o;
        for (; *p != '\0' && *p != '/'; p++) {
            if (*p == '%') {
                int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
                if (lo < 0 || (hi | lo) == 0)
                    return -400;
                buf[o++] = (char)(hi << 4 | lo);
                p += 2;
            } else {
                buf[o++] = *p;
            }
        }
        buf[o++] = '\0';
        if (*p == '/' && *++p == '\0')
            break; /* one trailing slash is tolerated */
    }
    return n;
}

static bool route_matches(const route_t *r, const char **segs, int n)
{
    if ((int)r->nseg != n)
        return false;
    for (int i = 0; i < n; i++) {
        if (r->is_param >> i & 1u) {
            if (segs[i][0] == '\0')
                return false;
        } else if (strcmp(r->seg[i], segs[i]) != 0) {
            return false;
        }
    }
    return true;
}

/* Higher is better: static segments early, then an exact method. */
static uint64_t route_rank(const route_t *r, bool exact)
{
    uint64_t rank = 0;

    for (unsigned i = 0; i < r->nseg; i++)
        if (!(r->is_param >> i & 1u))
            rank |= 1ull << (MAX_SEGS - i);
    return rank | (exact ? 1u : 0u);
}

static void allow_add(char *allow, size_t cap, const char *method)
{
    size_t len = strlen(allow), mlen = strlen(method);
    const char *p = allow;

    while ((p = strstr(p, method)) != NULL) { /* already listed? */
        if ((p == allow || p[-1] == ' ') && (p[mlen] == ',' || !p[mlen]))
            return;
        p += mlen;
    }
    if (len + mlen + 3 > cap)
        return;
    if (len > 0) {
        memcpy(allow + len, ", ", 2);
        len += 2;
    }
    memcpy(allow + len, method, mlen + 1);
}

static void fill_match(const route_t *r,
                       const char **segs,
                       crater_route_match_t *m)
{
    m->fn = r->fn;
    m->arg = r->arg;
    m->nparams = 0;
    for (unsigned i = 0; i < r->nseg; i++) {
        if (r->is_param >> i & 1u) {
            m->names[m->nparams] = r->seg[i];
            m->values[m->nparams++] = segs[i];
        }
    }
}

int crater_router_match(const crater_router_t *rt,
                        const char *method,
                        const char *path,
                        char *buf,
                        size_t cap,
                        crater_route_match_t *m,
                        char *allow,
                        size_t allow_cap)
{
    const char *segs[MAX_SEGS];
    const route_t *best = NULL;
    uint64_t best_rank = 0;
    bool head = strcmp(method, "HEAD") == 0, known = false;
    int n = split_path(path, buf, cap, segs);

    if (n < 0)
        return -n;
    if (allow_cap > 0)
        allow[0] = '\0';
    for (size_t i = 0; i < rt->n; i++) {
        const route_t *r = rt->routes[i];
        bool exact;
        if (!route_matches(r, segs, n))
            continue;
        known = true;
        exact = strcmp(r->method, method) == 0;
        if (!exact && !(head && strcmp(r->method, "GET") == 0)) {
            if (allow_cap > 0)
                allow_add(allow, allow_cap, r->method);
            continue;
        }
        if (best == NULL || route_rank(r, exact) > best_rank) {
            best = r;
            best_rank = route_rank(r, exact);
        }
    }
    if (best == NULL && rt->fallback != NULL) {
        *m =
            (crater_route_match_t){.fn = rt->fallback, .arg = rt->fallback_arg};
        return 200;
    }
    if (best == NULL)
        return known ? 405 : 404;
    fill_match(best, segs, m);
    return 200;
}
