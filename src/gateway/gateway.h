/* gateway.h - crater-gateway's engine: an HTTP front (src/net's server)
 * that routes /{service}/... to the service's ready backends, batching
 * KServe V2 infer requests of services with maxBatchSize > 1 (internal to
 * crater-gateway; see gateway.c for the design).
 *
 *     gw_table_t *t = gw__table_create();   // services and backends
 *     ...fill it (backends.h)...
 *     gw_opts_t o = {.listen = "127.0.0.1:0"};
 *     gw_t *g = gw__start(&o, t, &err);
 *     ... gw__port(g) ...
 *     gw__stop(g);                          // then gw__table_destroy(t)
 *
 * The program must have called curl_global_init() before gw__start().
 * Ownership: the table is borrowed and must outlive the gateway; it may be
 * changed (backends added, removed, made ready) while the gateway runs.
 */
#ifndef CRATER_GATEWAY_GATEWAY_H
#define CRATER_GATEWAY_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include "backends.h"
#include "crater/error.h"

typedef struct gw_opts {
    const char *listen; /* "127.0.0.1:8080"; ":0" picks a free port */
    unsigned threads;   /* HTTP event-loop threads; 0 = CPUs */
    uint64_t max_body;  /* bytes; 0 = 4 MiB; larger bodies get 413 */
    unsigned queue_max; /* per service, accepted and unanswered; 0 = 1024 */
    int64_t timeout_ms; /* per request, arrival to answer; 0 = 30000 */
    int64_t health_ms;  /* backend readiness probe period; 0 = 1000 */
} gw_opts_t;

typedef struct gw gw_t;

/* NULL with err (the HTTP server's errors: EIO cannot bind, EINVAL bad
 * listen address; ENOMEM). */
gw_t *gw__start(const gw_opts_t *o, gw_table_t *t, crater_error_t *err);
uint16_t gw__port(const gw_t *g);
/* The gateway's metrics, Prometheus text (malloc'd; caller frees; NULL on
 * ENOMEM): what GET /metrics answers, for craterd's own /metrics. */
char *gw__metrics_render(gw_t *g, size_t *len);
/* Drain (crater-gateway's SIGTERM): from now on a new request is
 * answered 503 "draining" with Retry-After (a load balancer sends it to
 * another gateway); those already accepted keep their course. */
void gw__drain(gw_t *g);
/* Requests accepted and not yet answered, over every service. */
unsigned gw__inflight(gw_t *g);
/* Stop serving: requests still waiting are answered 503. NULL accepted. */
void gw__stop(gw_t *g);

#endif /* CRATER_GATEWAY_GATEWAY_H */
