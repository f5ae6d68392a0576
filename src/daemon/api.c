/* api.c - what every API handler shares: authentication, error bodies,
 * JSON bodies, and the routes that need no token (/healthz, /readyz,
 * /metrics).
 *
 * Handlers run on the HTTP server's pool threads, concurrently; each takes
 * d->mu for the part that reads or changes state. Parsing a body (YAML,
 * JSON) happens outside the lock where the handler allows it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/audit.h"
#include "daemon/buildinfo.h"
#include "daemon/cost.h"
#include "daemon/internal.h"

void api_errorf(crater_http_resp_t *resp,
                crater_errno_t e,
                const char *field,
                const char *fmt,
                ...)
{
    crater_error_t err;
    va_list ap;

    va_start(ap, fmt);
    crater_verrorf(&err, e, field, fmt, ap);
    va_end(ap);
    crater_http_error(resp, &err);
}

/* What a read-only token may do: GET and HEAD, and the what-if POST
 * /api/v1/schedule (it places nothing). */
static bool reads_only(const crater_http_req_t *r)
{
    const char *m = crater_http_method(r);

    return !strcmp(m, "GET") || !strcmp(m, "HEAD")
           || (!strcmp(m, "POST")
               && !strcmp(crater_http_path(r), "/api/v1/schedule"));
}

int api_auth(crater_daemon_t *d,
             crater_http_req_t *r,
             crater_http_resp_t *resp,
             principal_t *p)
{
    const char *h = crater_http_header(r, "Authorization");
    const char *tok = h ? crater_auth_bearer(h) : NULL;
    crater_token_rec_t *rec;
    int64_t now = dnow_ms();

    if (!h) {
        api_errorf(resp,
                   CRATER_EAUTH,
                   NULL,
                   "missing token: send 'Authorization: Bearer <token>'");
        return -1;
    }
    if (!tok || !(rec = token_lookup(d, tok))) {
        api_errorf(resp, CRATER_EAUTH, NULL, "invalid token");
        return -1;
    }
    if (crater_token_expired(rec, now)) {
        api_errorf(resp,
                   CRATER_EAUTH,
                   NULL,
                   "token expired %" PRId64 " s ago: ask an admin for a new "
                   "one",
                   (now - rec->expires_ms) / 1000);
        return -1;
    }
    rec->last_used_ms = now;
    p->role = rec->role;
    p->tenant = rec->tenant;
    p->node = rec->node;
    /* an agent token (it lives on a node, where a task may steal it)
     * reaches its node's agent endpoints and nothing else: no job lists,
     * tenants or nodes */
    if (rec->read_only && !reads_only(r)) {
        api_errorf(resp,
                   CRATER_EPERM,
                   NULL,
                   "this token is read-only: it may read (GET) and ask "
                   "what-if questions (POST /api/v1/schedule), not %s %s",
                   crater_http_method(r),
                   crater_http_path(r));
        return -1;
    }
    if (p->role == CRATER_ROLE_AGENT
        && strncmp(crater_http_path(r), "/api/v1/agents/", 15) != 0) {
        api_errorf(resp,
                   CRATER_EPERM,
                   NULL,
                   "an agent token may only call /api/v1/agents/%s/...",
                   p->node);
        return -1;
    }
    return 0;
}

bool api_rate_exempt(const crater_http_req_t *r, void *arg)
{
    crater_daemon_t *d = arg;
    const char *tok =
        crater_auth_bearer(crater_http_header(r, "Authorization"));
    const crater_token_rec_t *rec;
    bool exempt = false;

    if (!tok)
        return false;
    pthread_mutex_lock(&d->mu);
    rec = token_lookup(d, tok);
    exempt =
        rec
        && (rec->role == CRATER_ROLE_ADMIN || rec->role == CRATER_ROLE_AGENT);
    pthread_mutex_unlock(&d->mu);
    return exempt;
}

