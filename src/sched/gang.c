/* gang.c - gang placement: all replicas of a job are placed together or
 * none are.
 *
 * First the greedy way: replicas are placed one by one through the normal
 * path (crater_sched_place) and committed at once, so each replica sees
 * the resources the earlier ones took: two replicas never count the same
 * free GPU twice. That gives the placements a single job would get and
 * succeeds almost always.
 *
 * Greedy can fail when an arrangement exists. Replicas are identical, so
 * how many a node can hold does not depend on the other nodes; but it
 * does depend on which GPUs each replica takes inside the node: with
 * GPUs of 90, 30 and 30 GB free, two replicas of two 30 GB slices fit as
 * (0,1) and (0,2), while best fit gives the first replica (1,2) and
 * leaves the second nothing. So when greedy fails, a bounded backtracking
 * search tries, replica by replica, every node in id order (never a
 * lower id than the previous replica's: identical replicas make any
 * arrangement one in node order) and on each node the placement the
 * filters choose first, then every other set of GPUs the request could
 * take there (the filters run on the node with only that set allowed,
 * sched->gpu_allow). At most GANG_SEARCH_BUDGET evaluations: past it the
 * search gives up with greedy's answer. Everything is deterministic.
 * The NUMA node and storage device inside a node are the filters' choice
 * (not searched).
 *
 * crater_sched_place_gang_bruteforce() is the reference the tests check
 * this against: the same filters on every node and every GPU set for
 * every replica, with no ordering, pruning or budget.
 *
 * On failure the replicas committed so far are released in reverse
 * order; commit and release are exact inverses (state.c), so the cluster
 * is left as it was. A gang that succeeds stays committed: the caller
 * owns those task ids.
 */
#include <stdlib.h>
#include <string.h>

#include "sched/explain.h"
#include "sched/internal.h"

#define GANG_SEARCH_BUDGET 200000
#define GANG_MAX_SETS 4096 /* GPU sets tried per node and replica */

/* Release tasks first..first+n-1, newest first. */
static int rollback(crater_sched_t *s, uint64_t first, uint32_t n)
{
    int rc = 0;

    for (uint32_t i = n; i-- > 0;)
        if (crater_sched_release(s, first + i, NULL) < 0)
            rc = -1;
    return rc;
}

static int check_args(uint32_t replicas,
                      uint64_t first_task,
                      crater_error_t *err)
{
    if (replicas == 0)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "a gang needs at least one replica");
    if (first_task == 0 || first_task > UINT64_MAX - (replicas - 1))
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "task ids %llu..+%u are not all valid (0 is "
                             "reserved, ids must not wrap)",
                             (unsigned long long)first_task,
                             replicas - 1);
    return 0;
}

/* Place and commit replica i; on failure say which replica and why. */
static int place_one(crater_sched_t *s,
                     const crater_request_t *req,
                     uint32_t i,
                     uint32_t replicas,
                     uint64_t task,
                     crater_placement_t *out,
                     crater_error_t *err)
{
    crater_error_t why;
    const char *step;

    if (crater_sched_place(s, req, out, &why) < 0) /* users read this one */
        return crater_errorf(err,
                             why.errnum,
                             "gang replica %u of %u does not fit: %s",
                             i + 1,
                             replicas,
                             why.text);
    if (crater_sched_commit(s, task, req, out, &why) == 0)
        return 0;
    step = "cannot be committed";
    return crater_errorf(err,
                         why.errnum,
                         "gang replica %u of %u (task %llu) %s: %s",
                         i + 1,
                         replicas,
                         (unsigned long long)task,
                         step,
                         why.text);
}

/* Greedy: -1 with err (nothing committed) when a replica fails. */
static int greedy(crater_sched_t *s,
                  const crater_request_t *req,
                  uint32_t replicas,
                  uint64_t first_task,
                  crater_placement_t *out,
                  crater_error_t *err)
{
    for (uint32_t i = 0; i < replicas; i++) {
        if (place_one(s, req, i, replicas, first_task + i, &out[i], err) == 0)
            continue;
        if (rollback(s, first_task, i) < 0)
            return crater_errorf(err,
                                 CRATER_ENOMEM,
                                 "out of memory while undoing a gang");
        return -1;
    }
    return 0;
}

/* ---- the search --------------------------------------------------------- */

typedef struct gang_search {
    crater_sched_t *s;
    const crater_request_t *req;
    uint32_t replicas;
    uint64_t first;
    crater_placement_t *out;
    uint64_t budget; /* evaluations left; UINT64_MAX: brute force */
    bool ordered;    /* replicas in nondecreasing node order */
    bool exhausted;  /* the budget ran out: give up */
    bool failed;     /* a commit or release failed: give up */
} gang_search_t;

/* The next set of k bits after m within width bits (Gosper's hack);
 * 0 when none. */
