/* loop.c - the scheduling loop, the pass's craterd ops and the decision
 * log.
 *
 * One thread. It sleeps on d->wake and runs a pass when something changed
 * (a submission committed, a job finished, a node came or went, a cancel)
 * and a tick every 100 ms (expired long polls, node health, log
 * rotation). The pass is the core's (src/sched/pass.c), the same code
 * `crater sim replay` runs: queue order (priority, deadline, fair share,
 * age), full or fresh pass, deadlines, dependencies, EASY backfill,
 * gangs, place -> plan preemption -> pending reason. This file is
 * craterd's side of it (crater_pass_ops_t): binding persists the job
 * and, once the commit that records it is durable (bind_done), hands it
 * to its agents; a preemption marks its victims preempting and orders
 * their agents to stop them (the job is bound by a later pass, once they
 * are gone); a pending job gets its reason, once per change; the fair
 * share input counts each tenant's GPUs in GPU-equivalents of the GPUs
 * they are on (crater_sched_gpus_held).
 *
 * Every decision is one JSON line in DATA_DIR/decisions.log, rotated at
 * 64 MiB into decisions-<ms>.log; rotated files older than
 * server.decisionLogRetention are deleted.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crater/log.h"
#include "daemon/internal.h"

#define DECLOG_ROTATE_BYTES (64ull << 20)
#define TICK_MS 100

int64_t dnow_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void loop_capacity_changed(crater_daemon_t *d)
{
    crater_pass_capacity_changed(d->pass);
    loop_kick(d);
}

void loop_kick(crater_daemon_t *d)
{
    d->dirty = true;
    pthread_cond_signal(&d->wake);
}

/* ---- decision log ---------------------------------------------------------
 */

static void declog_prune(crater_daemon_t *d, int64_t now)
{
    DIR *dir = opendir(d->data_dir);
    struct dirent *e;
    char path[4096];
    long long ms;

    if (!dir)
        return;
    while ((e = readdir(dir))) {
        if (sscanf(e->d_name, "decisions-%lld.log", &ms) != 1)
            continue;
        if (now - ms <= (int64_t)d->cfg.server.decision_log_retention_ms)
            continue;
        snprintf(path, sizeof(path), "%s/%s", d->data_dir, e->d_name);
        unlink(path);
    }
    closedir(dir);
}

static void declog_rotate(crater_daemon_t *d)
{
    char path[4096];
    int64_t now = dnow_ms();

    fclose(d->declog);
    d->declog = NULL;
    snprintf(path,
             sizeof(path),
             "%s/decisions-%lld.log",
             d->data_dir,
             (long long)now);
    if (rename(d->declog_path, path) < 0)
        crater_log(LOG_WARNING, "decision log: rename: %s", strerror(errno));
    d->declog_bytes = 0;
    declog_prune(d, now);
}

void declog_write(crater_daemon_t *d, json_t *entry)
{
    char *line;

    if (!entry)
        return;
    if (!d->declog && d->declog_path) {
        struct stat st;
        d->declog = fopen(d->declog_path, "a");
        d->declog_bytes = stat(d->declog_path, &st) == 0 ? st.st_size : 0;
    }
    line = json_dumps(entry, JSON_COMPACT);
    json_decref(entry);
    if (!line || !d->declog) {
        free(line);
        return;
    }
    d->declog_bytes += (uint64_t)fprintf(d->declog, "%s\n", line);
    free(line);
    if (d->declog_bytes >= DECLOG_ROTATE_BYTES)
        declog_rotate(d);
}

/* ---- the pass's ops: binding ----------------------------------------------
 */

