/* cost.c - craterd's cost accounting (daemon/cost.h) around the pure
 * ledger of src/core/cost.c.
 *
 * At each heartbeat a node's interval since its previous heartbeat is
 * charged: its lines are priced from the configuration (a GPU by its
 * model in cost.gpuModels, else cost.gpuHour, else derived from its SMs
 * and HBM bandwidth; cores, GiB, kIOPS and GB/s by their prices), and each
 * task placed there gives its allocation (GPU slices as MiB / the GPU's
 * MiB) and its measured use from the heartbeat (CPU and memory per task;
 * a GPU's SM utilisation times the task's share; the node's disk
 * utilisation times its disk reservation). The first heartbeat after a
 * start only sets the clock: nothing is charged for time craterd did not
 * see.
 *
 * Rows go to the store under /crater/cost/<hour>/<node> at most every
 * 10 s (a crash loses at most that much accounting, never the
 * invariant: each row is written whole). Retention drops rows older than
 * cost.retention. Why not with each job record: a job's record is written
 * on state changes, and charging every 5 s would multiply those writes.
 *
 * costCap and tenantRates/Budgets are applied here, in the configured
 * basis: a job whose total (times its tenant's rate) reaches its cap is
 * cancelled through the lifecycle table with reason "cost cap", its stop
 * order carrying the cost-cap notice, so a job that reported checkpoints
 * gets the checkpoint grace as a preempted one does.
 */
#include "daemon/cost.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/internal.h"

#define FLUSH_MS 10000

typedef struct dcost {
    crater_ledger_t *ledger;
    crater_billing_t billing;
    int64_t billing_price; /* micro per billing unit-hour */
    int64_t *last_ms;      /* per node sid: the last heartbeat charged */
    size_t nlast;
    int64_t flushed_ms;
    int64_t stored_ms; /* flushed_ms of the last flush on disk (atomic:
                          set by the store's writer thread) */
    int64_t expired_ms;
    crater_metric_t *m_meas, *m_cost, *m_idle;
} dcost_t;

/* ---- prices ------------------------------------------------------------- */

static int64_t price(double x)
{
    return crater_cost_from_double(x);
}

static int64_t gpu_price(const crater_config_t *c, const crater_gpu_t *g)
{
    json_t *p = g->model ? json_object_get(c->cost.gpu_models, g->model) : NULL;

    if (p)
        return price(json_number_value(p));
    if (c->cost.gpu_hour > 0)
        return price(c->cost.gpu_hour);
    return price(c->cost.gpu_sm_hour * g->sm_count
                 + c->cost.gpu_hbm_tbps_hour * (double)g->hbm_bandwidth / 1e12);
}

static uint64_t storage_sum(const crater_node_t *m, bool iops)
{
    uint64_t s = 0;

    for (size_t i = 0; i < m->nstorage; i++)
        s += iops ? m->storage[i].iops : m->storage[i].bandwidth;
    return s;
}

/* Node m's lines: its GPUs, then CPU, memory, IOPS, bandwidth. */
static size_t node_lines(const crater_config_t *c,
                         const crater_node_t *m,
                         crater_cost_line_t *ln)
{
    size_t n = 0;

    for (size_t i = 0; i < m->ngpus && i < CRATER_MAX_GPUS_PER_NODE; i++)
        ln[n++] = (crater_cost_line_t){CRATER_COST_GPU,
                                       gpu_price(c, &m->gpus[i]),
                                       CRATER_COST_MICRO};
    ln[n++] = (crater_cost_line_t){CRATER_COST_CPU,
                                   price(c->cost.cpu_core_hour),
                                   crater_node_cpu_milli(m)};
    ln[n++] = (crater_cost_line_t){CRATER_COST_MEMORY,
                                   price(c->cost.memory_gib_hour),
                                   crater_node_memory_bytes(m)};
    ln[n++] = (crater_cost_line_t){CRATER_COST_DISK_IOPS,
                                   price(c->cost.disk_kiops_hour),
                                   storage_sum(m, true)};
    ln[n++] = (crater_cost_line_t){CRATER_COST_DISK_BW,
                                   price(c->cost.disk_gbps_hour),
                                   storage_sum(m, false)};
    return n;
}

