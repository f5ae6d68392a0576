/* warm.h - a standby craterd's warm copy of the records craterd keeps in
 * the store (issue 17: "the others stand by, keep their state warm from
 * the change feed").
 *
 * A standby lists every record under CRATER_WARM_PREFIX once, then follows
 * the store's change feed, applying each put and delete, and tracks the
 * revision its copy reflects. When it is promoted it catches up from that
 * revision (only the changes since) and hands the copy to
 * crater_daemon_start() (crater_daemon_opts_t.warm), whose loader
 * (persist.c, cost.c) decodes the records exactly as it decodes a
 * crater_store_list() answer: the same bytes in the same key order at one
 * revision, so the promoted leader's state is the one a full load at that
 * revision gives (tests/unit/test_warm.c compares the two). What the
 * promotion saves is the store read: for etcd, the range over every key,
 * the gateway's JSON and base64 (bench/RESULTS.md B10).
 *
 * Why records and not the decoded daemon state: the decoded state charges
 * the scheduler core, fills the queue and starts timers relative to the
 * load, none of which has an undo per record; and a promotion must do
 * what a restart does (nodes NotReady until their agents register, a lost
 * node's jobs judged one heartbeatTimeout after it, preemptors waiting
 * again), which the unchanged load path does.
 *
 * Ownership: a warm copy is owned by its creator; crater_warm_list() fills
 * a list the caller frees with crater_skv_list_free(). The store is
 * borrowed per call. Not thread-safe: one thread uses a copy at a time
 * (ha.c's loop while standing by, then the daemon's start).
 */
#ifndef CRATER_DAEMON_WARM_H
#define CRATER_DAEMON_WARM_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "store/store.h"

#define CRATER_WARM_PREFIX "/crater/" /* every key craterd loads */

typedef struct crater_warm crater_warm_t;

/* An empty copy, not loaded (revision -1). NULL on ENOMEM. */
crater_warm_t *crater_warm_create(void);
void crater_warm_destroy(crater_warm_t *w); /* NULL ok */

/* Forgets everything: not loaded again. */
void crater_warm_clear(crater_warm_t *w);

/* The revision the copy reflects; -1 when not loaded (or broken by a
 * failed apply: load it again). */
int64_t crater_warm_revision(const crater_warm_t *w);
/* Records held. */
size_t crater_warm_count(const crater_warm_t *w);

/* Replaces the copy with every record under CRATER_WARM_PREFIX, listed
 * at one revision. On failure (err from the store) the copy is unchanged. */
int crater_warm_load(crater_warm_t *w, crater_store_t *st, crater_error_t *err);

/* Applies the changes after the copy's revision, up to at least the
 * store's revision at the call; *applied (may be NULL) gets how many.
 * -1 with CRATER_ESTALE when the history was compacted past the copy's
 * revision (load again), EINVAL when the copy is not loaded, or the
 * store's error (the copy is unchanged and may follow again). */
int crater_warm_follow(crater_warm_t *w,
                       crater_store_t *st,
                       size_t *applied,
                       crater_error_t *err);

/* One event of the feed (pure; crater_warm_follow's step). The revision
 * becomes the event's when it is newer. ENOMEM breaks the copy. */
int crater_warm_apply(crater_warm_t *w,
                      const crater_store_event_t *ev,
                      crater_error_t *err);

/* The records under prefix, sorted by key as crater_store_list() sorts
 * them, values copied; out->revision is the copy's. Only key, value and
 * len are filled (the revisions of each key are not kept: craterd's
 * loader reads none). EINVAL when not loaded. */
int crater_warm_list(const crater_warm_t *w,
                     const char *prefix,
                     crater_skv_list_t *out,
                     crater_error_t *err);

#endif /* CRATER_DAEMON_WARM_H */
