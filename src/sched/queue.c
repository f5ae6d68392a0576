/* queue.c - the pending-job queue (see queue.h and doc/queue.md).
 *
 * Storage. Entries live in a dense array; an open-addressing hash table
 * (linear probing, load <= 1/2, backward-shift deletion) maps an id to its
 * slot so push, remove and get are O(1). Removal moves the last entry into
 * the hole, so storage order means nothing; the order is defined purely
 * by the keys, which makes it independent of push order.
 *
 * Tenants are interned once in a second table (name -> index) holding the
 * fair-share weight; entries keep the index, and their tenant pointer
 * aliases the interned name. Tenants are never forgotten: a weight set by
 * the operator must survive the tenant's queue running empty, and the
 * number of tenants is small next to the number of jobs.
 *
 * Ordering, expected to run once per scheduling cycle over up to ~100k
 * pending jobs: build one key per entry, qsort by (priority desc,
 * has-deadline desc, deadline asc, tenant, submit asc, id asc). That puts
 * every tie group of (priority, deadline) in one run, sub-sorted into one
 * age-ordered run per tenant. Each group is then merged with a min-heap of
 * tenant runs keyed by (weighted dominant share, head submit, head id):
 * pop the neediest tenant, emit its oldest job, charge the job's demand to
 * the tenant and push the run back. Charges carry over to later groups,
 * as they would if the jobs really started in this order. O(n log n).
 */
#include "crater/queue.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY UINT32_MAX
#define MAX_ENTRIES (UINT32_MAX - 1u)
#define NDIM CRATER_QDIM_COUNT

/* ---- storage ----------------------------------------------------------- */

typedef struct item {
    crater_queue_entry_t e; /* e.tenant aliases tenants[tenant].name */
    uint32_t tenant;
} item_t;

typedef struct tenant {
    char *name;
    double weight;
} tenant_t;

struct crater_queue {
    item_t *items;
    size_t n, cap;
    uint32_t *idslot; /* item index or EMPTY; idmask + 1 slots */
    size_t idmask;
    tenant_t *tenants;
    size_t nt, tcap;
    uint32_t *tslot; /* tenant index or EMPTY; tmask + 1 slots */
    size_t tmask;
    uint64_t age_interval_ms;
    int32_t age_step, age_cap;
    size_t nhard; /* entries with a hard deadline (expiry scans only then) */
};

static size_t hash_id(uint64_t x)
{
    /* splitmix64 finaliser: ids are often sequential */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (size_t)x;
}

static size_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (size_t)h;
}

crater_queue_t *crater_queue_create(void)
{
    return calloc(1, sizeof(crater_queue_t));
}

void crater_queue_destroy(crater_queue_t *q)
{
    if (!q)
        return;
    for (size_t i = 0; i < q->nt; i++)
        free(q->tenants[i].name);
    free(q->tenants);
    free(q->tslot);
    free(q->items);
    free(q->idslot);
    free(q);
}

size_t crater_queue_count(const crater_queue_t *q)
{
    return q->n;
}

/* Slot holding id, or the empty slot where it would go. */
static size_t id_slot(const crater_queue_t *q, uint64_t id)
{
    size_t i = hash_id(id) & q->idmask;

    while (q->idslot[i] != EMPTY && q->items[q->idslot[i]].e.id != id)
        i = (i + 1) & q->idmask;
    return i;
}

static uint32_t find_item(const crater_queue_t *q, uint64_t id)
{
    if (!q->idslot)
        return EMPTY;
    return q->idslot[id_slot(q, id)];
}

/* Make room for q->n + 1 items in both the array and the id table. */
static int reserve_item(crater_queue_t *q)
{
    if (q->n + 1 > q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        item_t *p = realloc(q->items, cap * sizeof(*p));
        if (!p)
            return -1;
        q->items = p;
        q->cap = cap;
    }
    if (q->idslot && (q->n + 1) * 2 <= q->idmask + 1)
        return 0;
    size_t nslots = q->idslot ? (q->idmask + 1) * 2 : 128;
    uint32_t *slots = malloc(nslots * sizeof(*slots));
    if (!slots)
        return -1;
    memset(slots, 0xff, nslots * sizeof(*slots));
    free(q->idslot);
    q->idslot = slots;
    q->idmask = nslots - 1;
    for (uint32_t i = 0; i < q->n; i++)
        q->idslot[id_slot(q, q->items[i].e.id)] = i;
    return 0;
}

