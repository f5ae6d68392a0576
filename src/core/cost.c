/* cost.c - the cost ledger (crater/cost.h): integer charges per node,
 * hour, job and resource, and Slurm's billing weights.
 *
 * Layout: rows (one per node and hour) in one array, appended as hours
 * begin; each node's state remembers its lines, the start of each line's
 * current price segment and the index of its open row, so a heartbeat
 * touches one row and scans only that row's jobs (tens). Job totals sit
 * in an array sorted by id (binary search), so a cost cap check is
 * O(log jobs).
 *
 * Rounding: a line's cost from segment start s to t is
 * floor(price * cap * (t - s) / (hour * scale)); a piece [a, b) costs
 * cum(b) - cum(a), so the pieces of an hour add up to the hour's cost
 * however it was cut. A piece is split by floor(cost * share / total);
 * the idle charge is what is left, so charges + idle == cost by
 * construction and never negative (shares never exceed the total).
 *
 * Workload: one accrue per node heartbeat (seconds apart); rows number
 * nodes x hours retained.
 */
#include "crater/cost.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 u128;

typedef struct nstate {
    uint32_t node;
    size_t nlines;
    crater_cost_line_t lines[CRATER_COST_MAX_LINES];
    int64_t seg[CRATER_COST_MAX_LINES]; /* segment start per line */
    size_t row;                         /* open row index */
    bool has_row;
} nstate_t;

struct crater_ledger {
    crater_cost_row_t *rows;
    size_t nrows, caprows;
    nstate_t *nodes;
    size_t nnodes, capnodes;
    crater_cost_total_t *totals; /* sorted by job */
    size_t ntotals, captotals;
};

static const char *const res_names[CRATER_COST_NRES] = {"gpu",
                                                        "cpu",
                                                        "memory",
                                                        "disk_iops",
                                                        "disk_bandwidth"};

const char *crater_cost_res_name(crater_cost_res_t r)
{
    return (unsigned)r < CRATER_COST_NRES ? res_names[r] : "unknown";
}

int crater_cost_res_parse(const char *s)
{
    for (int i = 0; i < CRATER_COST_NRES; i++)
        if (strcmp(res_names[i], s) == 0)
            return i;
    return -1;
}

uint64_t crater_cost_res_scale(crater_cost_res_t r)
{
    static const uint64_t scale[CRATER_COST_NRES] = {1000000,
                                                     1000,
                                                     1ull << 30,
                                                     1000,
                                                     1000000000};

    return (unsigned)r < CRATER_COST_NRES ? scale[r] : 1;
}

/* Grow *p (elements of size) to hold n + 1; -1 on ENOMEM. */
static int reserve(void **p, size_t *cap, size_t n, size_t size)
{
    size_t ncap;
    void *q;

    if (n < *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 8;
    if (!(q = realloc(*p, ncap * size)))
        return -1;
    *p = q;
    *cap = ncap;
    return 0;
}

crater_ledger_t *crater_ledger_create(void)
{
    return calloc(1, sizeof(crater_ledger_t));
}

void crater_ledger_destroy(crater_ledger_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->nrows; i++)
        free(l->rows[i].jobs);
    free(l->rows);
    free(l->nodes);
    free(l->totals);
    free(l);
}

/* ---- job totals --------------------------------------------------------- */

static size_t total_pos(const crater_ledger_t *l, uint64_t job)
{
    size_t lo = 0, hi = l->ntotals;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->totals[mid].job < job)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static crater_cost_total_t *total_get(crater_ledger_t *l, uint64_t job)
{
    size_t i = total_pos(l, job);

    if (i < l->ntotals && l->totals[i].job == job)
        return &l->totals[i];
    if (reserve((void **)&l->totals,
                &l->captotals,
                l->ntotals,
                sizeof(*l->totals))
        < 0)
        return NULL;
    memmove(&l->totals[i + 1],
            &l->totals[i],
            (l->ntotals - i) * sizeof(*l->totals));
    l->ntotals++;
    memset(&l->totals[i], 0, sizeof(*l->totals));
    l->totals[i].job = job;
    return &l->totals[i];
}

