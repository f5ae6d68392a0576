/* agent.c - the agent's threads and its conversation with craterd
 * (protocol CRATER_AGENT_PROTOCOL, doc/agent.md).
 *
 * At start, before any thread runs, the agent adopts the tasks an earlier
 * agent left running (taskstate.c): tasks survive an agent crash.
 *
 * Work thread: register (protocol version, hardware document and every
 * task held here; learns the work channel's sequence number, the
 * heartbeat interval and how much of each task's output craterd holds),
 * then long-poll GET /agents/{node}/work?after=SEQ and apply each order:
 * start a task (ignored when that job and attempt already run here) or
 * stop one (SIGTERM now, SIGKILL of its cgroup after the grace period).
 * After any failure it backs off (100 ms doubling to 5 s) and registers
 * again, which is what makes a craterd restart or a network partition
 * harmless: craterd re-sends what should run here and stops what should
 * not.
 *
 * Supervisor thread, every 100 ms: notice ended tasks (their shim's exit
 * file), SIGKILL tasks past their grace period, sample, run the GPU
 * watchdog, and heartbeat every heartbeatInterval with the machine's
 * samples and each running task's usage. Task events and output go to
 * craterd from their own threads as they happen (report.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/discover.h"
#include "agent/internal.h"
#include "agent/ports.h"
#include "crater/doc.h"
#include "crater/hwfile.h"
#include "crater/log.h"
#include "crater/proto.h"
#include "daemon/buildinfo.h"

#define TICK_MS 100
#define POLL_WAIT_MS 5000
#define START_CHUNK 2 /* orders started between two looks at exits */

/* ---- hardware
 * ---------------------------------------------------------------- */

static int load_hw(crater_agent_t *a,
                   const crater_agent_opts_t *o,
                   crater_kb_t *kb,
                   crater_error_t *err)
{
    crater_cluster_t *c = NULL;
    size_t i = 0;

    if (!o->hardware) {
        crater_discover_opts_t d = {.name = o->node};
        return crater_discover(&d, kb, &a->node, err);
    }
    if (crater_hw_load(o->hardware, kb, &c, err) < 0)
        return -1;
    if (o->node)
        while (i < c->nnodes && strcmp(c->nodes[i].name, o->node) != 0)
            i++;
    if (i == c->nnodes || (!o->node && c->nnodes != 1)) {
        if (o->node)
            crater_errorf_field(err,
                                CRATER_EINVAL,
                                "node",
                                "%s: no node '%s'",
                                o->hardware,
                                o->node);
        else
            crater_errorf_field(err,
                                CRATER_EINVAL,
                                "node",
                                "%s: holds %zu nodes; name one with --node",
                                o->hardware,
                                c->nnodes);
        crater_cluster_destroy(c);
        return -1;
    }
    a->node = c->nodes[i];
    memset(&c->nodes[i], 0, sizeof(c->nodes[i]));
    crater_cluster_destroy(c);
    return 0;
}

int crater_agent_discover_json(const char *name,
                               char **out,
                               bool yaml,
                               crater_error_t *err)
{
    crater_discover_opts_t d = {.name = name};
    crater_kb_t *kb = crater_kb_create();
    crater_node_t n = {0};
    json_t *v = NULL;
    int rc = -1;

    if (!kb || crater_discover(&d, kb, &n, err) < 0)
        goto out;
    if (!(v = crater_hw_encode_node(&n))) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto out;
    }
    *out = yaml ? crater_json_to_yaml(v)
                : json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
    rc = *out ? 0 : crater_errorf(err, CRATER_ENOMEM, "out of memory");
out:
    json_decref(v);
    crater_node_clear(&n);
    crater_kb_destroy(kb);
    return rc;
}

/* ---- register
 * ---------------------------------------------------------------- */

/* The register request: every task held here (caller holds a->mu). */
static json_t *register_body(crater_agent_t *a)
{
    crater_proto_register_t r = {
        .version = (char *)crater_version(),
        .protocol = CRATER_AGENT_PROTOCOL,
        .node = a->hw,
        .tasks = calloc(a->ntasks + 1, sizeof(*r.tasks)),
    };
    json_t *body = NULL;

    for (size_t i = 0; r.tasks && i < a->ntasks; i++)
        r.tasks[r.ntasks++] = task_held(a->tasks[i]);
    if (r.tasks)
        body = crater_proto_register_encode(&r);
    free(r.tasks); /* the rest is borrowed */
    return body;
}