/* Delete slot i, shifting later members of its probe run back so that
 * every remaining id stays reachable from its home slot. */
static void id_delete_slot(crater_queue_t *q, size_t i)
{
    size_t j = i;

    for (;;) {
        j = (j + 1) & q->idmask;
        if (q->idslot[j] == EMPTY)
            break;
        size_t k = hash_id(q->items[q->idslot[j]].e.id) & q->idmask;
        /* move j into the hole unless its home k lies cyclically in
         * (i, j], in which case it is already as close as it can be */
        bool stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            q->idslot[i] = q->idslot[j];
            i = j;
        }
    }
    q->idslot[i] = EMPTY;
}

/* ---- tenants ----------------------------------------------------------- */

static size_t tenant_slot(const crater_queue_t *q, const char *name)
{
    size_t i = hash_name(name) & q->tmask;

    while (q->tslot[i] != EMPTY
           && strcmp(q->tenants[q->tslot[i]].name, name) != 0)
        i = (i + 1) & q->tmask;
    return i;
}

static uint32_t find_tenant(const crater_queue_t *q, const char *name)
{
    if (!q->tslot)
        return EMPTY;
    return q->tslot[tenant_slot(q, name)];
}

static int reserve_tenant(crater_queue_t *q)
{
    if (q->nt + 1 > q->tcap) {
        size_t cap = q->tcap ? q->tcap * 2 : 16;
        tenant_t *p = realloc(q->tenants, cap * sizeof(*p));
        if (!p)
            return -1;
        q->tenants = p;
        q->tcap = cap;
    }
    if (q->tslot && (q->nt + 1) * 2 <= q->tmask + 1)
        return 0;
    size_t nslots = q->tslot ? (q->tmask + 1) * 2 : 32;
    uint32_t *slots = malloc(nslots * sizeof(*slots));
    if (!slots)
        return -1;
    memset(slots, 0xff, nslots * sizeof(*slots));
    free(q->tslot);
    q->tslot = slots;
    q->tmask = nslots - 1;
    for (uint32_t i = 0; i < q->nt; i++)
        q->tslot[tenant_slot(q, q->tenants[i].name)] = i;
    return 0;
}

/* Index of tenant name, adding it (weight 1) when new. EMPTY on ENOMEM,
 * with nothing added. */
static uint32_t intern_tenant(crater_queue_t *q, const char *name)
{
    uint32_t t = find_tenant(q, name);

    if (t != EMPTY)
        return t;
    char *copy = strdup(name);
    if (!copy || reserve_tenant(q) < 0) {
        free(copy);
        return EMPTY;
    }
    t = (uint32_t)q->nt++;
    q->tenants[t] = (tenant_t){.name = copy, .weight = 1.0};
    q->tslot[tenant_slot(q, copy)] = t;
    return t;
}

int crater_queue_set_tenant_weight(crater_queue_t *q,
                                   const char *tenant,
                                   double weight,
                                   crater_error_t *err)
{
    if (!tenant || !*tenant)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "tenant",
                                   "tenant name must not be empty");
    if (!isfinite(weight) || weight <= 0)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "weight",
                                   "tenant '%.60s': weight %g must be > 0",
                                   tenant,
                                   weight);
    uint32_t t = intern_tenant(q, tenant);
    if (t == EMPTY)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    q->tenants[t].weight = weight;
    return 0;
}

double crater_queue_tenant_weight(const crater_queue_t *q, const char *tenant)
{
    uint32_t t = tenant ? find_tenant(q, tenant) : EMPTY;

    return t == EMPTY ? 1.0 : q->tenants[t].weight;
}

