/* api_agents.c - the agent protocol: register, heartbeat, the long-poll
 * work channel, and log upload. An agent token speaks only for its node.
 *
 * Register (after every agent start) resets the node's work channel and
 * answers with the channel's sequence number and the tasks craterd
 * believes run there; bound tasks are sent again as start orders. The
 * first heartbeat after a register reconciles: a job craterd has running
 * on the node that the agent does not report was lost with the agent and
 * is requeued; a task the agent reports for a job that is not placed there
 * (or a finished one) gets a stop order, so nothing runs twice.
 *
 * Heartbeat task states drive the job lifecycle: running (bound -> running,
 * lost -> running on reconnect), and exits: a preempting job is requeued
 * and its preemptor told one victim fewer; a cancelled one becomes
 * cancelled; otherwise succeeded (exit 0) or failed (with code, signal,
 * OOM).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/buildinfo.h"
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

/* ---- register -------------------------------------------------------------
 */

static dnode_t *register_node(crater_daemon_t *d,
                              const char *name,
                              json_t *body,
                              crater_http_resp_t *resp)
{
    json_t *hw = json_object_get(body, "node");
    crater_error_t err = {0};
    dnode_t *n;

    if (!json_is_object(hw)) {
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

static json_t *node_tasks(crater_daemon_t *d, dnode_t *n)
{
    json_t *tasks = json_array();

    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->placed && j->pl.node == n->sid && job_state_holds(j->state))
            json_array_append_new(tasks, task_json(d, j));
    }
    return tasks;
}

static void reset_channel(crater_daemon_t *d, dnode_t *n)
{
    node_complete_poll(n);
    for (size_t k = 0; k < n->nwork; k++)
        json_decref(n->work[k].item);
    n->nwork = 0;
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (j->placed && j->pl.node == n->sid && j->state == JS_BOUND)
            node_send_start(d, j);
        if (j->placed && j->pl.node == n->sid && j->cancel_requested
            && job_state_holds(j->state))
            node_send_stop(d, j, "cancelled");
    }
}

static void h_register(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    crater_daemon_t *d = arg;
    json_t *body = NULL;
    principal_t p;
    dnode_t *n;
    uint64_t seq;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0)
        goto out;
    n = agent_node(d, r, &p, resp, true);
    if (!n && resp->body)
        goto out;
    if (!n && !(n = register_node(d, crater_http_param(r, "node"), body, resp)))
        goto out;
    seq = n->seq;
    mark_alive(d, n, dnow_ms());
    n->first_hb_pending = true;
    reset_channel(d, n);
    crater_http_json(resp,
                     200,
                     json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o}",
                               "node",
                               n->name,
                               "version",
                               crater_version(),
                               "seq",
                               (json_int_t)seq,
                               "heartbeatInterval_ms",
                               (json_int_t)d->cfg.agent.heartbeat_interval_ms,
                               "heartbeatTimeout_ms",
                               (json_int_t)d->cfg.agent.heartbeat_timeout_ms,
                               "samplingInterval_ms",
                               (json_int_t)
                                   d->cfg.monitoring.sampling_interval_ms,
                               "tasks",
                               node_tasks(d, n)));
out:
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- heartbeat ------------------------------------------------------------
 */

