/* place.c - filter -> score -> reserve for one request, two ways.
 *
 * crater_sched_place() walks the live node classes (index.c): a class
 * whose summary cannot fit the request is skipped without evaluation, the
 * others are evaluated once through their lowest node id. The best score
 * wins; equal scores go to the lowest node id. A memoised request (a
 * deterministic policy, see the memo below) visits only the index's grid
 * cells whose classes have enough free whole GPUs or room and CPU: the
 * winner does not depend on the order classes are visited in.
 * crater_sched_place_bruteforce() evaluates every node through the same
 * plugins. The sched's policy (policy.c) gives the score; a policy with
 * random_ties ("random") instead draws uniformly among the best nodes, a
 * class counting as many draws as it has members. Both must return the same
 * placement: tests and the benchmark compare them decision by decision.
 *
 * When nothing fits, both explain why by evaluating every node (the
 * bruteforce) or every class weighted by its size (the fast path): counts
 * per reason and, per reason, the node that came closest. Failure is the
 * rare path, so it is allowed to cost a full pass.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "crater/queue.h"
#include "crater/units.h"
#include "sched/explain.h"
#include "sched/internal.h"

static void ctx_init(struct sched_ctx *c,
                     crater_sched_t *s,
                     uint32_t node,
                     const crater_request_t *r)
{
    memset(c, 0, sizeof(*c));
    c->s = s;
    c->node = node;
    c->req = r;
    c->p.node = node;
    c->p.numa = -1;
    c->p.storage = -1;
}

double sched__plugin_score(const struct sched_ctx *c)
{
    double total = 0;

    for (const sched_score_ops_t *const *sc = sched__scores; *sc; sc++) {
        double w = (*sc)->weight(c->s, c->req);
        if (w != 0)
            total += w * (*sc)->score(c);
    }
    return total;
}

/* The policy's first-fit bias of node (policy.h: order_bias). */
static double order_bias(const crater_sched_t *s, uint32_t node)
{
    double w =
        s->policy && s->policy->order_bias ? s->policy->order_bias(s) : 0;

    return w && s->n ? w * (double)node / (double)s->n : 0;
}

/* Run every filter; on success score the reservation, less the policy's
 * first-fit bias. A placement that overcommits a GPU's memory scores
 * SCHED_OVERCOMMIT_PENALTY lower, so that it wins only where nothing
 * fits within physical memory (overcommit is the last resort); a
 * time-shared one that joins other tenants SCHED_JOIN_PENALTY lower
 * (co-location is the last resort short of overcommit); the penalties
 * are part of raw, so the class memo keeps them too. */
int sched__eval(crater_sched_t *s,
                uint32_t node,
                const crater_request_t *r,
                struct sched_ctx *c)
{
    ctx_init(c, s, node, r);
    for (const sched_filter_ops_t *const *f = sched__filters; *f; f++)
        if ((*f)->filter(c) < 0)
            return -1;
    c->raw = c->s->policy && c->s->policy->score ? c->s->policy->score(c)
                                                 : sched__plugin_score(c);
    if (s->overcommit > 1 && sched__placement_overcommits(s, &c->p))
        c->raw -= SCHED_OVERCOMMIT_PENALTY;
    if (c->p.share_milli && sched__placement_joins(s, &c->p))
        c->raw -= SCHED_JOIN_PENALTY;
    c->p.score = c->raw - order_bias(s, node);
    return 0;
}

/* Necessary conditions the filters would check anyway. */
static int precheck(const crater_sched_t *s,
                    const struct live_sum *k,
                    const crater_request_t *r)
{
    if (!k->usable || k->cpu_free < r->cpu_milli || k->mem_free < r->mem_bytes)
        return 0;
    if (r->gpus == 0)
        return 1;
    if (r->slice_mib == 0)
        return k->free_whole >= r->gpus;
    return k->max_room_mib >= r->slice_mib + s->ctx_mib;
}

/* The same test on the class's own copy of its summary. */
static int precheck_class(const crater_sched_t *s,
                          const struct sclass *k,
                          const crater_request_t *r)
{
    if (!k->usable || k->cpu_free < r->cpu_milli || k->mem_free < r->mem_bytes)
        return 0;
    if (r->gpus == 0)
        return 1;
    if (r->slice_mib == 0)
        return k->free_whole >= r->gpus;
    return k->max_room_mib >= r->slice_mib + s->ctx_mib;
}