int crater_queue_set_age_boost(crater_queue_t *q,
                               uint64_t interval_ms,
                               int32_t step,
                               int32_t cap,
                               crater_error_t *err)
{
    if (step < 0 || cap < 0)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   step < 0 ? "ageBoost.step" : "ageBoost.cap",
                                   "age boost step and cap must be >= 0");
    q->age_interval_ms = interval_ms;
    q->age_step = step;
    q->age_cap = cap;
    return 0;
}

/* ---- push / remove ----------------------------------------------------- */

static int check_entry(const crater_queue_entry_t *e, crater_error_t *err)
{
    if (!e->tenant || !*e->tenant)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "tenant",
                                   "tenant name must not be empty");
    if (e->deadline_ms < 0)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "deadline_ms",
                                   "deadline %lld must be >= 0 (0 = none)",
                                   (long long)e->deadline_ms);
    if (e->hard_deadline && e->deadline_ms == 0)
        return crater_errorf_field(err,
                                   CRATER_ECONFLICT,
                                   "hard_deadline",
                                   "a hard deadline needs deadline_ms");
    for (int d = 0; d < NDIM; d++) {
        if (!isfinite(e->demand[d]) || e->demand[d] < 0) {
            char field[16];
            snprintf(field, sizeof(field), "demand[%d]", d);
            return crater_errorf_field(err,
                                       CRATER_ERANGE,
                                       field,
                                       "demand %g must be finite and >= 0",
                                       e->demand[d]);
        }
    }
    return 0;
}

int crater_queue_push(crater_queue_t *q,
                      const crater_queue_entry_t *e,
                      crater_error_t *err)
{
    if (check_entry(e, err) < 0)
        return -1;
    if (find_item(q, e->id) != EMPTY)
        return crater_errorf_field(err,
                                   CRATER_EEXIST,
                                   "id",
                                   "job %llu is already queued",
                                   (unsigned long long)e->id);
    if (q->n >= MAX_ENTRIES)
        return crater_errorf(err, CRATER_ELIMIT, "queue is full");
    /* Growing storage is not a visible change, so do it first; interning
     * the tenant is the last step that can fail. */
    uint32_t t = EMPTY;
    if (reserve_item(q) == 0)
        t = intern_tenant(q, e->tenant);
    if (t == EMPTY)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    uint32_t i = (uint32_t)q->n++;
    q->items[i] = (item_t){.e = *e, .tenant = t};
    q->items[i].e.tenant = q->tenants[t].name;
    q->idslot[id_slot(q, e->id)] = i;
    q->nhard += e->hard_deadline;
    return 0;
}

int crater_queue_remove(crater_queue_t *q, uint64_t id, crater_error_t *err)
{
    uint32_t i = find_item(q, id);

    if (i == EMPTY)
        return crater_errorf_field(err,
                                   CRATER_ENOENT,
                                   "id",
                                   "job %llu is not queued",
                                   (unsigned long long)id);
    q->nhard -= q->items[i].e.hard_deadline;
    id_delete_slot(q, id_slot(q, id));
    uint32_t last = (uint32_t)(q->n - 1);
    if (i != last) {
        q->items[i] = q->items[last];
        q->idslot[id_slot(q, q->items[i].e.id)] = i;
    }
    q->n--;
    return 0;
}

const crater_queue_entry_t *crater_queue_get(const crater_queue_t *q,
                                             uint64_t id)
{
    uint32_t i = find_item(q, id);

    return i == EMPTY ? NULL : &q->items[i].e;
}

/* ---- expired hard deadlines -------------------------------------------- */

