/* api_agents.c - the agent protocol (version CRATER_AGENT_PROTOCOL):
 * register, task events, heartbeat, the long-poll work channel, and log
 * upload. An agent token speaks only for its node.
 *
 * Register (after every agent start and reconnect) carries the protocol
 * version (a mismatch is refused with both numbers) and every task the
 * agent holds, running or exited but not yet reported; the agent adopts
 * tasks that survived its own restart, so this is the truth of the node.
 * craterd reconciles at once: a job it has running there that the agent
 * does not hold was lost with the node and is requeued; a task the agent
 * holds for a job not placed there (or another attempt) gets a stop
 * order, so nothing runs twice; bound jobs get their start orders again.
 * The answer lists the node's tasks with the log bytes craterd holds, so
 * an agent resumes shipping where craterd stopped.
 *
 * Events drive the job lifecycle the moment they happen on the node:
 * started (pid, the agent's start time) makes a bound job running; exited
 * (code, signal, OOM, reason, the final log sizes) makes it succeeded or
 * failed, or requeues a preempted job, or ends a cancelled one. Events are
 * idempotent: the agent re-sends until acknowledged. Heartbeats carry
 * samples only (machine utilisation, each running task's usage), with
 * two exceptions that only a node back from a partition needs: a lost
 * job whose task is listed runs again, and a listed task that is not
 * placed there (an attempt craterd requeued meanwhile) gets a stop order.
 *
 * Logs: POST .../logs/{job}?attempt=N&stream=S&offset=O writes at O in
 * DATA/logs/<job>.<N>.<S> (idempotent), outside the daemon's lock, up to
 * logs.maxBytes; past it a note is appended once and the answer says
 * "truncated" so the agent stops sending that stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crater/proto.h"
#include "daemon/buildinfo.h"
#include "daemon/cost.h"
#include "daemon/internal.h"

#define POLL_DEFAULT_MS 30000
#define POLL_MAX_MS 60000

/* The node in the path, if p may speak for it (an agent of that node or
 * an admin). Fills 403/404 otherwise. */
static dnode_t *agent_node(crater_daemon_t *d,
                           crater_http_req_t *r,
                           const principal_t *p,
                           crater_http_resp_t *resp,
                           bool may_be_new)
{
    const char *name = crater_http_param(r, "node");
    dnode_t *n = node_find(d, name);

    if (p->role == CRATER_ROLE_USER
        || (p->role == CRATER_ROLE_AGENT && strcmp(p->node, name) != 0)) {
        api_errorf(resp,
                   CRATER_EPERM,
                   "node",
                   "this token may not speak for node '%s'",
                   name);
        return NULL;
    }
    if (!n && !may_be_new)
        api_errorf(resp,
                   CRATER_ENOENT,
                   "node",
                   "node '%s' is not registered",
                   name);
    return n;
}

static void mark_alive(crater_daemon_t *d, dnode_t *n, int64_t now)
{
    n->last_hb_ms = now;
    if (n->registered && !n->ready) { /* back from a partition: reconcile */
        crater_proto_item_t resync = {.op = CRATER_PROTO_RESYNC};
        node_push_work(d, n, crater_proto_item_encode(&resync));
    }
    if (!n->registered || !n->ready) {
        n->registered = true;
        n->ready = true;
        crater_sched_set_ready(d->sched, n->sid, true);
        loop_capacity_changed(d);
        declog_write(d,
                     json_pack("{s:I, s:s, s:s}",
                               "time_ms",
                               (json_int_t)now,
                               "decision",
                               "node-ready",
                               "node",
                               n->name));
        loop_kick(d);
    }
}

/* Decode an agent's body as a protocol message; a malformed one is a 400
 * naming the field (or field, when given: the documented one). */
typedef int (*proto_decode_f)(crater_dec_t *d, json_t *v, void *out);

static int decode_body(json_t *body,
                       proto_decode_f fn,
                       void *out,
                       const char *field,
                       crater_http_resp_t *resp)
{
    crater_error_t err = {0};
    crater_dec_t dec;

    crater_dec_init(&dec, NULL, 0, &err);
    if (fn(&dec, body, out) == 0)
        return 0;
    if (field)
        snprintf(err.field, sizeof(err.field), "%s", field);
    crater_http_error(resp, &err);
    return -1;
}

