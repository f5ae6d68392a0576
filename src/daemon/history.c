/* history.c - the store's change history is compacted on a schedule, as
 * etcd's periodic auto-compaction (--auto-compaction-retention) does, and
 * the store's size is exported as metrics.
 *
 * Why: every write of every key leaves an event in the store's history, so
 * without compaction the store grows with every write ever made rather than
 * with what craterd holds: after 40,300 jobs with jobRetention: 1s it held
 * 3 keys, 333,809 history rows and 549 MB. craterd itself never reads old
 * history (it rebuilds from the keys at start); the feed is kept
 * store.historyRetention long for watchers, as kube-apiserver keeps 5
 * minutes of etcd history.
 *
 * How: every tenth of the retention the scheduler thread notes (time,
 * store revision); it compacts to the newest noted revision that is at
 * least one retention old, so history younger than the retention is always
 * there. The compaction is handed to the store asynchronously (never a
 * blocking store call under d->mu, internal.h) and its callback touches no
 * daemon state; the store frees the rows in bounded steps on its writer
 * thread (doc/store.md), so even a backlog of 300,000 rows holds no commit
 * for more than one step.
 */
#include <inttypes.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/internal.h"

_Static_assert(HISTORY_NOTES > 10, "notes must span more than a retention");

static void compact_done(int rc,
                         int64_t rev,
                         const crater_error_t *err,
                         void *arg)
{
    (void)rev;
    (void)arg;
    if (rc < 0)
        crater_log(LOG_ERR,
                   "store: compacting the history failed: %s",
                   err ? err->text : "");
}

/* Notes (now, rev), dropping the oldest note when all are used. */
static void note(crater_daemon_t *d, int64_t now, int64_t rev)
{
    if (d->hist_n == HISTORY_NOTES) {
        memmove(d->hist, d->hist + 1, (HISTORY_NOTES - 1) * sizeof(*d->hist));
        d->hist_n--;
    }
    d->hist[d->hist_n].ms = now;
    d->hist[d->hist_n].rev = rev;
    d->hist_n++;
}

/* The revision of the newest note at least keep_ms old (0: none yet);
 * older notes are dropped, that one stays. */
static int64_t due_revision(crater_daemon_t *d, int64_t now, int64_t keep_ms)
{
    size_t i = d->hist_n;

    while (i > 0 && now - d->hist[i - 1].ms < keep_ms)
        i--;
    if (i == 0)
        return 0;
    memmove(d->hist, d->hist + i - 1, (d->hist_n - i + 1) * sizeof(*d->hist));
    d->hist_n -= i - 1;
    return d->hist[0].rev;
}

void history_tick(crater_daemon_t *d, int64_t now)
{
    int64_t keep = (int64_t)d->cfg.store.history_retention_ms, rev;
    crater_error_t err;

    if (keep == 0 || now < d->hist_next_ms)
        return;
    d->hist_next_ms = now + keep / 10;
    note(d, now, crater_store_revision(d->store));
    rev = due_revision(d, now, keep);
    if (rev <= crater_store_compacted_revision(d->store))
        return;
    if (crater_store_compact_async(d->store, rev, compact_done, NULL, &err) < 0)
        crater_log(LOG_ERR, "store: cannot compact the history: %s", err.text);
    else
        crater_debug(CRATER_SUB_STORE,
                     "store: compacting the history to revision %" PRId64,
                     rev);
}

/* ---- metrics ------------------------------------------------------------- */

enum store_gauge {
    M_REV,
    M_COMPACTED,
    M_EVENTS,
    M_DB,
    M_WAL,
    M_COUNT
};
_Static_assert(sizeof(((crater_daemon_t *)0)->m_store)
                   == M_COUNT * sizeof(crater_metric_t *),
               "one gauge each");

static const char *const m_names[M_COUNT][2] = {
    {"crater_store_revision", "Revision of the last durable store write"},
    {"crater_store_compacted_revision",
     "Store revision at or below which the change history is compacted"},
    {"crater_store_history_events",
     "Change history events the store holds (store.historyRetention)"},
    {"crater_store_db_bytes", "Size of the store's database file"},
    {"crater_store_wal_bytes", "Size of the store's write-ahead log"},
};

int history_metrics_setup(crater_daemon_t *d, crater_error_t *err)
{
    for (size_t i = 0; i < M_COUNT; i++)
        if (!(d->m_store[i] = crater_metrics_gauge(d->metrics,
                                                   m_names[i][0],
                                                   m_names[i][1],
                                                   NULL,
                                                   err)))
            return -1;
    return 0;
}

void history_metrics_publish(crater_daemon_t *d)
{
    crater_store_stats_t s;
    crater_error_t err;

    if (!d->store || crater_store_stats(d->store, &s, &err) < 0)
        return;
    crater_metric_set(d->m_store[M_REV], NULL, (double)s.revision);
    crater_metric_set(d->m_store[M_COMPACTED], NULL, (double)s.compacted);
    crater_metric_set(d->m_store[M_EVENTS], NULL, (double)s.events);
    crater_metric_set(d->m_store[M_DB], NULL, (double)s.db_bytes);
    crater_metric_set(d->m_store[M_WAL], NULL, (double)s.wal_bytes);
}