static bool expired(const crater_queue_entry_t *e, uint64_t now_ms)
{
    if (!e->hard_deadline)
        return false;
    uint64_t dl = (uint64_t)e->deadline_ms; /* > 0, checked at push */
    if (now_ms > dl)
        return true;
    return e->est_runtime_ms > dl - now_ms;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

size_t crater_queue_expired(const crater_queue_t *q,
                            uint64_t now_ms,
                            uint64_t *ids_out)
{
    size_t k = 0;

    if (q->nhard == 0) /* a pass asks every time: no scan without any */
        return 0;
    for (size_t i = 0; i < q->n; i++) {
        if (!expired(&q->items[i].e, now_ms))
            continue;
        if (ids_out)
            ids_out[k] = q->items[i].e.id;
        k++;
    }
    if (ids_out)
        qsort(ids_out, k, sizeof(*ids_out), cmp_u64);
    return k;
}

/* ---- ordering ---------------------------------------------------------- */

double crater_weighted_dominant_share(const double alloc[CRATER_QDIM_COUNT],
                                      const double capacity[CRATER_QDIM_COUNT],
                                      double weight)
{
    double dom = 0;

    for (int d = 0; d < NDIM; d++) {
        if (capacity[d] > 0 && alloc[d] / capacity[d] > dom)
            dom = alloc[d] / capacity[d];
    }
    return dom / weight;
}

typedef struct okey {
    int64_t prio;     /* effective priority incl. age boost */
    int64_t deadline; /* meaningful only when has_dl */
    uint64_t submit;
    uint64_t id;
    uint32_t tenant;
    uint32_t item;
    bool has_dl;
} okey_t;

/* Keys that define a tie group: fair share decides inside one. */
static int cmp_group(const okey_t *a, const okey_t *b)
{
    if (a->prio != b->prio)
        return a->prio > b->prio ? -1 : 1;
    if (a->has_dl != b->has_dl)
        return a->has_dl ? -1 : 1;
    if (a->has_dl && a->deadline != b->deadline)
        return a->deadline < b->deadline ? -1 : 1;
    return 0;
}

static int cmp_key(const void *pa, const void *pb)
{
    const okey_t *a = pa, *b = pb;
    int c = cmp_group(a, b);

    if (c)
        return c;
    if (a->tenant != b->tenant)
        return a->tenant < b->tenant ? -1 : 1;
    if (a->submit != b->submit)
        return a->submit < b->submit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

bool crater_queue_order_is_static(const crater_queue_t *q)
{
    return q->age_interval_ms == 0 || q->age_step == 0;
}

/* cmp_key's order where it does not depend on the time or on fair share:
 * without share input every tenant's share stays 0, so merge_group
 * interleaves the tenants' runs by submit time, then id. */
int crater_queue_entry_cmp(const crater_queue_entry_t *a,
                           const crater_queue_entry_t *b)
{
    bool da = a->deadline_ms != 0, db = b->deadline_ms != 0;

    if (a->priority != b->priority)
        return a->priority > b->priority ? -1 : 1;
    if (da != db)
        return da ? -1 : 1;
    if (da && a->deadline_ms != b->deadline_ms)
        return a->deadline_ms < b->deadline_ms ? -1 : 1;
    if (a->submit_ms != b->submit_ms)
        return a->submit_ms < b->submit_ms ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int64_t age_boost(const crater_queue_t *q, uint64_t now, uint64_t sub)
{
    if (q->age_interval_ms == 0 || q->age_step == 0 || now <= sub)
        return 0;
    uint64_t steps = (now - sub) / q->age_interval_ms;
    if (steps >= (uint64_t)q->age_cap) /* step >= 1, so step*steps >= cap */
        return q->age_cap;
    int64_t b = (int64_t)steps * q->age_step; /* both < 2^31 */
    return b < q->age_cap ? b : q->age_cap;
}

static void fill_key(const crater_queue_t *q,
                     uint32_t i,
                     uint64_t now,
                     okey_t *k)
{
    const crater_queue_entry_t *e = &q->items[i].e;

    *k = (okey_t){
        .prio = (int64_t)e->priority + age_boost(q, now, e->submit_ms),
        .deadline = e->deadline_ms,
        .submit = e->submit_ms,
        .id = e->id,
        .tenant = q->items[i].tenant,
        .item = i,
        .has_dl = e->deadline_ms != 0,
    };
}

/* Per-pass fair-share state, one row per interned tenant. */
typedef struct pass {
    const crater_queue_t *q;
    double cap[NDIM];
    double (*alloc)[NDIM];
    double *share;
    okey_t *keys;
    struct run {
        size_t pos, end;
    } * heap;
    size_t nheap;
    uint64_t *out;
    size_t nout;
} pass_t;

typedef struct named {
    const char *name;
    size_t i;
} named_t;

static int cmp_named(const void *pa, const void *pb)
{
    const named_t *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);

    return c ? c : (a->i > b->i) - (a->i < b->i);
}

/* Reject a usage list that names a tenant twice or not at all. */
static int check_usage_names(const crater_share_input_t *in,
                             crater_error_t *err)
{
    for (size_t i = 0; i < in->nusage; i++) {
        if (!in->usage[i].tenant)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "usage.tenant",
                                       "usage[%zu]: no tenant",
                                       i);
    }
    named_t *v = malloc((in->nusage + 1) * sizeof(*v));
    if (!v)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < in->nusage; i++)
        v[i] = (named_t){in->usage[i].tenant, i};
    qsort(v, in->nusage, sizeof(*v), cmp_named);
    for (size_t i = 1; i < in->nusage; i++) {
        if (strcmp(v[i - 1].name, v[i].name) == 0) {
            crater_errorf_field(err,
                                CRATER_EINVAL,
                                "usage.tenant",
                                "usage[%zu]: tenant '%.60s' is listed twice",
                                v[i].i,
                                v[i].name);
            free(v);
            return -1;
        }
    }
    free(v);
    return 0;
}

