/* services.h - the service controller's state, shared by services.c (the
 * controller) and api_services.c (its JSON and API). Internal to
 * src/daemon; every function here is called with d->mu held.
 */
#ifndef CRATER_DAEMON_SERVICES_H
#define CRATER_DAEMON_SERVICES_H

#include "daemon/internal.h"
#include "sched/autoscale.h"

#define SVC_DECISIONS 16 /* kept per service for describe */

/* One inference service: its job, its autoscaler and what the controller
 * remembers between ticks. Owned by d->svcs. */
typedef struct dservice {
    uint64_t id; /* its job */
    char *name;
    crater__as_t *as;
    crater__as_params_t params;
    unsigned initial, desired, warm;
    int64_t created_ms;
    unsigned creating; /* replica submissions not committed yet */
    uint32_t next_index;
    int64_t load_last_ms, load_max_ms, load_sum_ms;
    uint32_t loads;
    uint64_t answered_prev, unserved_prev;
    int64_t prev_ms, logged_ms;
    uint32_t crashes;      /* replicas ended on their own in a row */
    int64_t next_start_ms; /* no start before (backoff after crashes) */
    unsigned hold_n;       /* at least this many in traffic ... */
    int64_t hold_until_ms; /* ... until then (svc_hold) */
    bool hold_initial;     /* the submission's count: also until loaded */
    json_t *decisions;     /* the last SVC_DECISIONS, oldest first */
    crater__as_decision_t last;
    bool decided;
} dservice_t;

/* A service's replicas by role and readiness (not the ended ones). */
typedef struct counts {
    unsigned traffic, ready, warm, warm_ready, starting;
} counts_t;

dservice_t *svc_find(crater_daemon_t *d, uint64_t id);
dservice_t *svc_by_name(crater_daemon_t *d, const char *name);
counts_t svc_counts(crater_daemon_t *d, const dservice_t *s);
/* Is j a stored replica of s? */
bool rep_of(const djob_t *j, const dservice_t *s);
const char *role_name(int role); /* "traffic" or "warm" */
/* The replica's base URL, http://<node addr>:<port>; -1 when unplaced. */
int rep_url(crater_daemon_t *d, const djob_t *j, char *buf, size_t n);

#endif /* CRATER_DAEMON_SERVICES_H */
