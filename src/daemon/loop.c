/* loop.c - the scheduling loop and the decision log.
 *
 * One thread. It sleeps on d->wake and runs a pass when something changed
 * (a submission committed, a job finished, a node came or went, a cancel)
 * and a tick every 100 ms (expired long polls, node health, log
 * rotation). A pass takes the pending jobs in the queue's order (priority,
 * deadline, fair share, age) and, for each: places it with the core and
 * binds it; or, when it cannot fit, asks the core's preemption planner for
 * victims of lower priority, marks them preempting and orders their agents
 * to stop them (the job is bound once they are gone); or records why it is
 * unschedulable. The binding reaches the agent only once the commit that
 * records it is durable (bind_done).
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
    d->epoch++;
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

/* ---- binding --------------------------------------------------------------
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
    else if (j && j->state == JS_BOUND && j->placed)
        node_send_start(d, j, NULL);
    pthread_mutex_unlock(&d->mu);
}

static void bind_job(crater_daemon_t *d,
                     djob_t *j,
                     const crater_placement_t *pl,
                     double lat_s)
{
    const crater_node_t *cn = node_model(d, pl->node);
    crater_error_t err;
    char reason[256];
    void **ctx;

    if (!j->nrep /* a gang is committed by gang_place */
        && crater_sched_commit(d->sched, j->id, &j->req, pl, &err) < 0) {
        crater_log(LOG_ERR, "job %" PRIu64 ": commit: %s", j->id, err.text);
        return;
    }
    if (j->nrep)
        gang_bound(j);
    j->pl = *pl;
    j->placed = true;
    j->ever_placed = true;
    array_moved(d, j, j->state, JS_BOUND);
    j->state = JS_BOUND;
    free(j->last_reason);
    j->last_reason = NULL;
    crater_queue_remove(d->queue, j->id, NULL);
    snprintf(reason,
             sizeof(reason),
             "placed on %s (score %.3f)",
             cn->name,
             pl->score);
    job_event(j, dnow_ms(), JS_BOUND, reason);
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
                           cn->name,
                           "placement",
                           placement_json(d, pl),
                           "latency_s",
                           lat_s));
    crater_metric_add(d->m_dec, (const char *[]){"bound"}, 1);
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
        if (!v || v->state == JS_PREEMPTING)
            continue;
        json_array_append_new(victims, json_integer((json_int_t)v->id));
        v->preempted_by = j->id;
        job_set_state(d, v, JS_PREEMPTING, reason);
        node_send_stop(d, v, reason);
        j->waiting_for++;
        n++;
        crater_metric_add(d->m_preempt, NULL, 1);
    }
    return n;
}

/* A plan whose victims are all stopping already: nothing new is decided,
 * so nothing is logged but the pending reason (once, as any reason). */
static void victims_stopping(crater_daemon_t *d,
                             djob_t *j,
                             const crater_preempt_plan_t *plan);

/* Preempt for j when a plan exists. One decision, one "preempting" line:
 * only a plan that stops at least one task is a decision (issue 13: a job
 * re-planned every pass over victims already stopping logged "preempting"
 * seven times). false with *perr saying why when there is no plan. */
static bool try_preempt(crater_daemon_t *d, djob_t *j, crater_error_t *perr)
{
    crater_preempt_plan_t plan;
    char reason[160];
    json_t *victims;
    uint32_t n;

    if (crater_sched_plan_preemption(d->sched, &j->req, &plan, perr) < 0) {
        recheck_protected(d);
        return false;
    }
    if (plan.nvictims == 0)
        return false;
    victims = json_array();
    if ((n = stop_victims(d, j, &plan, victims)) == 0) {
        json_decref(victims);
        victims_stopping(d, j, &plan);
        return true;
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
                           (json_int_t)plan.lost_ms));
    crater_metric_add(d->m_dec, (const char *[]){"preempting"}, 1);
    return true;
}

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
    job_event(j, dnow_ms(), JS_PENDING, reason);
    job_save(d, j, NULL, NULL);
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

/* The placement's reason and, after it, why no preemption helps (no
 * candidates: non-preemptible, equal or higher priority, too young). */