/* ---- register -------------------------------------------------------------
 */

static dnode_t *register_node(crater_daemon_t *d,
                              const char *name,
                              json_t *hw,
                              crater_http_resp_t *resp)
{
    crater_error_t err = {0};
    dnode_t *n;

    if (!hw) {
        api_errorf(resp,
                   CRATER_EMISSING,
                   "node",
                   "node: the agent's hardware (a Node document) is required");
        return NULL;
    }
    if (!(n = node_add(d, hw, name, &err))) {
        crater_http_error(resp, &err);
        return NULL;
    }
    node_save(d, n);
    return n;
}

/* Bytes craterd holds of stream s of j's attempt att. */
static uint64_t log_size(crater_daemon_t *d,
                         const djob_t *j,
                         uint32_t att,
                         uint32_t replica,
                         const char *s)
{
    char path[4096];
    struct stat st;

    if (log_path_replica(d, j->id, att, replica, s, NULL, path, sizeof(path))
            < 0
        || stat(path, &st) < 0)
        return 0;
    return (uint64_t)st.st_size;
}

/* Add replica k of j to r->tasks (room for *cap, grown when a gang puts
 * several replicas on one node). */
static int node_task(crater_daemon_t *d,
                     const djob_t *j,
                     uint32_t k,
                     crater_proto_registered_t *r,
                     size_t *cap)
{
    crater_proto_task_t *t;

    if (r->ntasks == *cap) {
        t = realloc(r->tasks, 2 * *cap * sizeof(*t));
        if (!t)
            return -1;
        r->tasks = t;
        *cap *= 2;
    }
    t = &r->tasks[r->ntasks];
    if (task_order(d, j, k, t) < 0)
        return -1;
    r->ntasks++;
    t->has_logs = true;
    t->logs[0] = log_size(d, j, j->attempts, k, "stdout");
    t->logs[1] = log_size(d, j, j->attempts, k, "stderr");
    return 0;
}

/* The register answer's tasks: the jobs placed on n, each with the bytes
 * of its output craterd holds. */
static int node_tasks(crater_daemon_t *d,
                      dnode_t *n,
                      crater_proto_registered_t *r)
{
    if (!(r->tasks = calloc(d->njobs ? d->njobs : 1, sizeof(*r->tasks))))
        return -1;
    size_t cap = d->njobs ? d->njobs : 1;

    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (!j->placed || !job_state_holds(j->state))
            continue;
        for (uint32_t k = 0; k < job_ntasks(j); k++)
            if (job_task_pl(j, k)->node == n->sid
                && node_task(d, j, k, r, &cap) < 0)
                return -1;
    }
    return 0;
}

static json_t *register_answer(crater_daemon_t *d, dnode_t *n, uint64_t seq)
{
    crater_proto_registered_t r = {
        .node = n->name,
        .version = (char *)crater_version(),
        .protocol = CRATER_AGENT_PROTOCOL,
        .seq = seq,
        .heartbeat_interval_ms = d->cfg.agent.heartbeat_interval_ms,
        .heartbeat_timeout_ms = d->cfg.agent.heartbeat_timeout_ms,
        .sampling_interval_ms = d->cfg.monitoring.sampling_interval_ms,
    };
    json_t *v =
        node_tasks(d, n, &r) == 0 ? crater_proto_registered_encode(&r) : NULL;

    r.node = r.version = NULL; /* borrowed */
    crater_proto_registered_clear(&r);
    return v;
}

static void reset_channel(crater_daemon_t *d, dnode_t *n)
{
    node_complete_poll(n);
    for (size_t k = 0; k < n->nwork; k++)
        json_decref(n->work[k].item);
    n->nwork = 0;
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->placed && job_on_node(j, n->sid) && j->state == JS_BOUND)
            node_send_start(d, j, n);
        if (j->placed && job_on_node(j, n->sid) && j->cancel_requested
            && job_state_holds(j->state))
            node_send_stop(d, j, "cancelled");
    }
}

