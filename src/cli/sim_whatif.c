/* sim_whatif.c - `crater sim whatif`: what the live cluster would do under
 * another configuration.
 *
 *   crater sim whatif [--config proposed.yaml] [--current FILE]
 *                     [--horizon 24h] [--assume-runtime 1h] [-o json]
 *
 * One snapshot of craterd through its API (the nodes with their hardware,
 * admin only; every running and pending job with its spec), replayed
 * twice from now through the shared scheduling pass (replay.h, pass.h):
 * once under the current configuration (--current, else craterd's
 * defaults with the policy GET /api/v1/scheduler reports) and once under
 * the proposed one (--config, else the current again). The two results
 * are printed side by side. The snapshot's conversion is the library's
 * (crater/whatif.h); this file fetches, runs and prints.
 *
 * Measured "now" is right after the first pass at time 0: what the
 * configuration does with the queue as it stands. Fragmentation is the
 * free GPU memory stranded on GPUs that are partly allocated, as a share
 * of all GPU memory; it needs no typical-task distribution, so both
 * configurations are measured the same way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote.h"
#include "crater/config.h"
#include "crater/replay.h"
#include "crater/typhist.h"
#include "crater/units.h"
#include "crater/whatif.h"

enum {
    O_CONFIG = RO_FIRST_CMD,
    O_CURRENT,
    O_HORIZON,
    O_ASSUME
};

struct wopts {
    cli_common_t co;
    const char *config, *current;
    uint64_t horizon_ms, assume_ms;
};

/* One configuration's run. */
struct side {
    const char *label; /* file name or what the configuration is */
    char policy[32];
    crater_replay_result_t res;
    size_t npending;         /* jobs that were pending in the snapshot */
    size_t placed_now;       /* of them, started at 0 */
    size_t placed;           /* of them, started before the horizon */
    uint32_t nrunning;       /* jobs pinned at 0 (index < nrunning) */
    double gpu_now, cpu_now; /* allocated fractions after the first pass
                                (GPU: GPUs held, a slice its share) */
    double overcommit;       /* the configuration's overcommitRatio */
    double frag_now;         /* stranded GPU memory after the first pass */
    bool measured;
};

static const char usage_text[] =
    "usage: crater sim whatif [--config PROPOSED.yaml] [--current FILE]\n"
    "                         [--horizon DURATION] [--assume-runtime "
    "DURATION]\n"
    "                         [--server URL] [--token T] [-o json]\n"
    "Snapshot the live cluster (admin token: node hardware) and replay it\n"
    "from now under the current and the proposed configuration.\n"
    "  --config FILE         proposed craterd.yaml (default: the current)\n"
    "  --current FILE        current craterd.yaml (default: craterd's\n"
    "                        defaults with the server's policy)\n"
    "  --horizon D           how far to simulate (default 24h)\n"
    "  --assume-runtime D    run time of a job without timeLimit (default "
    "1h)\n";

/* ---- measuring ----------------------------------------------------------- */

static void on_start(void *arg,
                     size_t job,
                     const crater_placement_t *p,
                     uint64_t t_ms)
{
    struct side *sd = arg;

    (void)p;
    if (job < sd->nrunning)
        return; /* a running job restarted after a preemption */
    sd->placed++;
    sd->placed_now += t_ms == 0;
}

/* Free GPU memory (MiB) stranded on partly allocated GPUs, and all GPU
 * memory. The core's room counts the overcommit headroom (ratio x
 * capacity), which is taken off to get what is physically free. */
static void stranded(const crater_sched_t *s,
                     double ratio,
                     double *strand,
                     double *total)
{
    uint32_t room[CRATER_MAX_GPUS_PER_NODE];

    *strand = *total = 0;
    for (uint32_t i = 0; i < crater_sched_node_count(s); i++) {
        const crater_node_t *n = crater_sched_node(s, i);
        uint32_t ng =
            crater_sched_gpu_room(s, i, room, CRATER_MAX_GPUS_PER_NODE);
        for (uint32_t g = 0; g < ng && g < n->ngpus; g++) {
            double cap = (double)(n->gpus[g].memory_bytes >> 20);
            double used = cap * ratio - (double)room[g];
            *total += cap;
            if (used > 0 && used < cap)
                *strand += cap - used;
        }
    }
}