static const crater_error_t *with_plan(crater_error_t *err,
                                       const crater_error_t *perr)
{
    size_t len = strlen(err->text), add = strlen(perr->text);

    if (perr->errnum != CRATER_EUNSCHED || len + 3 >= sizeof(err->text))
        return err;
    if (add > sizeof(err->text) - len - 3)
        add = sizeof(err->text) - len - 3; /* cut, as err.text is */
    memcpy(err->text + len, "; ", 2);
    memcpy(err->text + len + 2, perr->text, add);
    err->text[len + 2 + add] = '\0';
    return err;
}

static void victims_stopping(crater_daemon_t *d,
                             djob_t *j,
                             const crater_preempt_plan_t *plan)
{
    crater_error_t err = {0};
    size_t len;

    len = (size_t)snprintf(err.text, sizeof(err.text), "waiting for job(s)");
    for (uint32_t i = 0; i < plan->nvictims && len < sizeof(err.text); i++)
        len += (size_t)snprintf(err.text + len,
                                sizeof(err.text) - len,
                                "%s %" PRIu64,
                                i ? "," : "",
                                plan->victims[i]);
    if (len < sizeof(err.text))
        snprintf(err.text + len,
                 sizeof(err.text) - len,
                 " already being preempted to stop");
    err.errnum = CRATER_EUNSCHED;
    unschedulable(d, j, &err);
}