/* The job a task (a replica of an attempt) names, if that replica is
 * placed on n in a holding state and the attempt matches; NULL
 * otherwise. */
static djob_t *placed_job(crater_daemon_t *d,
                          dnode_t *n,
                          const char *id,
                          uint32_t att,
                          uint32_t replica)
{
    djob_t *j = id ? job_find(d, strtoull(id, NULL, 10)) : NULL;

    if (!j || !j->placed || replica >= job_ntasks(j)
        || job_task_pl(j, replica)->node != n->sid || !job_state_holds(j->state)
        || att != j->attempts)
        return NULL;
    return j;
}

/* The job whose previous attempt ran ev's task on n: a checkpoint the
 * task reported as it was stopped may come after the requeue. */
static djob_t *requeued_job(crater_daemon_t *d,
                            dnode_t *n,
                            const crater_proto_event_t *ev)
{
    djob_t *j = ev->job ? job_find(d, strtoull(ev->job, NULL, 10)) : NULL;

    return j && j->prev_attempt == ev->attempt && j->prev_node == n->sid ? j
                                                                         : NULL;
}

static void order_stop(crater_daemon_t *d,
                       dnode_t *n,
                       const char *id,
                       uint32_t attempt,
                       uint32_t replica,
                       const char *why)
{
    node_order_stop(d, n, id, attempt, replica, 0, why);
}

/* Does the agent of n hold every task of j's attempt placed on n? */
static bool held(const crater_proto_register_t *r,
                 const djob_t *j,
                 const dnode_t *n)
{
    for (uint32_t k = 0; k < job_ntasks(j); k++) {
        bool found = job_task_pl(j, k)->node != n->sid;
        for (size_t i = 0; !found && i < r->ntasks; i++)
            found = strtoull(r->tasks[i].job, NULL, 10) == j->id
                    && r->tasks[i].attempt == j->attempts
                    && r->tasks[i].replica == k;
        if (!found)
            return false;
    }
    return true;
}

static void job_exited(crater_daemon_t *d,
                       djob_t *j,
                       const crater_proto_event_t *ev);

/* What the agent holds is the truth of the node (see the top). */
static void reconcile(crater_daemon_t *d,
                      dnode_t *n,
                      const crater_proto_register_t *r)
{
    for (size_t i = 0; i < r->ntasks; i++) {
        const crater_proto_held_t *t = &r->tasks[i];
        djob_t *j = placed_job(d, n, t->job, t->attempt, t->replica);
        if (!j) {
            order_stop(d, n, t->job, t->attempt, t->replica, "not placed here");
            continue;
        }
        if (j->state == JS_LOST)
            job_apply(d, j, JE_RECONNECT, "node reconnected; still running");
    }
    for (size_t k = 0; k < d->njobs; k++) {
        djob_t *j = d->jobs[k];
        if (!j->placed || !job_on_node(j, n->sid) || j->state == JS_BOUND
            || !job_state_holds(j->state) || held(r, j, n))
            continue;
        if (j->state == JS_PREEMPTING) {
            crater_proto_event_t gone = {.event = CRATER_PROTO_EXITED,
                                         .signal = 15};
            job_exited(d, j, &gone);
            continue;
        }
        job_apply(d, j, JE_REQUEUE, "requeued: the agent restarted without it");
    }
}

static int check_protocol(json_t *body, crater_http_resp_t *resp)
{
    int64_t p = crater_proto_register_protocol(body);

    if (p == CRATER_AGENT_PROTOCOL)
        return 0;
    api_errorf(resp,
               CRATER_EINVAL,
               "protocol",
               "protocol: this agent speaks agent protocol "
               "%" PRId64 " and craterd %s speaks %d: run the same Crater "
               "version on both",
               p,
               crater_version(),
               CRATER_AGENT_PROTOCOL);
    return -1;
}