/* The register answer: craterd's log offsets for adopted tasks (whose
 * output a previous agent may have shipped in part), their readiness
 * commands; events again. */
static void after_register(crater_agent_t *a,
                           const crater_proto_registered_t *r)
{
    size_t i;

    for (i = 0; i < r->ntasks; i++) {
        const crater_proto_task_t *e = &r->tasks[i];
        atask_t *t = task_find(a, e->job, e->attempt, e->replica);
        if (t)
            task_probe_adopted(a, t, e);
        if (!t || !t->log_resync || !e->has_logs)
            continue;
        t->log_sent[0] = e->logs[0];
        t->log_sent[1] = e->logs[1];
    }
    for (i = 0; i < a->ntasks; i++) {
        a->tasks[i]->log_resync = false;
        a->tasks[i]->start_sent = false;
        a->tasks[i]->exit_sent = false;
        /* a new craterd (a failover) learns the answer again */
        a->tasks[i]->ready_pending = a->tasks[i]->ready_known;
    }
    report_kick(a);
}

/* A JSON answer of craterd's, decoded by fn into out. */
static int decode_answer(json_t *resp,
                         int (*fn)(crater_dec_t *, json_t *, void *),
                         void *out,
                         const char *what,
                         crater_error_t *err)
{
    crater_error_t derr;
    crater_dec_t dec;

    crater_dec_init(&dec, NULL, 0, &derr);
    if (fn(&dec, resp, out) == 0)
        return 0;
    return crater_errorf_field(err,
                               derr.errnum,
                               derr.field,
                               "%s answer: %s",
                               what,
                               derr.text);
}

static int dec_registered(crater_dec_t *d, json_t *v, void *out)
{
    return crater_proto_registered_decode(d, v, out);
}

static int dec_work(crater_dec_t *d, json_t *v, void *out)
{
    return crater_proto_work_decode(d, v, out);
}

static int do_register(crater_agent_t *a, crater_error_t *err)
{
    crater_proto_registered_t reg;
    char path[512];
    json_t *body, *resp = NULL;
    int rc;

    snprintf(path, sizeof(path), "/api/v1/agents/%s/register", a->node.name);
    pthread_mutex_lock(&a->mu);
    body = register_body(a);
    pthread_mutex_unlock(&a->mu);
    if (!body)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = crater_client_json(a->work_client, "POST", path, body, &resp, err);
    json_decref(body);
    if (rc == 0)
        rc = decode_answer(resp, dec_registered, &reg, "register", err);
    json_decref(resp);
    if (rc < 0)
        return -1;
    pthread_mutex_lock(&a->mu);
    a->seq = reg.seq;
    a->hb_interval_ms = reg.heartbeat_interval_ms;
    if (a->hb_interval_ms == 0)
        a->hb_interval_ms = 5000;
    a->need_register = false;
    a->reg_switches = crater_client_switches(a->work_client);
    a->hb_now = true;
    after_register(a, &reg);
    pthread_mutex_unlock(&a->mu);
    crater_proto_registered_clear(&reg);
    crater_log(LOG_INFO,
               "registered node %s with %s",
               a->node.name,
               crater_client_base(a->work_client));
    return 0;
}

/* ---- work
 * -------------------------------------------------------------------- */

static void apply_item(crater_agent_t *a, crater_proto_item_t *it)
{
    atask_t *t;

    if (it->op != CRATER_PROTO_START)
        task_start_finish(a); /* the orders before this one, started */
    switch (it->op) {
    case CRATER_PROTO_START:
        task_start(a, &it->task);
        break;
    case CRATER_PROTO_RESYNC:
        a->need_register = true; /* craterd saw this node come back */
        break;
    case CRATER_PROTO_STOP:
        t = task_find(a, it->stop.job, it->stop.attempt, it->stop.replica);
        if (t) {
            task_notice(a, t, it->stop.notice); /* with SIGTERM, at once */
            task_stop(a, t, it->stop.grace_period_ms);
        }
        break;
    }
}