static void bind_done(int rc, int64_t rev, const crater_error_t *err, void *arg)
{
    crater_daemon_t *d = ((void **)arg)[0];
    uint64_t id = (uint64_t)(uintptr_t)((void **)arg)[1];
    djob_t *j;

    (void)rev;
    free(arg);
    pthread_mutex_lock(&d->mu);
    j = job_find(d, id);
    if (rc < 0)
        crater_log(LOG_ERR,
                   "job %" PRIu64 ": binding not stored: %s",
                   id,
                   err ? err->text : "");
    else if (j && j->state == JS_BOUND && j->placed && j->cancel_requested)
        /* cancelled before its binding was stored: no start went out,
         * and the stop its cancel sent found nothing to stop */
        job_apply(d, j, JE_EXIT_CANCELLED, "cancelled before it started");
    else if (j && j->state == JS_BOUND && j->placed)
        node_send_start(d, j, NULL);
    pthread_mutex_unlock(&d->mu);
}

/* How long the pass took to decide about the current job (op_job). */
static double decided(crater_daemon_t *d)
{
    double lat = mono_s() - d->decide_t0;

    crater_metric_observe(d->m_lat, NULL, lat);
    d->decisions++;
    return lat;
}

/* The pass placed and committed j (a gang: every replica). */
static int op_bind(void *arg,
                   uint64_t id,
                   const crater_placement_t *pl,
                   uint32_t n,
                   crater_error_t *err)
{
    crater_daemon_t *d = arg;
    djob_t *j = job_find(d, id);
    double lat = decided(d);
    char reason[256];
    void **ctx;

    (void)err;
    if (!j)
        return 0;
    if (j->nrep && n == j->nrep) {
        gang_placed(d, j, pl);
        gang_bound(j);
    }
    j->pl = *pl;
    j->placed = true;
    j->ever_placed = true;
    if (j->svc_id)
        service_bound(d, j);
    free(j->last_reason);
    j->last_reason = NULL;
    snprintf(reason,
             sizeof(reason),
             "placed on %s (score %.3f)",
             node_model(d, pl->node)->name,
             pl->score);
    /* op_job hands the pass pending jobs only, so the table takes it */
    job_step(d, j, JE_BIND, reason, 0);
    ctx = malloc(2 * sizeof(void *));
    if (ctx) {
        ctx[0] = d;
        ctx[1] = (void *)(uintptr_t)j->id;
    }
    if (!ctx || job_save(d, j, bind_done, ctx) < 0)
        free(ctx);
    declog_write(d,
                 json_pack("{s:I, s:s, s:I, s:s, s:o, s:f}",
                           "time_ms",
                           (json_int_t)dnow_ms(),
                           "decision",
                           "bound",
                           "job",
                           (json_int_t)j->id,
                           "node",
                           node_model(d, pl->node)->name,
                           "placement",
                           placement_json(d, pl),
                           "latency_s",
                           lat));
    crater_metric_add(d->m_dec, (const char *[]){"bound"}, 1);
    return 0;
}

/* ---- preemption -----------------------------------------------------------
 */

/* No plan may be for want of victims old enough (preemptionMinRuntime),
 * and nothing announces their coming of age: a full pass once they all
 * have (the loop's tick; heartbeats usually bring one sooner). */
static void recheck_protected(crater_daemon_t *d)
{
    uint64_t min = d->cfg.scheduler.preemption_min_runtime_ms;

    if (min && !d->recheck_ms)
        d->recheck_ms = dnow_ms() + (int64_t)min;
}

/* Order the plan's victims that are not already stopping to stop; returns
 * how many were, with their ids appended to victims. A victim already
 * stopping (for this job or another) is not ordered again. */
