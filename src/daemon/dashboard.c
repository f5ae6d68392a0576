/* dashboard.c - the web dashboard's static files (doc/dashboard.md).
 *
 * GET / is the page (web/index.html); GET /ui/{file} its script, style
 * sheet and icon. The files are compiled into the binary (cmake/embed.cmake
 * makes dash_assets.c from web/), so only the names in that table exist:
 * any other /ui/ name is a 404, and nothing is ever read from disk.
 *
 * The page is a client of the API like the CLI: it sends the token a
 * person types as "Authorization: Bearer" on /api/v1 calls, and these
 * routes need no token (there is nothing secret in them). Every answer
 * carries a Content-Security-Policy that allows scripts, styles and
 * fetches from this origin only (no inline script, no eval, no frames),
 * X-Content-Type-Options: nosniff, and no-referrer, so a token never
 * leaves in a Referer and no injected text can run.
 */
#include "daemon/dashboard.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"

#define DASH_HEADERS                                                   \
    "Content-Security-Policy: default-src 'none'; script-src 'self'; " \
    "style-src 'self'; img-src 'self' data:; connect-src 'self'; "     \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n"  \
    "X-Content-Type-Options: nosniff\r\n"                              \
    "X-Frame-Options: DENY\r\n"                                        \
    "Referrer-Policy: no-referrer\r\n"                                 \
    "Cache-Control: no-cache"

/* Content-Type by extension; NULL: not a kind of file the page serves. */
static const char *content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".svg", "image/svg+xml"},
    };
    const char *dot = strrchr(name, '.');

    for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return NULL;
}

static const dash_asset_t *find_asset(const char *name)
{
    for (size_t i = 0; i < crater__dash_nassets; i++)
        if (strcmp(crater__dash_assets[i].name, name) == 0)
            return &crater__dash_assets[i];
    return NULL;
}

static void serve(const char *name, crater_http_resp_t *resp)
{
    const dash_asset_t *a = find_asset(name);
    const char *type = a ? content_type(name) : NULL;

    if (!a || !type) {
        api_errorf(resp, CRATER_ENOENT, NULL, "no such file: /ui/%s", name);
        return;
    }
    resp->body = malloc(a->len + 1);
    resp->headers = strdup(DASH_HEADERS);
    if (!resp->body || !resp->headers) {
        free(resp->headers);
        resp->headers = NULL;
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
        return;
    }
    memcpy(resp->body, a->data, a->len);
    resp->len = a->len;
    resp->content_type = type;
}

static void h_index(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)r;
    (void)arg;
    serve("index.html", resp);
}

static void h_file(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)arg;
    serve(crater_http_param(r, "file"), resp);
}

int api_dashboard_routes(crater_daemon_t *d, crater_error_t *err)
{
    return crater_router_add(d->router, "GET", "/", h_index, d, err) < 0
                   || crater_router_add(d->router,
                                        "GET",
                                        "/ui/{file}",
                                        h_file,
                                        d,
                                        err)
                          < 0
               ? -1
               : 0;
}
