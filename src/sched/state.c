/* state.c - the scheduler's cluster state: nodes, GPUs and storage devices
 * in flat arrays, the task table, and commit/release.
 *
 * Commit and release are exact inverses: a placement records every amount
 * it charged (per GPU, per NUMA node, per device), and release subtracts
 * exactly those amounts, so any sequence of commits and releases returns
 * the state to where it started (a property test checks this).
 *
 * The task table is an open-addressing hash on the task id; tasks are few
 * compared with decisions, so it is rebuilt on growth rather than kept
 * incrementally balanced. Each node also lists its task ids, with a
 * version that changes with the node's state, so that the preemption
 * planner reads only the nodes that changed since its last call.
 */
#include <stdlib.h>
#include <string.h>

#include "crater/units.h"
#include "sched/internal.h"

static uint64_t zero_now(void *arg)
{
    (void)arg;
    return 0;
}

static uint64_t fixed_random(void *arg)
{
    static const uint64_t k = 0x9e3779b97f4a7c15ull; /* no state: pure */
    (void)arg;
    return k;
}

static void copy_config(crater_sched_t *s, const crater_config_t *cfg)
{
    s->max_tasks = cfg->scheduler.max_tasks_per_gpu;
    s->overcommit = cfg->scheduler.overcommit_ratio;
    s->watermark = cfg->scheduler.safety_watermark;
    s->ctx_mib =
        (uint32_t)crater_bytes_to_mib_ceil(cfg->scheduler.gpu_context_overhead);
    s->cpu_thr = cfg->scheduler.cpu_threshold;
    s->mem_thr = cfg->scheduler.memory_threshold;
    s->pcie_thr = cfg->scheduler.pcie_threshold;
    s->score_w[0] = cfg->scheduler.score_weights.gpu;
    s->score_w[1] = cfg->scheduler.score_weights.cpu;
    s->score_w[2] = cfg->scheduler.score_weights.memory;
    s->score_w[3] = cfg->scheduler.score_weights.disk;
    s->w.joint = cfg->scheduler.plugin_weights.joint;
    s->w.packing = cfg->scheduler.plugin_weights.packing;
    s->w.topology = cfg->scheduler.plugin_weights.topology;
    s->w.locality = cfg->scheduler.plugin_weights.locality;
    s->w.low_util = cfg->scheduler.plugin_weights.low_utilization;
    s->prefer_low_util = cfg->scheduler.prefer_low_utilization;
    s->min_cpu_per_gpu = (uint64_t)(cfg->scheduler.min_cpu_per_gpu * 1000.0);
    s->min_mem_per_gpu = cfg->scheduler.min_memory_per_gpu;
    s->preempt_min_ms = cfg->scheduler.preemption_min_runtime_ms;
    s->share_on = cfg->scheduler.gpu_share.enabled;
    s->share_max = (uint16_t)(cfg->scheduler.gpu_share.max_util * 1000 + 0.5);
    s->share_margin = cfg->scheduler.gpu_share.memory_margin;
}

crater_sched_t *crater_sched_create(const crater_config_t *cfg,
                                    const crater_kb_t *kb,
                                    const crater_sched_env_t *env)
{
    crater_sched_t *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    copy_config(s, cfg);
    s->kb = kb;
    if (env)
        s->env = *env;
    if (!s->env.now_ms)
        s->env.now_ms = zero_now;
    if (!s->env.random)
        s->env.random = fixed_random;
    sched__policy_init(s, cfg ? cfg->scheduler.policy : NULL);
    return s;
}

void crater_sched_destroy(crater_sched_t *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n; i++)
        crater_node_clear(&s->nodes[i]);
    free(s->nodes);
    free(s->st);
    free(s->dyn);
    free(s->gs);
    free(s->gd);
    free(s->ds);
    free(s->dd);
    free(s->tasks);
    free(s->pcount);
    free(s->typical);
    sched__psum_free(s);
    for (uint32_t i = 0; i < s->ntcap; i++)
        free(s->ntasks[i].ids);
    free(s->ntasks);
    sched__pre_free(s);
    sched__index_free(s);
    free(s);
}

void crater_sched_set_weights(crater_sched_t *s,
                              const crater_sched_weights_t *w)
{
    s->w = *w;
    s->memo_epoch++;
}

crater_sched_weights_t crater_sched_get_weights(const crater_sched_t *s)
{
    return s->w;
}

uint32_t crater_sched_node_count(const crater_sched_t *s)
{
    return s->n;
}

const crater_node_t *crater_sched_node(const crater_sched_t *s, uint32_t id)
{
    return id < s->n ? &s->nodes[id] : NULL;
}