static void after_pass(void *arg,
                       const crater_sched_t *s,
                       const crater_replay_sample_t *now)
{
    struct side *sd = arg;
    double strand, total;

    if (sd->measured || now->t_ms != 0)
        return;
    sd->measured = true;
    stranded(s, sd->overcommit, &strand, &total);
    sd->frag_now = total > 0 ? strand / total : 0;
    sd->gpu_now = now->gpu_alloc;
    sd->cpu_now = now->cpu;
}

/* ---- one configuration --------------------------------------------------- */

/* The configuration of a side: the file, else craterd's defaults with the
 * server's policy (the one it runs now). */
static int side_config(const char *file,
                       const char *server_policy,
                       crater_config_t *cfg,
                       crater_error_t *err)
{
    if (file)
        return crater_config_load(file, cfg, err);
    if (crater_config_defaults(cfg) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (server_policy) {
        char *p = strdup(server_policy);
        if (!p)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        free(cfg->scheduler.policy);
        cfg->scheduler.policy = p;
    }
    return 0;
}

/* A scheduler over the snapshot's cluster as craterd would build it from
 * cfg. The typical tasks are the prior (craterd's until it has seen
 * enough submissions) unless cfg turns them off. */
static crater_sched_t *side_sched(crater_config_t *cfg,
                                  const crater_kb_t *kb,
                                  const crater_whatif_t *w,
                                  crater_error_t *err)
{
    crater_sched_t *s;
    size_t nt = 0;
    const crater_typical_t *t = crater_typhist_prior(&nt);

    /* no clock in the core here, as in the replay: no minimum run time */
    cfg->scheduler.preemption_min_runtime_ms = 0;
    if (!(s = crater_sched_create(cfg, kb, NULL))) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < w->cluster->nnodes; i++)
        if (crater_sched_add_node(s, &w->cluster->nodes[i], err) < 0)
            goto fail;
    if (crater_whatif_apply_nodes(w, s, err) < 0
        || (cfg->scheduler.typical_tasks != CRATER_TYPICAL_OFF
            && crater_sched_set_typical(s, t, nt, err) < 0))
        goto fail;
    return s;
fail:
    crater_sched_destroy(s);
    return NULL;
}

static int run_side(const struct wopts *o,
                    crater_config_t *cfg,
                    const crater_kb_t *kb,
                    const crater_whatif_t *w,
                    struct side *sd,
                    crater_error_t *err)
{
    crater_sched_t *s = side_sched(cfg, kb, w, err);
    crater_replay_job_t *jobs = NULL;
    crater_replay_opts_t ro = {
        .preempt = true,
        .backfill = cfg->scheduler.backfill,
        .sample_ms = o->horizon_ms / 100 ? o->horizon_ms / 100 : 1,
        .cluster = w->cluster,
        .on_start = on_start,
        .on_start_arg = sd,
        .horizon_ms = o->horizon_ms,
        .after_pass = after_pass,
        .after_pass_arg = sd,
    };
    int rc = -1;

    if (!s)
        return -1;
    snprintf(sd->policy, sizeof(sd->policy), "%s", crater_sched_policy(s));
    sd->nrunning = (uint32_t)w->nrunning;
    sd->overcommit = cfg->scheduler.overcommit_ratio > 1
                         ? cfg->scheduler.overcommit_ratio
                         : 1;
    sd->npending = w->npending;
    if (crater_whatif_jobs(w, s, &jobs, err) == 0)
        rc = crater_replay_run(s, jobs, w->njobs, &ro, &sd->res, err);
    free(jobs);
    crater_sched_destroy(s);
    return rc;
}

/* ---- the snapshot -------------------------------------------------------- */

/* Append the full view of every job on one page of the list to out;
 * *next is the next page's cursor (NULL at the end; caller frees). */
