/* retention.c - finished jobs are forgotten server.jobRetention after they
 * finished: removed from memory and from the store, their logs deleted.
 *
 * Why: craterd keeps every job it knows in memory (with up to
 * JOB_MAX_SAMPLES utilisation samples each), so without a limit a busy
 * cluster grows without bound; Slurm's MinJobAge and Kubernetes'
 * ttlSecondsAfterFinished answer the same need. The decision log
 * (server.decisionLogRetention) keeps the scheduling history longer.
 *
 * A finished job that a waiting job names in "after" is kept: forgetting
 * it would make the waiting job wait for a job that seems never submitted.
 *
 * Runs on the scheduler thread once a minute (a quarter of the retention
 * when that is shorter, for tests), under d->mu. Only
 * durable jobs in a final state are forgotten, and no store callback
 * holds a pointer to such a job (submit_done's job is not durable yet;
 * the others look jobs up by id), so freeing here is safe. The deletes go
 * to the store asynchronously, a bounded number per transaction (never a
 * blocking commit under d->mu, internal.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crater/log.h"
#include "daemon/internal.h"

#define DELETES_PER_TXN 512
#define FORGET_PER_PASS 8192

static void del_done(int rc, int64_t rev, const crater_error_t *err, void *arg)
{
    (void)rev;
    (void)arg;
    if (rc < 0)
        crater_log(LOG_ERR,
                   "store: deleting expired jobs failed: %s",
                   err ? err->text : "");
}

/* The jobs that wait for others: not final, with an "after" list. They
 * are never forgotten in this pass, so the list stays valid while the
 * pass frees others. Caller frees *out (NULL on ENOMEM: then nothing is
 * forgotten this time). */
static size_t waiters(const crater_daemon_t *d, const djob_t ***out)
{
    size_t n = 0;

    *out = malloc((d->njobs ? d->njobs : 1) * sizeof(**out));
    for (size_t i = 0; *out && i < d->njobs; i++) {
        const djob_t *k = d->jobs[i];
        if (!job_state_final(k->state) && k->spec && k->spec->after)
            (*out)[n++] = k;
    }
    return n;
}

/* Is j named in the "after" list of one of the waiters? */
static bool awaited(const djob_t *const *w, size_t nw, const djob_t *j)
{
    for (size_t i = 0; i < nw; i++) {
        if (strcmp(w[i]->tenant, j->tenant) != 0)
            continue;
        for (char **a = w[i]->spec->after; *a; a++)
            if (strcmp(*a, j->name) == 0)
                return true;
    }
    return false;
}

static bool expired(const crater_daemon_t *d, const djob_t *j, int64_t now)
{
    return j->durable && job_state_final(j->state) && j->finished_ms > 0
           && now - j->finished_ms > (int64_t)d->cfg.server.job_retention_ms;
}

/* Every attempt's output of job j. */
static void unlink_logs(crater_daemon_t *d, const djob_t *j)
{
    static const char *const streams[] = {"stdout", "stderr"};
    char path[4096];

    for (uint32_t a = 1; a <= j->attempts; a++)
        for (size_t i = 0; i < 2; i++)
            if (log_path(d, j->id, a, streams[i], NULL, path, sizeof(path))
                == 0)
                unlink(path);
}

/* Add the delete of job id's key to *t (created on first use). */
static void store_delete(crater_txn_t **t, uint64_t id)
{
    char key[64];
    crater_error_t err;

    snprintf(key, sizeof(key), KEY_JOBS "%020" PRIu64, id);
    if (!*t && !(*t = crater_txn_create()))
        return;
    if (crater_txn_delete(*t, key, &err) < 0)
        crater_log(LOG_ERR, "store: cannot delete %s: %s", key, err.text);
}

static void commit(crater_daemon_t *d, crater_txn_t **t)
{
    crater_error_t err;

    if (!*t)
        return;
    if (crater_store_commit_async(d->store, *t, del_done, NULL, &err) < 0)
        crater_log(LOG_ERR, "store: deleting expired jobs: %s", err.text);
    crater_metric_add(d->m_commits, NULL, 1);
    *t = NULL; /* owned by the store now, even on failure */
}

int64_t jobs_expire_every(const crater_daemon_t *d)
{
    int64_t every = (int64_t)d->cfg.server.job_retention_ms / 4;

    return every < 250 ? 250 : every > 60000 ? 60000 : every;
}

size_t jobs_expire(crater_daemon_t *d, int64_t now)
{
    crater_txn_t *t = NULL;
    const djob_t **w;
    size_t keep = 0, gone = 0, nw = waiters(d, &w);

    if (!w)
        return 0;
    for (size_t i = 0; i < d->njobs; i++) {
        djob_t *j = d->jobs[i];
        if (gone >= FORGET_PER_PASS || !expired(d, j, now)
            || awaited(w, nw, j)) {
            d->jobs[keep++] = j;
            continue;
        }
        store_delete(&t, j->id);
        unlink_logs(d, j);
        array_track(d, j, -1);
        backfill_track(d, j, (int)j->state, -1);
        job_free(j);
        if (++gone % DELETES_PER_TXN == 0)
            commit(d, &t);
    }
    d->njobs = keep;
    free(w);
    commit(d, &t);
    if (gone)
        crater_log(LOG_INFO,
                   "forgot %zu finished jobs (server.jobRetention)",
                   gone);
    return gone;
}
