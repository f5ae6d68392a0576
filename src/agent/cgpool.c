/* cgpool.c - a finished task's cgroup kept for the next task.
 *
 * Why: making a cgroup and removing it are the dearest steps of a short
 * task's start and end. On cgroup v1 a task has a directory in each of
 * four hierarchies (cpu, cpuacct, memory, pids); each mkdir allocates the
 * controller's per-CPU state and populates a dozen files, each rmdir tears
 * them down, and each limit write to cpu.cfs_quota_us walks every CPU
 * (tg_set_bandwidth). In a 1,000-element array that was about a fifth of
 * the node's CPU time (perf, bench/RESULTS.md B3). So a finished task's
 * cgroup is kept, empty, and the next task takes it with only the limits
 * that differ written (crater_cg_update()):
 *
 *   <parent>/pool-<hash of DATA>-<n>    (every hierarchy the task used)
 *
 * What may be kept: a "plain" cgroup (crater_cg_plain(): no cpuset and no
 * IO settings of its own, so its whole state is the CPU, memory and pids
 * limits we wrote) of a task without a GPU slice (the slice file is named
 * after the cgroup, and a GPU task is not short), that has no process left,
 * counted no OOM kill (the counter cannot be reset, and an OOM must be
 * reported for the task that had it), and holds at most CGPOOL_MEM_MAX
 * bytes of memory charge (page cache a task leaves stays charged to its
 * cgroup; more would count against the next task). Anything else is
 * removed as before. At most CGPOOL_MAX are kept per agent.
 *
 * Names: pool-<hash of the agent's DATA>-<pid>-<n>, so an agent that
 * restarts on the same DATA finds its own, and a new pid never meets an
 * old name. cgpool_init() (after adoption, before the threads) keeps the
 * cgroups of adopted tasks and removes every other one of its DATA,
 * killing what is still in it (a task whose start was interrupted before
 * its record was written); it also removes the empty kept cgroups of any
 * agent whose process is gone (killed with -9 and never started again on
 * its DATA: a test's, a decommissioned node's), so they do not pile up
 * on the machine. cgpool_close() removes the kept ones, so a stopped
 * agent leaves no cgroup.
 *
 * A cgroup that is not kept is removed; when the kernel says EBUSY after
 * the usual 200 ms of retries (processes killed but not yet reaped by the
 * parent they were given to: they still count in pids.current) its name
 * is remembered and tried again at each usage sample (cgpool_retry()), last
 * at close, so it does not stay behind in one hierarchy.
 *
 * Locking: cgpool_mu guards the kept list and the counter; the cgroup
 * writes run outside it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/log.h"

#define CGPOOL_MEM_MAX (1u << 20)

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static bool adopted_name(const crater_agent_t *a, const char *name)
{
    for (size_t i = 0; i < a->ntasks; i++)
        if (!strcmp(a->tasks[i]->cg, name))
            return true;
    return false;
}

/* "pool-<hash>-<pid>-<n>": its hash and pid; false for other names. */
static bool parse_name(const char *name, unsigned *hash, long *pid)
{
    unsigned n;
    int end = 0;

    return sscanf(name, "pool-%8x-%ld-%u%n", hash, pid, &n, &end) == 3
           && name[end] == '\0' && *pid > 0;
}

