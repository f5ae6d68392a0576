/* opsmetrics.c - the gauges the shipped alert rules need that no other
 * module owns (deploy/prometheus/crater-rules.yml, doc/cost.md):
 *
 *   crater_queue_oldest_wait_seconds   how long the oldest pending job has
 *                                      waited (queue wait over target)
 *   crater_overcommit_watermark        scheduler.safetyWatermark, so a
 *                                      rule can compare measured GPU
 *                                      memory against it
 *   crater_store_commit_seconds        a probe: an empty transaction
 *                                      queued at each scrape, timed to its
 *                                      callback. The writer commits in
 *                                      order, so this is what a write
 *                                      queued then waited (queue + fsync).
 *
 * Why a probe rather than timing every write: writes are issued from
 * several files, and a per-write wrapper would touch all of them; one
 * probe per scrape (every 15-60 s) samples the same queue.
 */
#include <stdlib.h>
#include <time.h>

#include "crater/log.h"
#include "daemon/internal.h"

typedef struct dops {
    crater_metric_t *m_wait, *m_mark, *m_commit;
    bool probing; /* a probe is queued (written by the writer thread) */
    double t0;
} dops_t;

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int ops_metrics_setup(crater_daemon_t *d, crater_error_t *err)
{
    static const double b[] =
        {1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
    dops_t *o = calloc(1, sizeof(*o));

    if (!o)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    d->ops = o;
    o->m_wait = crater_metrics_gauge(d->metrics,
                                     "crater_queue_oldest_wait_seconds",
                                     "How long the oldest pending job has "
                                     "waited",
                                     NULL,
                                     err);
    o->m_mark = crater_metrics_gauge(d->metrics,
                                     "crater_overcommit_watermark",
                                     "scheduler.safetyWatermark: the measured "
                                     "GPU memory share an overcommitted GPU "
                                     "may reach",
                                     NULL,
                                     err);
    o->m_commit = crater_metrics_histogram(d->metrics,
                                           "crater_store_commit_seconds",
                                           "Time a probe write waited for its "
                                           "store commit (queue and fsync)",
                                           NULL,
                                           b,
                                           sizeof(b) / sizeof(b[0]),
                                           err);
    return o->m_wait && o->m_mark && o->m_commit ? 0 : -1;
}

/* On the store's writer thread: no d->mu (the metric has its own). */
static void probe_done(int rc, int64_t rev, const crater_error_t *err, void *a)
{
    dops_t *o = a;

    (void)rev;
    (void)err;
    if (rc == 0)
        crater_metric_observe(o->m_commit, NULL, mono_s() - o->t0);
    __atomic_store_n(&o->probing, false, __ATOMIC_RELEASE);
}

static void probe(crater_daemon_t *d)
{
    dops_t *o = d->ops;
    crater_txn_t *t;
    crater_error_t err;

    if (__atomic_load_n(&o->probing, __ATOMIC_ACQUIRE)
        || !(t = crater_txn_create()))
        return;
    o->t0 = mono_s();
    __atomic_store_n(&o->probing, true, __ATOMIC_RELEASE);
    if (crater_store_commit_async(d->store, t, probe_done, o, &err) < 0)
        __atomic_store_n(&o->probing, false, __ATOMIC_RELEASE);
}

/* Under d->mu, at each scrape. */
void ops_metrics_publish(crater_daemon_t *d)
{
    int64_t now = dnow_ms(), oldest = now;

    if (!d->ops)
        return;
    for (size_t i = 0; i < d->njobs; i++)
        if (d->jobs[i]->durable && d->jobs[i]->state == JS_PENDING
            && d->jobs[i]->submitted_ms < oldest)
            oldest = d->jobs[i]->submitted_ms;
    crater_metric_set(d->ops->m_wait, NULL, (double)(now - oldest) / 1000);
    crater_metric_set(d->ops->m_mark, NULL, d->cfg.scheduler.safety_watermark);
    probe(d);
}

/* After the store is closed (no probe callback can run any more). */
void ops_metrics_free(crater_daemon_t *d)
{
    free(d->ops);
    d->ops = NULL;
}