static void schedule_one(crater_daemon_t *d, djob_t *j)
{
    crater_placement_t pl;
    crater_error_t err, perr = {0};
    double t0 = mono_s(), lat;
    int rc;

    rc = j->nrep ? gang_place(d, j, &err)
                 : backfill_place(d, j, &pl, &err); /* EASY: backfill.c */
    lat = mono_s() - t0;
    crater_metric_observe(d->m_lat, NULL, lat);
    d->decisions++;
    if (rc == 0)
        bind_job(d, j, j->nrep ? &j->pl : &pl, lat);
    else if (rc > 0 || j->nrep) /* delays the reserved head; gangs do not
                                   preempt yet */
        unschedulable(d, j, &err);
    else if (!try_preempt(d, j, &perr)) {
        backfill_reserve(d, j);
        unschedulable(d, j, with_plan(&err, &perr));
    }
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

/* Hard deadlines that can no longer be met fail the job. */
static void expire(crater_daemon_t *d, uint64_t *ids)
{
    size_t n = crater_queue_expired(d->queue, (uint64_t)dnow_ms(), ids);

    for (size_t i = 0; i < n; i++) {
        djob_t *j = job_find(d, ids[i]);
        if (j && j->state == JS_PENDING)
            job_set_state(d,
                          j,
                          JS_FAILED,
                          "hard deadline can no longer be met");
    }
}

static void consider(crater_daemon_t *d, djob_t *j)
{
    crater_error_t err;
    int dep = deps_ready(d, j, &err);

    if (dep < 0)
        job_set_state(d, j, JS_FAILED, err.text);
    else if (dep == 0 || array_at_cap(d, j, &err))
        unschedulable(d, j, &err);
    else
        schedule_one(d, j);
}

/* Every pending job in queue order: after capacity came back. */
/* Fair share input: the ready nodes' capacity and what each tenant holds
 * (same units as the queue's demand: GPUs as GPU-equivalents, millicores,
 * bytes). usage[] has room for d->ntenants + one per distinct tenant of a
 * placed job; *nusage is how many were filled. */
static void usage_add(crater_tenant_usage_t *u,
                      size_t *n,
                      size_t cap,
                      const djob_t *j,
                      const crater_placement_t *pl)
{
    size_t i = 0;
    double g = pl->whole ? pl->ngpus : 0;

    if (!pl->whole)
        for (uint32_t k = 0; k < pl->ngpus; k++)
            g += (double)pl->gpu_mib[k] / (80.0 * 1024);
    while (i < *n && strcmp(u[i].tenant, j->tenant) != 0)
        i++;
    if (i == *n) {
        if (*n == cap)
            return;
        memset(&u[i], 0, sizeof(u[i]));
        u[i].tenant = j->tenant;
        (*n)++;
    }
    u[i].alloc[CRATER_QDIM_GPU] += g;
    u[i].alloc[CRATER_QDIM_CPU] += (double)pl->cpu_milli;
    u[i].alloc[CRATER_QDIM_MEM] += (double)pl->mem_bytes;
}

static crater_tenant_usage_t *share_input(crater_daemon_t *d,
                                          crater_share_input_t *in)
{
    size_t cap = d->njobs ? d->njobs : 1;
    crater_tenant_usage_t *u = calloc(cap, sizeof(*u));

    memset(in, 0, sizeof(*in));
    for (size_t i = 0; i < d->nnodes; i++) {
        const crater_node_t *n = node_model(d, d->nodes[i]->sid);
        if (!d->nodes[i]->ready || !n)
            continue;
        in->capacity[CRATER_QDIM_GPU] += (double)n->ngpus;
        in->capacity[CRATER_QDIM_CPU] += (double)crater_node_cpu_milli(n);
        in->capacity[CRATER_QDIM_MEM] += (double)crater_node_memory_bytes(n);
    }
    for (size_t i = 0; u && i < d->njobs; i++)
        for (uint32_t r = 0; d->jobs[i]->placed && r < job_ntasks(d->jobs[i]);
             r++)
            usage_add(u,
                      &in->nusage,
                      cap,
                      d->jobs[i],
                      job_task_pl(d->jobs[i], r));
    in->usage = u;
    return u;
}

static void full_pass(crater_daemon_t *d, uint64_t *ids, size_t n)
{
    crater_share_input_t share;
    crater_tenant_usage_t *u = share_input(d, &share);
    crater_error_t err;
    int rc;

    rc = crater_queue_order(d->queue,
                            (uint64_t)dnow_ms(),
                            u ? &share : NULL,
                            ids,
                            &err);
    free(u);
    if (rc < 0)
        return;
    d->full_pass_epoch = d->epoch;
    backfill_reset(d);
    for (size_t i = 0; i < n; i++) {
        djob_t *j = job_find(d, ids[i]);
        if (j && j->state == JS_PENDING && !j->waiting_for) {
            j->seen_epoch = d->epoch;
            consider(d, j);
        }
    }
}

static int by_priority(const void *a, const void *b)
{
    const djob_t *x = *(djob_t *const *)a, *y = *(djob_t *const *)b;

    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Only the jobs submitted (or requeued) since the last pass: capacity
 * has only shrunk since the others were considered, so they still do not
 * fit. Highest priority first. */
static void fresh_pass(crater_daemon_t *d)
{
    djob_t **v = malloc(d->nfresh * sizeof(*v));
    size_t n = 0;

    if (!v)
        return;
    for (size_t i = 0; i < d->nfresh; i++) {
        djob_t *j = job_find(d, d->fresh[i]);
        if (j && j->state == JS_PENDING && j->seen_epoch != d->epoch)
            v[n++] = j;
    }
    qsort(v, n, sizeof(*v), by_priority);
    for (size_t i = 0; i < n; i++)
        if (v[i]->state == JS_PENDING && !v[i]->waiting_for) {
            v[i]->seen_epoch = d->epoch;
            consider(d, v[i]);
        }
    free(v);
}

static void sched_pass(crater_daemon_t *d)
{
    size_t n = crater_queue_count(d->queue);
    uint64_t *ids = n ? malloc(n * sizeof(*ids)) : NULL;

    if (ids)
        expire(d, ids);
    n = crater_queue_count(d->queue);
    if (ids && d->epoch != d->full_pass_epoch)
        full_pass(d, ids, n);
    else if (d->nfresh)
        fresh_pass(d);
    d->nfresh = 0;
    free(ids);
    if (d->declog)
        fflush(d->declog);
}

static void *sched_main(void *arg)
{
    crater_daemon_t *d = arg;
    int64_t next_tick = 0, next_expire = 0;
    struct timespec ts;

    pthread_mutex_lock(&d->mu);
    while (!d->stopping) {
        int64_t now = dnow_ms();
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
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&d->wake, &d->mu, &ts);
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