static int fetch_page(cli_remote_t *r,
                      const char *after,
                      json_t *out,
                      char **next)
{
    char path[256];
    json_t *res = NULL, *v;
    size_t i;
    int rc;

    *next = NULL;
    snprintf(path,
             sizeof(path),
             "/api/v1/jobs?state=pending,bound,running%s%s",
             after ? "&after=" : "",
             after ? after : "");
    if ((rc = cli__api(r, "GET", path, NULL, &res)) != CLI_EXIT_OK)
        return rc;
    json_array_foreach(json_object_get(res, "items"), i, v)
    {
        json_t *full = NULL;
        snprintf(path,
                 sizeof(path),
                 "/api/v1/jobs/%s",
                 json_string_value(json_object_get(v, "id")));
        if ((rc = cli__api(r, "GET", path, NULL, &full)) != CLI_EXIT_OK)
            break;
        json_array_append_new(out, full);
    }
    v = json_object_get(res, "next");
    *next = rc == CLI_EXIT_OK && json_is_string(v)
                ? strdup(json_string_value(v))
                : NULL;
    json_decref(res);
    return rc;
}

struct snap {
    json_t *nodes, *jobs; /* owned */
    char *policy;         /* the server's policy; owned, may be NULL */
};

static int fetch(cli_remote_t *r, struct snap *sn)
{
    json_t *res = NULL;
    char *after = NULL, *next = NULL;
    int rc = cli__api(r, "GET", "/api/v1/nodes?hardware=1", NULL, &res);

    if (rc != CLI_EXIT_OK)
        return rc;
    sn->nodes = json_incref(json_object_get(res, "items"));
    json_decref(res);
    sn->jobs = json_array();
    for (;;) {
        rc = fetch_page(r, after, sn->jobs, &next);
        free(after);
        if (rc != CLI_EXIT_OK || !next)
            break;
        after = next;
    }
    if (rc == CLI_EXIT_OK
        && (rc = cli__api(r, "GET", "/api/v1/scheduler", NULL, &res))
               == CLI_EXIT_OK) {
        const char *p = json_string_value(json_object_get(res, "policy"));
        sn->policy = p ? strdup(p) : NULL;
        json_decref(res);
    }
    return rc;
}

static void snap_clear(struct snap *sn)
{
    json_decref(sn->nodes);
    json_decref(sn->jobs);
    free(sn->policy);
}

/* ---- output -------------------------------------------------------------- */

static json_t *waits_json(const crater_replay_result_t *r)
{
    json_t *o = json_object();

    for (int k = 0; o && k < CRATER_REPLAY_NCLASS; k++) {
        const crater_replay_stats_t *s = &r->cls[k];
        json_object_set_new(o,
                            crater_replay_class_name((crater_replay_class_t)k),
                            json_pack("{s:I, s:I, s:f, s:f, s:f}",
                                      "jobs",
                                      (json_int_t)s->jobs,
                                      "started",
                                      (json_int_t)s->started,
                                      "wait_mean_s",
                                      s->wait_mean,
                                      "wait_p50_s",
                                      s->wait_p50,
                                      "wait_p99_s",
                                      s->wait_p99));
    }
    return o;
}

static json_t *side_json(const struct side *sd)
{
    const crater_replay_result_t *r = &sd->res;

    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f,"
                     " s:f, s:I, s:o}",
                     "config",
                     sd->label,
                     "policy",
                     sd->policy,
                     "pending",
                     (json_int_t)sd->npending,
                     "placed_now",
                     (json_int_t)sd->placed_now,
                     "placed",
                     (json_int_t)sd->placed,
                     "not_placed",
                     (json_int_t)(sd->npending - sd->placed),
                     "gpu_alloc_now",
                     sd->gpu_now,
                     "cpu_allocated_now",
                     sd->cpu_now,
                     "fragmentation_now",
                     sd->frag_now,
                     "gpu_alloc_mean",
                     r->util_gpu_alloc,
                     "cpu_alloc_mean",
                     r->util_cpu,
                     "preemptions",
                     (json_int_t)r->preemptions,
                     "waits",
                     waits_json(r));
}