static int bad_number(const char *what, size_t i, int d, crater_error_t *err)
{
    return crater_errorf_field(err,
                               CRATER_ERANGE,
                               what,
                               "%s[%zu][%d] must be finite and >= 0",
                               what,
                               i,
                               d);
}

static int check_share_input(const crater_share_input_t *in,
                             crater_error_t *err)
{
    for (int d = 0; d < NDIM; d++) {
        if (!isfinite(in->capacity[d]) || in->capacity[d] < 0)
            return crater_errorf_field(err,
                                       CRATER_ERANGE,
                                       "capacity",
                                       "capacity[%d] must be finite and >= 0",
                                       d);
    }
    for (size_t i = 0; i < in->nusage; i++) {
        for (int d = 0; d < NDIM; d++) {
            double a = in->usage[i].alloc[d];
            if (!isfinite(a) || a < 0)
                return bad_number("usage.alloc", i, d, err);
        }
    }
    return check_usage_names(in, err);
}

/* Load capacity and current allocations; tenants with no pending job are
 * irrelevant to the order and skipped. */
static void load_share(pass_t *p, const crater_share_input_t *in)
{
    const crater_queue_t *q = p->q;

    memset(p->alloc, 0, q->nt * sizeof(*p->alloc));
    memset(p->cap, 0, sizeof(p->cap));
    if (in) {
        memcpy(p->cap, in->capacity, sizeof(p->cap));
        for (size_t i = 0; i < in->nusage; i++) {
            uint32_t t = find_tenant(q, in->usage[i].tenant);
            if (t != EMPTY)
                memcpy(p->alloc[t], in->usage[i].alloc, sizeof(p->alloc[t]));
        }
    }
    for (size_t t = 0; t < q->nt; t++)
        p->share[t] = crater_weighted_dominant_share(p->alloc[t],
                                                     p->cap,
                                                     q->tenants[t].weight);
}

/* Heap order: lower share, then older head job, then lower head id. */
static bool run_less(const pass_t *p, const struct run *a, const struct run *b)
{
    const okey_t *x = &p->keys[a->pos], *y = &p->keys[b->pos];

    if (p->share[x->tenant] != p->share[y->tenant])
        return p->share[x->tenant] < p->share[y->tenant];
    if (x->submit != y->submit)
        return x->submit < y->submit;
    return x->id < y->id;
}

static void sift_down(pass_t *p, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < p->nheap && run_less(p, &p->heap[l], &p->heap[m]))
            m = l;
        if (l + 1 < p->nheap && run_less(p, &p->heap[l + 1], &p->heap[m]))
            m = l + 1;
        if (m == i)
            return;
        struct run tmp = p->heap[i];
        p->heap[i] = p->heap[m];
        p->heap[m] = tmp;
        i = m;
    }
}