const crater_cost_total_t *crater_ledger_total(const crater_ledger_t *l,
                                               uint64_t job)
{
    size_t i = total_pos(l, job);

    return i < l->ntotals && l->totals[i].job == job ? &l->totals[i] : NULL;
}

const crater_cost_total_t *crater_ledger_totals(const crater_ledger_t *l,
                                                size_t *n)
{
    *n = l->ntotals;
    return l->totals;
}

int crater_ledger_set_owner(crater_ledger_t *l,
                            uint64_t job,
                            const char *tenant,
                            const char *user)
{
    crater_cost_total_t *t = total_get(l, job);

    if (!t)
        return -1;
    snprintf(t->tenant, sizeof(t->tenant), "%s", tenant ? tenant : "");
    snprintf(t->user, sizeof(t->user), "%s", user ? user : "");
    return 0;
}

/* ---- rows and node states ----------------------------------------------- */

static nstate_t *node_state(crater_ledger_t *l, uint32_t node)
{
    for (size_t i = 0; i < l->nnodes; i++)
        if (l->nodes[i].node == node)
            return &l->nodes[i];
    if (reserve((void **)&l->nodes, &l->capnodes, l->nnodes, sizeof(*l->nodes))
        < 0)
        return NULL;
    memset(&l->nodes[l->nnodes], 0, sizeof(*l->nodes));
    l->nodes[l->nnodes].node = node;
    return &l->nodes[l->nnodes++];
}

static crater_cost_row_t *row_new(crater_ledger_t *l,
                                  uint32_t node,
                                  int64_t hour)
{
    crater_cost_row_t *r;

    if (reserve((void **)&l->rows, &l->caprows, l->nrows, sizeof(*l->rows)) < 0)
        return NULL;
    r = &l->rows[l->nrows++];
    memset(r, 0, sizeof(*r));
    r->hour_ms = hour;
    r->node = node;
    return r;
}

/* The row of node st for the hour starting at hour: its open row, or an
 * older one (a late interval), or a new one. */
static crater_cost_row_t *row_get(crater_ledger_t *l,
                                  nstate_t *st,
                                  int64_t hour)
{
    crater_cost_row_t *r;

    if (st->has_row && l->rows[st->row].hour_ms == hour)
        return &l->rows[st->row];
    for (size_t i = l->nrows; i-- > 0;)
        if (l->rows[i].node == st->node && l->rows[i].hour_ms == hour)
            return &l->rows[i];
    if (!(r = row_new(l, st->node, hour)))
        return NULL;
    if (!st->has_row || l->rows[st->row].hour_ms < hour) {
        st->row = (size_t)(r - l->rows);
        st->has_row = true;
    }
    return r;
}

static crater_cost_charge_t *row_job(crater_cost_row_t *r, uint64_t job)
{
    crater_cost_charge_t *c;

    for (size_t i = 0; i < r->njobs; i++)
        if (r->jobs[i].job == job)
            return &r->jobs[i];
    if (reserve((void **)&r->jobs, &r->capjobs, r->njobs, sizeof(*r->jobs)) < 0)
        return NULL;
    c = &r->jobs[r->njobs++];
    memset(c, 0, sizeof(*c));
    c->job = job;
    return c;
}

const crater_cost_row_t *crater_ledger_rows(const crater_ledger_t *l, size_t *n)
{
    *n = l->nrows;
    return l->rows;
}

void crater_ledger_clean(crater_ledger_t *l)
{
    for (size_t i = 0; i < l->nrows; i++)
        l->rows[i].dirty = false;
}

size_t crater_ledger_expire(crater_ledger_t *l, int64_t before_ms)
{
    size_t keep = 0, gone;

    for (size_t i = 0; i < l->nrows; i++) {
        if (l->rows[i].hour_ms + CRATER_COST_HOUR_MS <= before_ms)
            free(l->rows[i].jobs);
        else
            l->rows[keep++] = l->rows[i];
    }
    gone = l->nrows - keep;
    l->nrows = keep;
    for (size_t i = 0; gone && i < l->nnodes; i++)
        l->nodes[i].has_row = false; /* indexes moved: found again */
    return gone;
}

