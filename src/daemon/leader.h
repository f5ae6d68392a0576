/* leader.h - leader election among the craterds that share one etcd
 * (issue 17; doc/operations.md "High availability").
 *
 * One thread per craterd. While standing by it campaigns every retryPeriod:
 * a lease of leaseDuration and one transaction "the leader key does not
 * exist -> put it, with my URL, under my lease". The winner leads and
 * renews its lease every retryPeriod. Both clocks below count from when
 * the last successful renewal was sent (etcd restarts the TTL when it
 * gets it, later), and they hold on their own: the state read is the
 * state now, even while the thread waits on a renewal that hangs.
 *
 *   - renewDeadline without a renewal: UNSURE. The lease may have expired
 *     (a standby may lead soon) or not (etcd was electing its own leader,
 *     which extends every lease): the program must stop answering and
 *     scheduling as the leader, and keep its state. A renewal that then
 *     succeeds, with the key still the one it wrote, makes it LEADING
 *     again: nobody else can have led meanwhile, since the key was never
 *     replaced.
 *   - twice leaseDuration without a renewal (etcd's own election may
 *     extend the lease: it is given one more leaseDuration), the lease
 *     gone or the key no longer the one it wrote: LOST. The program must stop
 * writing (crater_store_set_fence(-1)) and scheduling, then rejoin as a
 *     standby.
 *
 * The fence - every write of the leader compares the key's mod_revision,
 * crater_leader_revision() - is what makes a deposed leader harmless even
 * before it notices; UNSURE is what keeps it from answering as the leader
 * once a standby could have won (renewDeadline < leaseDuration).
 *
 * Ownership: the store is borrowed (the election's own connection: its
 * requests are bounded by retryPeriod, not by craterd's 10 s); strings
 * are copied. All functions are thread-safe.
 */
#ifndef CRATER_DAEMON_LEADER_H
#define CRATER_DAEMON_LEADER_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "store/store.h"

#define CRATER_LEADER_KEY "/crater/leader"

typedef enum crater_leader_state {
    CRATER_LEADER_STANDBY, /* campaigning; someone else (or nobody) leads */
    CRATER_LEADER_LEADING, /* this craterd holds the key */
    CRATER_LEADER_UNSURE,  /* it did, and has not renewed for renewDeadline:
                              serve nothing until a renewal says (back to
                              LEADING) or twice leaseDuration passes
                              (LOST) */
    CRATER_LEADER_LOST,    /* it did and lost it: step down, then rejoin */
    CRATER_LEADER_STOPPED  /* destroyed */
} crater_leader_state_t;

typedef struct crater_leader_opts {
    crater_store_t *store; /* borrowed */
    const char *key;       /* NULL = CRATER_LEADER_KEY */
    const char *url;       /* this craterd's advertised URL */
    int64_t lease_ms;
    int64_t renew_deadline_ms; /* < lease_ms */
    int64_t retry_ms;          /* < renew_deadline_ms */
} crater_leader_opts_t;

typedef struct crater_leader crater_leader_t;

/* Starts the election thread (standing by). NULL with err on failure. */
crater_leader_t *crater_leader_start(const crater_leader_opts_t *o,
                                     crater_error_t *err);

/* Waits up to ms for the state to differ from seen; returns the state. */
crater_leader_state_t crater_leader_wait(crater_leader_t *l,
                                         crater_leader_state_t seen,
                                         int64_t ms);

/* The leader key's mod_revision while LEADING or UNSURE (the fence); 0
 * otherwise. */
int64_t crater_leader_revision(crater_leader_t *l);

/* The URL of the leader last seen ("" when none) into buf. */
void crater_leader_current(crater_leader_t *l, char *buf, size_t n);

/* After LOST (the program has stepped down), or to give leadership up
 * (a promotion that failed): revokes the lease if it can and campaigns
 * again. Returns once the thread has resigned (state STANDBY, until its
 * next campaign). */
void crater_leader_rejoin(crater_leader_t *l);

/* Stops the thread; a leader revokes its lease so that a standby takes
 * over at once (a clean stop). NULL ok. */
void crater_leader_destroy(crater_leader_t *l);

/* Pure: whether a leader that last renewed at last_ok_ms has lost at
 * now_ms (renewal failing for renew_deadline_ms). */
int crater_leader_deadline_passed(int64_t last_ok_ms,
                                  int64_t now_ms,
                                  int64_t renew_deadline_ms);

/* Pure: what a leader is at now_ms that last renewed at last_ok_ms
 * (LEADING, UNSURE past the renew deadline, LOST past twice the lease). */
crater_leader_state_t crater_leader_clock(int64_t last_ok_ms,
                                          int64_t now_ms,
                                          int64_t renew_deadline_ms,
                                          int64_t lease_ms);

#endif /* CRATER_DAEMON_LEADER_H */