/* The address the agent registered from: its replicas' MASTER_ADDR. */
static void note_address(dnode_t *n, crater_http_req_t *r)
{
    char addr[64];
    char *a;

    if (crater_http_peer(r, addr, sizeof(addr)) < 0 || !(a = strdup(addr)))
        return;
    free(n->addr);
    n->addr = a;
}

static int dec_register(crater_dec_t *d, json_t *v, void *out)
{
    return crater_proto_register_decode(d, v, out);
}

static void h_register(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    crater_daemon_t *d = arg;
    crater_proto_register_t reg = {0};
    json_t *body = NULL;
    principal_t p;
    dnode_t *n;
    uint64_t seq;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0)
        goto out;
    n = agent_node(d, r, &p, resp, true);
    if ((!n && resp->body) || check_protocol(body, resp) < 0
        || decode_body(body, dec_register, &reg, NULL, resp) < 0)
        goto out;
    if (n)
        node_check_hardware(d, n, reg.node);
    else if (!(n = register_node(d,
                                 crater_http_param(r, "node"),
                                 reg.node,
                                 resp)))
        goto out;
    note_address(n, r);
    seq = n->seq;
    mark_alive(d, n, dnow_ms());
    reset_channel(d, n);
    reconcile(d, n, &reg);
    crater_http_json(resp, 200, register_answer(d, n, seq));
out:
    crater_proto_register_clear(&reg);
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- events ---------------------------------------------------------------
 */

/* A preempted attempt is not a failure: the next attempt resumes from
 * the job's checkpoint directory (the latest report is named). */
static void requeue_preempted(crater_daemon_t *d, djob_t *j)
{
    json_t *last = json_array_get(j->ckpts, json_array_size(j->ckpts) - 1);
    char reason[256];
    int n = snprintf(reason,
                     sizeof(reason),
                     "requeued after preemption (%s); attempt %u",
                     crater_proto_notice_name(j->stop_notice),
                     j->attempts + 1);

    if (last && n > 0 && (size_t)n < sizeof(reason))
        snprintf(reason + n,
                 sizeof(reason) - (size_t)n,
                 " resumes from checkpoint step %" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(last, "step")));
    j->stop_notice = CRATER_NOTICE_NONE;
    job_apply(d, j, JE_REQUEUE, reason); /* counts the attempt */
}

static void job_exited_at(crater_daemon_t *d,
                          djob_t *j,
                          const crater_proto_event_t *ev,
                          int64_t at)
{
    const char *why = ev->error;
    char reason[256];

    j->exit_code = ev->exit_code;
    j->exit_signal = ev->signal;
    j->oom = ev->oom;
    if (j->state == JS_BOUND) /* ran and finished before "started" came */
        job_apply_at(d, j, JE_START, "started by agent", at);
    if (j->state == JS_PREEMPTING) {
        job_apply_at(d, j, JE_EXIT_STOPPED, "stopped by its agent", at);
        if (j->cancel_requested)
            job_apply_at(d, j, JE_EXIT_CANCELLED, "cancelled", at);
        else
            requeue_preempted(d, j);
        return;
    }
    if (j->cancel_requested) {
        job_apply_at(d,
                     j,
                     JE_EXIT_CANCELLED,
                     j->cost_capped ? "cost cap; stopped by its agent"
                                    : "cancelled; stopped by its agent",
                     at);
        return;
    }
    if (why && *why) /* could not start, time limit, GPU watchdog */
        snprintf(reason, sizeof(reason), "%s", why);
    else if (ev->oom)
        snprintf(reason,
                 sizeof(reason),
                 "OOM-killed: exceeded its memory limit");
    else if (ev->signal)
        snprintf(reason, sizeof(reason), "killed by signal %d", ev->signal);
    else
        snprintf(reason, sizeof(reason), "exit code %d", ev->exit_code);
    /* a reason from the agent (time limit, watchdog, could not start)
     * fails the job even when the task caught SIGTERM and exited 0 */
    if (ev->exit_code == 0 && !ev->signal && !ev->oom && !(why && *why)) {
        job_apply_at(d, j, JE_EXIT_OK, reason, at);
        return;
    }
    gshare_failed(j); /* before a retry is placed */
    if (!job_retry_failure(d, j, reason))
        job_apply_at(d, j, JE_EXIT_FAIL, reason, at);
}