static int better(const crater_placement_t *a, const crater_placement_t *b)
{
    return a->score > b->score || (a->score == b->score && a->node < b->node);
}

static int unschedulable(crater_sched_t *s,
                         const crater_request_t *r,
                         crater_error_t *err,
                         int by_class)
{
    struct sched_explain ex;

    if (!err) /* the caller only needs the verdict: skip the second scan */
        return -1;
    sched__explain_run(s, r, by_class, &ex);
    crater_errorf(err, CRATER_EUNSCHED, "%s", ex.text);
    return -1;
}

/* Random tie-breaking (policies with random_ties): a weighted reservoir
 * over equal-best candidates, each standing for n nodes, so that every
 * node with the best score is equally likely. *seen counts nodes tied
 * so far. Returns whether cand replaces best. */
static int random_tie(crater_sched_t *s,
                      const crater_placement_t *cand,
                      const crater_placement_t *best,
                      uint32_t n,
                      uint64_t *seen)
{
    if (best->node == CRATER_SCHED_NO_NODE || cand->score > best->score) {
        *seen = n;
        return 1;
    }
    if (cand->score < best->score)
        return 0;
    *seen += n;
    return s->env.random(s->env.arg) % *seen < n;
}

static int take(crater_sched_t *s,
                const crater_placement_t *cand,
                const crater_placement_t *best,
                uint32_t n,
                uint64_t *seen)
{
    if (s->policy && s->policy->random_ties)
        return random_tie(s, cand, best, n, seen);
    return best->node == CRATER_SCHED_NO_NODE || better(cand, best);
}

/* A uniform policy: rejection sampling (draw a node, keep it if it fits)
 * is uniform over the feasible nodes; after 64 misses the weighted draw
 * over classes below takes over, which is uniform too. */
static int draw_uniform(crater_sched_t *s,
                        const crater_request_t *r,
                        crater_placement_t *out)
{
    struct sched_ctx c;

    for (int t = 0; t < 64 && s->n; t++) {
        uint32_t n = (uint32_t)(s->env.random(s->env.arg) % s->n);
        if (sched__eval(s, n, r, &c) == 0) {
            *out = c.p;
            return 0;
        }
    }
    return -1;
}

/* ---- the evaluation memo ------------------------------------------------
 *
 * A class's state never changes (a node that changes moves to another
 * class), so its evaluation for a request depends only on the request and
 * on sched-wide settings that bump memo_epoch. Each class remembers its
 * last CLASS_MEMO (request shape, score, fit) results, replaced round
 * robin, with the keys in an array of their own so that a lookup reads
 * only them (B6's openb mix keeps more than 16 shapes in play: each
 * doubling of the memo up to 32 made it faster). A decision re-evaluates
 * only classes it has not seen with this shape, then evaluates the winner
 * once more to get its reservation. Requests whose result depends on the
 * job spec's selectors, tolerations, dataset or image, and random policies, are
 * not memoised. */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

/* The memo key of r, or 0 when r must not be memoised. */
static uint64_t memo_key(const crater_sched_t *s, const crater_request_t *r)
{
    const crater_jobspec_t *sp = r->spec;
    uint64_t h = s->memo_epoch + 1;

    if ((s->policy && (s->policy->random_ties || s->policy->uniform))
        || (sp
            && (sp->nselector || sp->ntolerations || sp->dataset || sp->image)))
        return 0;
    h = mix(h, r->gpus);
    h = mix(h,
            (uint64_t)r->disk_soft << 48 | (uint64_t)r->share_milli << 32
                | r->slice_mib);
    h = mix(h, r->cpu_milli);
    h = mix(h, r->mem_bytes);
    h = mix(h, r->disk_iops);
    h = mix(h, r->disk_bw);
    h = mix(h, (uint64_t)r->disk_iface << 32 | r->disk_max_latency_us);
    h = mix(h, r->model_mask);
    h = mix(h,
            r->vendor
                ? sched__hash((const uint8_t *)r->vendor, strlen(r->vendor))
                : 0);
    h = mix(h, (uint64_t)r->min_sm << 32 | r->min_cc);
    h = mix(h, r->min_hbm_bw);
    h = mix(h,
            (uint64_t)r->nvlink << 16 | (uint64_t)r->numa << 8
                | (uint64_t)r->prefer_low_util);
    return h ? h : 1;
}

