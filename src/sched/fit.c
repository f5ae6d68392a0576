/* fit.c - choosing GPUs, NUMA node and CPU/memory inside one node.
 *
 * GPU choice. A slice goes to the GPUs it fits most tightly (best fit:
 * least admissible room left after the charge), which keeps other GPUs
 * whole for whole-GPU jobs. Overcommit (overcommitRatio > 1) is for when
 * nothing else fits: a GPU where the charge stays within physical memory
 * always beats one it would overcommit, however tight the latter, so a
 * second slice goes to a free GPU rather than past a half-used GPU's
 * memory (issue 13). sched__eval() applies the same rule between nodes. Whole
 * GPUs are taken from one PCIe switch if any switch has enough free (the switch
 * with the fewest free that still suffices, so big switches stay big), else
 * from one NUMA node, else across. NVLink-required jobs need a clique of the
 * NVLink graph; when the topology-first (or, for slices, best-fit) choice is
 * not one, a bounded search over the free GPUs (the GPUs with room) finds the
 * first clique in index order.
 *
 * GPU sharing (scheduler.gpuShare, doc/scheduling.md "GPU sharing"): a
 * time-shared whole-GPU job is a slice carrying its profiled use; every
 * policy's GPU choice goes through sched__pick_gpus(), which first keeps
 * the GPUs the sharing rule allows (time-shared jobs only with
 * time-shared jobs, their use within maxUtil; plain slices never with
 * them), so no policy can bypass it. A time-shared job takes an empty
 * GPU before one with tenants: co-location is the last resort.
 *
 * Everything here is deterministic and depends only on the node's state
 * and the request, which the class index relies on.
 */
#include <string.h>

#include "sched/internal.h"

static unsigned popcount64(uint64_t x)
{
    return sched__popcount64(x);
}

uint64_t sched__gpu_mask_on_numa(const crater_sched_t *s,
                                 uint32_t node,
                                 int numa)
{
    const struct node_static *st = &s->st[node];
    uint64_t m = 0;

    for (uint32_t i = 0; i < st->ngpus; i++)
        if (s->gs[st->gpu_first + i].numa == numa
            || (numa == 0 && s->gs[st->gpu_first + i].numa < 0))
            m |= 1ull << i;
    return m;
}

int sched__share_ok(const crater_sched_t *s, uint32_t g, uint16_t share)
{
    const struct gpu_dyn *d = &s->gd[g];

    if (!share)
        return d->nshared == 0;
    return d->ntasks == d->nshared
           && (uint32_t)d->share + share <= s->share_max;
}

/* Charge a slice request puts on GPU g, or 0 when g cannot take it. */
uint32_t sched__slice_charge(const crater_sched_t *s,
                             uint32_t g,
                             uint32_t slice,
                             uint16_t share)
{
    uint32_t charge = slice + s->ctx_mib;
    const struct gpu_dyn *d = &s->gd[g];
    uint32_t mem = s->gs[g].mem_mib;

    if (sched__room_mib(s, g) < charge || !sched__share_ok(s, g, share))
        return 0;
    /* beyond physical memory only while measured use stays safe */
    if ((uint64_t)d->reserved_mib + charge > mem
        && (double)d->used_mib + slice > s->watermark * mem)
        return 0;
    return charge;
}

int sched__overcommits(const crater_sched_t *s, uint32_t g, uint32_t charge)
{
    return (uint64_t)s->gd[g].reserved_mib + charge > s->gs[g].mem_mib;
}

int sched__placement_joins(const crater_sched_t *s, const crater_placement_t *p)
{
    uint32_t first = s->st[p->node].gpu_first;

    for (uint32_t i = 0; p->share_milli && i < p->ngpus; i++)
        if (s->gd[first + p->gpu[i]].ntasks > 0)
            return 1;
    return 0;
}

