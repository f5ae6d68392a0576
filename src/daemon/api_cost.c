/* api_cost.c - GET /api/v1/cost: the ledger's hourly rows summed over a
 * window, by job, tenant, user, node or resource, in steps.
 *
 * ?window=24h (default; hours, up to cost.retention) &aggregate=job
 * (default) | tenant | user | node | resource &step=1h (default: the
 * whole window; a whole number of hours) &basis=allocation|usage|billing
 * (default cost.basis). The answer follows OpenCost's allocation API in
 * spirit: one entry per name and step with cpuCost, gpuCost, ramCost,
 * diskCost and totalCost in the currency, plus the integer micro-units
 * and an "__idle__" entry (admins only) so that an admin's entries of a
 * step add up to the nodes' cost exactly (list prices). A user sees its
 * tenant's jobs, at its cost.tenantRates factor.
 *
 * Workload: an operator's or a dashboard's query, a few per minute; the
 * rows are scanned once and entries found by a linear search (hundreds).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/units.h"
#include "daemon/cost.h"
#include "daemon/internal.h"

#define IDLE_NAME "__idle__"

typedef enum agg {
    AGG_JOB,
    AGG_TENANT,
    AGG_USER,
    AGG_NODE,
    AGG_RES
} agg_t;

typedef struct entry {
    int64_t bucket;
    char name[96];
    int64_t alloc[CRATER_COST_NRES], usage[CRATER_COST_NRES], billing;
} entry_t;

typedef struct query {
    int64_t start, end, step; /* hours, ms */
    agg_t agg;
    crater_cost_basis_t basis;
    const char *tenant; /* a user's: only its jobs, no idle */
    entry_t *e;
    size_t n, cap;
} query_t;

static entry_t *entry_get(query_t *q, int64_t bucket, const char *name)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->e[i].bucket == bucket && strcmp(q->e[i].name, name) == 0)
            return &q->e[i];
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 16;
        entry_t *p = realloc(q->e, nc * sizeof(*p));
        if (!p)
            return NULL;
        q->e = p;
        q->cap = nc;
    }
    memset(&q->e[q->n], 0, sizeof(q->e[0]));
    q->e[q->n].bucket = bucket;
    snprintf(q->e[q->n].name, sizeof(q->e[0].name), "%s", name);
    return &q->e[q->n++];
}

static void add_charge(crater_daemon_t *d,
                       entry_t *e,
                       const crater_cost_charge_t *c,
                       const char *tenant,
                       int only) /* a resource, or -1 for all */
{
    for (int r = 0; r < CRATER_COST_NRES; r++) {
        if (only >= 0 && r != only)
            continue;
        e->alloc[r] +=
            tenant ? cost__rated(d, tenant, c->alloc[r]) : c->alloc[r];
        e->usage[r] +=
            tenant ? cost__rated(d, tenant, c->usage[r]) : c->usage[r];
    }
    if (only <= 0)
        e->billing += tenant ? cost__rated(d, tenant, c->billing) : c->billing;
}

/* The name a job charge counts under. */
static const char *job_key(crater_daemon_t *d,
                           const query_t *q,
                           const crater_cost_row_t *row,
                           const crater_cost_total_t *t,
                           char *buf,
                           size_t size)
{
    const dnode_t *n;

    switch (q->agg) {
    case AGG_TENANT:
        return t && *t->tenant ? t->tenant : "unknown";
    case AGG_USER:
        return t && *t->user ? t->user : "unknown";
    case AGG_NODE:
        n = node_by_sid(d, row->node);
        return n ? n->name : "unknown";
    default:
        snprintf(buf, size, "%" PRIu64, t ? t->job : 0);
        return buf;
    }
}

static int add_row(crater_daemon_t *d, query_t *q, const crater_cost_row_t *row)
{
    const crater_ledger_t *l = cost__ledger(d);
    int64_t b = (row->hour_ms - q->start) / q->step;
    char buf[32];
    entry_t *e;

    for (size_t k = 0; k < row->njobs; k++) {
        const crater_cost_total_t *t = crater_ledger_total(l, row->jobs[k].job);
        if (q->tenant && (!t || strcmp(t->tenant, q->tenant) != 0))
            continue;
        for (int r = 0; r < CRATER_COST_NRES; r++) {
            if (q->agg != AGG_RES && r > 0)
                break;
            if (!(e = entry_get(q,
                                b,
                                q->agg == AGG_RES
                                    ? crater_cost_res_name(r)
                                    : job_key(d, q, row, t, buf, sizeof(buf)))))
                return -1;
            add_charge(d,
                       e,
                       &row->jobs[k],
                       q->tenant, /* a user's view: at its rate */
                       q->agg == AGG_RES ? r : -1);
        }
    }
    if (q->tenant)
        return 0;
    if (!(e = entry_get(q, b, IDLE_NAME)))
        return -1;
    add_charge(d, e, &row->idle, NULL, -1);
    return 0;
}

static json_t *money(int64_t micro)
{
    return json_real((double)micro / CRATER_COST_MICRO);
}