/* ---- the uses of a heartbeat -------------------------------------------- */

static const crater_proto_usage_t *measured(const crater_proto_heartbeat_t *h,
                                            const djob_t *j,
                                            uint32_t r)
{
    char id[24];

    snprintf(id, sizeof(id), "%" PRIu64, j->id);
    for (size_t i = 0; i < h->ntasks; i++)
        if (h->tasks[i].replica == r && strcmp(h->tasks[i].job, id) == 0)
            return &h->tasks[i];
    return NULL;
}

static void fill_use(crater_daemon_t *d,
                     const dnode_t *n,
                     const crater_node_t *m,
                     const djob_t *j,
                     uint32_t r,
                     const crater_proto_usage_t *u,
                     crater_cost_use_t *out)
{
    const crater_placement_t *pl = job_task_pl(j, r);
    size_t g0 = m->ngpus, gpu_ppm = 0;

    memset(out, 0, sizeof(*out));
    out->job = j->id;
    for (uint32_t k = 0; k < pl->ngpus && pl->gpu[k] < m->ngpus; k++) {
        uint64_t mib = m->gpus[pl->gpu[k]].memory_bytes >> 20;
        uint64_t s = pl->whole || !mib
                         ? CRATER_COST_MICRO
                         : (uint64_t)pl->gpu_mib[k] * CRATER_COST_MICRO / mib;
        s = s > CRATER_COST_MICRO ? CRATER_COST_MICRO : s;
        out->alloc[pl->gpu[k]] += s;
        out->used[pl->gpu[k]] += (uint64_t)(s * n->util.gpu[pl->gpu[k]]);
        gpu_ppm += s;
    }
    out->alloc[g0] = pl->cpu_milli;
    out->used[g0] = u ? (uint64_t)u->cpu_millis : 0;
    out->alloc[g0 + 1] = pl->mem_bytes;
    out->used[g0 + 1] = u ? u->memory_bytes : 0;
    out->alloc[g0 + 2] = pl->disk_iops;
    out->used[g0 + 2] = (uint64_t)(pl->disk_iops * n->util.disk);
    out->alloc[g0 + 3] = pl->disk_bw;
    out->used[g0 + 3] = (uint64_t)(pl->disk_bw * n->util.disk);
    out->billing_hour =
        (int64_t)(crater_billing_units_ppm(&d->cost->billing,
                                           pl->cpu_milli,
                                           pl->mem_bytes,
                                           gpu_ppm)
                  * (uint64_t)d->cost->billing_price / CRATER_COST_MICRO);
}

/* The tasks placed on n, into *uses (malloc'd); -1 on ENOMEM. */
static int node_uses(crater_daemon_t *d,
                     const dnode_t *n,
                     const crater_node_t *m,
                     const crater_proto_heartbeat_t *h,
                     crater_cost_use_t **uses,
                     size_t *nuses)
{
    size_t cap = 0;

    *uses = NULL;
    *nuses = 0;
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        for (uint32_t r = 0; j->placed && r < job_ntasks(j); r++) {
            if (job_task_pl(j, r)->node != n->sid)
                continue;
            if (*nuses == cap) {
                size_t nc = cap ? cap * 2 : 8;
                crater_cost_use_t *p = realloc(*uses, nc * sizeof(*p));
                if (!p)
                    return -1;
                *uses = p;
                cap = nc;
            }
            fill_use(d, n, m, j, r, measured(h, j, r), &(*uses)[(*nuses)++]);
            crater_ledger_set_owner(d->cost->ledger,
                                    j->id,
                                    j->tenant,
                                    j->tenant);
        }
    }
    return 0;
}