int api_require_admin(const principal_t *p, crater_http_resp_t *resp)
{
    if (p->role == CRATER_ROLE_ADMIN)
        return 0;
    api_errorf(resp,
               CRATER_EPERM,
               NULL,
               "this needs an admin token (yours has role %s)",
               crater_role_name(p->role));
    return -1;
}

int api_body_json(crater_http_req_t *r, json_t **out, crater_http_resp_t *resp)
{
    size_t len;
    const char *body = crater_http_body(r, &len);
    json_error_t jerr;

    if (len == 0) {
        *out = json_object();
        return 0;
    }
    *out = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!*out) {
        api_errorf(resp,
                   CRATER_EPARSE,
                   NULL,
                   "body: line %d column %d: %s",
                   jerr.line,
                   jerr.column,
                   jerr.text);
        return -1;
    }
    if (!json_is_object(*out)) {
        json_decref(*out);
        api_errorf(resp, CRATER_ETYPE, NULL, "body: expected a JSON object");
        return -1;
    }
    return 0;
}

int api_query_offset(crater_http_req_t *r,
                     const char *name,
                     uint64_t *out,
                     crater_http_resp_t *resp)
{
    const char *v = crater_http_query(r, name);

    *out = 0;
    if (!v)
        return 0;
    if (crater_http_parse_uint(v, CRATER_API_MAX_OFFSET, out) < 0) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   name,
                   "%s: '%.40s' is not a byte offset (0 to %llu)",
                   name,
                   v,
                   (unsigned long long)CRATER_API_MAX_OFFSET);
        return -1;
    }
    return 0;
}

int api_body_reason(crater_http_req_t *r, char **out, crater_http_resp_t *resp)
{
    json_t *v, *x;
    const char *k;

    *out = NULL;
    if (api_body_json(r, &v, resp) < 0)
        return -1;
    json_object_foreach(v, k, x)
    {
        if (strcmp(k, "reason") != 0) {
            api_errorf(resp,
                       CRATER_EFIELD,
                       k,
                       "%s: unknown field (the body is {\"reason\": ...})",
                       k);
            json_decref(v);
            return -1;
        }
    }
    x = json_object_get(v, "reason");
    if (x && !json_is_string(x)) {
        api_errorf(resp, CRATER_ETYPE, "reason", "reason: expected a string");
        json_decref(v);
        return -1;
    }
    *out = strdup(x ? json_string_value(x) : "");
    json_decref(v);
    if (!*out) {
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
        return -1;
    }
    return 0;
}

static void h_healthz(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    (void)r;
    (void)arg;
    crater_http_json(resp,
                     200,
                     json_pack("{s:s, s:s}",
                               "status",
                               "ok",
                               "version",
                               crater_version()));
}

static void h_readyz(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    bool ready;

    (void)r;
    pthread_mutex_lock(&d->mu);
    ready = d->ready && !d->paused;
    pthread_mutex_unlock(&d->mu);
    if (ready)
        crater_http_json(resp, 200, json_pack("{s:s}", "status", "ready"));
    else
        api_errorf(resp, CRATER_EUNAVAIL, NULL, "not ready");
}

bool api_paused(crater_daemon_t *d, crater_http_resp_t *resp)
{
    bool paused;

    pthread_mutex_lock(&d->mu);
    paused = d->paused;
    pthread_mutex_unlock(&d->mu);
    if (!paused)
        return false;
    api_errorf(resp,
               CRATER_EUNAVAIL,
               NULL,
               "this craterd cannot renew its leadership (etcd does not "
               "answer): it applied nothing; try again, here or at another "
               "craterd");
    /* like a standby's: "nothing applied, no leader known" */
    if (asprintf(&resp->headers, "Retry-After: 1\r\nX-Crater-Leader: none") < 0)
        resp->headers = NULL;
    return true;
}

/* GET /api/v1/leader: who leads (a standby answers it too, standby.c). */
static void h_leader(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    const char *self = d->advertise_url ? d->advertise_url : "";
    bool deposed, paused;

    (void)r;
    pthread_mutex_lock(&d->mu);
    deposed = d->deposed;
    paused = d->paused;
    pthread_mutex_unlock(&d->mu);
    crater_http_json(resp,
                     200,
                     json_pack("{s:s, s:s, s:s}",
                               "role",
                               !d->fenced ? "single"
                               : deposed  ? "stepping-down"
                               : paused   ? "unsure"
                                          : "leader",
                               "leader",
                               deposed || paused ? "" : self,
                               "self",
                               self));
}