static uint64_t next_set(uint64_t m, unsigned width)
{
    uint64_t c = m & -m, r = m + c;

    if (r == 0)
        return 0;
    m = (((r ^ m) >> 2) / c) | r;
    return width < 64 && (m >> width) ? 0 : m;
}

static uint64_t gpu_set(const crater_placement_t *p)
{
    uint64_t m = 0;

    for (uint32_t k = 0; k < p->ngpus; k++)
        m |= 1ull << p->gpu[k];
    return m;
}

/* Evaluate replica on node with GPU set allow (0: the filters' choice). */
static int try_on(gang_search_t *g,
                  uint32_t node,
                  uint64_t allow,
                  crater_placement_t *p)
{
    struct sched_ctx c;
    int rc;

    if (g->budget != UINT64_MAX && g->budget-- == 0) {
        g->exhausted = true;
        return -1;
    }
    g->s->gpu_allow = allow;
    rc = sched__eval(g->s, node, g->req, &c);
    g->s->gpu_allow = 0;
    if (rc == 0)
        *p = c.p;
    return rc;
}

static int search(gang_search_t *g, uint32_t i, uint32_t min_node);

/* Commit p as replica i and search on; undo it when that fails. 1 found,
 * 0 not, -1 out of budget (or a failure). */
static int descend(gang_search_t *g,
                   uint32_t i,
                   uint32_t node,
                   const crater_placement_t *p)
{
    int rc;

    if (crater_sched_commit(g->s, g->first + i, g->req, p, NULL) < 0) {
        g->failed = true;
        return -1;
    }
    rc = search(g, i + 1, g->ordered ? node : 0);
    if (rc == 1) {
        g->out[i] = *p;
        return 1;
    }
    if (crater_sched_release(g->s, g->first + i, NULL) < 0) {
        g->failed = true;
        return -1;
    }
    return rc;
}

/* Replica i on node: the filters' choice first, then every other GPU
 * set of the request's size. */
static int on_node(gang_search_t *g, uint32_t i, uint32_t node)
{
    unsigned width = g->s->st[node].ngpus, n = 0;
    uint64_t first = 0, m;
    crater_placement_t p;
    int rc;

    if ((rc = try_on(g, node, 0, &p)) == 0) {
        first = gpu_set(&p);
        if ((rc = descend(g, i, node, &p)) != 0)
            return rc;
    }
    if (g->exhausted)
        return -1;
    if (g->req->gpus == 0 || g->req->gpus > width || width > 64)
        return 0;
    m = g->req->gpus == 64 ? UINT64_MAX : (1ull << g->req->gpus) - 1;
    for (; m && n < GANG_MAX_SETS; m = next_set(m, width), n++) {
        if (m == first)
            continue;
        rc = try_on(g, node, m, &p);
        if (g->exhausted)
            return -1;
        if (rc == 0 && (rc = descend(g, i, node, &p)) != 0)
            return rc;
    }
    return 0;
}

static int search(gang_search_t *g, uint32_t i, uint32_t min_node)
{
    if (i == g->replicas)
        return 1;
    for (uint32_t node = min_node; node < g->s->n; node++) {
        int rc = on_node(g, i, node);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Run the search; 0 with every replica committed, -1 with nothing. */
static int run_search(gang_search_t *g)
{
    int rc = search(g, 0, 0);

    g->s->gpu_allow = 0;
    return rc == 1 && !g->failed ? 0 : -1;
}

int crater_sched_place_gang(crater_sched_t *s,
                            const crater_request_t *req,
                            uint32_t replicas,
                            uint64_t first_task,
                            crater_placement_t *out,
                            crater_error_t *err)
{
    gang_search_t g = {.s = s,
                       .req = req,
                       .replicas = replicas,
                       .first = first_task,
                       .out = out,
                       .budget = GANG_SEARCH_BUDGET,
                       .ordered = true};
    crater_error_t why;

    if (check_args(replicas, first_task, err) < 0)
        return -1;
    if (greedy(s, req, replicas, first_task, out, &why) == 0)
        return 0;
    if (why.errnum != CRATER_EUNSCHED || run_search(&g) < 0) {
        if (err)
            *err = why;
        return -1;
    }
    return 0;
}

int crater_sched_place_gang_bruteforce(crater_sched_t *s,
                                       const crater_request_t *req,
                                       uint32_t replicas,
                                       uint64_t first_task,
                                       crater_placement_t *out,
                                       crater_error_t *err)
{
    gang_search_t g = {.s = s,
                       .req = req,
                       .replicas = replicas,
                       .first = first_task,
                       .out = out,
                       .budget = UINT64_MAX};

    if (check_args(replicas, first_task, err) < 0)
        return -1;
    if (run_search(&g) == 0)
        return 0;
    return crater_errorf(err,
                         CRATER_EUNSCHED,
                         "no arrangement of the %u replicas fits",
                         replicas);
}
