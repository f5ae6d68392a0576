/* cost.h - craterd's side of the cost ledger (crater/cost.h): prices
 * from the configuration, accrual at each heartbeat, persistence of the
 * hourly rows, GET /api/v1/cost, per-job cost, costCap and tenant budgets,
 * and the measured-utilisation gauges. Not a public header.
 *
 * Every function here is called with d->mu held unless it says
 * otherwise.
 */
#ifndef CRATER_DAEMON_COST_H
#define CRATER_DAEMON_COST_H

#include <jansson.h>
#include <stdint.h>

#include "crater/cost.h"
#include "crater/error.h"
#include "crater/proto.h"

struct crater_daemon;
struct djob;
struct dnode;

#define KEY_COST "/crater/cost/" /* + <hour_ms>/<node sid> */

/* After persist_load (no lock needed yet): the ledger, the billing
 * weights, the stored rows. -1 with err (ENOMEM; a bad stored row is
 * logged and skipped). */
int cost_init(struct crater_daemon *d, crater_error_t *err);
void cost_free(struct crater_daemon *d);

/* A heartbeat from node n at now: charge its jobs for the time since the
 * previous one, stop the jobs that reached their costCap, persist the
 * changed rows (at most every 10 s). */
void cost_heartbeat(struct crater_daemon *d,
                    struct dnode *n,
                    const crater_proto_heartbeat_t *h,
                    int64_t now);

/* {currency, basis, allocation, usage, billing, cap} of j (amounts as
 * decimal numbers and as micro-unit integers); NULL when never charged
 * and uncapped. New reference. */
json_t *cost_job_json(struct crater_daemon *d, const struct djob *j);

/* A tenant that spent its cost.tenantBudgets over cost.budgetWindow:
 * -1 with err (EQUOTA naming the amounts); 0 otherwise. */
int cost_admit(struct crater_daemon *d,
               const char *tenant,
               crater_error_t *err);

/* For api_cost.c: j's total in the basis, rated; the ledger (NULL
 * before cost_init); v at tenant's rate. */
int64_t cost__job_spent(struct crater_daemon *d, const struct djob *j);
const crater_ledger_t *cost__ledger(struct crater_daemon *d);
int64_t cost__rated(struct crater_daemon *d, const char *tenant, int64_t v);
/* When the ledger's changed rows were last queued to the store (ms). */
int64_t cost__stored_ms(struct crater_daemon *d);

/* Register GET /api/v1/cost (api_cost.c). */
int api_cost_routes(struct crater_daemon *d, crater_error_t *err);

/* The gauges: registered once; published at each scrape. */
int cost_metrics_setup(struct crater_daemon *d, crater_error_t *err);
void cost_metrics_publish(struct crater_daemon *d);

#endif /* CRATER_DAEMON_COST_H */