double crater_sched_gpus_held(const crater_sched_t *s,
                              const crater_placement_t *p)
{
    const crater_node_t *node = crater_sched_node(s, p->node);
    double g = 0;

    for (uint32_t i = 0; node && i < p->ngpus; i++) {
        double mib = (double)node->gpus[p->gpu[i]].memory_bytes / 1048576.0;
        g += p->whole ? 1.0 : (mib > 0 ? p->gpu_mib[i] / mib : 0);
    }
    return g;
}

uint32_t crater_sched_gpu_room(const crater_sched_t *s,
                               uint32_t node,
                               uint32_t *room,
                               size_t max)
{
    uint32_t left[MAX_GPUS];

    if (node >= s->n)
        return 0;
    sched__gpu_left(s, node, left);
    for (uint32_t i = 0; i < s->st[node].ngpus && i < max; i++)
        room[i] = left[i];
    return s->st[node].ngpus;
}

uint64_t crater_sched_cpu_free(const crater_sched_t *s, uint32_t node)
{
    return node < s->n ? s->dyn[node].cpu_free : 0;
}

/* ---- health and measurements --------------------------------------------- */

static int bad_node(crater_sched_t *s, uint32_t node, crater_error_t *err)
{
    (void)s;
    return crater_errorf(err, CRATER_ENOENT, "no node with id %u", node);
}

int crater_sched_set_ready(crater_sched_t *s, uint32_t node, bool ready)
{
    if (node >= s->n)
        return bad_node(s, node, NULL);
    s->dyn[node].ready = ready;
    sched__node_touch(s, node);
    return sched__reindex(s, node);
}

int crater_sched_set_cordoned(crater_sched_t *s, uint32_t node, bool cordon)
{
    if (node >= s->n)
        return bad_node(s, node, NULL);
    s->dyn[node].cordoned = cordon;
    sched__node_touch(s, node);
    return sched__reindex(s, node);
}

static float clamp01(double x)
{
    return x < 0 ? 0.0f : x > 1 ? 1.0f : (float)x;
}

int crater_sched_set_util(crater_sched_t *s,
                          uint32_t node,
                          const crater_node_util_t *u)
{
    struct node_static *st;

    if (node >= s->n)
        return bad_node(s, node, NULL);
    st = &s->st[node];
    s->dyn[node].util_cpu = clamp01(u->cpu);
    s->dyn[node].util_mem = clamp01(u->mem);
    s->dyn[node].util_disk = clamp01(u->disk);
    for (uint32_t i = 0; i < st->ngpus; i++) {
        struct gpu_dyn *g = &s->gd[st->gpu_first + i];
        g->util = clamp01(u->gpu[i]);
        g->used_mib = u->gpu_used_mib[i];
        g->pcie = clamp01(u->pcie[s->gs[st->gpu_first + i].upstream]);
    }
    sched__node_touch(s, node);
    return sched__reindex(s, node);
}

/* The newest task (latest start, then highest id) holding a slice of
 * local GPU gi of node; 0 when none. */
static uint64_t newest_on(const crater_sched_t *s, uint32_t node, uint32_t gi)
{
    const struct node_tasks *nt = &s->ntasks[node];
    const struct task *best = NULL;

    for (uint32_t i = 0; i < nt->n; i++) {
        const struct task *t = sched__task_find(s, nt->ids[i]);
        int on = 0;
        for (uint32_t k = 0; k < t->p.ngpus; k++)
            on |= t->p.gpu[k] == gi;
        if (on && !t->p.whole
            && (!best || t->start_ms > best->start_ms
                || (t->start_ms == best->start_ms && t->id > best->id)))
            best = t;
    }
    return best ? best->id : 0;
}

