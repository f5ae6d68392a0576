/* gang.c - multi-replica jobs in craterd: one djob_t with nrep replicas.
 *
 * Why one job and not N. A distributed training job is one thing to its
 * user: one id, one state, one cancel, one quota charge. So the job keeps
 * its single lifecycle (jobs.c) and adds a small table of replicas, each
 * with its placement, its state and how it ended. The agents see one
 * task per replica, keyed by (job, attempt, replica) in the agent
 * protocol; the core sees one task per replica under ids GANG_TASK_BIT |
 * id << 16 | r, consecutive, as crater_sched_place_gang() wants.
 *
 * All at once or none. craterd places every replica in one call to the
 * core's gang placement (src/sched/gang.c), also for gang: false (it
 * runs a job's replicas together either way; placing them one by one as
 * capacity frees is left for later). A gang runs, fails, is preempted
 * and is requeued as a unit: the first replica to start makes the job
 * running; the first to fail (exit code, signal, OOM, or a start that
 * failed) fails the job and the others get stop orders; the job succeeds
 * when the last replica exits 0; a lost node of any replica loses the job
 * (nodes.c); a preempted or cancelled gang ends with the first replica
 * that exits. Stop orders carry the attempt each replica was bound for,
 * so a requeued gang's old replicas stop whatever attempt the job counts
 * by then.
 *
 * Environment. Each replica gets torchrun's variables: MASTER_ADDR (the
 * rank-0 replica's node: the address its agent registered from, or the
 * node's name), MASTER_PORT (chosen here, deterministically, from
 * server.gangPortBase/gangPorts: free of the other placed gangs whose
 * rank 0 is on the same node), WORLD_SIZE (replicas), RANK (replica
 * index), LOCAL_RANK and LOCAL_WORLD_SIZE (among the replicas on the
 * same node, in index order), NODE_RANK (the node's index among the
 * gang's nodes, in order of their first replica) and CRATER_REPLICA.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "crater/proto.h"
#include "daemon/internal.h"

uint64_t job_task_id(const djob_t *j, uint32_t r)
{
    return j->nrep ? GANG_TASK_BIT | j->id << 16 | r : j->id;
}

uint64_t task_job_id(uint64_t task)
{
    return task & GANG_TASK_BIT ? (task & ~GANG_TASK_BIT) >> 16 : task;
}

bool job_on_node(const djob_t *j, uint32_t sid)
{
    for (uint32_t r = 0; r < job_ntasks(j); r++)
        if (job_task_pl(j, r)->node == sid)
            return true;
    return false;
}

int gang_init(djob_t *j, crater_error_t *err)
{
    uint32_t n = j->spec->replicas;

    if (n <= 1 || j->rep || j->spec->inference.enabled)
        return 0; /* a service's replicas are jobs of their own */
    if (n > JOB_MAX_REPLICAS)
        n = JOB_MAX_REPLICAS; /* admission refuses more */
    if (!(j->rep = calloc(n, sizeof(*j->rep))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    j->nrep = n;
    for (uint32_t r = 0; r < n; r++)
        j->rep[r].state = JS_PENDING;
    return 0;
}

/* Is port held by another placed gang whose rank 0 is on node, or by
 * any process there (its agent's last report)? */
static bool port_taken(crater_daemon_t *d,
                       const djob_t *j,
                       uint32_t node,
                       uint32_t port)
{
    if (node_port_held(d, node, port))
        return true;
    for (size_t i = 0; i < d->njobs; i++) {
        const djob_t *o = d->jobs[i];
        if (o != j && o->nrep && o->placed && o->rep[0].pl.node == node
            && o->master_port == port)
            return true;
    }
    return false;
}

static uint32_t pick_port(crater_daemon_t *d, const djob_t *j)
{
    uint32_t base = d->cfg.server.gang_port_base;
    uint32_t count = d->cfg.server.gang_ports;
    uint32_t start;

    if (base + count > 65536)
        count = 65536 - base;
    start = (uint32_t)(j->id % count);
    for (uint32_t k = 0; k < count; k++) {
        uint32_t p = base + (start + k) % count;
        if (!port_taken(d, j, j->rep[0].pl.node, p))
            return p;
    }
    return base + start; /* every port taken: share one */
}

void gang_placed(crater_daemon_t *d, djob_t *j, const crater_placement_t *pl)
{
    for (uint32_t r = 0; r < j->nrep; r++)
        j->rep[r].pl = pl[r];
    j->pl = pl[0];
    j->master_port = pick_port(d, j);
}

void gang_bound(djob_t *j)
{
    for (uint32_t r = 0; r < j->nrep; r++) {
        djob_rep_t *p = &j->rep[r];
        p->state = JS_BOUND;
        p->exit_code = p->exit_signal = 0;
        p->oom = p->stopping = false;
        p->attempt = j->attempts;
    }
}

void gang_release(crater_daemon_t *d, djob_t *j)
{
    for (uint32_t r = 0; r < j->nrep; r++)
        crater_sched_release(d->sched, job_task_id(j, r), NULL);
}

int gang_recommit(crater_daemon_t *d, djob_t *j, crater_error_t *err)
{
    for (uint32_t r = 0; r < j->nrep; r++)
        if (crater_sched_commit(d->sched,
                                job_task_id(j, r),
                                &j->req,
                                &j->rep[r].pl,
                                err)
            < 0) {
            while (r-- > 0)
                crater_sched_release(d->sched, job_task_id(j, r), NULL);
            return -1;
        }
    return 0;
}

/* ---- environment --------------------------------------------------------
 */

/* NODE_RANK of node: its index among j's nodes by first replica. */
static uint32_t node_rank(const djob_t *j, uint32_t node)
{
    uint32_t rank = 0;

    for (uint32_t r = 0; r < j->nrep && j->rep[r].pl.node != node; r++) {
        bool first = true;
        for (uint32_t q = 0; q < r && first; q++)
            first = j->rep[q].pl.node != j->rep[r].pl.node;
        rank += first;
    }
    return rank;
}

static int setenv_u(crater_proto_task_t *t, const char *key, uint32_t v)
{
    char num[16];

    snprintf(num, sizeof(num), "%" PRIu32, v);
    return crater_proto_task_setenv(t, key, num);
}

int gang_env(crater_daemon_t *d,
             const djob_t *j,
             uint32_t r,
             crater_proto_task_t *t)
{
    dnode_t *m = node_by_sid(d, j->rep[0].pl.node);
    uint32_t node = j->rep[r].pl.node, local = 0, nlocal = 0;
    int rc = 0;

    for (uint32_t q = 0; q < j->nrep; q++) {
        local += q < r && j->rep[q].pl.node == node;
        nlocal += j->rep[q].pl.node == node;
    }
    rc |= crater_proto_task_setenv(t,
                                   "MASTER_ADDR",
                                   m && m->addr ? m->addr
                                   : m          ? m->name
                                                : "127.0.0.1");
    rc |= setenv_u(t, "MASTER_PORT", j->master_port);
    rc |= setenv_u(t, "WORLD_SIZE", j->nrep);
    rc |= setenv_u(t, "RANK", r);
    rc |= setenv_u(t, "LOCAL_RANK", local);
    rc |= setenv_u(t, "LOCAL_WORLD_SIZE", nlocal);
    rc |= setenv_u(t, "NODE_RANK", node_rank(j, node));
    rc |= setenv_u(t, "CRATER_REPLICA", r);
    return rc ? -1 : 0;
}

/* ---- lifecycle ----------------------------------------------------------
 */

void gang_started(crater_daemon_t *d, djob_t *j, uint32_t r, int64_t at)
{
    char reason[64];

    if (j->rep[r].state == JS_BOUND)
        j->rep[r].state = JS_RUNNING;
    snprintf(reason, sizeof(reason), "replica %" PRIu32 " started", r);
    if (j->state == JS_LOST)
        job_apply(d, j, JE_RECONNECT, "node reconnected; still running");
    else if (job_apply_at(d, j, JE_START, reason, at) < 0)
        job_save(d, j, NULL, NULL); /* running already: the replica's state */
}

bool gang_exited(
    djob_t *j, uint32_t r, int code, int signal, bool oom, bool *failed)
{
    djob_rep_t *p = &j->rep[r];
    bool ok = code == 0 && !signal && !oom;
    uint32_t done = 0;

    if (job_state_final(p->state))
        return false; /* its exit was counted */
    p->exit_code = code;
    p->exit_signal = signal;
    p->oom = oom;
    p->state = j->state == JS_PREEMPTING ? JS_PREEMPTED
               : j->cancel_requested     ? JS_CANCELLED
               : ok                      ? JS_SUCCEEDED
                                         : JS_FAILED;
    if (!ok && j->state != JS_PREEMPTING && !j->cancel_requested) {
        *failed = true;
        return true;
    }
    /* A gang being stopped is gone with its last replica: until then the
     * others still hold their GPUs (and are requeued once, as a unit). */
    for (uint32_t q = 0; q < j->nrep; q++)
        done += j->state == JS_PREEMPTING || j->cancel_requested
                    ? job_state_final(j->rep[q].state)
                          || j->rep[q].state == JS_PREEMPTED
                    : j->rep[q].state == JS_SUCCEEDED;
    return done == j->nrep;
}

void gang_ended(crater_daemon_t *d, djob_t *j, job_state_t to)
{
    char id[24];

    snprintf(id, sizeof(id), "%" PRIu64, j->id);
    for (uint32_t r = 0; j->placed && r < j->nrep; r++) {
        djob_rep_t *p = &j->rep[r];
        dnode_t *n = node_by_sid(d, p->pl.node);
        if (job_state_final(p->state) || p->state == JS_PENDING)
            continue;
        if (!p->stopping && n)
            node_order_stop(d,
                            n,
                            id,
                            p->attempt,
                            r,
                            j->spec->grace_period_ms,
                            "stopped with its gang");
        p->stopping = true;
        p->state = to == JS_SUCCEEDED ? JS_SUCCEEDED : JS_CANCELLED;
    }
}

/* ---- JSON -----------------------------------------------------------------
 */

static json_t *rep_json(crater_daemon_t *d, const djob_t *j, uint32_t r)
{
    const djob_rep_t *p = &j->rep[r];
    dnode_t *n = node_by_sid(d, p->pl.node);
    json_t *o = json_pack("{s:i, s:s?, s:s}",
                          "replica",
                          (int)r,
                          "node",
                          j->ever_placed && n ? n->name : NULL,
                          "state",
                          job_state_name(p->state));

    if (o && job_state_final(p->state))
        json_object_set_new(o,
                            "exit",
                            json_pack("{s:i, s:i, s:b}",
                                      "code",
                                      p->exit_code,
                                      "signal",
                                      p->exit_signal,
                                      "oom",
                                      p->oom));
    return o;
}

json_t *gang_json(crater_daemon_t *d, const djob_t *j)
{
    json_t *a = json_array();

    for (uint32_t r = 0; a && r < j->nrep; r++)
        json_array_append_new(a, rep_json(d, j, r));
    return a;
}

json_t *gang_store(crater_daemon_t *d, const djob_t *j)
{
    json_t *a = json_array();

    for (uint32_t r = 0; a && r < j->nrep; r++) {
        const djob_rep_t *p = &j->rep[r];
        json_array_append_new(a,
                              json_pack("{s:o, s:s, s:i, s:i, s:b, s:b, s:i,"
                                        " s:i}",
                                        "placement",
                                        placement_store(d, &p->pl),
                                        "state",
                                        job_state_name(p->state),
                                        "exit_code",
                                        p->exit_code,
                                        "exit_signal",
                                        p->exit_signal,
                                        "oom",
                                        p->oom,
                                        "stopping",
                                        p->stopping,
                                        "attempt",
                                        (int)p->attempt,
                                        "master_port",
                                        (int)j->master_port));
    }
    return a;
}

int gang_load(crater_daemon_t *d, djob_t *j, json_t *v)
{
    json_t *e;
    size_t r;

    if (!json_is_array(v) || json_array_size(v) != j->nrep)
        return -1;
    json_array_foreach(v, r, e)
    {
        djob_rep_t *p = &j->rep[r];
        const char *state = NULL;
        json_t *pl = NULL;
        int stopping = 0, oom = 0, att = 0, port = 0;
        if (json_unpack(e,
                        "{s:o, s:s, s:i, s:i, s:b, s:b, s:i, s:i}",
                        "placement",
                        &pl,
                        "state",
                        &state,
                        "exit_code",
                        &p->exit_code,
                        "exit_signal",
                        &p->exit_signal,
                        "oom",
                        &oom,
                        "stopping",
                        &stopping,
                        "attempt",
                        &att,
                        "master_port",
                        &port)
                < 0
            || job_state_parse(state) < 0 || placement_load(d, pl, &p->pl) < 0)
            return -1;
        p->state = (job_state_t)job_state_parse(state);
        p->oom = oom;
        p->stopping = stopping;
        p->attempt = (uint32_t)att;
        j->master_port = (uint32_t)port;
    }
    return 0;
}