/* A batch's orders, START_CHUNK at a time (caller holds a->mu): between
 * two groups the tasks just started are collected, those that already
 * ended are taken in (their cgroups and working directories go back to
 * the pools) and a->mu is let go, so the event and log threads report
 * meanwhile. Started whole, a burst of short tasks (an array's 80 orders
 * for a node) held a cgroup and two directories per task until the last
 * one had started (B3, session 10). */
static void apply_work(crater_agent_t *a, crater_proto_work_t *work)
{
    for (size_t i = 0; i < work->nitems; i++) {
        apply_item(a, &work->items[i]);
        if ((i + 1) % START_CHUNK == 0 && i + 1 < work->nitems) {
            task_start_finish(a);
            task_reap(a);
            pthread_mutex_unlock(&a->mu);
            sched_yield(); /* a waiting thread takes a->mu first */
            pthread_mutex_lock(&a->mu);
        }
    }
    task_start_finish(a);
}

static int poll_once(crater_agent_t *a, crater_error_t *err)
{
    crater_proto_work_t work;
    char path[512];
    json_t *resp = NULL;
    int rc;

    snprintf(path,
             sizeof(path),
             "/api/v1/agents/%s/work?after=%" PRIu64 "&wait_ms=%d",
             a->node.name,
             a->seq,
             POLL_WAIT_MS);
    if (crater_client_json(a->work_client, "GET", path, NULL, &resp, err) < 0)
        return -1;
    if (crater_client_switches(a->work_client) != a->reg_switches) {
        /* another craterd (a new leader) answered: its work channel is
         * not the one after= counts in; register there first */
        json_decref(resp);
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "now at %s (new leader): registering again",
                             crater_client_base(a->work_client));
    }
    rc = decode_answer(resp, dec_work, &work, "work", err);
    json_decref(resp);
    if (rc < 0)
        return -1;
    pthread_mutex_lock(&a->mu);
    apply_work(a, &work);
    a->seq = work.seq;
    pthread_mutex_unlock(&a->mu);
    crater_proto_work_clear(&work);
    return 0;
}

bool agent_stopping(crater_agent_t *a)
{
    bool s;

    pthread_mutex_lock(&a->mu);
    s = a->stopping;
    pthread_mutex_unlock(&a->mu);
    return s;
}

static void backoff(crater_agent_t *a, uint64_t *ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(*ms / 1000);
    ts.tv_nsec += (long)(*ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&a->mu);
    if (!a->stopping)
        pthread_cond_timedwait(&a->wake, &a->mu, &ts);
    pthread_mutex_unlock(&a->mu);
    *ms = *ms * 2 > 5000 ? 5000 : *ms * 2;
}

static void *work_main(void *arg)
{
    crater_agent_t *a = arg;
    uint64_t delay = 100;
    crater_error_t err;
    bool reg;

    while (!agent_stopping(a)) {
        unsigned sw = crater_client_switches(a->work_client);
        pthread_mutex_lock(&a->mu);
        reg = a->need_register;
        pthread_mutex_unlock(&a->mu);
        if ((reg ? do_register(a, &err) : poll_once(a, &err)) == 0) {
            delay = 100;
            continue;
        }
        if (crater_client_switches(a->work_client) != sw)
            delay = 100; /* a new leader: register there at once */
        if (agent_stopping(a))
            break;
        crater_log(LOG_WARNING, "node %s: %s", a->node.name, err.text);
        pthread_mutex_lock(&a->mu);
        a->need_register = true;
        pthread_mutex_unlock(&a->mu);
        backoff(a, &delay);
    }
    return NULL;
}

/* ---- heartbeat
 * --------------------------------------------------------------- */

/* Hardware-file nodes with `samples: synthetic` report a deterministic
 * load derived from what their tasks asked for: each task busy on half its
 * CPU request and using half its memory request (a fully requested node
 * reads 50%, under the default cpuThreshold/memoryThreshold, as a real
 * node running typical jobs would), 0.9 SM utilisation and memory
 * activity on each GPU a task holds (the most of its tasks' when a task
 * sets CRATER_SYNTHETIC_GPU_UTIL, see atask_t), its slice as used GPU
 * memory.
 * Nodes with real samples report /proc and NVML. Caller holds a->mu. */
static double frac01(double x)
{
    return x < 0 || x != x ? 0 : x > 1 ? 1 : x;
}