static void job_exited(crater_daemon_t *d,
                       djob_t *j,
                       const crater_proto_event_t *ev)
{
    job_exited_at(d, j, ev, 0);
}

/* The final log sizes an exited event carries. */
static void log_expect(djob_t *j, const crater_proto_event_t *ev)
{
    if (!ev->has_logs)
        return;
    job_log_attempt(j, j->attempts);
    j->log_expect[0] = ev->logs[0];
    j->log_expect[1] = ev->logs[1];
    j->log_final = true;
}

/* An event's time, never before the job's last recorded change (the
 * node's clock may lag craterd's; the history stays in order). */
static int64_t not_before_last(const djob_t *j, int64_t at)
{
    json_t *last = json_array_get(j->history, json_array_size(j->history) - 1);
    int64_t t = (int64_t)json_integer_value(json_object_get(last, "time_ms"));

    return at > 0 && at < t ? t : at;
}

/* An event of one replica of a multi-replica job (gang.c keeps the
 * replicas' states): the first start runs the job; an exit ends the job
 * when it decides the gang (the first failure fails it, and the others
 * are stopped; the last success succeeds it; the last exit of a gang
 * being preempted or cancelled: it is requeued or cancelled once, as a
 * unit); the job's log counters follow its first replica. */
static void gang_event(crater_daemon_t *d,
                       djob_t *j,
                       const crater_proto_event_t *ev,
                       int64_t at)
{
    crater_proto_event_t e = *ev;
    char why[1200];
    bool failed = false;

    if (ev->event == CRATER_PROTO_STARTED) {
        gang_started(d, j, ev->replica, at);
        return;
    }
    if (ev->replica == 0)
        log_expect(j, ev);
    if (!gang_exited(j,
                     ev->replica,
                     ev->exit_code,
                     ev->signal,
                     ev->oom,
                     &failed)) {
        job_save(d, j, NULL, NULL);
        return;
    }
    if (failed) {
        int n = snprintf(why,
                         sizeof(why),
                         "replica %u on %s: ",
                         ev->replica,
                         node_by_sid(d, j->rep[ev->replica].pl.node)->name);
        if (ev->error && *ev->error)
            snprintf(why + n, sizeof(why) - (size_t)n, "%s", ev->error);
        else if (ev->oom)
            snprintf(why + n, sizeof(why) - (size_t)n, "OOM-killed");
        else if (ev->signal)
            snprintf(why + n,
                     sizeof(why) - (size_t)n,
                     "killed by signal %d",
                     ev->signal);
        else
            snprintf(why + n,
                     sizeof(why) - (size_t)n,
                     "exit code %d",
                     ev->exit_code);
        e.error = why;
    }
    job_exited_at(d, j, &e, at);
}

/* One (decoded) event. */
static void apply_event(crater_daemon_t *d,
                        dnode_t *n,
                        const crater_proto_event_t *ev)
{
    djob_t *j = placed_job(d, n, ev->job, ev->attempt, ev->replica);
    int64_t at = ev->time_ms;
    char reason[96];

    if (at > dnow_ms() + 60000)
        at = 0; /* a clock far off: craterd's time */
    if (!j && ev->event == CRATER_PROTO_CHECKPOINT
        && (j = requeued_job(d, n, ev))) { /* saved as it was stopped */
        job_checkpoint(d, j, ev, at);
        return;
    }
    if (!j) { /* not ours (any more): make sure it does not keep running */
        if (ev->event == CRATER_PROTO_STARTED)
            order_stop(d,
                       n,
                       ev->job,
                       ev->attempt,
                       ev->replica,
                       "not placed here");
        return;
    }
    at = not_before_last(j, at);
    if (ev->event == CRATER_PROTO_CHECKPOINT) {
        job_checkpoint(d, j, ev, at);
        return;
    }
    if (ev->event == CRATER_PROTO_PROGRESS) {
        job_progress(j, ev, at);
        return;
    }
    if (ev->event == CRATER_PROTO_READY) {
        svc_ready_report(d, j, ev->ready);
        return;
    }
    if (j->nrep) {
        gang_event(d, j, ev, at);
        return;
    }
    if (ev->event == CRATER_PROTO_STARTED) {
        snprintf(reason, sizeof(reason), "started by agent (pid %d)", ev->pid);
        if (j->state == JS_LOST)
            job_apply(d, j, JE_RECONNECT, "node reconnected; still running");
        else /* refused but when bound: a duplicate or late report */
            job_apply_at(d, j, JE_START, reason, at);
        return;
    }
    log_expect(j, ev);
    job_exited_at(d, j, ev, at);
}