int sched__placement_overcommits(const crater_sched_t *s,
                                 const crater_placement_t *p)
{
    uint32_t first = s->st[p->node].gpu_first;

    for (uint32_t i = 0; !p->whole && i < p->ngpus; i++)
        if (sched__overcommits(s, first + p->gpu[i], p->gpu_mib[i]))
            return 1;
    return 0;
}

static void set_topology(struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    uint64_t numas = 0, ups = 0;

    for (uint32_t i = 0; i < c->p.ngpus; i++) {
        const struct gpu_static *g = &c->s->gs[st->gpu_first + c->p.gpu[i]];
        numas |= 1ull << (g->numa < 0 ? 0 : g->numa);
        ups |= 1ull << g->upstream;
    }
    c->numa_used = popcount64(numas);
    c->upstream_used = popcount64(ups);
}

static int is_clique(const crater_sched_t *s, uint32_t first, uint64_t set)
{
    for (uint64_t m = set; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        uint64_t others = set & ~(1ull << i);
        if ((s->gs[first + (uint32_t)i].nvlink & others) != others)
            return 0;
    }
    return 1;
}

/* First NVLink clique of n GPUs within cand, in index order; 0 if none.
 * Bounded: at most 64 GPUs, and the recursion prunes non-adjacent GPUs. */
static uint64_t find_clique(const crater_sched_t *s,
                            uint32_t first,
                            uint64_t cand,
                            uint64_t chosen,
                            unsigned n)
{
    if (popcount64(chosen) == n)
        return chosen;
    for (uint64_t m = cand; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        uint64_t links = s->gs[first + (uint32_t)i].nvlink;
        uint64_t next = cand & links & ~((2ull << i) - 1);
        if ((links & chosen) != chosen)
            continue;
        if (popcount64(next) + popcount64(chosen) + 1 < n)
            continue;
        uint64_t r = find_clique(s, first, next, chosen | (1ull << i), n);
        if (r)
            return r;
    }
    return 0;
}

/* n lowest-index GPUs of m. */
static uint64_t lowest(uint64_t m, unsigned n)
{
    uint64_t r = 0;

    for (; m && n; m &= m - 1, n--)
        r |= m & -m;
    return r;
}

/* Best-fit group: among groups (by key) with >= n free GPUs, the one with
 * the fewest; ties to the lowest key. */
static uint64_t best_group(const crater_sched_t *s,
                           uint32_t first,
                           uint64_t free,
                           unsigned n,
                           int by_numa)
{
    uint64_t best = 0, grp[64], keys = 0;
    unsigned bestn = 65;

    /* one pass groups the free GPUs by key (keys above 63 never qualify) */
    for (uint64_t m = free; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        const struct gpu_static *g = &s->gs[first + (uint32_t)i];
        int k = by_numa ? (g->numa < 0 ? 0 : g->numa) : g->upstream;
        if (k >= 64)
            continue;
        if (!(keys & 1ull << k))
            grp[k] = 0;
        keys |= 1ull << k;
        grp[k] |= 1ull << i;
    }
    for (uint64_t km = keys; km; km &= km - 1) { /* ascending keys */
        int key = __builtin_ctzll(km);
        unsigned cnt = popcount64(grp[key]);
        if (cnt >= n && cnt < bestn) {
            best = grp[key];
            bestn = cnt;
        }
    }
    return best ? lowest(best, n) : 0;
}

static uint64_t pick_whole(struct sched_ctx *c, uint64_t free)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first;
    unsigned n = c->req->gpus;
    uint64_t set = best_group(s, first, free, n, 0);

    if (!set)
        set = best_group(s, first, free, n, 1);
    if (!set)
        set = lowest(free, n);
    if (c->req->nvlink == CRATER_NVLINK_REQUIRED && n > 1
        && !is_clique(s, first, set))
        set = find_clique(s, first, free, 0, n);
    return set;
}

static int fail(struct sched_ctx *c,
                const char *why,
                uint64_t need,
                uint64_t have,
                int unit)
{
    c->why = why;
    c->need = need;
    c->have = have;
    c->unit = unit;
    return -1;
}