static void synthetic_util(crater_agent_t *a, crater_proto_heartbeat_t *h)
{
    uint64_t cpu = 0, mem = 0, cap_cpu = crater_node_cpu_milli(&a->node);
    uint64_t cap_mem = crater_node_memory_bytes(&a->node);
    double gu[CRATER_MAX_GPUS_PER_NODE] = {0};
    uint64_t gm[CRATER_MAX_GPUS_PER_NODE] = {0};

    for (size_t i = 0; i < a->ntasks; i++) {
        const atask_t *t = a->tasks[i];
        double u = t->synth_gpu_set ? t->synth_gpu_util : 0.9;
        if (t->state != AT_RUNNING)
            continue;
        cpu += t->req_cpu_milli;
        mem += t->mem_limit;
        for (uint32_t g = 0; g < t->ngpus; g++) {
            if (t->gpu[g] >= CRATER_MAX_GPUS_PER_NODE)
                continue;
            gu[t->gpu[g]] = u > gu[t->gpu[g]] ? u : gu[t->gpu[g]];
            gm[t->gpu[g]] += t->gpu_bytes[g];
        }
    }
    for (size_t g = 0; g < a->node.ngpus && g < CRATER_MAX_GPUS_PER_NODE; g++)
        h->gpus[h->ngpus++] = (crater_proto_gpu_util_t){
            .index = (uint32_t)g,
            .util = gu[g],
            .memory_used_bytes = gm[g],
            .mem_activity = gu[g], /* as busy on memory as on SMs */
        };
    h->cpu = frac01(cap_cpu ? 0.5 * (double)cpu / (double)cap_cpu : 0.0);
    h->memory = frac01(cap_mem ? 0.5 * (double)mem / (double)cap_mem : 0.0);
    h->disk = 0.0;
}

/* The machine's utilisation into h: fractions, clamped to [0, 1] (a
 * sampler's rounding never makes a heartbeat craterd refuses). */
static void util_sample(crater_agent_t *a, crater_proto_heartbeat_t *h)
{
    crater_host_sample_t hs = {0};

    h->has_util = true;
    if (a->synthetic) {
        pthread_mutex_lock(&a->mu);
        synthetic_util(a, h);
        pthread_mutex_unlock(&a->mu);
        return;
    }
    crater_sampler_get(a->sampler, &hs);
    for (unsigned i = 0; a->nvml && i < crater_nvml_count(a->nvml)
                         && i < CRATER_MAX_GPUS_PER_NODE;
         i++) {
        double u = 0, act = 0;
        uint64_t used = 0;
        /* not read: left out; craterd takes a GPU it has no reading
         * of as busy (never reclaimed on a guess) */
        if (crater_nvml_util(a->nvml, i, &u, &act, &used, NULL) < 0)
            continue;
        h->gpus[h->ngpus++] = (crater_proto_gpu_util_t){
            .index = i,
            .util = frac01(u),
            .memory_used_bytes = used,
            .mem_activity = frac01(act),
        };
    }
    h->cpu = frac01(hs.cpu);
    h->memory = frac01(hs.mem);
    h->disk = frac01(hs.disk_util);
}

static void heartbeat(crater_agent_t *a)
{
    crater_proto_heartbeat_t *hb = calloc(1, sizeof(*hb));
    json_t *body = NULL, *resp = NULL;
    crater_error_t err;
    char path[512];

    if (!hb)
        return;
    util_sample(a, hb);
    hb->has_ports = crater_ports_listening(NULL,
                                           CRATER_PROTO_MAX_PORTS,
                                           &hb->ports,
                                           &hb->nports)
                    == 0;
    pthread_mutex_lock(&a->mu);
    hb->tasks = calloc(a->ntasks + 1, sizeof(*hb->tasks));
    for (size_t i = 0; hb->tasks && i < a->ntasks; i++)
        if (a->tasks[i]->state == AT_RUNNING)
            hb->tasks[hb->ntasks++] = task_usage(a->tasks[i]);
    if (hb->tasks) /* encoded under a->mu: the usages borrow the tasks */
        body = crater_proto_heartbeat_encode(hb);
    pthread_mutex_unlock(&a->mu);
    free(hb->tasks);
    free(hb->ports);
    free(hb);
    if (!body)
        return;
    snprintf(path, sizeof(path), "/api/v1/agents/%s/heartbeat", a->node.name);
    if (crater_client_json(a->sup_client, "POST", path, body, &resp, &err)
        < 0) {
        crater_log(LOG_WARNING,
                   "node %s: heartbeat: %s",
                   a->node.name,
                   err.text);
        pthread_mutex_lock(&a->mu);
        a->need_register = true;
        pthread_mutex_unlock(&a->mu);
    }
    json_decref(resp);
    json_decref(body);
}