/* ---- accrual ------------------------------------------------------------ */

/* floor(price * cap * dt / (hour * scale)) */
static int64_t cum_cost(const crater_cost_line_t *ln, int64_t dt)
{
    u128 num = (u128)(uint64_t)ln->price * ln->cap * (uint64_t)dt;
    u128 den = (u128)CRATER_COST_HOUR_MS * crater_cost_res_scale(ln->res);

    return dt <= 0 ? 0 : (int64_t)(num / den);
}

static int64_t share(int64_t cost, uint64_t q, u128 total)
{
    return total ? (int64_t)((u128)(uint64_t)cost * q / total) : 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Charges of line i's cost among the uses; the jobs' charge entries are
 * ch[] (one per use). */
static void split_line(crater_cost_row_t *r,
                       const crater_cost_line_t *ln,
                       size_t i,
                       int64_t cost,
                       const crater_cost_use_t *uses,
                       crater_cost_charge_t **ch,
                       size_t nuses)
{
    u128 sa = 0, su = 0;
    int64_t left_a = cost, left_u = cost;

    for (size_t k = 0; k < nuses; k++) {
        sa += max_u64(uses[k].alloc[i], uses[k].used[i]);
        su += uses[k].used[i];
    }
    sa = sa > ln->cap ? sa : ln->cap;
    su = su > ln->cap ? su : ln->cap;
    for (size_t k = 0; k < nuses; k++) {
        int64_t a = share(cost, max_u64(uses[k].alloc[i], uses[k].used[i]), sa);
        int64_t u = share(cost, uses[k].used[i], su);
        ch[k]->alloc[ln->res] += a;
        ch[k]->usage[ln->res] += u;
        left_a -= a;
        left_u -= u;
    }
    r->node_cost[ln->res] += cost;
    r->idle.alloc[ln->res] += left_a;
    r->idle.usage[ln->res] += left_u;
}

static void add_totals(crater_ledger_t *l,
                       const crater_cost_charge_t *before,
                       crater_cost_charge_t **ch,
                       size_t nuses)
{
    for (size_t k = 0; k < nuses; k++) {
        crater_cost_total_t *t;
        bool seen = false;
        for (size_t e = 0; e < k; e++) /* two tasks of one job on a node */
            seen |= ch[e] == ch[k];
        if (seen)
            continue;
        t = (crater_cost_total_t *)crater_ledger_total(l, ch[k]->job);
        t->alloc +=
            crater_cost_sum(ch[k]->alloc) - crater_cost_sum(before[k].alloc);
        t->usage +=
            crater_cost_sum(ch[k]->usage) - crater_cost_sum(before[k].usage);
        t->billing += ch[k]->billing - before[k].billing;
    }
}

/* The job entries (and totals) of the uses exist before any money moves,
 * so that an ENOMEM leaves the piece unapplied. */
static int prepare(crater_ledger_t *l,
                   crater_cost_row_t *r,
                   const crater_cost_use_t *uses,
                   size_t nuses,
                   crater_cost_charge_t **ch,
                   crater_cost_charge_t *before)
{
    for (size_t k = 0; k < nuses; k++)
        if (!total_get(l, uses[k].job) || !row_job(r, uses[k].job))
            return -1;
    for (size_t k = 0; k < nuses; k++) { /* row_job may move the array */
        ch[k] = row_job(r, uses[k].job);
        before[k] = *ch[k];
    }
    return 0;
}

/* One piece [a, b) inside one hour. */
static int piece(crater_ledger_t *l,
                 nstate_t *st,
                 const crater_cost_use_t *uses,
                 size_t nuses,
                 int64_t a,
                 int64_t b)
{
    int64_t hour = a - a % CRATER_COST_HOUR_MS;
    crater_cost_charge_t **ch = calloc(nuses + 1, sizeof(*ch));
    crater_cost_charge_t *before = calloc(nuses + 1, sizeof(*before));
    crater_cost_row_t *r = row_get(l, st, hour);
    int rc = -1;

    if (!ch || !before || !r || prepare(l, r, uses, nuses, ch, before) < 0)
        goto out;
    for (size_t i = 0; i < st->nlines; i++) {
        const crater_cost_line_t *ln = &st->lines[i];
        int64_t s = st->seg[i] > hour ? st->seg[i] : hour;
        int64_t cost = cum_cost(ln, b - s) - cum_cost(ln, a - s);
        split_line(r, ln, i, cost, uses, ch, nuses);
    }
    for (size_t k = 0; k < nuses; k++)
        ch[k]->billing += (int64_t)((u128)(uint64_t)uses[k].billing_hour
                                    * (uint64_t)(b - a) / CRATER_COST_HOUR_MS);
    add_totals(l, before, ch, nuses);
    r->dirty = true;
    rc = 0;
out:
    free(ch);
    free(before);
    if (rc < 0)
        errno = ENOMEM;
    return rc;
}

static bool line_eq(const crater_cost_line_t *a, const crater_cost_line_t *b)
{
    return a->res == b->res && a->price == b->price && a->cap == b->cap;
}

static void set_lines(nstate_t *st,
                      const crater_cost_line_t *lines,
                      size_t nlines,
                      int64_t t0)
{
    for (size_t i = 0; i < nlines; i++) {
        if (i >= st->nlines || !line_eq(&st->lines[i], &lines[i]))
            st->seg[i] = t0;
        st->lines[i] = lines[i];
    }
    st->nlines = nlines;
}

static bool args_ok(const crater_cost_line_t *lines,
                    size_t nlines,
                    const crater_cost_use_t *uses,
                    size_t nuses,
                    int64_t t0)
{
    if (nlines > CRATER_COST_MAX_LINES || t0 < 0)
        return false;
    for (size_t i = 0; i < nlines; i++)
        if (lines[i].price < 0 || (unsigned)lines[i].res >= CRATER_COST_NRES)
            return false;
    for (size_t k = 0; k < nuses; k++)
        if (uses[k].job == 0 || uses[k].billing_hour < 0)
            return false;
    return true;
}

int crater_ledger_accrue(crater_ledger_t *l,
                         uint32_t node,
                         const crater_cost_line_t *lines,
                         size_t nlines,
                         const crater_cost_use_t *uses,
                         size_t nuses,
                         int64_t t0,
                         int64_t t1)
{
    nstate_t *st;

    if (!args_ok(lines, nlines, uses, nuses, t0)) {
        errno = EINVAL;
        return -1;
    }
    if (!(st = node_state(l, node))) {
        errno = ENOMEM;
        return -1;
    }
    set_lines(st, lines, nlines, t0);
    for (int64_t a = t0, b; a < t1; a = b) {
        b = a - a % CRATER_COST_HOUR_MS + CRATER_COST_HOUR_MS;
        b = b < t1 ? b : t1;
        if (piece(l, st, uses, nuses, a, b) < 0)
            return -1;
    }
    return 0;
}

int64_t crater_cost_sum(const int64_t v[CRATER_COST_NRES])
{
    int64_t s = 0;

    for (int i = 0; i < CRATER_COST_NRES; i++)
        s += v[i];
    return s;
}

/* ---- JSON --------------------------------------------------------------- */

static json_t *res_json(const int64_t v[CRATER_COST_NRES])
{
    json_t *o = json_object();

    for (int i = 0; o && i < CRATER_COST_NRES; i++)
        if (json_object_set_new(o, res_names[i], json_integer(v[i])) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *charge_json(const crater_cost_charge_t *c)
{
    return json_pack("{s:I, s:o, s:o, s:I}",
                     "job",
                     (json_int_t)c->job,
                     "alloc",
                     res_json(c->alloc),
                     "usage",
                     res_json(c->usage),
                     "billing",
                     (json_int_t)c->billing);
}

json_t *crater_cost_row_json(const crater_cost_row_t *row)
{
    json_t *jobs = json_array();

    for (size_t i = 0; jobs && i < row->njobs; i++)
        if (json_array_append_new(jobs, charge_json(&row->jobs[i])) < 0) {
            json_decref(jobs);
            return NULL;
        }
    return json_pack("{s:I, s:I, s:o, s:o, s:o}",
                     "hour_ms",
                     (json_int_t)row->hour_ms,
                     "node",
                     (json_int_t)row->node,
                     "node_cost",
                     res_json(row->node_cost),
                     "idle",
                     charge_json(&row->idle),
                     "jobs",
                     jobs);
}

static int load_res(json_t *o, int64_t v[CRATER_COST_NRES])
{
    for (int i = 0; i < CRATER_COST_NRES; i++) {
        json_t *x = json_object_get(o, res_names[i]);
        if (!json_is_integer(x))
            return -1;
        v[i] = json_integer_value(x);
    }
    return 0;
}

static int load_charge(json_t *o, crater_cost_charge_t *c)
{
    json_int_t job, billing;

    if (json_unpack(o, "{s:I, s:I}", "job", &job, "billing", &billing) < 0
        || load_res(json_object_get(o, "alloc"), c->alloc) < 0
        || load_res(json_object_get(o, "usage"), c->usage) < 0)
        return -1;
    c->job = (uint64_t)job;
    c->billing = billing;
    return 0;
}

static int add_loaded(crater_ledger_t *l, crater_cost_row_t *r, json_t *jobs)
{
    crater_cost_charge_t c;
    size_t i;
    json_t *v;

    json_array_foreach(jobs, i, v)
    {
        crater_cost_charge_t *dst;
        crater_cost_total_t *t;
        memset(&c, 0, sizeof(c));
        if (load_charge(v, &c) < 0 || c.job == 0)
            return -2;
        if (!(dst = row_job(r, c.job)) || !(t = total_get(l, c.job)))
            return -1;
        *dst = c;
        t->alloc += crater_cost_sum(c.alloc);
        t->usage += crater_cost_sum(c.usage);
        t->billing += c.billing;
    }
    return 0;
}

int crater_ledger_load_row(crater_ledger_t *l, json_t *v, crater_error_t *err)
{
    json_int_t hour, node;
    crater_cost_row_t *r;
    nstate_t *st;
    int rc;

    if (json_unpack(v, "{s:I, s:I}", "hour_ms", &hour, "node", &node) < 0
        || hour < 0 || hour % CRATER_COST_HOUR_MS || node < 0
        || node > UINT32_MAX)
        return crater_errorf(err, CRATER_EINVAL, "cost row: bad hour_ms/node");
    if (!(st = node_state(l, (uint32_t)node)) || !(r = row_get(l, st, hour)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (load_res(json_object_get(v, "node_cost"), r->node_cost) < 0
        || load_charge(json_object_get(v, "idle"), &r->idle) < 0)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "cost row: bad node_cost or idle");
    if ((rc = add_loaded(l, r, json_object_get(v, "jobs"))) < 0)
        return crater_errorf(err,
                             rc == -1 ? CRATER_ENOMEM : CRATER_EINVAL,
                             "cost row: bad jobs entry");
    return 0;
}

/* ---- money text --------------------------------------------------------- */

char *crater_cost_format(int64_t micro, char *buf, size_t size)
{
    uint64_t m = micro < 0 ? 0 - (uint64_t)micro : (uint64_t)micro;
    uint64_t unit = CRATER_COST_MICRO;

    snprintf(buf,
             size,
             "%s%" PRIu64 ".%06" PRIu64,
             micro < 0 ? "-" : "",
             m / unit,
             m % unit);
    return buf;
}

int crater_cost_parse(const char *s, int64_t *micro)
{
    int64_t whole = 0, frac = 0;
    int digits = 0, decimals = 0;

    for (; isdigit((unsigned char)*s); s++, digits++)
        if ((whole = whole * 10 + (*s - '0')) > 1000000000)
            return -1;
    if (*s == '.') {
        for (s++; isdigit((unsigned char)*s); s++, decimals++) {
            if (decimals >= 6)
                return -1;
            frac = frac * 10 + (*s - '0');
        }
    }
    if (*s || (!digits && !decimals))
        return -1;
    while (decimals++ < 6)
        frac *= 10;
    *micro = whole * CRATER_COST_MICRO + frac;
    return 0;
}

int64_t crater_cost_from_double(double x)
{
    double m = x * CRATER_COST_MICRO;

    return (int64_t)(m < 0 ? m - 0.5 : m + 0.5);
}

/* ---- Slurm billing weights ---------------------------------------------- */

/* "2.0", "0.25G" into weight ppm and the suffix letter (0 none). */
static int parse_weight(const char *s, size_t n, int64_t *ppm, char *suffix)
{
    char num[32];

    *suffix = 0;
    if (n && strchr("KMGTP", toupper((unsigned char)s[n - 1]))) {
        *suffix = (char)toupper((unsigned char)s[n - 1]);
        n--;
    }
    if (n == 0 || n >= sizeof(num))
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    return crater_cost_parse(num, ppm);
}

static int billing_term(const char *t,
                        size_t n,
                        crater_billing_t *b,
                        crater_error_t *err)
{
    const char *eq = memchr(t, '=', n);
    size_t k = eq ? (size_t)(eq - t) : n;
    char suffix;
    int64_t w;

    if (!eq || parse_weight(eq + 1, n - k - 1, &w, &suffix) < 0)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "'%.*s' is not NAME=WEIGHT (e.g. CPU=1.0)",
                             (int)n,
                             t);
    if (k == 3 && strncasecmp(t, "mem", 3) == 0) {
        static const char order[] = "KMGTP";
        int e = suffix ? (int)(strchr(order, suffix) - order) - 1 : 0;
        b->mem_ppm = w;
        b->mem_mul = e < 0 ? 1024 : 1;
        b->mem_shift = e > 0 ? (unsigned)e : 0;
        return 0;
    }
    if (suffix)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "'%.*s': a unit suffix applies to Mem only",
                             (int)n,
                             t);
    if (k == 3 && strncasecmp(t, "cpu", 3) == 0)
        b->cpu_ppm = w;
    else if (k == 8 && strncasecmp(t, "gres/gpu", 8) == 0)
        b->gpu_ppm = w;
    else
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "unknown TRES '%.*s' (one of CPU, Mem, GRES/gpu)",
                             (int)k,
                             t);
    return 0;
}

int crater_billing_parse(const char *s,
                         bool max_tres,
                         crater_billing_t *out,
                         crater_error_t *err)
{
    crater_billing_t b = {.max_tres = max_tres, .mem_mul = 1};

    if (*s && strcmp(s, "none") != 0) {
        for (const char *t = s; *t;) {
            size_t n = strcspn(t, ",");
            if (billing_term(t, n, &b, err) < 0)
                return -1;
            t += n + (t[n] == ',');
        }
        b.set = true;
    }
    *out = b;
    return 0;
}

uint64_t crater_billing_units_ppm(const crater_billing_t *b,
                                  uint64_t cpu_milli,
                                  uint64_t mem_bytes,
                                  uint64_t gpu_ppm)
{
    u128 mb = mem_bytes >> 20;
    u128 cpu = (u128)(uint64_t)b->cpu_ppm * cpu_milli / 1000;
    u128 mem =
        (u128)(uint64_t)b->mem_ppm * mb * b->mem_mul >> (10 * b->mem_shift);
    u128 gpu = (u128)(uint64_t)b->gpu_ppm * gpu_ppm / 1000000;
    u128 m;

    if (!b->set)
        return 0;
    m = cpu > mem ? cpu : mem;
    if (b->max_tres_gres)
        return (uint64_t)(gpu + m);
    if (!b->max_tres)
        return (uint64_t)(cpu + mem + gpu);
    return (uint64_t)(m > gpu ? m : gpu);
}
