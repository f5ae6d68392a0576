/* cost.h - the cost ledger: what each job is charged, per node, per hour
 * and per resource, in integer micro-units of the currency.
 *
 * Money is never a double here: prices are micro-units (1e-6 of the
 * currency) per price unit-hour (a GPU-hour, a core-hour, a GiB-hour, a
 * thousand-IOPS-hour, a GB/s-hour), quantities are integers in the
 * resource's base unit (GPU: millionths of a GPU, so slices are charged by
 * their share; CPU: millicores; memory: bytes; IOPS; bytes/s), and every
 * division rounds down in 128-bit arithmetic.
 *
 * The invariant (tests/unit/test_cost.c checks it over random workloads):
 * for every node, hour and resource, the charges of its jobs plus its idle
 * cost equal the node's cost exactly, in each basis. The node's cost of an
 * hour is computed cumulatively from the start of the hour (or the last
 * price or capacity change), so it does not depend on how often the
 * ledger is fed: 8 GPUs at 2.50 cost exactly 20.000000 an hour whether
 * the hour came in one piece or in 720 heartbeats. Each piece of node
 * cost is split between the jobs by their share of the capacity (divided
 * by the sum of shares when they exceed it, as overcommitted memory can);
 * what the floors leave over, and the unused capacity, is idle.
 *
 * Two bases, both always kept: allocation (a job pays for max(request,
 * measured use): what it kept others from) and usage (measured use only).
 * A third, Slurm's TRESBillingWeights, is optional and outside the
 * invariant: billing units x a price per billing unit-hour.
 *
 * Pure: no clock (times are injected), no I/O, no globals. The daemon
 * (src/daemon/cost.c) feeds it at each heartbeat and persists its rows.
 */
#ifndef CRATER_COST_H
#define CRATER_COST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/model.h"

#define CRATER_COST_HOUR_MS 3600000ll
#define CRATER_COST_MICRO 1000000ll
/* A node's lines: one per GPU, then CPU, memory, IOPS, bandwidth. */
#define CRATER_COST_MAX_LINES (CRATER_MAX_GPUS_PER_NODE + 4)
#define CRATER_COST_OWNER_MAX 64

typedef enum crater_cost_res {
    CRATER_COST_GPU,
    CRATER_COST_CPU,
    CRATER_COST_MEMORY,
    CRATER_COST_DISK_IOPS,
    CRATER_COST_DISK_BW,
    CRATER_COST_NRES
} crater_cost_res_t;

/* "gpu", "cpu", "memory", "disk_iops", "disk_bandwidth"; -1 unknown. */
const char *crater_cost_res_name(crater_cost_res_t r);
int crater_cost_res_parse(const char *s);
/* Base units per price unit: 1e6 (GPU ppm), 1000 (millicores), 2^30
 * (bytes per GiB), 1000 (IOPS per kIOPS), 1e9 (bytes/s per GB/s). */
uint64_t crater_cost_res_scale(crater_cost_res_t r);

/* One priced quantity of a node. */
typedef struct crater_cost_line {
    crater_cost_res_t res;
    int64_t price; /* micro-units per price unit-hour, >= 0 */
    uint64_t cap;  /* base units */
} crater_cost_line_t;

/* One task on a node for an interval: per line (same order as the
 * node's lines) what it holds and what it was measured to use. */
typedef struct crater_cost_use {
    uint64_t job; /* > 0 */
    uint64_t alloc[CRATER_COST_MAX_LINES];
    uint64_t used[CRATER_COST_MAX_LINES];
    int64_t billing_hour; /* Slurm basis: its billing units x the price of
                             a unit-hour, micro-units per hour (0: none) */
} crater_cost_use_t;

/* A job's charges in one row (job 0: the node's idle cost). */
typedef struct crater_cost_charge {
    uint64_t job;
    int64_t alloc[CRATER_COST_NRES];
    int64_t usage[CRATER_COST_NRES];
    int64_t billing; /* Slurm basis, micro-units */
} crater_cost_charge_t;

/* One node's hour. node_cost[r] == idle.alloc[r] + sum jobs[].alloc[r]
 * == idle.usage[r] + sum jobs[].usage[r]. */
typedef struct crater_cost_row {
    int64_t hour_ms; /* start of the hour, epoch ms */
    uint32_t node;   /* the caller's node id */
    int64_t node_cost[CRATER_COST_NRES];
    crater_cost_charge_t idle;
    crater_cost_charge_t *jobs; /* by first charge */
    size_t njobs, capjobs;
    bool dirty; /* changed since crater_ledger_clean() */
} crater_cost_row_t;