static int whole_gpus(struct sched_ctx *c, uint64_t cand)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first;
    uint64_t free = 0, set;

    for (uint64_t m = cand; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (s->gd[first + (uint32_t)i].ntasks == 0)
            free |= 1ull << i;
    }
    if (popcount64(free) < c->req->gpus)
        return fail(c,
                    "not enough free GPUs",
                    c->req->gpus,
                    popcount64(free),
                    U_COUNT);
    if (!(set = pick_whole(c, free)))
        return fail(c,
                    "no NVLink-connected set of free GPUs",
                    c->req->gpus,
                    0,
                    U_COUNT);
    c->p.whole = true;
    for (uint64_t m = set; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        c->p.gpu[c->p.ngpus] = (uint8_t)i;
        c->p.gpu_mib[c->p.ngpus++] = s->gs[first + (uint32_t)i].mem_mib;
    }
    return 0;
}

/* NVLink required and the best-fit GPUs are not a clique: the first
 * clique, in index order, of the GPUs that can take the slice. */
static int slice_clique(struct sched_ctx *c, uint64_t cand)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first, slice = c->req->slice_mib;
    uint64_t ok = 0, set;

    for (uint64_t m = cand; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (sched__slice_charge(s,
                                first + (uint32_t)i,
                                slice,
                                c->req->share_milli))
            ok |= 1ull << i;
    }
    if (!(set = find_clique(s, first, ok, 0, c->req->gpus)))
        return fail(c,
                    "no NVLink-connected set of GPUs with room",
                    c->req->gpus,
                    0,
                    U_COUNT);
    c->p.ngpus = 0;
    for (uint64_t m = set; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        c->p.gpu[c->p.ngpus] = (uint8_t)i;
        c->p.gpu_mib[c->p.ngpus++] = sched__slice_charge(s,
                                                         first + (uint32_t)i,
                                                         slice,
                                                         c->req->share_milli);
    }
    return 0;
}

/* Why no GPU of cand takes a slice: every one is held whole or at
 * maxTasksPerGPU (a task limit, whatever memory is left), or memory. */
static int slice_fail(struct sched_ctx *c, uint64_t cand, uint32_t best_room)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first;

    for (uint64_t m = cand; m; m &= m - 1) {
        const struct gpu_dyn *d = &s->gd[first + (uint32_t)__builtin_ctzll(m)];
        if (!d->whole && d->ntasks < s->max_tasks)
            return fail(c,
                        "insufficient GPU memory",
                        c->req->slice_mib + s->ctx_mib,
                        best_room,
                        U_MIB);
    }
    return fail(c,
                "GPUs full: held whole or at maxTasksPerGPU",
                c->req->gpus,
                0,
                U_COUNT);
}

/* 1 when a time-shared request would join tenants on GPU g: such a GPU
 * ranks after every empty one (co-location is the last resort, as
 * overcommit is: a shared job alone on a GPU runs at its full speed). */
static int joins(const struct sched_ctx *c, uint32_t g)
{
    return c->req->share_milli && c->s->gd[g].ntasks > 0;
}

/* Slices: the n feasible GPUs with the least room left, best first,
 * those within physical memory before those the charge overcommits;
 * for a time-shared request, empty GPUs before shared ones. */
