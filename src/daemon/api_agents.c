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
    if (n->registered && !n->ready) /* back from a partition: reconcile */
        node_push_work(d, n, json_pack("{s:s}", "op", "resync"));
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

/* Bytes craterd holds of stream s of j's attempt att. */
static uint64_t log_size(crater_daemon_t *d,
                         const djob_t *j,
                         uint32_t att,
                         const char *s)
{
    char path[4096];
    struct stat st;

    if (log_path(d, j->id, att, s, NULL, path, sizeof(path)) < 0
        || stat(path, &st) < 0)
        return 0;
    return (uint64_t)st.st_size;
}

static json_t *node_tasks(crater_daemon_t *d, dnode_t *n)
{
    json_t *tasks = json_array();

    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        json_t *t;
        if (!j->placed || j->pl.node != n->sid || !job_state_holds(j->state))
            continue;
        t = task_json(d, j);
        json_object_set_new(t,
                            "logs",
                            json_pack("{s:I, s:I}",
                                      "stdout",
                                      (json_int_t)
                                          log_size(d, j, j->attempts, "stdout"),
                                      "stderr",
                                      (json_int_t)log_size(d,
                                                           j,
                                                           j->attempts,
                                                           "stderr")));
        json_array_append_new(tasks, t);
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

/* The job a task entry names, if it is placed on n in a holding state and
 * the attempt matches; NULL otherwise. */
static djob_t *placed_job(crater_daemon_t *d, dnode_t *n, json_t *t)
{
    const char *id = json_string_value(json_object_get(t, "job"));
    json_int_t att = json_integer_value(json_object_get(t, "attempt"));
    djob_t *j = id ? job_find(d, strtoull(id, NULL, 10)) : NULL;

    if (!j || !j->placed || j->pl.node != n->sid || !job_state_holds(j->state)
        || att != (json_int_t)j->attempts)
        return NULL;
    return j;
}

static void order_stop(crater_daemon_t *d,
                       dnode_t *n,
                       const char *id,
                       json_int_t attempt,
                       const char *why)
{
    node_push_work(d,
                   n,
                   json_pack("{s:s, s:s, s:I, s:i, s:s}",
                             "op",
                             "stop",
                             "job",
                             id,
                             "attempt",
                             attempt,
                             "gracePeriod_ms",
                             0,
                             "reason",
                             why));
}

static bool held(json_t *tasks, const djob_t *j)
{
    size_t i;
    json_t *t;

    json_array_foreach(tasks, i, t)
    {
        const char *s = json_string_value(json_object_get(t, "job"));
        json_int_t att = json_integer_value(json_object_get(t, "attempt"));
        if (s && strtoull(s, NULL, 10) == j->id
            && att == (json_int_t)j->attempts)
            return true;
    }
    return false;
}

static void job_exited(crater_daemon_t *d, djob_t *j, json_t *t);

/* What the agent holds is the truth of the node (see the top). */
static void reconcile(crater_daemon_t *d, dnode_t *n, json_t *tasks)
{
    size_t i;
    json_t *t;

    json_array_foreach(tasks, i, t)
    {
        const char *id = json_string_value(json_object_get(t, "job"));
        djob_t *j = placed_job(d, n, t);
        if (!id)
            continue;
        if (!j) {
            order_stop(d,
                       n,
                       id,
                       json_integer_value(json_object_get(t, "attempt")),
                       "not placed here");
            continue;
        }
        if (j->state == JS_LOST)
            job_set_state(d, j, JS_RUNNING, "node reconnected; still running");
    }
    for (size_t k = 0; k < d->njobs; k++) {
        djob_t *j = d->jobs[k];
        if (!j->placed || j->pl.node != n->sid || j->state == JS_BOUND
            || !job_state_holds(j->state) || held(tasks, j))
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

static int check_protocol(json_t *body, crater_http_resp_t *resp)
{
    json_t *v = json_object_get(body, "protocol");
    json_int_t p = json_is_integer(v) ? json_integer_value(v) : 1;

    if (p == CRATER_AGENT_PROTOCOL)
        return 0;
    api_errorf(resp,
               CRATER_EINVAL,
               "protocol",
               "protocol: this agent speaks agent protocol "
               "%" JSON_INTEGER_FORMAT " and craterd %s speaks %d: run the "
               "same Crater version on "
               "both",
               p,
               crater_version(),
               CRATER_AGENT_PROTOCOL);
    return -1;
}

static void h_register(crater_http_req_t *r,
                       crater_http_resp_t *resp,
                       void *arg)
{
    crater_daemon_t *d = arg;
    json_t *body = NULL, *tasks;
    principal_t p;
    dnode_t *n;
    uint64_t seq;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0)
        goto out;
    n = agent_node(d, r, &p, resp, true);
    if ((!n && resp->body) || check_protocol(body, resp) < 0)
        goto out;
    tasks = json_object_get(body, "tasks");
    if (tasks && !json_is_array(tasks)) {
        api_errorf(resp, CRATER_ETYPE, "tasks", "tasks: expected an array");
        goto out;
    }
    if (!n && !(n = register_node(d, crater_http_param(r, "node"), body, resp)))
        goto out;
    seq = n->seq;
    mark_alive(d, n, dnow_ms());
    reset_channel(d, n);
    reconcile(d, n, tasks);
    crater_http_json(resp,
                     200,
                     json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:I, s:o}",
                               "node",
                               n->name,
                               "version",
                               crater_version(),
                               "protocol",
                               CRATER_AGENT_PROTOCOL,
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

/* ---- events ---------------------------------------------------------------
 */

static void job_exited_at(crater_daemon_t *d, djob_t *j, json_t *t, int64_t at)
{
    int code = (int)json_integer_value(json_object_get(t, "exit_code"));
    int sig = (int)json_integer_value(json_object_get(t, "signal"));
    bool oom = json_is_true(json_object_get(t, "oom"));
    const char *why = json_string_value(json_object_get(t, "error"));
    char reason[256];

    j->exit_code = code;
    j->exit_signal = sig;
    j->oom = oom;
    if (j->state == JS_BOUND) /* ran and finished before "started" came */
        job_set_state_at(d, j, JS_RUNNING, "started by agent", at);
    if (j->state == JS_PREEMPTING) {
        djob_t *by = j->preempted_by ? job_find(d, j->preempted_by) : NULL;
        if (by && by->waiting_for)
            by->waiting_for--;
        j->preempted_by = 0;
        job_set_state_at(d, j, JS_PREEMPTED, "stopped by its agent", at);
        if (j->cancel_requested) {
            job_set_state_at(d, j, JS_CANCELLED, "cancelled", at);
            return;
        }
        j->attempts++;
        job_set_state(d, j, JS_PENDING, "requeued after preemption");
        return;
    }
    if (j->cancel_requested) {
        job_set_state_at(d,
                         j,
                         JS_CANCELLED,
                         "cancelled; stopped by its agent",
                         at);
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
    job_set_state_at(d,
                     j,
                     code == 0 && !sig && !oom ? JS_SUCCEEDED : JS_FAILED,
                     reason,
                     at);
}

static void job_exited(crater_daemon_t *d, djob_t *j, json_t *t)
{
    job_exited_at(d, j, t, 0);
}

/* The final log sizes an exited event carries. */
static void log_expect(djob_t *j, json_t *ev)
{
    json_t *l = json_object_get(ev, "logs");

    if (!json_is_object(l))
        return;
    job_log_attempt(j, j->attempts);
    j->log_expect[0] =
        (uint64_t)json_integer_value(json_object_get(l, "stdout"));
    j->log_expect[1] =
        (uint64_t)json_integer_value(json_object_get(l, "stderr"));
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

/* One event; a malformed one fills resp and returns -1. */
static int apply_event(crater_daemon_t *d,
                       dnode_t *n,
                       json_t *ev,
                       size_t i,
                       crater_http_resp_t *resp)
{
    const char *id = json_string_value(json_object_get(ev, "job"));
    const char *what = json_string_value(json_object_get(ev, "event"));
    json_int_t att = json_integer_value(json_object_get(ev, "attempt"));
    int64_t at = (int64_t)json_integer_value(json_object_get(ev, "time_ms"));
    json_int_t pid = json_integer_value(json_object_get(ev, "pid"));
    djob_t *j = placed_job(d, n, ev);
    char reason[96];

    if (!id || !what
        || (strcmp(what, "started") != 0 && strcmp(what, "exited") != 0)) {
        api_errorf(resp,
                   CRATER_EINVAL,
                   "events",
                   "events[%zu]: needs \"job\" and \"event\" (started or "
                   "exited)",
                   i);
        return -1;
    }
    if (at > dnow_ms() + 60000 || at < 0)
        at = 0; /* a clock far off: craterd's time */
    if (!j) {   /* not ours (any more): make sure it does not keep running */
        if (strcmp(what, "started") == 0)
            order_stop(d, n, id, att, "not placed here");
        return 0;
    }
    at = not_before_last(j, at);
    if (strcmp(what, "started") == 0) {
        snprintf(reason, sizeof(reason), "started by agent (pid %d)", (int)pid);
        if (j->state == JS_BOUND)
            job_set_state_at(d, j, JS_RUNNING, reason, at);
        else if (j->state == JS_LOST)
            job_set_state(d, j, JS_RUNNING, "node reconnected; still running");
        return 0;
    }
    log_expect(j, ev);
    job_exited_at(d, j, ev, at);
    return 0;
}

static void h_events(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    json_t *body = NULL, *evs, *ev;
    principal_t p;
    dnode_t *n;
    size_t i;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_body_json(r, &body, resp) < 0
        || !(n = agent_node(d, r, &p, resp, false)))
        goto out;
    evs = json_object_get(body, "events");
    if (!json_is_array(evs)) {
        api_errorf(resp, CRATER_ETYPE, "events", "events: expected an array");
        goto out;
    }
    mark_alive(d, n, dnow_ms());
    json_array_foreach(evs, i, ev)
    {
        if (apply_event(d, n, ev, i, resp) < 0)
            goto out;
    }
    crater_http_json(resp, 200, json_pack("{s:b}", "ok", 1));
out:
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- heartbeat ------------------------------------------------------------
 */

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
    json_array_foreach(tasks, i, t)
    {
        djob_t *j = placed_job(d, n, t);
        const char *id = json_string_value(json_object_get(t, "job"));
        if (j && j->state == JS_LOST) /* the node is back; so is the task */
            job_set_state(d, j, JS_RUNNING, "node reconnected; still running");
        if (j)
            add_sample(j, t, now);
        else if (id) /* runs there but is not ours (any more): stop it */
            order_stop(d,
                       n,
                       id,
                       json_integer_value(json_object_get(t, "attempt")),
                       "not placed here");
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
                          crater_http_req_t *r,
                          size_t len,
                          log_up_t *u,
                          crater_http_resp_t *resp)
{
    const char *stream = crater_http_query(r, "stream");
    const char *off = crater_http_query(r, "offset");
    const char *att = crater_http_query(r, "attempt");
    const char *id = crater_http_param(r, "job");
    djob_t *j = job_find(d, strtoull(id, NULL, 10));
    uint32_t a;
    int s;

    if (!j || !j->durable) {
        api_errorf(resp, CRATER_ENOENT, "job", "no job '%s'", id);
        return NULL;
    }
    a = att ? (uint32_t)strtoul(att, NULL, 10) : j->attempts;
    if (a == 0 || a > j->attempts) {
        api_errorf(resp, CRATER_ERANGE, "attempt", "no attempt '%s'", att);
        return NULL;
    }
    if (log_path(d,
                 j->id,
                 a,
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
    u->off = off ? strtoull(off, NULL, 10) : 0;
    u->limit = d->cfg.logs.max_bytes;
    u->len = len;
    if (u->off >= u->limit)
        u->len = 0;
    else if (u->off + len > u->limit)
        u->len = (size_t)(u->limit - u->off);
    u->cut = u->off + len > u->limit;
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

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && agent_node(d, r, &p, resp, false))
        j = log_target(d, r, len, &u, resp);
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