static int listed(const uint64_t *ids, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

uint32_t crater_sched_watermark_victims(const crater_sched_t *s,
                                        uint32_t node,
                                        uint64_t *out,
                                        uint32_t max)
{
    uint32_t n = 0;

    if (node >= s->n || node >= s->ntcap)
        return 0;
    for (uint32_t i = 0; i < s->st[node].ngpus && n < max; i++) {
        uint32_t g = s->st[node].gpu_first + i;
        const struct gpu_dyn *d = &s->gd[g];
        uint64_t id;
        if (d->reserved_mib <= s->gs[g].mem_mib
            || (double)d->used_mib <= s->watermark * s->gs[g].mem_mib)
            continue;
        if ((id = newest_on(s, node, i)) && !listed(out, n, id))
            out[n++] = id;
    }
    return n;
}

/* Largest new charge GPU g admits now (0 when it takes no more tasks). */
uint32_t sched__room_mib(const crater_sched_t *s, uint32_t g)
{
    const struct gpu_dyn *d = &s->gd[g];
    uint64_t cap = (uint64_t)((double)s->gs[g].mem_mib * s->overcommit);

    if (d->whole || d->ntasks >= s->max_tasks || d->reserved_mib >= cap)
        return 0;
    return (uint32_t)(cap - d->reserved_mib);
}

/* ---- task table ------------------------------------------------------------
 */

static uint32_t task_slot(const crater_sched_t *s, uint64_t id)
{
    uint32_t mask = s->tsize - 1,
             i = (uint32_t)(id * 0x9e3779b97f4a7c15ull >> 32) & mask;

    while (s->tasks[i].id != 0 && s->tasks[i].id != id)
        i = (i + 1) & mask;
    return i;
}

struct task *sched__task_find(const crater_sched_t *s, uint64_t id)
{
    uint32_t i;

    if (!s->tsize || id == 0)
        return NULL;
    i = task_slot(s, id);
    return s->tasks[i].id == id ? &s->tasks[i] : NULL;
}

static int task_grow(crater_sched_t *s)
{
    uint32_t old = s->tsize, size = old ? old * 2 : 64;
    struct task *ot = s->tasks;

    if (!(s->tasks = calloc(size, sizeof(*s->tasks)))) {
        s->tasks = ot;
        return -1;
    }
    s->tsize = size;
    for (uint32_t i = 0; i < old; i++)
        if (ot[i].id)
            s->tasks[task_slot(s, ot[i].id)] = ot[i];
    free(ot);
    return 0;
}

/* Remove slot i keeping probe chains intact (backward-shift deletion). */
static void task_delete(crater_sched_t *s, uint32_t i)
{
    uint32_t mask = s->tsize - 1, j = i;

    for (;;) {
        j = (j + 1) & mask;
        if (s->tasks[j].id == 0)
            break;
        uint32_t home =
            (uint32_t)(s->tasks[j].id * 0x9e3779b97f4a7c15ull >> 32) & mask;
        if ((j > i && (home <= i || home > j))
            || (j < i && home <= i && home > j)) {
            s->tasks[i] = s->tasks[j];
            i = j;
        }
    }
    memset(&s->tasks[i], 0, sizeof(s->tasks[i]));
    s->tused--;
}

/* ---- tasks by node --------------------------------------------------------
 */

void sched__node_touch(crater_sched_t *s, uint32_t node)
{
    if (node < s->ntcap) {
        s->ntasks[node].ver = ++s->ver_clock;
        sched__touch_log(s, node, s->ver_clock);
    }
}

/* Room for one more id in node's list. */
static int node_tasks_need(crater_sched_t *s, uint32_t node)
{
    struct node_tasks *nt;

    if (node >= s->ntcap) {
        uint32_t cap = s->ntcap ? s->ntcap : 64;
        while (cap <= node)
            cap *= 2;
        if (!(nt = realloc(s->ntasks, cap * sizeof(*nt))))
            return -1;
        memset(nt + s->ntcap, 0, (cap - s->ntcap) * sizeof(*nt));
        s->ntasks = nt;
        s->ntcap = cap;
    }
    nt = &s->ntasks[node];
    if (nt->n == nt->cap) {
        uint32_t cap = nt->cap ? nt->cap * 2 : 8;
        uint64_t *ids = realloc(nt->ids, cap * sizeof(*ids));
        if (!ids)
            return -1;
        nt->ids = ids;
        nt->cap = cap;
    }
    return 0;
}

static void node_tasks_del(crater_sched_t *s, uint32_t node, uint64_t id)
{
    struct node_tasks *nt = &s->ntasks[node];

    for (uint32_t i = 0; i < nt->n; i++) {
        if (nt->ids[i] == id) {
            nt->ids[i] = nt->ids[--nt->n];
            break;
        }
    }
    sched__node_touch(s, node);
}

/* ---- commit and release
 * ------------------------------------------------------ */

static int check_fits(const crater_sched_t *s,
                      const crater_placement_t *p,
                      crater_error_t *err)
{
    const struct node_static *st = &s->st[p->node];
    const struct node_dyn *d = &s->dyn[p->node];

    if (p->ngpus > st->ngpus)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "placement names %u GPUs",
                             p->ngpus);
    for (uint32_t i = 0; i < p->ngpus; i++)
        if (p->gpu[i] >= st->ngpus)
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "no GPU %u on node",
                                 p->gpu[i]);
    for (int k = 0; k < MAX_NUMA; k++)
        if (p->numa_cpu[k] > d->numa_cpu_free[k]
            || p->numa_mem[k] > d->numa_mem_free[k])
            return crater_errorf(err,
                                 CRATER_ECONFLICT,
                                 "placement no longer fits NUMA node %d",
                                 k);
    if (p->storage >= (int)st->ndevs)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "no storage device %d",
                             p->storage);
    return 0;
}

/* sign +1 charges p, -1 returns it (the node's dynamic state only: no
 * task record, no reindexing; the preemption planner uses it directly). */