/* Evaluate class k's representative, through the memo when key != 0.
 * Returns 0 with *score when it fits. */
static int class_eval(crater_sched_t *s,
                      struct sclass *k,
                      const crater_request_t *r,
                      uint64_t key,
                      double *score)
{
    struct sched_ctx c;
    uint32_t i;
    int ok;

    /* the memo holds scores without the first-fit bias: the class's
     * lowest node id changes as nodes join and leave it */
    double bias = order_bias(s, k->members[0]);

    for (i = 0; key && i < CLASS_MEMO; i++) {
        if (k->memo_key[i] == key) {
            *score = k->memo_score[i] - bias;
            return k->memo_ok >> i & 1 ? 0 : -1;
        }
    }
    ok = sched__eval(s, k->members[0], r, &c) == 0;
    *score = ok ? c.p.score : 0;
    if (key) {
        i = k->memo_next;
        k->memo_next = (uint8_t)((i + 1) % CLASS_MEMO);
        k->memo_key[i] = key;
        k->memo_score[i] = ok ? c.raw : 0;
        k->memo_ok = (k->memo_ok & ~(1u << i)) | (uint32_t)ok << i;
    }
    return ok ? 0 : -1;
}

/* The best (score, lowest node) so far of a deterministic decision. */
struct best {
    uint32_t node;
    double score;
};

static void consider(crater_sched_t *s,
                     struct sclass *k,
                     const crater_request_t *r,
                     uint64_t key,
                     struct best *b)
{
    double score;

    if (class_eval(s, k, r, key, &score) < 0)
        return;
    if (b->node == CRATER_SCHED_NO_NODE || score > b->score
        || (score == b->score && k->members[0] < b->node)) {
        b->score = score;
        b->node = k->members[0];
    }
}

/* Visit rows [first, end) of a grid (index.c), in each the cells of at
 * least cpu's bucket: every class that could pass the precheck. */
static void scan_grid(crater_sched_t *s,
                      const struct cgrid *first,
                      const struct cgrid *end,
                      const crater_request_t *r,
                      uint64_t key,
                      struct best *b)
{
    uint64_t from = ~0ull << sched__cpu_bucket(r->cpu_milli);

    for (const struct cgrid *g = first; g < end; g++) {
        for (uint64_t m = g->nonempty & from; m; m &= m - 1) {
            const struct cbucket *bk = &g->cell[__builtin_ctzll(m)];
            for (uint32_t i = 0; i < bk->n; i++) {
                struct sclass *k = &s->classes[bk->ids[i]];
                if (i + 8 < bk->n) /* the classes are scattered */
                    __builtin_prefetch(&s->classes[bk->ids[i + 8]].cpu_free);
                if (precheck_class(s, k, r))
                    consider(s, k, r, key, b);
            }
        }
    }
}

/* The rows a request's precheck could pass: at least r->gpus free whole
 * GPUs, or room in the bucket of the charge or above; every class (each
 * is in one by_whole row) for a request without GPUs. */
static void scan_buckets(crater_sched_t *s,
                         const crater_request_t *r,
                         uint64_t key,
                         struct best *b)
{
    if (r->gpus == 0)
        scan_grid(s, s->by_whole, s->by_whole + MAX_GPUS + 1, r, key, b);
    else if (r->slice_mib == 0 && r->gpus <= MAX_GPUS)
        scan_grid(s,
                  s->by_whole + r->gpus,
                  s->by_whole + MAX_GPUS + 1,
                  r,
                  key,
                  b);
    else if (r->slice_mib)
        scan_grid(s,
                  s->by_room + sched__room_bucket(r->slice_mib + s->ctx_mib),
                  s->by_room + ROOM_BUCKETS,
                  r,
                  key,
                  b);
}

/* Deterministic policies: best score, ties to the lowest node id. The
 * winner does not depend on the order classes are visited in. */
