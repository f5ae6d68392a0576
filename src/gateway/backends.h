/* backends.h - the gateway's table of services and their backends
 * (internal to crater-gateway).
 *
 * A service has a name, its batching configuration and a list of
 * backends (base URLs). Today the table is filled from command-line flags;
 * it is the interface a later change feeds from craterd's API (replicas
 * becoming ready, going away): add, remove, set_ready, at any time, from
 * any thread.
 *
 * Picking: gw__table_pick() returns the ready backend of a service with
 * the fewest outstanding requests (ties: the one after the last picked)
 * and counts one more outstanding on it; gw__table_done() counts it back.
 *
 * Ownership and threads: the table owns services and backends; one mutex
 * guards it. A service, once added, lives as long as the table (the
 * pointer from gw__table_service() stays valid). A backend is refcounted:
 * a picked backend stays valid until its gw__table_done(), even when
 * removed meanwhile.
 */
#ifndef CRATER_GATEWAY_BACKENDS_H
#define CRATER_GATEWAY_BACKENDS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "crater/error.h"

#define GW_NAME_MAX 64
#define GW_URL_MAX 256

typedef struct gw_backend {
    char url[GW_URL_MAX]; /* "http://127.0.0.1:8001", no trailing slash */
    bool ready;
    bool removed;
    bool probing;         /* a health probe is in flight (gateway loop) */
    unsigned outstanding; /* requests in flight to it */
    unsigned refs;        /* the table's (until removed) + each pick */
    struct gw_backend *next;
} gw_backend_t;

typedef struct gw_service {
    char name[GW_NAME_MAX];
    unsigned max_batch;       /* rows per batch; 1 = no batching */
    int64_t batch_timeout_us; /* the oldest request waits at most this */
    unsigned max_inflight;    /* batches in flight per backend (1) */
    atomic_uint queued;       /* accepted, not yet answered */
    atomic_ulong answered;    /* accepted and answered, ever (QPS) */
    atomic_ulong unserved;    /* found no ready backend (answered 503, or
                                 held): craterd's activation from zero */
    atomic_uint held;         /* waiting now for a first ready backend */
    atomic_llong hold_us;     /* how long a request waits for one; 0: 503
                                 at once (gw__table_set_hold) */
    gw_backend_t *backends;   /* guarded by the table's mutex */
    struct gw_service *next;
} gw_service_t;

typedef struct gw_table gw_table_t;

gw_table_t *gw__table_create(void);    /* NULL on ENOMEM */
void gw__table_destroy(gw_table_t *t); /* NULL accepted; no pick in flight */

/* Add a service (no batching: max_batch 1). -1: EINVAL (bad name: 1..63 of
 * [A-Za-z0-9_.-]), EEXIST, ENOMEM. */
int gw__table_add_service(gw_table_t *t, const char *name, crater_error_t *err);
/* Batching for a service: max_batch 1..4096 rows, timeout_us >= 0,
 * inflight 1..64 batches at a time per backend (a batch goes only to a
 * backend with room: while the model is busy, the next batch fills). */
int gw__table_set_batch(gw_table_t *t,
                        const char *name,
                        unsigned max_batch,
                        int64_t timeout_us,
                        unsigned inflight,
                        crater_error_t *err);
/* NULL when there is no such service. */
gw_service_t *gw__table_service(gw_table_t *t, const char *name);

/* Backends. url: http://host:port[/prefix] (a trailing slash is dropped).
 * A new backend is not ready until set_ready (the gateway's health probe
 * does that). -1: ENOENT (no such service or backend), EEXIST, EINVAL. */
int gw__table_add(gw_table_t *t,
                  const char *service,
                  const char *url,
                  crater_error_t *err);
int gw__table_remove(gw_table_t *t,
                     const char *service,
                     const char *url,
                     crater_error_t *err);
int gw__table_set_ready(gw_table_t *t,
                        const char *service,
                        const char *url,
                        bool ready,
                        crater_error_t *err);

/* Requests of the service that find no ready backend wait up to hold_us
 * for one (0: answered 503 at once, the default). -1: ENOENT. */
int gw__table_set_hold(gw_table_t *t,
                       const char *name,
                       int64_t hold_us,
                       crater_error_t *err);

/* Drain a backend: it leaves the service like gw__table_remove (no new
 * request goes to it) but is referenced for the caller, who polls
 * gw__table_outstanding() until the requests it has in flight are
 * answered, then gives it back with gw__table_release(). NULL: ENOENT. */
gw_backend_t *gw__table_drain(gw_table_t *t,
                              const char *service,
                              const char *url,
                              crater_error_t *err);
unsigned gw__table_outstanding(gw_table_t *t, gw_backend_t *b);

/* See above. limit > 0: only backends with fewer than limit outstanding
 * requests qualify. NULL when none does. */
gw_backend_t *gw__table_pick(gw_table_t *t, gw_service_t *s, unsigned limit);
/* Is there a ready backend (with fewer than limit outstanding, limit > 0)? */
bool gw__table_can_pick(gw_table_t *t, gw_service_t *s, unsigned limit);
void gw__table_done(gw_table_t *t, gw_backend_t *b);
/* Mark a picked backend ready or not (the gateway, after a probe or a
 * connection failure). */
void gw__table_mark(gw_table_t *t, gw_backend_t *b, bool ready);

/* Counts for metrics. */
void gw__table_counts(gw_table_t *t,
                      gw_service_t *s,
                      unsigned *ready,
                      unsigned *total);

/* Call fn for every backend of every service, under the mutex (fn must
 * not call back into the table); a backend passed with *take set to true
 * by fn is referenced for the caller, who gives it back with
 * gw__table_release(). For the health probes. */
typedef void (*gw_each_f)(gw_service_t *s,
                          gw_backend_t *b,
                          bool *take,
                          void *arg);
void gw__table_each(gw_table_t *t, gw_each_f fn, void *arg);
void gw__table_release(gw_table_t *t, gw_backend_t *b);

/* Service names in order, for metrics: fn(s, arg) for each. */
typedef void (*gw_svc_f)(gw_service_t *s, void *arg);
void gw__table_services(gw_table_t *t, gw_svc_f fn, void *arg);

#endif /* CRATER_GATEWAY_BACKENDS_H */