static uint32_t stop_victims(crater_daemon_t *d,
                             djob_t *j,
                             const crater_preempt_plan_t *plan,
                             json_t *victims)
{
    char reason[160];
    uint32_t n = 0;

    snprintf(reason,
             sizeof(reason),
             "preempted by job %" PRIu64 " (priority %d)",
             j->id,
             j->priority);
    for (uint32_t i = 0; i < plan->nvictims; i++) {
        /* a gang's tasks carry their replica: one stop per job */
        djob_t *v = job_find(d, task_job_id(plan->victims[i]));
        crater_proto_notice_t was;

        if (!v)
            continue;
        /* the notice rides on the stop order the transition sends;
         * refused when stopping already (for this job or another) */
        was = v->stop_notice;
        v->stop_notice = CRATER_NOTICE_PRIORITY;
        if (job_apply(d, v, JE_PREEMPT, reason) < 0) {
            v->stop_notice = was;
            continue;
        }
        json_array_append_new(victims, json_integer((json_int_t)v->id));
        v->preempted_by = j->id;
        j->waiting_for++;
        n++;
        crater_metric_add(d->m_preempt, NULL, 1);
    }
    return n;
}

/* Stop the plan's victims; j is bound by a later pass once they are gone
 * (their release changes capacity). One decision, one "preempting" line:
 * only a plan that stops at least one task is a decision (issue 13: a job
 * re-planned every pass over victims already stopping logged "preempting"
 * seven times); 2 tells the pass every victim was stopping already. */
static int op_preempt(void *arg,
                      uint64_t id,
                      const crater_preempt_plan_t *plan,
                      crater_error_t *err)
{
    crater_daemon_t *d = arg;
    djob_t *j = job_find(d, id);
    json_t *victims = json_array();
    char reason[160];
    uint32_t n;

    (void)err;
    if (!j || (n = stop_victims(d, j, plan, victims)) == 0) {
        json_decref(victims);
        return 2;
    }
    snprintf(reason,
             sizeof(reason),
             "waiting for %u preempted job(s) to stop",
             n);
    job_event(j, dnow_ms(), JS_PENDING, reason);
    job_save(d, j, NULL, NULL);
    declog_write(d,
                 json_pack("{s:I, s:s, s:I, s:o, s:I}",
                           "time_ms",
                           (json_int_t)dnow_ms(),
                           "decision",
                           "preempting",
                           "job",
                           (json_int_t)j->id,
                           "victims",
                           victims,
                           "lost_ms",
                           (json_int_t)plan->lost_ms));
    crater_metric_add(d->m_dec, (const char *[]){"preempting"}, 1);
    decided(d);
    return 0;
}

/* ---- pending and failed ---------------------------------------------------
 */

static void unschedulable(crater_daemon_t *d,
                          djob_t *j,
                          const crater_error_t *err)
{
    char reason[CRATER_ERROR_TEXT + 32];

    if (j->last_reason && strcmp(j->last_reason, err->text) == 0)
        return;
    free(j->last_reason);
    j->last_reason = strdup(err->text);
    snprintf(reason, sizeof(reason), "unschedulable: %s", err->text);
    /* not written on its own: the next write of the job (bound,
     * cancelled) carries it, and after a restart the pass finds the
     * reason again (a burst of jobs waiting for room was a write each) */
    job_event(j, dnow_ms(), JS_PENDING, reason);
    declog_write(d,
                 json_pack("{s:I, s:s, s:I, s:s}",
                           "time_ms",
                           (json_int_t)dnow_ms(),
                           "decision",
                           "unschedulable",
                           "job",
                           (json_int_t)j->id,
                           "reason",
                           err->text));
    crater_metric_add(d->m_dec, (const char *[]){"unschedulable"}, 1);
}

static void op_pending(void *arg,
                       uint64_t id,
                       crater_pass_wait_t kind,
                       const crater_error_t *why)
{
    crater_daemon_t *d = arg;
    djob_t *j = job_find(d, id);

    if (kind != CRATER_PASS_WAIT_READY)
        decided(d);
    if (kind == CRATER_PASS_WAIT_NOPLAN)
        recheck_protected(d);
    if (j)
        unschedulable(d, j, why);
}

static void op_fail(void *arg, uint64_t id, const char *reason)
{
    crater_daemon_t *d = arg;
    djob_t *j = job_find(d, id);

    if (j && j->state == JS_PENDING)
        job_apply(d, j, JE_FAIL, reason);
}