/* ---- per job: basis, rate, cap ------------------------------------------ */

static int64_t tenant_rate_ppm(const crater_daemon_t *d, const char *tenant)
{
    json_t *r = json_object_get(d->cfg.cost.tenant_rates, tenant);

    return r ? crater_cost_from_double(json_number_value(r))
             : CRATER_COST_MICRO;
}

static int64_t rated(const crater_daemon_t *d, const char *tenant, int64_t v)
{
    __extension__ typedef __int128 i128;

    return (int64_t)((i128)v * tenant_rate_ppm(d, tenant) / CRATER_COST_MICRO);
}

static int64_t basis_of(const crater_daemon_t *d,
                        int64_t alloc,
                        int64_t usage,
                        int64_t billing)
{
    switch (d->cfg.cost.basis) {
    case CRATER_BASIS_USAGE:
        return usage;
    case CRATER_BASIS_BILLING:
        return billing;
    default:
        return alloc;
    }
}

static int64_t job_spent(const crater_daemon_t *d, const djob_t *j)
{
    const crater_cost_total_t *t = crater_ledger_total(d->cost->ledger, j->id);

    return t ? rated(d, j->tenant, basis_of(d, t->alloc, t->usage, t->billing))
             : 0;
}

static void cost_stop(crater_daemon_t *d, djob_t *j, int64_t spent, int64_t cap)
{
    char reason[160], a[32], b[32];
    crater_proto_notice_t was = j->stop_notice;
    job_step_t s;

    if (job_life_step(j->state, JE_CANCEL, &s) < 0)
        return;
    j->cost_capped = true;
    snprintf(reason,
             sizeof(reason),
             "cost cap: charged %s of costCap %s %s",
             crater_cost_format(spent, a, sizeof(a)),
             crater_cost_format(cap, b, sizeof(b)),
             d->cfg.cost.currency);
    crater_log(LOG_INFO, "job %" PRIu64 ": %s", j->id, reason);
    j->stop_notice = CRATER_NOTICE_COST_CAP; /* checkpoint grace */
    job_apply(d, j, JE_CANCEL, reason);
    j->stop_notice = was;
}

static void check_caps(crater_daemon_t *d,
                       const crater_cost_use_t *uses,
                       size_t n)
{
    for (size_t i = 0; i < n; i++) {
        djob_t *j = job_find(d, uses[i].job);
        int64_t cap, spent;
        if (!j || j->cost_capped || j->spec->cost_cap <= 0
            || job_state_final(j->state))
            continue;
        cap = crater_cost_from_double(j->spec->cost_cap);
        if ((spent = job_spent(d, j)) >= cap)
            cost_stop(d, j, spent, cap);
    }
}

/* ---- persistence -------------------------------------------------------- */

/* {job id: tenant} of a row's jobs, so that a restart knows whose they
 * were after the jobs themselves expired (new reference; NULL: none). */
static json_t *row_owners(crater_daemon_t *d, const crater_cost_row_t *row)
{
    json_t *o = json_object();
    char id[24];

    for (size_t k = 0; o && k < row->njobs; k++) {
        const crater_cost_total_t *t =
            crater_ledger_total(d->cost->ledger, row->jobs[k].job);
        snprintf(id, sizeof(id), "%" PRIu64, row->jobs[k].job);
        if (t && *t->tenant)
            json_object_set_new(o, id, json_string(t->tenant));
    }
    return o;
}

static void load_owners(crater_daemon_t *d, json_t *owners)
{
    const char *id;
    json_t *v;

    json_object_foreach(owners, id, v)
    {
        uint64_t job = strtoull(id, NULL, 10);
        if (job && json_is_string(v))
            crater_ledger_set_owner(d->cost->ledger,
                                    job,
                                    json_string_value(v),
                                    json_string_value(v));
    }
}

/* An empty transaction whose callback runs once every write queued before
 * it is on disk (the writer commits in order). */