static int print_json(const struct wopts *o,
                      const crater_whatif_t *w,
                      const struct side sd[2])
{
    json_t *v = json_pack("{s:f, s:f, s:{s:I, s:I, s:I, s:I, s:I}, s:o, s:o}",
                          "horizon_s",
                          (double)o->horizon_ms / 1000.0,
                          "assumed_runtime_s",
                          (double)o->assume_ms / 1000.0,
                          "snapshot",
                          "nodes",
                          (json_int_t)w->cluster->nnodes,
                          "running",
                          (json_int_t)w->nrunning,
                          "pending",
                          (json_int_t)w->npending,
                          "skipped",
                          (json_int_t)w->skipped,
                          "assumed",
                          (json_int_t)w->nassumed,
                          "current",
                          side_json(&sd[0]),
                          "proposed",
                          side_json(&sd[1]));
    int rc = v ? cli__print_raw(v, o->co.fmt) : CLI_EXIT_UNAVAIL;

    json_decref(v);
    return rc;
}

static const char *base(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash ? slash + 1 : path;
}

static void row_pct(const char *name, double a, double b)
{
    printf("%-30s %13.1f%% %13.1f%%\n", name, 100 * a, 100 * b);
}

static void row_count(const char *name, size_t a, size_t b, size_t of)
{
    char x[32], y[32];

    snprintf(x, sizeof(x), "%zu/%zu", a, of);
    snprintf(y, sizeof(y), "%zu/%zu", b, of);
    printf("%-30s %14s %14s\n", name, x, y);
}

static void print_waits(const struct side sd[2])
{
    for (int k = 0; k < CRATER_REPLAY_NCLASS; k++) {
        const crater_replay_stats_t *a = &sd[0].res.cls[k];
        const crater_replay_stats_t *b = &sd[1].res.cls[k];
        char name[64];
        if (!a->started && !b->started)
            continue;
        snprintf(name,
                 sizeof(name),
                 "wait %s mean / p99 (s)",
                 crater_replay_class_name((crater_replay_class_t)k));
        printf("%-30s %6.0f / %-6.0f %6.0f / %-6.0f\n",
               name,
               a->wait_mean,
               a->wait_p99,
               b->wait_mean,
               b->wait_p99);
    }
}

static void print_text(const struct wopts *o,
                       const crater_whatif_t *w,
                       const struct side sd[2])
{
    printf("what-if over %.1f h from now: %zu nodes, %zu running, %zu "
           "pending",
           (double)o->horizon_ms / 3.6e6,
           w->cluster->nnodes,
           w->nrunning,
           w->npending);
    if (w->nassumed)
        printf("; %zu without timeLimit assumed to run %.1f h",
               w->nassumed,
               (double)o->assume_ms / 3.6e6);
    if (w->skipped)
        printf("; %zu gangs/undecodable jobs left out", w->skipped);
    printf("\n\n%-30s %14s %14s\n", "", "current", "proposed");
    printf("%-30s %14.14s %14.14s\n",
           "config",
           base(sd[0].label),
           base(sd[1].label));
    printf("%-30s %14s %14s\n", "policy", sd[0].policy, sd[1].policy);
    row_count("pending placed now",
              sd[0].placed_now,
              sd[1].placed_now,
              w->npending);
    row_count("placed within horizon", sd[0].placed, sd[1].placed, w->npending);
    print_waits(sd);
    row_pct("GPUs held now", sd[0].gpu_now, sd[1].gpu_now);
    row_pct("GPUs held (horizon mean)",
            sd[0].res.util_gpu_alloc,
            sd[1].res.util_gpu_alloc);
    row_pct("CPU allocated now", sd[0].cpu_now, sd[1].cpu_now);
    row_pct("CPU allocated (horizon mean)",
            sd[0].res.util_cpu,
            sd[1].res.util_cpu);
    row_pct("fragmentation now", sd[0].frag_now, sd[1].frag_now);
    printf("%-30s %14zu %14zu\n",
           "preemptions",
           sd[0].res.preemptions,
           sd[1].res.preemptions);
}