/* Emit the job at keys[pos] and charge its demand to its tenant. */
static void emit(pass_t *p, size_t pos)
{
    const okey_t *k = &p->keys[pos];
    const crater_queue_entry_t *e = &p->q->items[k->item].e;
    uint32_t t = k->tenant;

    p->out[p->nout++] = k->id;
    for (int d = 0; d < NDIM; d++)
        p->alloc[t][d] += e->demand[d];
    p->share[t] = crater_weighted_dominant_share(p->alloc[t],
                                                 p->cap,
                                                 p->q->tenants[t].weight);
}

/* Merge the tie group keys[lo, hi) by fair share. */
static void merge_group(pass_t *p, size_t lo, size_t hi)
{
    p->nheap = 0;
    for (size_t i = lo; i < hi;) {
        size_t j = i + 1;
        while (j < hi && p->keys[j].tenant == p->keys[i].tenant)
            j++;
        p->heap[p->nheap++] = (struct run){i, j};
        i = j;
    }
    for (size_t i = p->nheap / 2; i-- > 0;)
        sift_down(p, i);
    while (p->nheap > 0) {
        struct run *top = &p->heap[0];
        emit(p, top->pos++);
        if (top->pos == top->end)
            *top = p->heap[--p->nheap];
        sift_down(p, 0);
    }
}

static void run_pass(pass_t *p, uint64_t now)
{
    const crater_queue_t *q = p->q;

    for (uint32_t i = 0; i < q->n; i++)
        fill_key(q, i, now, &p->keys[i]);
    qsort(p->keys, q->n, sizeof(*p->keys), cmp_key);
    for (size_t lo = 0; lo < q->n;) {
        size_t hi = lo + 1;
        while (hi < q->n && cmp_group(&p->keys[lo], &p->keys[hi]) == 0)
            hi++;
        merge_group(p, lo, hi);
        lo = hi;
    }
}

int crater_queue_order(const crater_queue_t *q,
                       uint64_t now_ms,
                       const crater_share_input_t *share,
                       uint64_t *ids_out,
                       crater_error_t *err)
{
    if (share && check_share_input(share, err) < 0)
        return -1;
    if (q->n == 0)
        return 0;
    pass_t p = {.q = q, .out = ids_out};
    p.alloc = malloc(q->nt * sizeof(*p.alloc));
    p.share = malloc(q->nt * sizeof(*p.share));
    p.keys = malloc(q->n * sizeof(*p.keys));
    p.heap = malloc(q->nt * sizeof(*p.heap));
    int rc = 0;
    if (p.alloc && p.share && p.keys && p.heap) {
        load_share(&p, share);
        run_pass(&p, now_ms);
    } else {
        rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    free(p.alloc);
    free(p.share);
    free(p.keys);
    free(p.heap);
    return rc;
}

/* ---- backfill ---------------------------------------------------------- */

crater_backfill_verdict_t crater_backfill_check(
    const crater_backfill_window_t *w,
    uint64_t now_ms,
    uint64_t est_runtime_ms,
    const double demand[CRATER_QDIM_COUNT])
{
    /* written as a subtraction so now + runtime cannot overflow */
    if (est_runtime_ms > 0 && now_ms <= w->shadow_ms
        && est_runtime_ms <= w->shadow_ms - now_ms)
        return CRATER_BACKFILL_BEFORE_SHADOW;
    for (int d = 0; d < NDIM; d++) {
        if (!(demand[d] <= w->extra[d])) /* NaN never fits */
            return CRATER_BACKFILL_DENY;
    }
    return CRATER_BACKFILL_EXTRA;
}

void crater_backfill_commit(crater_backfill_window_t *w,
                            crater_backfill_verdict_t v,
                            const double demand[CRATER_QDIM_COUNT])
{
    if (v != CRATER_BACKFILL_EXTRA)
        return;
    for (int d = 0; d < NDIM; d++)
        w->extra[d] -= demand[d];
}

const char *crater_backfill_verdict_name(crater_backfill_verdict_t v)
{
    switch (v) {
    case CRATER_BACKFILL_DENY:
        return "deny";
    case CRATER_BACKFILL_BEFORE_SHADOW:
        return "before-shadow";
    case CRATER_BACKFILL_EXTRA:
        return "extra";
    }
    return "unknown";
}