/* The poll set of sup_main: the wake pipe, then the kept pid pipe of each
 * running task (task.c), in *fds (grown as needed). Caller holds a->mu. */
static size_t watch_set(crater_agent_t *a, struct pollfd **fds, size_t *cap)
{
    size_t n = 0;

    if (*cap < a->ntasks + 1) {
        struct pollfd *p = realloc(*fds, (a->ntasks + 1) * sizeof(*p));
        if (!p)
            return 0;
        *fds = p;
        *cap = a->ntasks + 1;
    }
    (*fds)[n++] = (struct pollfd){.fd = a->sup_wake[0], .events = POLLIN};
    for (size_t i = 0; i < a->ntasks; i++)
        if (a->tasks[i]->state == AT_RUNNING && a->tasks[i]->exit_watch)
            (*fds)[n++] =
                (struct pollfd){.fd = a->tasks[i]->pid_fd, .events = POLLIN};
    return n;
}

/* Waits until a watched shim ends, new tasks are to be watched, or
 * timeout_ms; the descriptors that ended, in fds[0..returned). */
static size_t watch_wait(crater_agent_t *a,
                         struct pollfd *fds,
                         size_t n,
                         int timeout_ms)
{
    char drain[64];
    size_t k = 0;

    if (n == 0) {
        usleep((useconds_t)timeout_ms * 1000);
        return 0;
    }
    if (poll(fds, n, timeout_ms) <= 0)
        return 0;
    if (fds[0].revents)
        while (read(a->sup_wake[0], drain, sizeof(drain)) > 0)
            ;
    for (size_t i = 1; i < n; i++)
        if (fds[i].revents)
            fds[k++].fd = fds[i].fd;
    return k;
}

/* The supervisor: every TICK_MS each running task is checked (exit, time
 * limit, stop deadline, usage), and in between a task whose shim ends is
 * checked at once: the shim keeps its pid pipe open until it exits, so
 * the pipe's end wakes the poll (an adopted task has none: the tick finds
 * it). An exit is then reported without waiting for the tick, and the
 * resources it held are free for the next task sooner. */
static void *sup_main(void *arg)
{
    crater_agent_t *a = arg;
    int64_t next_watch = 0, next_sample = 0, next_tick = 0;
    uint64_t every = a->cfg ? a->cfg->monitoring.sampling_interval_ms : 5000;
    struct pollfd *fds = NULL;
    size_t cap = 0, nready = 0;
    int ready[64];

    while (!agent_stopping(a)) {
        int64_t now = agent_now_ms();
        bool hb, reg, full = now >= next_tick;
        size_t nfds;
        pthread_mutex_lock(&a->mu);
        task_supervise(a, now, ready, nready, full);
        if (full)
            next_tick = now + TICK_MS;
        reg = a->need_register;
        hb = !reg && (a->hb_now || now >= a->next_hb_ms);
        if (hb) {
            a->hb_now = false;
            a->next_hb_ms = now + (int64_t)a->hb_interval_ms;
        }
        pthread_mutex_unlock(&a->mu);
        if (now >= next_sample) {
            cgpool_retry(a, false);
            crater_sampler_sample(a->sampler, (uint64_t)now, NULL);
            next_sample = now + (int64_t)(every ? every : 5000);
        }
        if (now >= next_watch) {
            pthread_mutex_lock(&a->mu);
            agent_watchdog(a);
            pthread_mutex_unlock(&a->mu);
            next_watch = now + 1000;
        }
        if (hb)
            heartbeat(a);
        pthread_mutex_lock(&a->mu);
        nfds = watch_set(a, &fds, &cap);
        pthread_mutex_unlock(&a->mu);
        now = agent_now_ms();
        nready = watch_wait(a,
                            fds,
                            nfds,
                            next_tick > now ? (int)(next_tick - now) : 0);
        nready = nready < 64 ? nready : 64; /* more: the tick has them */
        for (size_t i = 0; i < nready; i++)
            ready[i] = fds[i].fd;
    }
    free(fds);
    return NULL;
}