/* ---- what the pass asks ---------------------------------------------------
 */

static int op_job(void *arg, uint64_t id, crater_pass_job_t *out)
{
    crater_daemon_t *d = arg;
    djob_t *j = job_find(d, id);

    if (!j || j->state != JS_PENDING || j->waiting_for)
        return 0;
    d->decide_t0 = mono_s();
    gshare_prepare(d, j);
    out->req = &j->req;
    out->replicas = j->nrep ? j->nrep : 1;
    out->task = job_task_id(j, 0);
    out->time_limit_ms = j->spec->time_limit_ms;
    return 1;
}

/* The job named name in tenant, latest submission first. */
static djob_t *named_job(crater_daemon_t *d,
                         const char *tenant,
                         const char *name)
{
    for (size_t i = d->njobs; i-- > 0;)
        if (d->jobs[i]->durable && strcmp(d->jobs[i]->name, name) == 0
            && strcmp(d->jobs[i]->tenant, tenant) == 0)
            return d->jobs[i];
    return NULL;
}

/* Dependencies (spec "after"): 1 ready, 0 wait (err says why), -1 the job
 * can never run (a dependency failed; err says which). */
static int deps_ready(crater_daemon_t *d, djob_t *j, crater_error_t *err)
{
    for (char **a = j->spec->after; a && *a; a++) {
        djob_t *dep = named_job(d, j->tenant, *a);
        if (!dep) {
            crater_errorf(err,
                          CRATER_EUNSCHED,
                          "waiting for job '%s' (not submitted yet)",
                          *a);
            return 0;
        }
        if (dep->state == JS_FAILED || dep->state == JS_CANCELLED) {
            crater_errorf(err,
                          CRATER_EUNSCHED,
                          "dependency '%s' (job %" PRIu64 ") %s",
                          *a,
                          dep->id,
                          job_state_name(dep->state));
            return -1;
        }
        if (dep->state != JS_SUCCEEDED) {
            crater_errorf(err,
                          CRATER_EUNSCHED,
                          "waiting for job '%s' (job %" PRIu64 ", %s)",
                          *a,
                          dep->id,
                          job_state_name(dep->state));
            return 0;
        }
    }
    return 1;
}

/* Dependencies met and the job array under its parallelism cap. */
static int op_ready(void *arg, uint64_t id, crater_error_t *why)
{
    crater_daemon_t *d = arg;
    djob_t *j = job_find(d, id);
    int dep;

    if (!j)
        return 0;
    if ((dep = deps_ready(d, j, why)) <= 0)
        return dep;
    return array_at_cap(d, j, why) ? 0 : 1;
}

/* Fair share input: the ready nodes' capacity and what each tenant holds
 * (same units as the queue's demand: GPUs as GPU-equivalents of the GPU
 * they are on, millicores, bytes). */
static void usage_add(crater_daemon_t *d,
                      crater_share_input_t *in,
                      size_t cap,
                      const djob_t *j,
                      const crater_placement_t *pl)
{
    crater_tenant_usage_t *u = d->share_buf;
    size_t i = 0;

    while (i < in->nusage && strcmp(u[i].tenant, j->tenant) != 0)
        i++;
    if (i == in->nusage) {
        if (in->nusage == cap)
            return;
        memset(&u[i], 0, sizeof(u[i]));
        u[i].tenant = j->tenant;
        in->nusage++;
    }
    u[i].alloc[CRATER_QDIM_GPU] += crater_sched_gpus_held(d->sched, pl);
    u[i].alloc[CRATER_QDIM_CPU] += (double)pl->cpu_milli;
    u[i].alloc[CRATER_QDIM_MEM] += (double)pl->mem_bytes;
}