static json_t *entry_json(const query_t *q, const entry_t *e)
{
    const int64_t *v = q->basis == CRATER_BASIS_USAGE ? e->usage : e->alloc;
    int64_t total =
        q->basis == CRATER_BASIS_BILLING ? e->billing : crater_cost_sum(v);
    int64_t a = crater_cost_sum(e->alloc), u = crater_cost_sum(e->usage);
    int64_t start = q->start + e->bucket * q->step;

    return json_pack("{s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:o, "
                     "s:o, s:o, s:o}",
                     "name",
                     e->name,
                     "start_ms",
                     (json_int_t)start,
                     "end_ms",
                     (json_int_t)(start + q->step),
                     "cpuCost",
                     money(v[CRATER_COST_CPU]),
                     "gpuCost",
                     money(v[CRATER_COST_GPU]),
                     "ramCost",
                     money(v[CRATER_COST_MEMORY]),
                     "diskCost",
                     money(v[CRATER_COST_DISK_IOPS] + v[CRATER_COST_DISK_BW]),
                     "totalCost",
                     money(total),
                     "totalCostMicros",
                     (json_int_t)total,
                     "allocationCost",
                     money(a),
                     "usageCost",
                     money(u),
                     "billingCost",
                     money(e->billing),
                     "totalEfficiency",
                     a ? json_real((double)u / (double)a) : json_null());
}

/* A duration parameter in whole hours (at least one). */
static int hours_param(crater_http_req_t *r,
                       const char *name,
                       const char *def,
                       int64_t *ms,
                       crater_http_resp_t *resp)
{
    const char *s = crater_http_query(r, name);
    crater_error_t err;
    uint64_t ns;

    if (!s)
        s = def;
    if (crater_parse_duration_ns(s, &ns, &err) < 0 || ns == 0
        || ns % (3600ull * 1000000000) || ns / 1000000 > 3650ull * 86400000) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   name,
                   "%s: '%s' is not a whole number of hours (e.g. 24h, 7d)",
                   name,
                   s);
        return -1;
    }
    *ms = (int64_t)(ns / 1000000);
    return 0;
}

static int enum_param(crater_http_req_t *r,
                      const char *name,
                      const char *const *names,
                      int *out,
                      crater_http_resp_t *resp)
{
    const char *s = crater_http_query(r, name);

    if (!s)
        return 0;
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0) {
            *out = i;
            return 0;
        }
    api_errorf(resp, CRATER_EINVAL, name, "%s: unknown value '%s'", name, s);
    return -1;
}

static int parse_query(crater_daemon_t *d,
                       crater_http_req_t *r,
                       query_t *q,
                       crater_http_resp_t *resp)
{
    static const char *const aggs[] =
        {"job", "tenant", "user", "node", "resource", NULL};
    static const char *const bases[] = {"allocation", "usage", "billing", NULL};
    int64_t window, now = dnow_ms();
    int agg = AGG_JOB, basis = (int)d->cfg.cost.basis;

    if (hours_param(r, "window", "24h", &window, resp) < 0
        || hours_param(r,
                       "step",
                       crater_http_query(r, "window")
                           ? crater_http_query(r, "window")
                           : "24h",
                       &q->step,
                       resp)
               < 0
        || enum_param(r, "aggregate", aggs, &agg, resp) < 0
        || enum_param(r, "basis", bases, &basis, resp) < 0)
        return -1;
    q->end = now - now % CRATER_COST_HOUR_MS + CRATER_COST_HOUR_MS;
    q->start = q->end - window;
    q->agg = (agg_t)agg;
    q->basis = (crater_cost_basis_t)basis;
    return 0;
}

static json_t *answer(crater_daemon_t *d, query_t *q)
{
    size_t n;
    const crater_cost_row_t *rows = crater_ledger_rows(cost__ledger(d), &n);
    json_t *items = json_array();

    for (size_t i = 0; items && i < n; i++)
        if (rows[i].hour_ms >= q->start && rows[i].hour_ms < q->end
            && add_row(d, q, &rows[i]) < 0) {
            json_decref(items);
            return NULL;
        }
    for (size_t i = 0; items && i < q->n; i++)
        json_array_append_new(items, entry_json(q, &q->e[i]));
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o}",
                     "currency",
                     d->cfg.cost.currency,
                     "basis",
                     q->basis == CRATER_BASIS_USAGE     ? "usage"
                     : q->basis == CRATER_BASIS_BILLING ? "billing"
                                                        : "allocation",
                     "start_ms",
                     (json_int_t)q->start,
                     "end_ms",
                     (json_int_t)q->end,
                     "stored_ms",
                     (json_int_t)cost__stored_ms(d),
                     "items",
                     items);
}

static void h_cost(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    query_t q = {0};
    principal_t p;
    json_t *o;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || parse_query(d, r, &q, resp) < 0)
        goto out;
    q.tenant = user_tenant(&p);
    if (p.role == CRATER_ROLE_AGENT) {
        api_errorf(resp, CRATER_EPERM, NULL, "agents have no cost view");
        goto out;
    }
    if (!cost__ledger(d) || !(o = answer(d, &q)))
        api_errorf(resp, CRATER_ENOMEM, NULL, "out of memory");
    else
        crater_http_json(resp, 200, o);
out:
    free(q.e);
    pthread_mutex_unlock(&d->mu);
}

int api_cost_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"GET", "/api/v1/cost", h_cost},
    };

    return api_register(d, routes, 1, err);
}