/* ---- start / stop
 * ---------------------------------------------------------------- */

static int open_parts(crater_agent_t *a,
                      const crater_agent_opts_t *o,
                      crater_error_t *err)
{
    crater_error_t nerr;
    crater_kb_t *kb = crater_kb_create();
    int rc;

    if (!kb)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = load_hw(a, o, kb, err);
    crater_kb_destroy(kb);
    if (rc < 0)
        return -1;
    a->synthetic = a->node.samples == CRATER_SAMPLES_SYNTHETIC;
    if (!(a->hw = crater_hw_encode_node(&a->node)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (agent_isolation_setup(a, err) < 0 /* before the threads: forks */
        || spare_init(a, err) < 0)
        return -1;
    if (!(a->work_client = crater_client_create(o->server, o->token, err))
        || !(a->sup_client = crater_client_create(o->server, o->token, err))
        || !(a->ev_client = crater_client_create(o->server, o->token, err))
        || !(a->log_client = crater_client_create(o->server, o->token, err)))
        return -1;
    crater_client_set_timeout_ms(a->work_client, POLL_WAIT_MS + 10000);
    crater_client_set_timeout_ms(a->sup_client, 10000);
    crater_client_set_timeout_ms(a->ev_client, 10000);
    crater_client_set_timeout_ms(a->log_client, 30000);
    if (!(a->cg = crater_cg_open(o->cgroup_root,
                                 o->cgroup_parent ? o->cgroup_parent : "crater",
                                 err))
        || !(a->sampler =
                 crater_sampler_create(NULL,
                                       a->cfg
                                           ? a->cfg->monitoring.smoothing_window
                                           : 10,
                                       err)))
        return -1;
    if (!(a->cg_root =
              strdup(o->cgroup_root ? o->cgroup_root : "/sys/fs/cgroup"))
        || !(a->cg_parent =
                 strdup(o->cgroup_parent ? o->cgroup_parent : "crater")))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    json_decref(a->hw); /* again, with the runtimes label */
    if (ctr_setup(a, err) < 0)
        return -1;
    if (!(a->hw = crater_hw_encode_node(&a->node)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (!o->hardware)
        a->nvml = crater_nvml_open(NULL, &nerr);
    agent_ctx_overheads(a); /* before the threads: it forks */
    if (!(a->shim_path = agent_shim_path()))
        crater_log(LOG_WARNING,
                   "crater-shim not found (next to this program or "
                   "$CRATER_SHIM): tasks start under a fork of the agent, "
                   "a few milliseconds slower");
    spawner_start(a); /* before the threads: it forks */
    return 0;
}

static int start_threads(crater_agent_t *a)
{
    void *(*mains[])(void *) = {work_main,
                                sup_main,
                                report_events_main,
                                report_logs_main,
                                notice_main,
                                probe_main,
                                spare_main};
    static const char *const names[] = {"agent-work",
                                        "agent-sup",
                                        "agent-events",
                                        "agent-logs",
                                        "agent-notice",
                                        "agent-probe",
                                        "agent-spare"};
    pthread_t *ids[] = {&a->work_thread,
                        &a->sup_thread,
                        &a->ev_thread,
                        &a->log_thread,
                        &a->notice_thread,
                        &a->probe_thread,
                        &a->spare_thread};

    if (notice_create(a) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        if (pthread_create(ids[i], NULL, mains[i], a) != 0)
            return -1;
        pthread_setname_np(*ids[i], names[i]); /* top -H, perf, gdb */
        a->nthreads++;
    }
    return 0;
}

crater_agent_t *crater_agent_start(const crater_agent_opts_t *o,
                                   crater_error_t *err)
{
    crater_agent_t *a = calloc(1, sizeof(*a));

    if (!a) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->spare_mu, NULL);
    pthread_mutex_init(&a->cgpool_mu, NULL);
    pthread_cond_init(&a->wake, NULL);
    pthread_cond_init(&a->ev_wake, NULL);
    pthread_cond_init(&a->log_wake, NULL);
    pthread_cond_init(&a->probe_wake, NULL);
    a->cfg = o->cfg;
    a->stop_grace_ms = o->stop_grace_ms ? o->stop_grace_ms : 2000;
    a->server = strdup(o->server ? o->server : "http://127.0.0.1:7480");
    a->token = strdup(o->token ? o->token : "");
    a->data_dir = strdup(o->data_dir ? o->data_dir : "./var/agent");
    a->need_register = true;
    a->hb_interval_ms = 5000;
    a->procns_fd = a->mounts_fd = a->spawn_fd = -1;
    a->sup_wake[0] = a->sup_wake[1] = -1;
    if (getrandom(&a->instance, sizeof(a->instance), 0) != sizeof(a->instance))
        a->instance = (uint32_t)getpid();
    if (!a->server || !a->token || !a->data_dir) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto fail;
    }
    if (pipe2(a->sup_wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        crater_errorf(err, CRATER_EIO, "pipe: %s", strerror(errno));
        goto fail;
    }
    if (open_parts(a, o, err) < 0)
        goto fail;
    if (taskstate_adopt(a) > 0)
        crater_log(LOG_INFO,
                   "node %s: adopted %zu task(s) of an earlier agent",
                   a->node.name,
                   a->ntasks);
    if (cgpool_init(a, err) < 0)
        goto fail;
    ctr_sweep(a); /* after adoption: its containers stay */
    if (start_threads(a) < 0) {
        crater_errorf(err, CRATER_EINTERNAL, "cannot start agent threads");
        goto fail;
    }
    return a;
fail:
    crater_agent_stop(a);
    return NULL;
}

const char *crater_agent_node(const crater_agent_t *a)
{
    return a->node.name;
}

/* Terminate every task: SIGTERM, stop_grace_ms, SIGKILL; reap. */
static void stop_tasks(crater_agent_t *a)
{
    int64_t end = agent_now_ms() + (int64_t)a->stop_grace_ms;
    bool running = true;

    for (size_t i = 0; i < a->ntasks; i++)
        task_stop(a, a->tasks[i], a->stop_grace_ms);
    while (running && agent_now_ms() < end + 1000) {
        running = false;
        task_supervise(a, agent_now_ms(), NULL, 0, true);
        for (size_t i = 0; i < a->ntasks; i++)
            running |= a->tasks[i]->state == AT_RUNNING;
        if (running)
            usleep(20000);
    }
}

void crater_agent_request_stop(crater_agent_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_cond_broadcast(&a->wake);
    pthread_cond_signal(&a->probe_wake);
    report_kick(a);
    notice_kick(a);
    pthread_mutex_unlock(&a->mu);
}

void crater_agent_stop(crater_agent_t *a)
{
    if (!a)
        return;
    crater_agent_request_stop(a);
    {
        pthread_t ids[] = {a->work_thread,
                           a->sup_thread,
                           a->ev_thread,
                           a->log_thread,
                           a->notice_thread,
                           a->probe_thread,
                           a->spare_thread};
        for (size_t i = 0; i < a->nthreads; i++)
            pthread_join(ids[i], NULL);
    }
    notice_destroy(a);
    stop_tasks(a);
    while (a->ntasks > 0)
        task_remove(a, a->tasks[0]);
    free(a->tasks);
    spawner_stop(a);
    crater_client_destroy(a->work_client);
    crater_client_destroy(a->sup_client);
    crater_client_destroy(a->ev_client);
    crater_client_destroy(a->log_client);
    cgpool_close(a);
    crater_cg_close(a->cg);
    crater_sampler_destroy(a->sampler);
    crater_nvml_close(a->nvml);
    json_decref(a->hw);
    crater_node_clear(&a->node);
    free(a->server);
    free(a->token);
    free(a->data_dir);
    free(a->cg_root);
    free(a->cg_parent);
    free(a->work_root);
    for (int i = 0; i < 2; i++)
        if (a->sup_wake[i] >= 0)
            close(a->sup_wake[i]);
    pthread_cond_destroy(&a->wake);
    pthread_cond_destroy(&a->ev_wake);
    pthread_cond_destroy(&a->log_wake);
    pthread_cond_destroy(&a->probe_wake);
    pthread_mutex_destroy(&a->mu);
    pthread_mutex_destroy(&a->spare_mu);
    pthread_mutex_destroy(&a->cgpool_mu);
    agent_isolation_close(a);
    free(a);
}