static void persist_commit_marker(crater_daemon_t *d,
                                  crater_store_done_f cb,
                                  void *arg)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;

    if (t && crater_store_commit_async(d->store, t, cb, arg, &err) < 0)
        crater_log(LOG_WARNING, "cost: cannot queue a marker: %s", err.text);
}

/* The writer commits in order: when the last row of a flush is on disk,
 * all of them are. */
static void flush_done(int rc, int64_t rev, const crater_error_t *err, void *a)
{
    dcost_t *c = a;

    (void)rev;
    (void)err;
    if (rc == 0)
        __atomic_store_n(&c->stored_ms,
                         __atomic_load_n(&c->flushed_ms, __ATOMIC_ACQUIRE),
                         __ATOMIC_RELEASE);
}

static void flush_rows(crater_daemon_t *d, int64_t now)
{
    size_t n;
    const crater_cost_row_t *rows = crater_ledger_rows(d->cost->ledger, &n);
    size_t last = n;
    char key[96];

    for (size_t i = 0; i < n; i++) {
        const dnode_t *node;
        json_t *v;
        if (!rows[i].dirty || !(v = crater_cost_row_json(&rows[i])))
            continue;
        if ((node = node_by_sid(d, rows[i].node)))
            json_object_set_new(v, "node_name", json_string(node->name));
        json_object_set_new(v, "owners", row_owners(d, &rows[i]));
        snprintf(key,
                 sizeof(key),
                 KEY_COST "%013" PRId64 "/%06" PRIu32,
                 rows[i].hour_ms,
                 rows[i].node);
        last = i;
        persist_put_json(d, key, v, NULL, NULL);
    }
    crater_ledger_clean(d->cost->ledger);
    __atomic_store_n(&d->cost->flushed_ms, now, __ATOMIC_RELEASE);
    if (last < n) /* an empty write after the rows: its callback says */
        persist_commit_marker(d, flush_done, d->cost);
}

static void expire_done(int rc,
                        int64_t rev,
                        const crater_error_t *err,
                        void *arg)
{
    (void)rev;
    (void)arg;
    if (rc < 0)
        crater_log(LOG_WARNING,
                   "cost: deleting expired rows failed: %s",
                   err ? err->text : "");
}

/* Rows past cost.retention leave memory and the store, hourly (no commit
   when none has expired). */
static void expire_rows(crater_daemon_t *d, int64_t now)
{
    int64_t before = now - (int64_t)d->cfg.cost.retention_ms;
    size_t n;
    const crater_cost_row_t *rows = crater_ledger_rows(d->cost->ledger, &n);
    crater_txn_t *t;
    crater_error_t err;
    size_t ndel = 0;
    char key[96];

    if (now - d->cost->expired_ms < CRATER_COST_HOUR_MS
        || !(t = crater_txn_create()))
        return;
    d->cost->expired_ms = now;
    for (size_t i = 0; i < n; i++) {
        if (rows[i].hour_ms + CRATER_COST_HOUR_MS > before)
            continue;
        snprintf(key,
                 sizeof(key),
                 KEY_COST "%013" PRId64 "/%06" PRIu32,
                 rows[i].hour_ms,
                 rows[i].node);
        ndel += crater_txn_delete(t, key, &err) == 0;
    }
    crater_ledger_expire(d->cost->ledger, before);
    if (!ndel) {
        crater_txn_destroy(t);
        return;
    }
    if (crater_store_commit_async(d->store, t, expire_done, NULL, &err) < 0)
        crater_log(LOG_WARNING, "cost: cannot expire rows: %s", err.text);
}

static int64_t *last_of(dcost_t *c, uint32_t sid)
{
    if (sid >= c->nlast) {
        size_t nn = sid + 16;
        int64_t *p = realloc(c->last_ms, nn * sizeof(*p));
        if (!p)
            return NULL;
        memset(p + c->nlast, 0, (nn - c->nlast) * sizeof(*p));
        c->last_ms = p;
        c->nlast = nn;
    }
    return &c->last_ms[sid];
}