static int slice_gpus(struct sched_ctx *c, uint64_t cand)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first;
    uint64_t used = 0;

    for (uint32_t k = 0; k < c->req->gpus; k++) {
        int bi = -1;
        /* best_room: what the k-th GPU could offer, for explain */
        uint32_t bleft = UINT32_MAX, bcharge = 0, best_room = 0;
        int bover = 1; /* the best so far overcommits its GPU */
        int bjoin = 1; /* ... joins other tenants (time-shared only) */
        for (uint64_t m = cand & ~used; m; m &= m - 1) {
            int i = __builtin_ctzll(m);
            uint32_t g = first + (uint32_t)i;
            uint32_t charge = sched__slice_charge(s,
                                                  g,
                                                  c->req->slice_mib,
                                                  c->req->share_milli);
            uint32_t room = sched__room_mib(s, g);
            int over = charge && sched__overcommits(s, g, charge);
            int join = joins(c, g);
            best_room = room > best_room ? room : best_room;
            if (charge
                && (over < bover
                    || (over == bover
                        && (join < bjoin
                            || (join == bjoin && room - charge < bleft))))) {
                bi = i;
                bleft = room - charge;
                bcharge = charge;
                bover = over;
                bjoin = join;
            }
        }
        if (bi < 0)
            return slice_fail(c, cand & ~used, best_room);
        used |= 1ull << bi;
        c->p.gpu[c->p.ngpus] = (uint8_t)bi;
        c->p.gpu_mib[c->p.ngpus++] = bcharge;
    }
    if (c->req->nvlink == CRATER_NVLINK_REQUIRED && c->req->gpus > 1
        && !is_clique(s, first, used))
        return slice_clique(c, cand);
    return 0;
}

/* The sharing rule refused every GPU of cand: say which way. A
 * time-shared request names the lowest profiled use it would reach on a
 * GPU holding only time-shared jobs (against gpuShare.maxUtil). */
static int share_fail(struct sched_ctx *c, uint64_t cand)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first, best = UINT32_MAX;

    if (!c->req->share_milli)
        return fail(c,
                    "GPUs time-shared by profiled whole-GPU jobs (gpuShare)",
                    c->req->gpus,
                    0,
                    U_COUNT);
    for (uint64_t m = cand; m; m &= m - 1) {
        const struct gpu_dyn *d = &s->gd[first + (uint32_t)__builtin_ctzll(m)];
        uint32_t use = (uint32_t)d->share + c->req->share_milli;
        if (d->ntasks == d->nshared && use < best)
            best = use;
    }
    if (best == UINT32_MAX)
        return fail(c,
                    "GPU sharing: every GPU holds a job that is not "
                    "time-shared",
                    c->req->gpus,
                    0,
                    U_COUNT);
    return fail(c,
                "GPU sharing: profiled use would pass gpuShare.maxUtil",
                (s->share_max + 5) / 10,
                (best + 5) / 10,
                U_PERCENT);
}

/* The GPUs of cand the sharing rule lets a slice request onto (all of
 * them for whole GPUs, and while nothing is time-shared). */
static uint64_t share_mask(const struct sched_ctx *c, uint64_t cand)
{
    const crater_sched_t *s = c->s;
    uint32_t first = s->st[c->node].gpu_first;
    uint64_t ok = 0;

    if (!c->req->slice_mib)
        return cand;
    for (uint64_t m = cand; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (sched__share_ok(s, first + (uint32_t)i, c->req->share_milli))
            ok |= 1ull << i;
    }
    return ok;
}

/* Every policy's GPU choice goes through here, so the sharing rule holds
 * whichever policy picks (some pick shares by free memory alone). */
int sched__pick_gpus(struct sched_ctx *c, uint64_t cand)
{
    const sched_policy_ops_t *pol = c->s->policy;
    uint64_t ok;
    int rc;

    if (c->s->gpu_allow) /* the gang search's alternative (gang.c) */
        cand &= c->s->gpu_allow;
    if (cand && !(ok = share_mask(c, cand)))
        return share_fail(c, cand);
    cand = cand ? ok : cand;
    if (pol && pol->pick_gpus)
        rc = pol->pick_gpus(c, cand);
    else
        rc = sched__pick_gpus_default(c, cand);
    c->p.share_milli = rc == 0 && !c->p.whole ? c->req->share_milli : 0;
    return rc;
}

