/* audit.c - the audit log (daemon/audit.h).
 *
 * Why a wrapper around the handlers rather than a call in each: every
 * state-changing route is covered by construction, including routes
 * added later (an engineer adding inference services need not remember
 * it), and the handlers stay as they are. The action is named from the
 * route's pattern ("POST /api/v1/jobs/{id}/cancel" -> "job.cancel"), the
 * actor from the request's token (looked up again after the handler:
 * a hash lookup, for writes only).
 *
 * The file is written under d->mu, like the decision log; an audit line
 * is a few hundred bytes and writes are rare next to reads.
 */
#include "daemon/audit.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crater/auth.h"
#include "crater/log.h"
#include "daemon/internal.h"

#define AUDIT_ROTATE_BYTES (16u << 20)
#define AUDIT_MAX_ROUTES 256
#define AUDIT_DEFAULT_LIMIT 500
#define AUDIT_MAX_LIMIT 10000

typedef struct wrap {
    crater_daemon_t *d;
    crater_http_handler_f fn;
    bool audit; /* a write: audited */
    char method[8];
    char route[80];
    char action[48];
} wrap_t;

typedef struct daudit {
    char *path; /* DATA/audit.log */
    FILE *fp;
    uint64_t bytes;
    wrap_t wraps[AUDIT_MAX_ROUTES];
    size_t nwraps;
    crater_metric_t *m_lat; /* crater_http_request_duration_seconds */
} daudit_t;

/* ---- naming ------------------------------------------------------------- */

static const struct {
    const char *method, *path, *action;
} names[] = {
    {"POST", "/api/v1/jobs", "job.submit"},
    {"POST", "/api/v1/jobs/{id}/cancel", "job.cancel"},
    {"POST", "/api/v1/nodes/{name}/drain", "node.drain"},
    {"POST", "/api/v1/nodes/{name}/cordon", "node.cordon"},
    {"POST", "/api/v1/nodes/{name}/uncordon", "node.uncordon"},
    {"POST", "/api/v1/tokens", "token.create"},
    {"DELETE", "/api/v1/tokens/{hash}", "token.revoke"},
    {"PUT", "/api/v1/tenants/{name}", "tenant.quota"},
};

/* A known name, else "METHOD path". */
static void action_name(const char *method,
                        const char *path,
                        char *buf,
                        size_t n)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(names[i].method, method) == 0
            && strcmp(names[i].path, path) == 0) {
            snprintf(buf, n, "%s", names[i].action);
            return;
        }
    snprintf(buf, n, "%s %s", method, path);
}

static bool audited(const char *method, const char *path)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0
           && strncmp(path, "/api/v1/agents/", 15) != 0;
}

/* ---- the file ----------------------------------------------------------- */

static void prune(crater_daemon_t *d, int64_t now)
{
    DIR *dir = opendir(d->data_dir);
    struct dirent *e;
    char path[4096];
    long long ms;

    if (!dir)
        return;
    while ((e = readdir(dir))) {
        if (sscanf(e->d_name, "audit-%lld.log", &ms) != 1
            || now - ms <= (int64_t)d->cfg.server.audit_log_retention_ms)
            continue;
        snprintf(path, sizeof(path), "%s/%s", d->data_dir, e->d_name);
        unlink(path);
    }
    closedir(dir);
}

static void rotate(crater_daemon_t *d)
{
    daudit_t *a = d->audit;
    char path[4096];
    int64_t now = dnow_ms();

    fclose(a->fp);
    a->fp = NULL;
    snprintf(path,
             sizeof(path),
             "%s/audit-%lld.log",
             d->data_dir,
             (long long)now);
    if (rename(a->path, path) < 0)
        crater_log(LOG_WARNING, "audit log: rename: %s", strerror(errno));
    a->bytes = 0;
    prune(d, now);
}