/* ---- main ---------------------------------------------------------------- */

static int parse_dur(const char *name, const char *v, uint64_t *out_ms)
{
    crater_error_t err;
    uint64_t ns;

    if (crater_parse_duration_ns(v, &ns, &err) < 0 || ns < 1000000) {
        fprintf(stderr,
                "crater: error: --%s: '%s' is not a duration of at least "
                "1ms\n",
                name,
                v);
        return -1;
    }
    *out_ms = ns / 1000000;
    return 0;
}

static int extra_opt(int c, const char *arg, void *ctx)
{
    struct wopts *o = ctx;

    switch (c) {
    case O_CONFIG:
        o->config = arg;
        return 0;
    case O_CURRENT:
        o->current = arg;
        return 0;
    case O_HORIZON:
        return parse_dur("horizon", arg, &o->horizon_ms);
    case O_ASSUME:
        return parse_dur("assume-runtime", arg, &o->assume_ms);
    }
    return -1;
}

/* Both sides over the snapshot; prints the result. */
static int compare(const struct wopts *o, const struct snap *sn)
{
    crater_error_t err;
    crater_whatif_t w;
    crater_config_t cfg[2] = {0};
    struct side sd[2] = {{.label = o->current ? o->current : "craterd"},
                         {.label = o->config ? o->config : "current"}};
    crater_kb_t *kb = crater_kb_create();
    int rc = -1, ncfg = 0;

    if (kb
        && crater_whatif_build(sn->nodes,
                               sn->jobs,
                               (uint64_t)cli__now_ms(),
                               o->assume_ms,
                               kb,
                               &w,
                               &err)
               == 0) {
        const char *file[2] = {o->current, o->config ? o->config : o->current};
        for (ncfg = 0; ncfg < 2; ncfg++)
            if (side_config(file[ncfg], sn->policy, &cfg[ncfg], &err) < 0
                || run_side(o, &cfg[ncfg], kb, &w, &sd[ncfg], &err) < 0)
                break;
        rc = ncfg == 2 ? 0 : -1;
        if (rc == 0 && o->co.fmt != CLI_FMT_TEXT)
            rc = print_json(o, &w, sd) == CLI_EXIT_OK ? 0 : -1;
        else if (rc == 0)
            print_text(o, &w, sd);
        crater_whatif_clear(&w);
    } else if (!kb)
        crater_errorf(&err, CRATER_ENOMEM, "out of memory");
    for (int i = 0; i < 2; i++) {
        crater_replay_result_clear(&sd[i].res);
        crater_config_clear(&cfg[i]); /* zeroed or loaded: both clear */
    }
    crater_kb_destroy(kb);
    if (rc < 0)
        fprintf(stderr, "crater: error: %s\n", err.text);
    return rc < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int cli_sim_whatif(int argc, char **argv)
{
    static const struct option opts[] = {
        CLI_REMOTE_LONGOPTS,
        {"config", required_argument, NULL, O_CONFIG},
        {"current", required_argument, NULL, O_CURRENT},
        {"horizon", required_argument, NULL, O_HORIZON},
        {"assume-runtime", required_argument, NULL, O_ASSUME},
        {NULL, 0, NULL, 0},
    };
    struct wopts o = {.horizon_ms = 24 * 3600 * 1000ull,
                      .assume_ms = 3600 * 1000ull};
    struct snap sn = {0};
    cli_remote_t r;
    int rc = cli__parse_opts(argc,
                             argv,
                             "o:h",
                             opts,
                             usage_text,
                             &o.co,
                             extra_opt,
                             &o,
                             0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((rc = cli__remote_open(&r, &o.co)) != CLI_EXIT_OK)
        return rc;
    rc = fetch(&r, &sn);
    cli__remote_close(&r);
    if (rc == CLI_EXIT_OK)
        rc = compare(&o, &sn);
    snap_clear(&sn);
    return rc;
}