/* A job's running totals over every row (micro-units). */
typedef struct crater_cost_total {
    uint64_t job;
    int64_t alloc, usage, billing;
    char tenant[CRATER_COST_OWNER_MAX];
    char user[CRATER_COST_OWNER_MAX];
} crater_cost_total_t;

typedef struct crater_ledger crater_ledger_t;

/* NULL on ENOMEM. destroy accepts NULL. */
crater_ledger_t *crater_ledger_create(void);
void crater_ledger_destroy(crater_ledger_t *l);

/* Node `node` from t0 to t1 (ms, t0 >= 0): its lines (nlines <=
 * CRATER_COST_MAX_LINES) and the tasks on it. A line whose price or
 * capacity differs from the last call starts a new segment at t0. Splits
 * at hour boundaries. -1 (ENOMEM, or bad arguments: EINVAL) with nothing
 * half-applied to totals of a piece. */
int crater_ledger_accrue(crater_ledger_t *l,
                         uint32_t node,
                         const crater_cost_line_t *lines,
                         size_t nlines,
                         const crater_cost_use_t *uses,
                         size_t nuses,
                         int64_t t0,
                         int64_t t1);

/* Who owns job (copied, truncated to CRATER_COST_OWNER_MAX - 1). */
int crater_ledger_set_owner(crater_ledger_t *l,
                            uint64_t job,
                            const char *tenant,
                            const char *user);

/* The rows, oldest hour first per node (borrowed; valid until the next
 * accrue/load/expire). */
const crater_cost_row_t *crater_ledger_rows(const crater_ledger_t *l,
                                            size_t *n);
/* A job's totals; NULL when it was never charged (borrowed). */
const crater_cost_total_t *crater_ledger_total(const crater_ledger_t *l,
                                               uint64_t job);
/* Every job's totals, by job id (borrowed). */
const crater_cost_total_t *crater_ledger_totals(const crater_ledger_t *l,
                                                size_t *n);
/* Forget rows whose hour ended before before_ms (totals stay). Returns
 * how many went. */
size_t crater_ledger_expire(crater_ledger_t *l, int64_t before_ms);
/* Mark every row clean (after persisting the dirty ones). */
void crater_ledger_clean(crater_ledger_t *l);

/* A row as JSON {hour_ms, node, node_cost:{gpu..}, idle:{...}, jobs:[...]}
 * (new reference; NULL on ENOMEM), and back: the row is added (the
 * totals follow its jobs); -1 with err naming the field. */
json_t *crater_cost_row_json(const crater_cost_row_t *row);
int crater_ledger_load_row(crater_ledger_t *l, json_t *v, crater_error_t *err);
/* A charge's sum over resources. */
int64_t crater_cost_sum(const int64_t v[CRATER_COST_NRES]);

/* ---- money text ---- */
/* "12.345678" (6 decimals, '-' when negative) into buf. */
char *crater_cost_format(int64_t micro, char *buf, size_t size);
/* A decimal price ("2.5", "0.000001") to micro-units, exactly: at most 6
 * decimals, 0 to 1e9. -1 otherwise. */
int crater_cost_parse(const char *s, int64_t *micro);
/* A double from the configuration, to the nearest micro-unit. */
int64_t crater_cost_from_double(double x);

/* ---- Slurm TRESBillingWeights ---- */
typedef struct crater_billing {
    bool set;
    bool max_tres; /* PriorityFlags=MAX_TRES: the largest term, not the sum */
    bool max_tres_gres;       /* PriorityFlags=MAX_TRES_GRES: the GPU term plus
                                 the larger of the CPU and memory terms */
    int64_t cpu_ppm, gpu_ppm; /* weight x 1e6 per CPU, per GPU */
    int64_t mem_ppm;          /* weight x 1e6 per MB ... */
    unsigned mem_shift;       /* ... divided by 1024^mem_shift (suffix) */
    unsigned mem_mul;         /* ... or multiplied by 1024 (suffix K) */
} crater_billing_t;

/* "CPU=1.0,Mem=0.25G,GRES/gpu=2.0" (names case-insensitive; a K, M, G,
 * T or P suffix on Mem's weight makes it per KB ... PB instead of per
 * MB); "" or "none" is no weights. -1 with err naming the term. */
int crater_billing_parse(const char *s,
                         bool max_tres,
                         crater_billing_t *out,
                         crater_error_t *err);
/* Billing units x 1e6 of an allocation: CPUs in millicores, memory in
 * bytes (counted in MB as Slurm does), GPUs in ppm (0.5 for half a GPU). */
uint64_t crater_billing_units_ppm(const crater_billing_t *b,
                                  uint64_t cpu_milli,
                                  uint64_t mem_bytes,
                                  uint64_t gpu_ppm);

#endif /* CRATER_COST_H */