static int dec_events(crater_dec_t *d, json_t *v, void *out)
{
    return crater_proto_events_decode(d, v, out);
}

/* A malformed event is refused whole, before any of them applies. */
static void h_events(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    crater_proto_events_t evs = {0};
    json_t *body = NULL;
    principal_t p;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0
        || !(n = agent_node(d, r, &p, resp, false))
        || decode_body(body, dec_events, &evs, "events", resp) < 0)
        goto out;
    mark_alive(d, n, dnow_ms());
    job_save_defer(d); /* a start and an exit of one job: one write */
    for (size_t i = 0; i < evs.nevents; i++)
        apply_event(d, n, &evs.events[i]);
    job_save_flush(d);
    crater_http_json(resp, 200, json_pack("{s:b}", "ok", 1));
    /* acknowledged once what they changed is stored: an agent drops an
     * acknowledged exit, and a leader that lost its election (fenced, or
     * cut off from etcd) must not make it forget a job that finished, or
     * the next leader starts that job again (test_ha's partition) */
    api_answer_when_stored(d, r, resp);
out:
    crater_proto_events_clear(&evs);
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- heartbeat ------------------------------------------------------------
 */

static void add_sample(djob_t *j, const crater_proto_usage_t *u, int64_t now)
{
    json_t *s = json_pack("{s:f, s:I, s:I}",
                          "cpu_millis",
                          u->cpu_millis,
                          "memory_bytes",
                          (json_int_t)u->memory_bytes,
                          "time_ms",
                          (json_int_t)now);

    if (!s)
        return;
    if (json_array_size(j->samples) >= JOB_MAX_SAMPLES)
        json_array_remove(j->samples, 0);
    json_array_append_new(j->samples, s);
}

static void apply_util(crater_daemon_t *d,
                       dnode_t *n,
                       const crater_proto_heartbeat_t *h)
{
    if (!h->has_util)
        return;
    n->util.cpu = h->cpu;
    n->util.mem = h->memory;
    n->util.disk = h->disk;
    for (uint32_t i = 0; i < h->ngpus; i++) {
        uint32_t g = h->gpus[i].index; /* < CRATER_MAX_GPUS_PER_NODE */
        n->util.gpu[g] = h->gpus[i].util;
        n->util.gpu_used_mib[g] =
            (uint32_t)(h->gpus[i].memory_used_bytes >> 20);
    }
    crater_sched_set_util(d->sched, n->sid, &n->util);
    node_watermark(d, n);
    d->util_dirty = true;
}

static int dec_heartbeat(crater_dec_t *d, json_t *v, void *out)
{
    return crater_proto_heartbeat_decode(d, v, out);
}