static void write_line(crater_daemon_t *d, json_t *entry)
{
    daudit_t *a = d->audit;
    char *line = json_dumps(entry, JSON_COMPACT);
    struct stat st;

    json_decref(entry);
    if (!a->fp && (a->fp = fopen(a->path, "a")))
        a->bytes = stat(a->path, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (!line || !a->fp) {
        crater_log(LOG_ERR, "audit log: cannot write %s", a->path);
        free(line);
        return;
    }
    a->bytes += (uint64_t)fprintf(a->fp, "%s\n", line);
    fflush(a->fp);
    free(line);
    if (a->bytes >= AUDIT_ROTATE_BYTES)
        rotate(d);
}

/* ---- the wrapper -------------------------------------------------------- */

static json_t *actor_json(crater_daemon_t *d, crater_http_req_t *r)
{
    const char *h = crater_http_header(r, "Authorization");
    const char *tok = h ? crater_auth_bearer(h) : NULL;
    const crater_token_rec_t *rec = tok ? token_lookup(d, tok) : NULL;

    if (!rec)
        return json_pack("{s:s, s:s}", "actor", "anonymous", "role", "none");
    return json_pack("{s:s, s:s, s:s?}",
                     "actor",
                     rec->role == CRATER_ROLE_USER ? rec->tenant : "admin",
                     "role",
                     rec->role == CRATER_ROLE_USER    ? "user"
                     : rec->role == CRATER_ROLE_ADMIN ? "admin"
                                                      : "agent",
                     "token_name",
                     rec->name);
}

static void audit_request(wrap_t *w,
                          crater_http_req_t *r,
                          const crater_http_resp_t *resp)
{
    crater_daemon_t *d = w->d;
    char from[64] = "";
    json_t *o;

    crater_http_peer(r, from, sizeof(from));
    pthread_mutex_lock(&d->mu);
    o = actor_json(d, r);
    if (o) {
        json_object_update_new(o,
                               json_pack("{s:I, s:s, s:s, s:s, s:s, s:i}",
                                         "time_ms",
                                         (json_int_t)dnow_ms(),
                                         "from",
                                         from,
                                         "method",
                                         crater_http_method(r),
                                         "path",
                                         crater_http_path(r),
                                         "action",
                                         w->action,
                                         "status",
                                         resp->status));
        if (resp->status == 200 && !resp->body) /* answered at its commit */
            json_object_set_new(o, "status", json_string("on commit"));
        write_line(d, o);
    }
    pthread_mutex_unlock(&d->mu);
}

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Every API route: refused by a paused leader, timed (the handler's own
 * time: a long poll that suspends counts until it suspends), and audited
 * when it writes. */
static void trampoline(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    wrap_t *w = arg;
    double t0 = mono_s();

    if (!api_paused(w->d, resp))
        w->fn(r, resp, w->d);
    crater_metric_observe(w->d->audit->m_lat,
                          (const char *[]){w->method, w->route},
                          mono_s() - t0);
    if (w->audit)
        audit_request(w, r, resp);
}

int audit_wrap(crater_daemon_t *d,
               const char *method,
               const char *path,
               crater_http_handler_f fn,
               crater_http_handler_f *fn_out,
               void **arg_out)
{
    daudit_t *a = d->audit;
    wrap_t *w;

    *fn_out = fn;
    *arg_out = d;
    if (!a)
        return 0;
    if (a->nwraps == AUDIT_MAX_ROUTES) {
        errno = ENOMEM;
        return -1;
    }
    w = &a->wraps[a->nwraps++];
    w->d = d;
    w->fn = fn;
    w->audit = audited(method, path);
    snprintf(w->method, sizeof(w->method), "%s", method);
    snprintf(w->route, sizeof(w->route), "%s", path);
    action_name(method, path, w->action, sizeof(w->action));
    *fn_out = trampoline;
    *arg_out = w;
    return 0;
}

int audit_init(crater_daemon_t *d, crater_error_t *err)
{
    static const double b[] =
        {1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1, 5};
    static const char *const mr[] = {"method", "route", NULL};
    daudit_t *a = calloc(1, sizeof(*a));

    if (!a || asprintf(&a->path, "%s/audit.log", d->data_dir) < 0) {
        free(a);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    d->audit = a;
    a->m_lat = crater_metrics_histogram(d->metrics,
                                        "crater_http_request_duration_seconds",
                                        "Time an API handler took, per route",
                                        mr,
                                        b,
                                        sizeof(b) / sizeof(b[0]),
                                        err);
    if (!a->m_lat)
        return -1;
    prune(d, dnow_ms());
    return 0;
}

void audit_free(crater_daemon_t *d)
{
    if (!d->audit)
        return;
    if (d->audit->fp)
        fclose(d->audit->fp);
    free(d->audit->path);
    free(d->audit);
    d->audit = NULL;
}

/* ---- GET /api/v1/audit -------------------------------------------------- */

typedef struct filter {
    int64_t since_ms;
    const char *action, *actor;
    uint64_t limit;
} filter_t;

static bool keep(const filter_t *f, json_t *e)
{
    const char *a = json_string_value(json_object_get(e, "action"));
    const char *who = json_string_value(json_object_get(e, "actor"));
    json_int_t t = json_integer_value(json_object_get(e, "time_ms"));

    return t >= f->since_ms && (!f->action || (a && strcmp(a, f->action) == 0))
           && (!f->actor || (who && strcmp(who, f->actor) == 0));
}

/* Append the matching lines of one file; the oldest are dropped past
 * f->limit, so the answer holds the newest. */
static void read_file(const char *path, const filter_t *f, json_t *items)
{
    FILE *fp = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;

    if (!fp)
        return;
    while (getline(&line, &cap, fp) > 0) {
        json_t *e = json_loads(line, 0, NULL);
        if (e && keep(f, e)) {
            json_array_append(items, e);
            if (json_array_size(items) > f->limit)
                json_array_remove(items, 0);
        }
        json_decref(e);
    }
    free(line);
    fclose(fp);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;

    return x < y ? -1 : x > y;
}

/* Rotated files oldest first, then the current one. */
static json_t *read_all(crater_daemon_t *d, const filter_t *f)
{
    long long ms[256];
    size_t n = 0;
    DIR *dir = opendir(d->data_dir);
    struct dirent *e;
    char path[4096];
    json_t *items = json_array();

    while (dir && (e = readdir(dir)) && n < 256)
        if (sscanf(e->d_name, "audit-%lld.log", &ms[n]) == 1)
            n++;
    if (dir)
        closedir(dir);
    qsort(ms, n, sizeof(ms[0]), cmp_ll);
    for (size_t i = 0; items && i < n; i++) {
        snprintf(path, sizeof(path), "%s/audit-%lld.log", d->data_dir, ms[i]);
        read_file(path, f, items);
    }
    if (items)
        read_file(d->audit->path, f, items);
    return items;
}

static void h_audit(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    filter_t f = {.limit = AUDIT_DEFAULT_LIMIT};
    uint64_t since = 0;
    principal_t p;
    json_t *items;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
        || api_query_offset(r, "since_ms", &since, resp) < 0
        || api_query_offset(r, "limit", &f.limit, resp) < 0)
        goto out;
    f.since_ms = (int64_t)since;
    f.limit = f.limit && f.limit <= AUDIT_MAX_LIMIT
                  ? f.limit
                  : (crater_http_query(r, "limit") ? AUDIT_MAX_LIMIT
                                                   : AUDIT_DEFAULT_LIMIT);
    f.action = crater_http_query(r, "action");
    f.actor = crater_http_query(r, "actor");
    if (d->audit->fp)
        fflush(d->audit->fp);
    if (!(items = read_all(d, &f)))
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
    else
        crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
out:
    pthread_mutex_unlock(&d->mu);
}

int api_audit_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"GET", "/api/v1/audit", h_audit},
    };

    return api_register(d, routes, 1, err);
}