void sched__apply(crater_sched_t *s, const crater_placement_t *p, int sign)
{
    struct node_static *st = &s->st[p->node];
    struct node_dyn *d = &s->dyn[p->node];

    for (uint32_t i = 0; i < p->ngpus; i++) {
        struct gpu_dyn *g = &s->gd[st->gpu_first + p->gpu[i]];
        g->reserved_mib += (uint32_t)sign * p->gpu_mib[i];
        g->ntasks += (uint8_t)sign;
        g->whole = sign > 0 ? p->whole : 0;
        if (p->share_milli) {
            g->nshared += (uint8_t)sign;
            g->share += (uint16_t)(sign * (int)p->share_milli);
        }
    }
    for (int k = 0; k < MAX_NUMA; k++) {
        d->numa_cpu_free[k] -= (uint64_t)sign * p->numa_cpu[k];
        d->numa_mem_free[k] -= (uint64_t)sign * p->numa_mem[k];
    }
    d->cpu_free -= (uint64_t)sign * p->cpu_milli;
    d->mem_free -= (uint64_t)sign * p->mem_bytes;
    if (p->storage >= 0) {
        struct dev_dyn *dv = &s->dd[st->dev_first + (uint32_t)p->storage];
        dv->iops_free -= (uint64_t)sign * p->disk_iops;
        dv->bw_free -= (uint64_t)sign * p->disk_bw;
    }
}

int crater_sched_commit(crater_sched_t *s,
                        uint64_t task,
                        const crater_request_t *req,
                        const crater_placement_t *p,
                        crater_error_t *err)
{
    struct task *t;

    if (task == 0)
        return crater_errorf(err, CRATER_EINVAL, "task id 0 is reserved");
    if (p->node >= s->n)
        return bad_node(s, p->node, err);
    if (sched__task_find(s, task))
        return crater_errorf(err,
                             CRATER_EEXIST,
                             "task %llu already placed",
                             (unsigned long long)task);
    if (check_fits(s, p, err) < 0)
        return -1;
    if (((s->tused + 1) * 4 > s->tsize * 3 && task_grow(s) < 0)
        || node_tasks_need(s, p->node) < 0
        || sched__pcount_need(&s->pcount, &s->pcountcap, s->npcount) < 0
        || (req && req->preemptible && sched__psum_need(s, p->node) < 0))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    s->ntasks[p->node].ids[s->ntasks[p->node].n++] = task;
    sched__node_touch(s, p->node);
    t = &s->tasks[task_slot(s, task)];
    t->id = task;
    t->priority = req ? req->priority : 0;
    t->preemptible = req ? req->preemptible : false;
    t->start_ms = s->env.now_ms(s->env.arg);
    t->p = *p;
    if (t->start_ms > s->since_max)
        s->since_max = t->start_ms;
    if (t->preemptible) {
        sched__pcount_add(s->pcount, &s->npcount, t->priority, +1);
        sched__psum_add(s, t, +1);
    }
    s->tused++;
    sched__apply(s, p, +1);
    return sched__reindex(s, p->node);
}

int crater_sched_retag(crater_sched_t *s,
                       uint64_t task,
                       int32_t priority,
                       bool preemptible,
                       crater_error_t *err)
{
    struct task *t = sched__task_find(s, task);

    if (!t)
        return crater_errorf(err,
                             CRATER_ENOENT,
                             "no task %llu",
                             (unsigned long long)task);
    if (preemptible
        && (sched__pcount_need(&s->pcount, &s->pcountcap, s->npcount) < 0
            || sched__psum_need(s, t->p.node) < 0))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (t->preemptible) {
        sched__pcount_add(s->pcount, &s->npcount, t->priority, -1);
        sched__psum_add(s, t, -1);
    }
    t->priority = priority;
    t->preemptible = preemptible;
    if (t->preemptible) {
        sched__pcount_add(s->pcount, &s->npcount, t->priority, +1);
        sched__psum_add(s, t, +1);
    }
    sched__node_touch(s, t->p.node);
    return sched__reindex(s, t->p.node);
}

int crater_sched_release(crater_sched_t *s, uint64_t task, crater_error_t *err)
{
    struct task *t = sched__task_find(s, task);
    uint32_t node;

    if (!t)
        return crater_errorf(err,
                             CRATER_ENOENT,
                             "no task %llu",
                             (unsigned long long)task);
    node = t->p.node;
    if (t->preemptible) {
        sched__pcount_add(s->pcount, &s->npcount, t->priority, -1);
        sched__psum_add(s, t, -1);
    }
    sched__apply(s, &t->p, -1);
    node_tasks_del(s, node, task);
    task_delete(s, (uint32_t)(t - s->tasks));
    return sched__reindex(s, node);
}