void cost_heartbeat(crater_daemon_t *d,
                    dnode_t *n,
                    const crater_proto_heartbeat_t *h,
                    int64_t now)
{
    crater_cost_line_t lines[CRATER_COST_MAX_LINES];
    const crater_node_t *m = node_model(d, n->sid);
    crater_cost_use_t *uses = NULL;
    size_t nlines, nuses = 0;
    int64_t *last = d->cost ? last_of(d->cost, n->sid) : NULL;

    if (!last || !m)
        return;
    if (*last > 0 && now > *last) {
        nlines = node_lines(&d->cfg, m, lines);
        if (node_uses(d, n, m, h, &uses, &nuses) < 0
            || crater_ledger_accrue(d->cost->ledger,
                                    n->sid,
                                    lines,
                                    nlines,
                                    uses,
                                    nuses,
                                    *last,
                                    now)
                   < 0)
            crater_log(LOG_ERR, "cost: cannot charge node %s", n->name);
        else
            check_caps(d, uses, nuses);
    }
    free(uses);
    *last = now;
    if (now - d->cost->flushed_ms >= FLUSH_MS)
        flush_rows(d, now);
    expire_rows(d, now);
}

/* ---- start and stop ----------------------------------------------------- */

static void load_rows(crater_daemon_t *d)
{
    crater_skv_list_t l = {0};
    crater_error_t err;

    if (persist_list(d, KEY_COST, &l, &err) < 0) {
        crater_log(LOG_ERR, "cost: cannot read the ledger: %s", err.text);
        return;
    }
    for (size_t i = 0; i < l.count; i++) {
        json_t *v = json_loadb(l.items[i].value, l.items[i].len, 0, NULL);
        if (!v || crater_ledger_load_row(d->cost->ledger, v, &err) < 0)
            crater_log(LOG_WARNING, "cost: skipped %s", l.items[i].key);
        else
            load_owners(d, json_object_get(v, "owners"));
        json_decref(v);
    }
    crater_skv_list_free(&l);
    crater_ledger_clean(d->cost->ledger);
}

int cost_init(crater_daemon_t *d, crater_error_t *err)
{
    dcost_t *c = calloc(1, sizeof(*c));

    if (!c || !(c->ledger = crater_ledger_create())) {
        free(c);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    d->cost = c;
    if (crater_billing_parse(d->cfg.cost.billing_weights,
                             d->cfg.cost.billing_max_tres,
                             &c->billing,
                             err)
        < 0)
        return -1;
    c->billing.max_tres_gres = d->cfg.cost.billing_max_tres_gres;
    c->billing_price = price(d->cfg.cost.billing_unit_hour);
    load_rows(d);
    for (size_t i = 0; i < d->njobs; i++) /* owners of the loaded rows */
        if (crater_ledger_total(c->ledger, d->jobs[i]->id))
            crater_ledger_set_owner(c->ledger,
                                    d->jobs[i]->id,
                                    d->jobs[i]->tenant,
                                    d->jobs[i]->tenant);
    return 0;
}

void cost_free(crater_daemon_t *d)
{
    if (!d->cost)
        return;
    crater_ledger_destroy(d->cost->ledger);
    free(d->cost->last_ms);
    free(d->cost);
    d->cost = NULL;
}

/* ---- views -------------------------------------------------------------- */

static json_t *money(int64_t micro)
{
    return json_real((double)micro / CRATER_COST_MICRO);
}

json_t *cost_job_json(crater_daemon_t *d, const djob_t *j)
{
    const crater_cost_total_t *t =
        d->cost ? crater_ledger_total(d->cost->ledger, j->id) : NULL;
    int64_t cap = crater_cost_from_double(j->spec->cost_cap);
    json_t *o;

    if (!t && cap <= 0)
        return NULL;
    o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:I}",
                  "currency",
                  d->cfg.cost.currency,
                  "basis",
                  d->cfg.cost.basis == CRATER_BASIS_USAGE     ? "usage"
                  : d->cfg.cost.basis == CRATER_BASIS_BILLING ? "billing"
                                                              : "allocation",
                  "allocation",
                  money(t ? rated(d, j->tenant, t->alloc) : 0),
                  "usage",
                  money(t ? rated(d, j->tenant, t->usage) : 0),
                  "billing",
                  money(t ? rated(d, j->tenant, t->billing) : 0),
                  "total",
                  money(job_spent(d, j)),
                  "total_micros",
                  (json_int_t)job_spent(d, j));
    if (o && cap > 0)
        json_object_set_new(o, "cap", money(cap));
    if (o && j->cost_capped)
        json_object_set_new(o, "capped", json_true());
    return o;
}