static int place_memo(crater_sched_t *s,
                      const crater_request_t *r,
                      uint64_t key,
                      crater_placement_t *out)
{
    struct best b = {.node = CRATER_SCHED_NO_NODE};
    uint32_t bestnode;
    struct sched_ctx c;

    scan_buckets(s, r, key, &b);
    if ((bestnode = b.node) == CRATER_SCHED_NO_NODE)
        return -1;
    if (sched__eval(s, bestnode, r, &c) < 0) /* cannot differ: a bug */
        return -1;
    *out = c.p;
    return 0;
}

static int place_fast(crater_sched_t *s,
                      const crater_request_t *r,
                      crater_placement_t *out,
                      crater_error_t *err)
{
    crater_placement_t best = {.node = CRATER_SCHED_NO_NODE};
    struct sched_ctx c;
    uint64_t seen = 0, key;

    if (s->policy && s->policy->uniform && draw_uniform(s, r, out) == 0)
        return 0;
    if ((key = memo_key(s, r)) != 0)
        return place_memo(s, r, key, out) == 0 ? 0
                                               : unschedulable(s, r, err, 1);
    for (uint32_t i = 0; i < s->nlive; i++) {
        const struct sclass *k = &s->classes[s->live[i]];
        if (!precheck(s, &s->lsum[i], r)
            || sched__eval(s, k->members[0], r, &c) < 0)
            continue;
        if (take(s, &c.p, &best, k->nmembers, &seen)) {
            best = c.p;
            if (s->policy && s->policy->random_ties && k->nmembers > 1)
                best.node = k->members[s->env.random(s->env.arg) % k->nmembers];
        }
    }
    if (best.node == CRATER_SCHED_NO_NODE)
        return unschedulable(s, r, err, 1);
    *out = best;
    return 0;
}

static int place_scan(crater_sched_t *s,
                      const crater_request_t *r,
                      crater_placement_t *out,
                      crater_error_t *err)
{
    crater_placement_t best = {.node = CRATER_SCHED_NO_NODE};
    struct sched_ctx c;
    uint64_t seen = 0;

    for (uint32_t n = 0; n < s->n; n++) {
        if (sched__eval(s, n, r, &c) < 0)
            continue;
        if (take(s, &c.p, &best, 1, &seen))
            best = c.p;
    }
    if (best.node == CRATER_SCHED_NO_NODE)
        return unschedulable(s, r, err, 0);
    *out = best;
    return 0;
}

/* A soft disk request (disk_soft) is placed with its bandwidth where a
 * node has it free, else without (the explanation is the second's). */
static int place_soft(crater_sched_t *s,
                      const crater_request_t *r,
                      crater_placement_t *out,
                      crater_error_t *err,
                      int (*place)(crater_sched_t *,
                                   const crater_request_t *,
                                   crater_placement_t *,
                                   crater_error_t *))
{
    crater_request_t w = *r;

    if (!r->disk_soft || !r->disk_bw)
        return place(s, r, out, err);
    if (place(s, r, out, NULL) == 0)
        return 0;
    w.disk_bw = 0;
    w.disk_soft = false;
    return place(s, &w, out, err);
}

int crater_sched_place(crater_sched_t *s,
                       const crater_request_t *r,
                       crater_placement_t *out,
                       crater_error_t *err)
{
    return place_soft(s, r, out, err, place_fast);
}

int crater_sched_place_bruteforce(crater_sched_t *s,
                                  const crater_request_t *r,
                                  crater_placement_t *out,
                                  crater_error_t *err)
{
    return place_soft(s, r, out, err, place_scan);
}

/* One named node, as the Kubernetes extender asks: the same filters and
 * score as a full scan, on that node only (no class index: the caller
 * names the nodes), and the score without the first-fit bias. */
int crater_sched_place_on(crater_sched_t *s,
                          const crater_request_t *r,
                          uint32_t node,
                          crater_placement_t *out,
                          const char **why)
{
    struct sched_ctx c;

    if (node >= s->n) {
        if (why)
            *why = "no such node";
        return -1;
    }
    if (sched__eval(s, node, r, &c) < 0) {
        if (why)
            *why = c.why ? c.why : "does not fit";
        return -1;
    }
    *out = c.p;
    out->score = c.raw; /* named nodes have no order: no first-fit bias */
    return 0;
}

/* ---- requests
 * ------------------------------------------------------------------ */

