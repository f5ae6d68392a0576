/* probe.c - a service replica's readiness command, run by its agent
 * (inference.readiness; doc/inference.md "Ports and readiness"; agent
 * protocol 6: the task order's "readiness", the "ready" event).
 *
 * Why here and not in craterd: the command must see what the replica
 * sees (its files, processes, network namespace) and must run with the
 * replica's rights, never craterd's: a tenant's command run by a root
 * craterd would be a root shell for anyone who may submit a service. So
 * it runs exactly as a Kubernetes exec probe in the container: the same
 * start as the task (taskexec_child(): its user and groups, its cgroups,
 * its private /proc, its environment and working directory), stdout and
 * stderr to /dev/null; for a replica in a container, `podman exec` into
 * that container (its user).
 *
 * The probe thread wakes at the earliest due probe (at most every
 * PROBE_TICK_MS), and runs the due ones one after another without a->mu:
 * fork, then waitpid(WNOHANG) every 5 ms until the command ends or its
 * timeout passes, when its process group is killed (a shell's children
 * too). Exit 0 is ready; anything else (a non-zero exit, a signal, the
 * timeout, a failed start) is not. A change of the answer (and the first
 * answer) sets ready_pending; the event thread reports it ("ready") and
 * clears it once craterd acknowledged the value it sent. Probes of one
 * agent run in series, so a slow command delays the others by at most
 * its timeout; the expected load is a few replicas per node, once a
 * second.
 *
 * Ownership: t->probe (probe_t, below) is the task's, made at its start
 * (probe_prepare) and freed with it; the thread runs a copy of it made
 * under a->mu, so a task removed meanwhile frees nothing in use.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/taskexec.h"
#include "crater/dec.h"
#include "crater/log.h"

#define PROBE_TICK_MS 200
#define PROBE_POLL_MS 5

struct probe {
    char **argv, **envp, **procs; /* owned */
    size_t nprocs;
    char *dir;
    bool switch_user, hide_procs;
    uid_t uid;
    gid_t gid;
    int64_t period_ms, timeout_ms;
    int64_t next_ms; /* the next run, agent_now_ms() */
};

void probe_free(probe_t *p)
{
    if (!p)
        return;
    crater_strv_free(p->argv);
    crater_strv_free(p->envp);
    crater_strv_free(p->procs);
    free(p->dir);
    free(p);
}

/* podman exec into t's container, then the command. */
static char **ctr_argv(const crater_agent_t *a,
                       const atask_t *t,
                       char *const *cmd)
{
    size_t n = crater_strv_len(cmd), k = 0;
    char **v = calloc(n + 8, sizeof(*v));

    if (!v)
        return NULL;
    v[k++] = strdup(a->ctr->podman);
    if (a->ctr->runtime[0]) {
        v[k++] = strdup("--runtime");
        v[k++] = strdup(a->ctr->runtime);
    }
    v[k++] = strdup("exec");
    v[k++] = strdup(t->ctr);
    for (size_t i = 0; i < n; i++)
        v[k++] = strdup(cmd[i]);
    for (size_t i = 0; i < k; i++)
        if (!v[i]) {
            crater_strv_free(v);
            return NULL;
        }
    return v;
}

/* A NULL-terminated copy of n paths (crater_cg_procs_paths()); NULL: no
   memory. */
static char **vec_dup(char *const *v, size_t n)
{
    char **c = calloc(n + 1, sizeof(*c));

    for (size_t i = 0; c && i < n; i++)
        if (!(c[i] = strdup(v[i]))) {
            crater_strv_free(c);
            return NULL;
        }
    return c;
}

int probe_prepare(crater_agent_t *a,
                  atask_t *t,
                  const crater_proto_readiness_t *r,
                  const probe_exec_t *x)
{
    probe_t *p = calloc(1, sizeof(*p));

    if (!p)
        return -1;
    p->period_ms = (int64_t)r->period_ms;
    p->timeout_ms = (int64_t)r->timeout_ms;
    p->next_ms = agent_now_ms(); /* the first answer as soon as it runs */
    if (t->ctr) {                /* in its container, as its user */
        p->argv = ctr_argv(a, t, r->argv);
        p->envp = crater_strv_dup(x->envp);
    } else {
        p->argv = crater_strv_dup(r->argv);
        p->envp = crater_strv_dup(x->envp);
        p->procs = vec_dup(x->procs, x->nprocs);
        p->nprocs = x->nprocs;
        p->dir = x->dir ? strdup(x->dir) : NULL;
        p->switch_user = t->switch_user;
        p->hide_procs = a->hide_procs;
        p->uid = t->uid;
        p->gid = t->gid;
    }
    if (!p->argv || !p->envp || (x->nprocs && !t->ctr && !p->procs)
        || (x->dir && !t->ctr && !p->dir)) {
        probe_free(p);
        return -1;
    }
    t->probe = p;
    pthread_cond_signal(&a->probe_wake);
    return 0;
}