static void h_heartbeat(crater_http_req_t *r,
                        crater_http_resp_t *resp,
                        void *arg)
{
    crater_daemon_t *d = arg;
    int64_t now = dnow_ms();
    crater_proto_heartbeat_t hb;
    json_t *body = NULL;
    principal_t p;
    dnode_t *n;

    memset(&hb, 0, sizeof(hb));
    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0
        || !(n = agent_node(d, r, &p, resp, false))
        || decode_body(body, dec_heartbeat, &hb, NULL, resp) < 0)
        goto out;
    mark_alive(d, n, now);
    apply_util(d, n, &hb);
    if (hb.has_ports)
        node_held_set(d, n, hb.ports, hb.nports);
    for (size_t i = 0; i < hb.ntasks; i++) {
        const crater_proto_usage_t *u = &hb.tasks[i];
        djob_t *j = placed_job(d, n, u->job, u->attempt, u->replica);
        if (j && j->state == JS_LOST) /* the node is back; so is the task */
            job_apply(d, j, JE_RECONNECT, "node reconnected; still running");
        if (!j) { /* runs there but is not ours (any more): stop it */
            order_stop(d, n, u->job, u->attempt, u->replica, "not placed here");
            continue;
        }
        if (u->replica == 0) /* a gang's samples: its first replica */
            add_sample(j, u, now);
        idle_observe(d, j, u->replica, &hb, now);
        gshare_observe(d, j, u->replica, &hb);
    }
    cost_heartbeat(d, n, &hb, now);
    crater_http_json(resp, 200, json_pack("{s:b}", "ok", 1));
out:
    crater_proto_heartbeat_clear(&hb);
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- work (long poll) -----------------------------------------------------
 */

static void drop_acked(dnode_t *n, uint64_t after)
{
    size_t k = 0;

    for (size_t i = 0; i < n->nwork; i++) {
        if (n->work[i].seq <= after)
            json_decref(n->work[i].item);
        else
            n->work[k++] = n->work[i];
    }
    n->nwork = k;
}

static void h_work(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    const char *a = crater_http_query(r, "after");
    const char *w = crater_http_query(r, "wait_ms");
    uint64_t after = 0, wait = POLL_DEFAULT_MS;
    principal_t p;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0
        || !(n = agent_node(d, r, &p, resp, false)))
        goto out;
    if (a && crater_http_parse_uint(a, UINT64_MAX, &after) < 0) {
        api_errorf(resp, CRATER_EINVAL, "after", "after: not a number");
        goto out;
    }
    if (w && crater_http_parse_uint(w, POLL_MAX_MS, &wait) < 0) {
        api_errorf(resp,
                   CRATER_ERANGE,
                   "wait_ms",
                   "wait_ms must be between 0 and %d",
                   POLL_MAX_MS);
        goto out;
    }
    drop_acked(n, after);
    node_complete_poll(n); /* an older poll of this node ends now */
    n->poll_after = after;
    n->poll_deadline_ms = dnow_ms() + (int64_t)wait;
    if (!(n->poll = crater_http_suspend(r))) {
        api_errorf(resp, CRATER_EUNAVAIL, NULL, "server is shutting down");
        goto out;
    }
    if (n->nwork > 0 || wait == 0 || d->stopping)
        node_complete_poll(n);
out:
    pthread_mutex_unlock(&d->mu);
}

/* ---- logs -----------------------------------------------------------------
 */

typedef struct log_up {
    char path[4096];
    uint64_t off;
    size_t len;      /* bytes to write (cut at logs.maxBytes) */
    uint64_t limit;  /* logs.maxBytes */
    bool cut;        /* this upload crosses the limit: write the note */
    bool all_before; /* the stream was already cut: write nothing */
} log_up_t;