static bool alive(long pid)
{
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* A cgroup that would not go yet (EBUSY: killed processes not reaped by
   their new parent): tried again by cgpool_retry(), last at close. */
static void doom(crater_agent_t *a, const char *name)
{
    pthread_mutex_lock(&a->cgpool_mu);
    if (a->ncgdoomed < CGPOOL_MAX)
        snprintf(a->cgdoomed[a->ncgdoomed++],
                 sizeof(a->cgdoomed[0]),
                 "%s",
                 name);
    else
        crater_log(LOG_WARNING, "cgroup %s: cannot be removed yet", name);
    pthread_mutex_unlock(&a->cgpool_mu);
}

/* One kept cgroup found at start: ours from an earlier run (not held by
   an adopted task: its processes killed, removed), or another agent's
   whose process is gone (removed when empty: a non-empty one may be a
   task its agent will adopt when it comes back). */
static void sweep_one(crater_agent_t *a, const char *name, unsigned mine)
{
    unsigned hash;
    long pid;
    crater_error_t e;

    if (!parse_name(name, &hash, &pid) || adopted_name(a, name))
        return;
    if (hash != mine
        && (alive(pid) || !crater_cg_reusable(a->cg, name, UINT64_MAX)))
        return;
    if (hash == mine)
        crater_cg_kill(a->cg, name, SIGKILL, NULL);
    if (crater_cg_destroy(a->cg, name, &e) < 0) {
        crater_log(LOG_WARNING,
                   "cgroup %s of an earlier agent: %s (tried again later)",
                   name,
                   e.text);
        doom(a, name);
    }
}

int cgpool_init(crater_agent_t *a, crater_error_t *err)
{
    char real[4096], **names = NULL;
    unsigned mine = fnv1a(realpath(a->data_dir, real) ? real : a->data_dir);
    size_t n = 0;

    snprintf(a->cg_prefix,
             sizeof(a->cg_prefix),
             "pool-%08x-%ld-",
             mine,
             (long)getpid());
    if (crater_cg_list(a->cg, "pool-", &names, &n, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        sweep_one(a, names[i], mine);
    crater_cg_paths_free(names, n);
    return 0;
}

/* A kept cgroup into *e; false when none. */
static bool pop(crater_agent_t *a, cgpool_ent_t *e)
{
    bool got;

    pthread_mutex_lock(&a->cgpool_mu);
    if ((got = a->ncgpool > 0))
        *e = a->cgpool[--a->ncgpool];
    pthread_mutex_unlock(&a->cgpool_mu);
    return got;
}

static void keep(atask_t *t, const crater_cg_limits_t *lim, const char *name)
{
    snprintf(t->cg, sizeof(t->cg), "%s", name);
    t->cg_pooled = true;
    t->cg_lim = *lim;
    t->cg_lim.cpuset_cpus = t->cg_lim.cpuset_mems = NULL; /* plain: unused */
}

int cgpool_take(crater_agent_t *a,
                atask_t *t,
                const crater_cg_limits_t *lim,
                bool may_pool,
                crater_error_t *err)
{
    cgpool_ent_t e;
    char name[64];

    if (!may_pool || !crater_cg_plain(a->cg, lim))
        return crater_cg_create(a->cg, t->cg, lim, err);
    if (pop(a, &e) && crater_cg_update(a->cg, e.name, lim, &e.lim, NULL) == 0) {
        keep(t, lim, e.name);
        return 0;
    } /* a failed update removed it: make a new one */
    pthread_mutex_lock(&a->cgpool_mu);
    snprintf(name, sizeof(name), "%s%u", a->cg_prefix, a->cg_next++);
    pthread_mutex_unlock(&a->cgpool_mu);
    if (crater_cg_create(a->cg, name, lim, err) < 0)
        return -1;
    keep(t, lim, name);
    return 0;
}

bool cgpool_keep(crater_agent_t *a, atask_t *t)
{
    bool kept = false;

    if (!t->cg_pooled || !crater_cg_reusable(a->cg, t->cg, CGPOOL_MEM_MAX))
        return false;
    pthread_mutex_lock(&a->cgpool_mu);
    if ((kept = a->ncgpool < CGPOOL_MAX)) {
        cgpool_ent_t *e = &a->cgpool[a->ncgpool++];
        snprintf(e->name, sizeof(e->name), "%s", t->cg);
        e->lim = t->cg_lim;
    }
    pthread_mutex_unlock(&a->cgpool_mu);
    if (kept) { /* the name is the next task's now */
        t->cg[0] = '\0';
        t->cg_pooled = false;
    }
    return kept;
}

/* Another task of the table in the same cgroup: two adopted records of
   one kept cgroup, the first task's exited, the second's running. */
static bool held_by_other(const crater_agent_t *a, const atask_t *t)
{
    for (size_t i = 0; i < a->ntasks; i++)
        if (a->tasks[i] != t && !strcmp(a->tasks[i]->cg, t->cg))
            return true;
    return false;
}

void cgpool_give(crater_agent_t *a, atask_t *t)
{
    if (!t->cg[0] || cgpool_keep(a, t) || held_by_other(a, t))
        return;
    if (crater_cg_destroy(a->cg, t->cg, NULL) < 0)
        doom(a, t->cg);
    t->cg_pooled = false;
}

void cgpool_retry(crater_agent_t *a, bool wait)
{
    pthread_mutex_lock(&a->cgpool_mu);
    for (size_t i = 0; i < a->ncgdoomed;) {
        const char *g = a->cgdoomed[i];
        if ((wait ? crater_cg_destroy(a->cg, g, NULL)
                  : crater_cg_destroy_nowait(a->cg, g, NULL))
            == 0) {
            memmove(a->cgdoomed[i],
                    a->cgdoomed[--a->ncgdoomed],
                    sizeof(a->cgdoomed[0]));
            continue;
        }
        if (wait)
            crater_log(LOG_WARNING, "cgroup %s: cannot be removed", g);
        i++;
    }
    pthread_mutex_unlock(&a->cgpool_mu);
}

void cgpool_close(crater_agent_t *a)
{
    cgpool_ent_t e;

    while (a->cg && pop(a, &e))
        if (crater_cg_destroy(a->cg, e.name, NULL) < 0)
            doom(a, e.name);
    if (a->cg)
        cgpool_retry(a, true);
}