static void h_metrics(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    size_t len = 0;
    char *text = metrics_render(d, &len);

    (void)r;
    if (!text) {
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
        return;
    }
    resp->body = text;
    resp->len = len;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

int api_register(crater_daemon_t *d,
                 const api_route_t *routes,
                 size_t n,
                 crater_error_t *err)
{
    for (size_t i = 0; i < n; i++) {
        crater_http_handler_f fn;
        void *arg;
        if (audit_wrap(d,
                       routes[i].method,
                       routes[i].path,
                       routes[i].fn,
                       &fn,
                       &arg)
            < 0)
            return crater_errorf(err, CRATER_ENOMEM, "too many routes");
        if (crater_router_add(d->router,
                              routes[i].method,
                              routes[i].path,
                              fn,
                              arg,
                              err)
            < 0)
            return -1;
    }
    return 0;
}

int api_add_routes(crater_daemon_t *d, crater_error_t *err)
{
    crater_router_t *rt = d->router;

    if (crater_router_add(rt, "GET", "/healthz", h_healthz, d, err) < 0
        || crater_router_add(rt, "GET", "/readyz", h_readyz, d, err) < 0
        || crater_router_add(rt, "GET", "/metrics", h_metrics, d, err) < 0
        || crater_router_add(rt, "GET", "/api/v1/leader", h_leader, d, err) < 0)
        return -1;
    return api_jobs_routes(d, err) < 0 || api_nodes_routes(d, err) < 0
                   || api_agents_routes(d, err) < 0
                   || api_arrays_routes(d, err) < 0
                   || api_services_routes(d, err) < 0
                   || api_admin_routes(d, err) < 0
                   || api_typical_routes(d, err) < 0
                   || api_k8s_routes(d, err) < 0 || api_cost_routes(d, err) < 0
                   || api_audit_routes(d, err) < 0
                   || api_dashboard_routes(d, err) < 0
               ? -1
               : 0;
}

/* ---- answers after the commit ---------------------------------------------
 */

typedef struct ack {
    crater_daemon_t *d;
    crater_http_pending_t *pend;
    crater_http_resp_t resp; /* the answer, sent once the state is stored */
} ack_t;

static void ack_done(int rc, int64_t rev, const crater_error_t *err, void *arg)
{
    ack_t *a = arg;

    (void)rev;
    if (rc != 0) {
        free(a->resp.body);
        free(a->resp.location);
        free(a->resp.headers);
        a->resp = (crater_http_resp_t){0};
        api_errorf(&a->resp,
                   CRATER_EUNAVAIL,
                   NULL,
                   "not stored: %s",
                   err ? err->text : "store error");
    }
    crater_http_complete(a->pend, &a->resp);
    free(a);
}

void api_answer_when_stored(crater_daemon_t *d,
                            crater_http_req_t *r,
                            crater_http_resp_t *resp)
{
    crater_txn_t *t;
    crater_error_t e = {0};
    ack_t *a;

    if (resp->status >= 300 || !(a = calloc(1, sizeof(*a))))
        return; /* an error, or no memory: answer now */
    if (!(a->pend = crater_http_suspend(r))) {
        free(a);
        return;
    }
    a->d = d;
    a->resp = *resp; /* takes its buffers */
    *resp = (crater_http_resp_t){.status = 200};
    /* an empty transaction: the writer commits in order, so when its
     * callback runs every write queued before it is on disk */
    if (!(t = crater_txn_create()))
        crater_errorf(&e, CRATER_ENOMEM, "out of memory");
    if (!t || crater_store_commit_async(d->store, t, ack_done, a, &e) < 0)
        ack_done(-1, 0, &e, a); /* the callback never runs */
}