static void job_exited(crater_daemon_t *d, djob_t *j, json_t *t)
{
    int code = (int)json_integer_value(json_object_get(t, "exit_code"));
    int sig = (int)json_integer_value(json_object_get(t, "signal"));
    bool oom = json_is_true(json_object_get(t, "oom"));
    const char *why = json_string_value(json_object_get(t, "error"));
    char reason[256];

    j->exit_code = code;
    j->exit_signal = sig;
    j->oom = oom;
    if (j->state == JS_BOUND) /* it ran and finished between heartbeats */
        job_set_state(d, j, JS_RUNNING, "started by agent");
    if (j->state == JS_PREEMPTING) {
        djob_t *by = j->preempted_by ? job_find(d, j->preempted_by) : NULL;
        if (by && by->waiting_for)
            by->waiting_for--;
        j->preempted_by = 0;
        job_set_state(d, j, JS_PREEMPTED, "stopped by its agent");
        if (j->cancel_requested) {
            job_set_state(d, j, JS_CANCELLED, "cancelled");
            return;
        }
        j->attempts++;
        job_set_state(d, j, JS_PENDING, "requeued after preemption");
        return;
    }
    if (j->cancel_requested) {
        job_set_state(d, j, JS_CANCELLED, "cancelled; stopped by its agent");
        return;
    }
    if (why && *why) /* could not start, or killed by the GPU watchdog */
        snprintf(reason, sizeof(reason), "%s", why);
    else if (oom)
        snprintf(reason,
                 sizeof(reason),
                 "OOM-killed: exceeded its memory limit");
    else if (sig)
        snprintf(reason, sizeof(reason), "killed by signal %d", sig);
    else
        snprintf(reason, sizeof(reason), "exit code %d", code);
    job_set_state(d,
                  j,
                  code == 0 && !sig && !oom ? JS_SUCCEEDED : JS_FAILED,
                  reason);
}

static void add_sample(djob_t *j, json_t *t, int64_t now)
{
    json_t *u = json_object_get(t, "usage");
    json_t *s;

    if (!json_is_object(u))
        return;
    s = json_deep_copy(u);
    json_object_set_new(s, "time_ms", json_integer(now));
    if (json_array_size(j->samples) >= JOB_MAX_SAMPLES)
        json_array_remove(j->samples, 0);
    json_array_append_new(j->samples, s);
}

static void task_report(crater_daemon_t *d, dnode_t *n, json_t *t, int64_t now)
{
    const char *id = json_string_value(json_object_get(t, "job"));
    const char *st = json_string_value(json_object_get(t, "state"));
    json_int_t attempt = json_integer_value(json_object_get(t, "attempt"));
    djob_t *j = id ? job_find(d, strtoull(id, NULL, 10)) : NULL;

    if (!st)
        return;
    if (!j || !j->placed || j->pl.node != n->sid || !job_state_holds(j->state)
        || (attempt && attempt != (json_int_t)j->attempts)) {
        /* not ours (any more): make sure it does not keep running */
        if (strcmp(st, "running") == 0 && id)
            node_push_work(d,
                           n,
                           json_pack("{s:s, s:s, s:I, s:i, s:s}",
                                     "op",
                                     "stop",
                                     "job",
                                     id,
                                     "attempt",
                                     (json_int_t)attempt,
                                     "gracePeriod_ms",
                                     0,
                                     "reason",
                                     "not placed here"));
        return;
    }
    if (strcmp(st, "running") == 0) {
        add_sample(j, t, now);
        if (j->state == JS_BOUND)
            job_set_state(d, j, JS_RUNNING, "started by agent");
        else if (j->state == JS_LOST)
            job_set_state(d, j, JS_RUNNING, "node reconnected; still running");
    } else if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0)
        job_exited(d, j, t);
}

static bool reported(json_t *tasks, uint64_t id)
{
    size_t i;
    json_t *t;

    json_array_foreach(tasks, i, t)
    {
        const char *s = json_string_value(json_object_get(t, "job"));
        if (s && strtoull(s, NULL, 10) == id)
            return true;
    }
    return false;
}

static void reconcile(crater_daemon_t *d, dnode_t *n, json_t *tasks)
{
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (!j->placed || j->pl.node != n->sid || j->state == JS_BOUND
            || !job_state_holds(j->state) || reported(tasks, j->id))
            continue;
        if (j->state == JS_PREEMPTING) {
            json_t *gone =
                json_pack("{s:i, s:i}", "exit_code", 0, "signal", 15);
            job_exited(d, j, gone);
            json_decref(gone);
            continue;
        }
        j->attempts++;
        job_set_state(d,
                      j,
                      JS_PENDING,
                      "requeued: the agent restarted without it");
    }
}