/* A tenant's spending over the budget window, in the basis, rated. */
static int64_t tenant_spent(crater_daemon_t *d, const char *tenant, int64_t now)
{
    int64_t since = now - (int64_t)d->cfg.cost.budget_window_ms, sum = 0;
    size_t n;
    const crater_cost_row_t *rows = crater_ledger_rows(d->cost->ledger, &n);

    for (size_t i = 0; i < n; i++) {
        if (rows[i].hour_ms + CRATER_COST_HOUR_MS <= since)
            continue;
        for (size_t k = 0; k < rows[i].njobs; k++) {
            const crater_cost_charge_t *c = &rows[i].jobs[k];
            const crater_cost_total_t *t =
                crater_ledger_total(d->cost->ledger, c->job);
            if (t && strcmp(t->tenant, tenant) == 0)
                sum += basis_of(d,
                                crater_cost_sum(c->alloc),
                                crater_cost_sum(c->usage),
                                c->billing);
        }
    }
    return rated(d, tenant, sum);
}

int cost_admit(crater_daemon_t *d, const char *tenant, crater_error_t *err)
{
    json_t *b = json_object_get(d->cfg.cost.tenant_budgets, tenant);
    int64_t budget, spent;
    char a[32], c[32];

    if (!b || !d->cost)
        return 0;
    budget = crater_cost_from_double(json_number_value(b));
    if ((spent = tenant_spent(d, tenant, dnow_ms())) < budget)
        return 0;
    return crater_errorf_field(err,
                               CRATER_EPERM,
                               "tenant",
                               "tenant '%s' has spent %s %s of its budget "
                               "of %s over the last %" PRIu64 " h "
                               "(cost."
                               "tenantBudgets); "
                               "new jobs are "
                               "held",
                               tenant,
                               crater_cost_format(spent, a, sizeof(a)),
                               d->cfg.cost.currency,
                               crater_cost_format(budget, c, sizeof(c)),
                               d->cfg.cost.budget_window_ms / 3600000);
}

/* ---- metrics ------------------------------------------------------------ */

int cost_metrics_setup(crater_daemon_t *d, crater_error_t *err)
{
    static const char *const nr[] = {"node", "resource", NULL};
    static const char *const tb[] = {"tenant", "basis", NULL};
    static const char *const no[] = {"node", NULL};
    dcost_t *c = d->cost;

    c->m_meas = crater_metrics_gauge(d->metrics,
                                     "crater_resource_capability_utilization",
                                     "Measured use of a node's capability "
                                     "over its capacity (0-1), from the "
                                     "agents' samples",
                                     nr,
                                     err);
    c->m_cost = crater_metrics_counter(d->metrics,
                                       "crater_cost_micros_total",
                                       "Charges in micro-units of "
                                       "cost.currency, per tenant and basis",
                                       tb,
                                       err);
    c->m_idle = crater_metrics_counter(d->metrics,
                                       "crater_cost_idle_micros_total",
                                       "Idle cost (allocation basis) in "
                                       "micro-units, per node",
                                       no,
                                       err);
    return c->m_meas && c->m_cost && c->m_idle ? 0 : -1;
}