static int op_share(void *arg, crater_share_input_t *in)
{
    crater_daemon_t *d = arg;
    size_t cap = d->njobs ? d->njobs : 1;
    crater_tenant_usage_t *u = realloc(d->share_buf, cap * sizeof(*u));

    if (!u)
        return -1;
    d->share_buf = u;
    memset(in, 0, sizeof(*in));
    for (size_t i = 0; i < d->nnodes; i++) {
        const crater_node_t *n = node_model(d, d->nodes[i]->sid);
        if (!d->nodes[i]->ready || !n)
            continue;
        in->capacity[CRATER_QDIM_GPU] += (double)n->ngpus;
        in->capacity[CRATER_QDIM_CPU] += (double)crater_node_cpu_milli(n);
        in->capacity[CRATER_QDIM_MEM] += (double)crater_node_memory_bytes(n);
    }
    for (size_t i = 0; i < d->njobs; i++)
        for (uint32_t r = 0; d->jobs[i]->placed && r < job_ntasks(d->jobs[i]);
             r++)
            usage_add(d, in, cap, d->jobs[i], job_task_pl(d->jobs[i], r));
    in->usage = u;
    return 0;
}

static size_t op_ends(void *arg, const crater_task_end_t **ends)
{
    return backfill_ends(arg, ends); /* backfill.c */
}

static const crater_pass_ops_t daemon_ops = {
    .version = CRATER_PASS_OPS_VERSION,
    .job = op_job,
    .ready = op_ready,
    .bind = op_bind,
    .preempt = op_preempt,
    .pending = op_pending,
    .fail = op_fail,
    .ends = op_ends,
    .share = op_share,
};

int loop_init(crater_daemon_t *d, crater_error_t *err)
{
    crater_pass_params_t prm = {.preempt = true,
                                .backfill = d->cfg.scheduler.backfill};

    d->pass = crater_pass_create(d->sched, d->queue, &prm, &daemon_ops, d);
    if (!d->pass)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

/* One pass of the core (pass.c). One whose preemptions freed capacity at
 * once asks for another; craterd's victims stop later, and their release
 * makes the next pass a full one. */
static void sched_pass(crater_daemon_t *d)
{
    crater_error_t err;
    int rc = crater_pass_run(d->pass, (uint64_t)dnow_ms(), &err);

    if (rc < 0)
        crater_log(LOG_ERR, "scheduling pass: %s", err.text);
    else if (rc > 0)
        d->dirty = true;
    if (d->declog)
        fflush(d->declog);
}

/* Waits up to TICK_MS for loop_kick() (caller holds d->mu). */
static void sched_nap(crater_daemon_t *d)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += TICK_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&d->wake, &d->mu, &ts);
}

static void *sched_main(void *arg)
{
    crater_daemon_t *d = arg;
    int64_t next_tick = 0, next_expire = 0;

    pthread_setname_np(pthread_self(), "scheduler"); /* top -H, perf, gdb */

    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        int64_t now = dnow_ms();
        if (d->paused) { /* not sure it still leads: decide nothing */
            sched_nap(d);
            continue;
        }
        if (now >= next_tick) {
            if (d->util_dirty || (d->recheck_ms && now >= d->recheck_ms)) {
                d->util_dirty = false;
                d->recheck_ms = 0;
                loop_capacity_changed(d);
            }
            node_health_tick(d, now);
            node_poll_tick(d, now);
            tokens_flush_use(d, now);
            if (now >= next_expire) {
                jobs_expire(d, now);
                next_expire = now + jobs_expire_every(d);
            }
            history_tick(d, now);
            next_tick = now + TICK_MS;
        }
        if (d->dirty) {
            d->dirty = false;
            sched_pass(d);
            continue;
        }
        sched_nap(d);
    }
    node_poll_tick(d, dnow_ms());
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int loop_start(crater_daemon_t *d, crater_error_t *err)
{
    if (pthread_create(&d->sched_thread, NULL, sched_main, d) != 0)
        return crater_errorf(err,
                             CRATER_EINTERNAL,
                             "cannot start the scheduler thread");
    d->sched_started = true;
    return 0;
}