static void apply_util(crater_daemon_t *d, dnode_t *n, json_t *u)
{
    json_t *gpus = json_object_get(u, "gpus"), *g;
    size_t i;

    if (!json_is_object(u))
        return;
    n->util.cpu = json_number_value(json_object_get(u, "cpu"));
    n->util.mem = json_number_value(json_object_get(u, "memory"));
    n->util.disk = json_number_value(json_object_get(u, "disk"));
    json_array_foreach(gpus, i, g)
    {
        if (i >= CRATER_MAX_GPUS_PER_NODE)
            break;
        n->util.gpu[i] = json_number_value(json_object_get(g, "util"));
        n->util.gpu_used_mib[i] =
            (uint32_t)(json_integer_value(
                           json_object_get(g, "memory_used_bytes"))
                       >> 20);
    }
    crater_sched_set_util(d->sched, n->sid, &n->util);
    d->util_dirty = true;
}

static void h_heartbeat(crater_http_req_t *r,
                        crater_http_resp_t *resp,
                        void *arg)
{
    crater_daemon_t *d = arg;
    int64_t now = dnow_ms();
    json_t *body = NULL, *tasks, *t;
    principal_t p;
    dnode_t *n;
    size_t i;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0
        || !(n = agent_node(d, r, &p, resp, false)))
        goto out;
    tasks = json_object_get(body, "tasks");
    if (tasks && !json_is_array(tasks)) {
        api_errorf(resp, CRATER_ETYPE, "tasks", "tasks: expected an array");
        goto out;
    }
    mark_alive(d, n, now);
    apply_util(d, n, json_object_get(body, "util"));
    json_array_foreach(tasks, i, t) task_report(d, n, t, now);
    if (n->first_hb_pending) {
        n->first_hb_pending = false;
        reconcile(d, n, tasks);
    }
    crater_http_json(resp, 200, json_pack("{s:b}", "ok", 1));
out:
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
    uint64_t after = a ? strtoull(a, NULL, 10) : 0;
    long wait = w ? strtol(w, NULL, 10) : POLL_DEFAULT_MS;
    principal_t p;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0
        || !(n = agent_node(d, r, &p, resp, false)))
        goto out;
    if (wait < 0 || wait > POLL_MAX_MS) {
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
    n->poll_deadline_ms = dnow_ms() + wait;
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

static int append_log(const char *path,
                      uint64_t off,
                      const char *data,
                      size_t len,
                      crater_http_resp_t *resp)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ssize_t w;

    if (fd < 0) {
        api_errorf(resp, CRATER_EIO, NULL, "log: %s", strerror(errno));
        return -1;
    }
    w = pwrite(fd, data, len, (off_t)off);
    close(fd);
    if (w != (ssize_t)len) {
        api_errorf(resp, CRATER_EIO, NULL, "log: short write");
        return -1;
    }
    return 0;
}

static void h_log_upload(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         void *arg)
{
    crater_daemon_t *d = arg;
    const char *stream = crater_http_query(r, "stream");
    const char *off = crater_http_query(r, "offset");
    const char *id = crater_http_param(r, "job");
    char path[4096];
    principal_t p;
    size_t len;
    const char *data = crater_http_body(r, &len);
    djob_t *j;
    dnode_t *n;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0
        || !(n = agent_node(d, r, &p, resp, false)))
        goto out;
    j = job_find(d, strtoull(id, NULL, 10));
    if (!j || !j->durable) {
        api_errorf(resp, CRATER_ENOENT, "job", "no job '%s'", id);
        goto out;
    }
    if (log_path(d, j->id, stream ? stream : "stdout", path, sizeof(path))
        < 0) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "stream",
                   "stream must be stdout or stderr");
        goto out;
    }
    if (append_log(path, off ? strtoull(off, NULL, 10) : 0, data, len, resp)
        == 0)
        crater_http_json(resp, 200, json_pack("{s:b}", "ok", 1));
out:
    pthread_mutex_unlock(&d->mu);
}

int api_agents_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"POST", "/api/v1/agents/{node}/register", h_register},
        {"POST", "/api/v1/agents/{node}/heartbeat", h_heartbeat},
        {"GET", "/api/v1/agents/{node}/work", h_work},
        {"POST", "/api/v1/agents/{node}/logs/{job}", h_log_upload},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