static int append_log(const log_up_t *u,
                      const char *data,
                      crater_http_resp_t *resp)
{
    int fd = open(u->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    char note[128];
    ssize_t w = 0;
    int n;

    if (fd < 0) {
        api_errorf(resp, CRATER_EIO, NULL, "log: %s", strerror(errno));
        return -1;
    }
    if (u->len > 0)
        w = pwrite(fd, data, u->len, (off_t)u->off);
    if (u->cut) {
        n = snprintf(note,
                     sizeof(note),
                     "\n[crater: output truncated at %" PRIu64 " bytes "
                     "(logs.maxBytes)"
                     "]\n",
                     u->limit);
        if (pwrite(fd, note, (size_t)n, (off_t)u->limit) != n)
            w = -1;
    }
    close(fd);
    if (w != (ssize_t)u->len) {
        api_errorf(resp, CRATER_EIO, NULL, "log: short write");
        return -1;
    }
    return 0;
}

/* Under d->mu: check the request, fill u, count the bytes on j. */
static djob_t *log_target(crater_daemon_t *d,
                          dnode_t *n,
                          crater_http_req_t *r,
                          size_t len,
                          log_up_t *u,
                          crater_http_resp_t *resp)
{
    const char *stream = crater_http_query(r, "stream");
    const char *att = crater_http_query(r, "attempt");
    const char *rep = crater_http_query(r, "replica");
    const char *id = crater_http_param(r, "job");
    uint64_t jid = 0, a64 = 0, r64 = 0;
    uint32_t a;
    djob_t *j;
    int s;

    crater_http_parse_uint(id, UINT64_MAX, &jid);
    j = job_find(d, jid);
    if (!j || !j->durable) {
        api_errorf(resp, CRATER_ENOENT, "job", "no job '%s'", id);
        return NULL;
    }
    /* "4294967297" once became attempt 1 (strtoul cast to 32 bits) */
    if (!att)
        a64 = j->attempts;
    else if (crater_http_parse_uint(att, UINT32_MAX, &a64) < 0)
        a64 = 0;
    a = (uint32_t)a64;
    if (a == 0 || a > j->attempts) {
        api_errorf(resp, CRATER_ERANGE, "attempt", "no attempt '%s'", att);
        return NULL;
    }
    if (rep
        && (crater_http_parse_uint(rep, UINT32_MAX, &r64) < 0
            || r64 >= job_ntasks(j))) {
        api_errorf(resp, CRATER_ERANGE, "replica", "no replica '%s'", rep);
        return NULL;
    }
    if (log_path_replica(d,
                         j->id,
                         a,
                         (uint32_t)r64,
                         stream ? stream : "stdout",
                         &s,
                         u->path,
                         sizeof(u->path))
        < 0) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "stream",
                   "stream must be stdout or stderr");
        return NULL;
    }
    if (api_query_offset(r, "offset", &u->off, resp) < 0)
        return NULL;
    if (!(a == j->attempts && j->ever_placed
          && job_task_pl(j, (uint32_t)r64)->node == n->sid)
        && !(a == j->prev_attempt
             && (r64 ? job_task_pl(j, (uint32_t)r64)->node : j->prev_node)
                    == n->sid)) {
        api_errorf(resp,
                   CRATER_EPERM,
                   "job",
                   "attempt %" PRIu32 " of job %s did not run on node %s",
                   a,
                   id,
                   n->name);
        return NULL;
    }
    u->limit = d->cfg.logs.max_bytes;
    u->len = len;
    if (u->off >= u->limit)
        u->len = 0;
    else if (u->off + len > u->limit)
        u->len = (size_t)(u->limit - u->off);
    u->cut = u->off + len > u->limit;
    if (r64) /* the job's log counters follow its first replica */
        return j;
    job_log_attempt(j, a);
    if (j->log_attempt == a) {
        u->all_before = j->log_truncated[s];
        if (u->off + len > j->log_bytes[s])
            j->log_bytes[s] = u->off + len;
        j->log_truncated[s] |= u->cut;
    }
    return j;
}

static void h_log_upload(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    size_t len;
    const char *data = crater_http_body(r, &len);
    log_up_t u = {0};
    djob_t *j = NULL;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0
        && (n = agent_node(d, r, &p, resp, false)))
        j = log_target(d, n, r, len, &u, resp);
    pthread_mutex_unlock(&d->mu);
    if (!j)
        return;
    if (u.all_before)
        u.cut = false;
    if (append_log(&u, data, resp) == 0)
        crater_http_json(resp,
                         200,
                         json_pack("{s:b, s:b}",
                                   "ok",
                                   1,
                                   "truncated",
                                   u.off + len > u.limit));
}

int api_agents_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"POST", "/api/v1/agents/{node}/register", h_register},
        {"POST", "/api/v1/agents/{node}/heartbeat", h_heartbeat},
        {"POST", "/api/v1/agents/{node}/events", h_events},
        {"GET", "/api/v1/agents/{node}/work", h_work},
        {"POST", "/api/v1/agents/{node}/logs/{job}", h_log_upload},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