/* Measured GPU memory over the node's GPU memory. */
static double gpu_mem_share(const crater_node_t *m, const crater_node_util_t *u)
{
    uint64_t used = 0, total = 0;

    for (size_t g = 0; g < m->ngpus && g < CRATER_MAX_GPUS_PER_NODE; g++) {
        used += u->gpu_used_mib[g];
        total += m->gpus[g].memory_bytes >> 20;
    }
    return total ? (double)used / (double)total : 0;
}

static void publish_measured(crater_daemon_t *d, const dnode_t *n)
{
    const crater_node_t *m = node_model(d, n->sid);
    double gpu = 0;
    char r[32];

    if (!m || !n->ready)
        return;
    crater_metric_set(d->cost->m_meas,
                      (const char *[]){n->name, "cpu"},
                      n->util.cpu);
    crater_metric_set(d->cost->m_meas,
                      (const char *[]){n->name, "memory"},
                      n->util.mem);
    crater_metric_set(d->cost->m_meas,
                      (const char *[]){n->name, "disk"},
                      n->util.disk);
    for (size_t g = 0; g < m->ngpus && g < CRATER_MAX_GPUS_PER_NODE; g++) {
        snprintf(r, sizeof(r), "gpu%zu", g);
        crater_metric_set(d->cost->m_meas,
                          (const char *[]){n->name, r},
                          n->util.gpu[g]);
        gpu += n->util.gpu[g];
    }
    if (m->ngpus) {
        crater_metric_set(d->cost->m_meas,
                          (const char *[]){n->name, "gpu"},
                          gpu / (double)m->ngpus);
        crater_metric_set(d->cost->m_meas,
                          (const char *[]){n->name, "gpu_memory"},
                          gpu_mem_share(m, &n->util));
    }
}

/* Counters re-derived from the ledger at each scrape: set to the total
 * (a counter family's series only grow: charges never shrink). */
static void publish_costs(crater_daemon_t *d)
{
    static const char *const bases[] = {"allocation", "usage", "billing"};
    size_t n;
    const crater_cost_total_t *t = crater_ledger_totals(d->cost->ledger, &n);
    const crater_cost_row_t *rows;

    crater_metric_reset(d->cost->m_cost);
    crater_metric_reset(d->cost->m_idle);
    for (size_t i = 0; i < n; i++) {
        int64_t v[3] = {t[i].alloc, t[i].usage, t[i].billing};
        for (int b = 0; b < 3; b++)
            crater_metric_add(d->cost->m_cost,
                              (const char *[]){t[i].tenant, bases[b]},
                              (double)rated(d, t[i].tenant, v[b]));
    }
    rows = crater_ledger_rows(d->cost->ledger, &n);
    for (size_t i = 0; i < n; i++) {
        const dnode_t *node = node_by_sid(d, rows[i].node);
        if (node)
            crater_metric_add(d->cost->m_idle,
                              (const char *[]){node->name},
                              (double)crater_cost_sum(rows[i].idle.alloc));
    }
}

void cost_metrics_publish(crater_daemon_t *d)
{
    if (!d->cost || !d->cost->m_meas)
        return;
    crater_metric_reset(d->cost->m_meas);
    for (size_t i = 0; i < d->nnodes; i++)
        publish_measured(d, d->nodes[i]);
    publish_costs(d);
}

int64_t cost__stored_ms(crater_daemon_t *d)
{
    return d->cost ? __atomic_load_n(&d->cost->stored_ms, __ATOMIC_ACQUIRE) : 0;
}

int64_t cost__job_spent(crater_daemon_t *d, const djob_t *j)
{
    return job_spent(d, j);
}

const crater_ledger_t *cost__ledger(crater_daemon_t *d)
{
    return d->cost ? d->cost->ledger : NULL;
}

int64_t cost__rated(crater_daemon_t *d, const char *tenant, int64_t v)
{
    return rated(d, tenant, v);
}