static probe_t *probe_copy(const probe_t *p)
{
    probe_t *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    *c = *p;
    c->argv = crater_strv_dup(p->argv);
    c->envp = crater_strv_dup(p->envp);
    c->procs = p->procs ? vec_dup(p->procs, p->nprocs) : NULL;
    c->dir = p->dir ? strdup(p->dir) : NULL;
    if (!c->argv || !c->envp || (p->procs && !c->procs)
        || (p->dir && !c->dir)) {
        probe_free(c);
        return NULL;
    }
    return c;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Run p once: true when the command exited 0 within its timeout. */
static bool probe_run(const probe_t *p)
{
    taskexec_t x = {.argv = p->argv,
                    .envp = p->envp,
                    .procs = p->procs,
                    .nprocs = p->nprocs,
                    .out = "/dev/null",
                    .errf = "/dev/null",
                    .dir = p->dir,
                    .switch_user = p->switch_user,
                    .hide_procs = p->hide_procs,
                    /* its own /proc (the agent's namespace is the work
                       thread's to replace) */
                    .procns_fd = -1,
                    .uid = p->uid,
                    .gid = p->gid};
    int64_t deadline = agent_now_ms() + p->timeout_ms;
    int st = 0;
    pid_t pid = fork(), r;

    if (pid < 0)
        return false;
    if (pid == 0)
        taskexec_child(&x); /* its own process group; never returns */
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && agent_now_ms() < deadline)
        sleep_ms(PROBE_POLL_MS);
    if (r == 0) { /* past its timeout: the whole group */
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        return false;
    }
    return r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Under a->mu: the running task whose probe is the most overdue (a
 * command always due, slower than its period, does not starve the
 * others), or NULL and the time of the next one (*next_ms). */
static atask_t *due(crater_agent_t *a, int64_t now, int64_t *next_ms)
{
    atask_t *first = NULL;

    *next_ms = now + PROBE_TICK_MS;
    for (size_t i = 0; i < a->ntasks; i++) {
        atask_t *t = a->tasks[i];
        if (!t->probe || t->state != AT_RUNNING || t->pid <= 0)
            continue;
        if (!first || t->probe->next_ms < first->probe->next_ms)
            first = t;
    }
    if (first && first->probe->next_ms <= now)
        return first;
    if (first && first->probe->next_ms < *next_ms)
        *next_ms = first->probe->next_ms;
    return NULL;
}

/* Under a->mu: the answer for (job, attempt, replica), if it still runs. */
static void answer(crater_agent_t *a,
                   const char *job,
                   uint32_t attempt,
                   uint32_t replica,
                   bool ok,
                   int64_t period_ms)
{
    atask_t *t = task_find(a, job, attempt, replica);

    if (!t || !t->probe)
        return;
    t->probe->next_ms = agent_now_ms() + period_ms;
    if (t->state != AT_RUNNING)
        return;
    if (ok != t->ready || !t->ready_known) {
        t->ready = ok;
        t->ready_known = true;
        t->ready_pending = true;
        pthread_cond_signal(&a->ev_wake);
    }
}

/* One due probe run (a->mu held on entry and on return); false when
 * none was due (*next_ms: when one is). */
static bool run_due(crater_agent_t *a, int64_t *next_ms)
{
    int64_t now = agent_now_ms();
    atask_t *t = due(a, now, next_ms);
    probe_t *c;
    char *job;
    uint32_t attempt, replica;
    bool ok;

    if (!t)
        return false;
    c = probe_copy(t->probe);
    job = strdup(t->job);
    /* the next run a period after this one ends (answer()): a command
       slower than its period runs back to back, never piles up */
    t->probe->next_ms = job ? INT64_MAX : now + t->probe->period_ms;
    attempt = t->attempt;
    replica = t->replica;
    pthread_mutex_unlock(&a->mu);
    ok = c && job && probe_run(c);
    pthread_mutex_lock(&a->mu);
    if (job)
        answer(a, job, attempt, replica, ok, c ? c->period_ms : 1000);
    probe_free(c);
    free(job);
    return true;
}

void *probe_main(void *arg)
{
    crater_agent_t *a = arg;
    int64_t next_ms;

    pthread_mutex_lock(&a->mu);
    while (!a->stopping) {
        if (run_due(a, &next_ms))
            continue;
        int64_t wait = next_ms - agent_now_ms();
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        wait = wait < 1 ? 1 : wait;
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (long)(wait % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&a->probe_wake, &a->mu, &ts);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}