static int model_mask(const crater_sched_t *s,
                      char *const *models,
                      uint64_t *mask)
{
    char want[64];

    *mask = 0;
    for (size_t i = 0; models && models[i]; i++) {
        /* nodes carry kb keys: resolve aliases (NVML or trace names) */
        const crater_kb_gpu_t *g =
            s->kb ? crater_kb_gpu(s->kb, models[i]) : NULL;
        if (g)
            snprintf(want, sizeof(want), "%s", g->key);
        else if (!crater_kb_normalize(models[i], want, sizeof(want)))
            continue;
        for (uint32_t m = 0; m < s->nmodels; m++)
            if (strcmp(s->models[m].key, want) == 0)
                *mask |= 1ull << m;
    }
    if (models && models[0] && !*mask)
        *mask = 1ull << 63; /* none of the allowed models is in the cluster */
    return 0;
}

int crater_sched_model_mask(const crater_sched_t *s,
                            char *const *models,
                            uint64_t *mask)
{
    return model_mask(s, models, mask);
}

int crater_sched_model_id(const crater_sched_t *s, const char *key)
{
    for (uint32_t m = 0; m < s->nmodels; m++)
        if (strcmp(s->models[m].key, key) == 0)
            return (int)m;
    return -1;
}

static uint32_t max_gpu_mib(const crater_sched_t *s)
{
    uint32_t m = 0;

    for (uint32_t g = 0; g < s->ngpu; g++)
        m = s->gs[g].mem_mib > m ? s->gs[g].mem_mib : m;
    return m;
}

static const char *share_refusal(const crater_sched_t *s,
                                 const crater_request_t *r,
                                 double util,
                                 uint64_t peak_mib,
                                 double slice)
{
    if (!s->share_on)
        return "GPU sharing off (scheduler.gpuShare.enabled)";
    if (r->gpus == 0 || r->slice_mib)
        return "not a whole-GPU request";
    if (!(util >= 0) || util * 1000 >= s->share_max)
        return "profiled GPU use at or above gpuShare.maxUtil";
    if (peak_mib == 0)
        return "no peak GPU memory measured";
    if (slice + s->ctx_mib > max_gpu_mib(s))
        return "peak GPU memory x (1 + memoryMargin) larger than every GPU";
    return NULL;
}

int crater_sched_share(const crater_sched_t *s,
                       crater_request_t *r,
                       double util,
                       uint64_t peak_mib,
                       const char **why)
{
    double slice = ceil((double)peak_mib * (1 + s->share_margin));
    const char *no = share_refusal(s, r, util, peak_mib, slice);
    double milli = ceil(util * 1000);

    if (why)
        *why = no;
    if (no)
        return 0;
    r->slice_mib = (uint32_t)slice;
    r->share_milli = (uint16_t)(milli < 1 ? 1 : milli);
    return 1;
}

int crater_request_from_spec(const crater_sched_t *s,
                             const crater_jobspec_t *spec,
                             crater_request_t *r,
                             crater_error_t *err)
{
    const crater_resources_t *res = &spec->resources;
    int32_t prio;

    if (crater_effective_priority(spec->priority_class,
                                  spec->priority,
                                  &prio,
                                  err)
        < 0)
        return -1;
    memset(r, 0, sizeof(*r));
    r->gpus = res->gpu.count;
    r->slice_mib = (uint32_t)crater_bytes_to_mib_ceil(res->gpu.memory_bytes);
    r->cpu_milli = res->cpu_milli;
    r->mem_bytes = res->memory_bytes;
    r->disk_iops = res->disk.iops;
    r->disk_bw = res->disk.bandwidth;
    r->disk_iface = res->disk.iface;
    r->disk_max_latency_us = res->disk.max_latency_us;
    model_mask(s, res->gpu.models, &r->model_mask);
    r->vendor = res->gpu.vendor;
    r->min_sm = res->gpu.min_sm_count;
    r->min_cc = res->gpu.min_compute_cap;
    r->min_hbm_bw = res->gpu.min_hbm_bandwidth;
    r->nvlink = res->gpu.nvlink;
    r->numa = spec->numa;
    r->priority = prio;
    r->preemptible = spec->preemptible;
    r->prefer_low_util =
        spec->inference.enabled && spec->inference.warm_pool_size > 0;
    r->spec = spec;
    return 0;
}