int sched__pick_gpus_default(struct sched_ctx *c, uint64_t cand)
{
    int rc;

    c->p.ngpus = 0;
    c->p.whole = false;
    rc = c->req->slice_mib ? slice_gpus(c, cand) : whole_gpus(c, cand);
    if (rc == 0)
        set_topology(c);
    return rc;
}

/* Take amount from the NUMA buckets, preferred first, then in index
 * order. The caller checked the total. */
static void spread(uint64_t *take,
                   const uint64_t *free,
                   int nnuma,
                   int prefer,
                   uint64_t amount)
{
    memset(take, 0, sizeof(uint64_t) * MAX_NUMA);
    for (int j = -1; j < nnuma && amount; j++) {
        int k = j < 0 ? prefer : j;
        if (k < 0 || (j >= 0 && k == prefer))
            continue;
        uint64_t t = free[k] - take[k] < amount ? free[k] - take[k] : amount;
        take[k] += t;
        amount -= t;
    }
}

static int numa_fits(const struct node_dyn *d,
                     int k,
                     uint64_t cpu,
                     uint64_t mem)
{
    return d->numa_cpu_free[k] >= cpu && d->numa_mem_free[k] >= mem;
}

static int gpu_numa(const struct sched_ctx *c)
{
    const struct node_static *st = &c->s->st[c->node];
    int k;

    if (c->p.ngpus == 0)
        return -1;
    k = c->s->gs[st->gpu_first + c->p.gpu[0]].numa;
    return k < 0 ? 0 : k;
}

/* The NUMA node with the least free CPU that still fits, or -1. */
static int best_numa(const struct node_dyn *d,
                     int nnuma,
                     uint64_t cpu,
                     uint64_t mem)
{
    int best = -1;

    for (int k = 0; k < nnuma; k++)
        if (numa_fits(d, k, cpu, mem)
            && (best < 0 || d->numa_cpu_free[k] < d->numa_cpu_free[best]))
            best = k;
    return best;
}

/* The most free CPU on one NUMA node: what a strict job could have. */
static uint64_t most_numa_cpu(const struct node_dyn *d, int nnuma)
{
    uint64_t most = 0;

    for (int k = 0; k < nnuma; k++)
        most = d->numa_cpu_free[k] > most ? d->numa_cpu_free[k] : most;
    return most;
}

/* CPU and memory: pinned to one NUMA node when the policy asks and it
 * fits (strict: must), spread otherwise. */
int sched__pick_cpu_mem(struct sched_ctx *c)
{
    const struct node_dyn *d = &c->s->dyn[c->node];
    const crater_request_t *r = c->req;
    int nnuma = c->s->st[c->node].nnuma, k = c->p.numa;

    if (d->cpu_free < r->cpu_milli)
        return fail(c, "insufficient CPU", r->cpu_milli, d->cpu_free, U_MILLI);
    if (d->mem_free < r->mem_bytes)
        return fail(c,
                    "insufficient memory",
                    r->mem_bytes,
                    d->mem_free,
                    U_BYTES);
    if (k < 0 && r->numa != CRATER_NUMA_NONE)
        k = c->p.ngpus ? gpu_numa(c)
                       : best_numa(d, nnuma, r->cpu_milli, r->mem_bytes);
    if (k >= 0 && !numa_fits(d, k, r->cpu_milli, r->mem_bytes))
        k = -1;
    if (k < 0 && r->numa == CRATER_NUMA_STRICT)
        return fail(c,
                    "no NUMA node has the CPU and memory next to its GPUs",
                    r->cpu_milli,
                    most_numa_cpu(d, nnuma),
                    U_MILLI);
    c->p.numa = k;
    c->p.cpu_milli = r->cpu_milli;
    c->p.mem_bytes = r->mem_bytes;
    spread(c->p.numa_cpu, d->numa_cpu_free, nnuma, k, r->cpu_milli);
    spread(c->p.numa_mem, d->numa_mem_free, nnuma, k, r->mem_bytes);
    return 0;
}
