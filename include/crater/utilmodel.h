/* utilmodel.h - the contention model behind `crater sim util`: what a task
 * on a node actually gets of the resources that feed its GPUs, and so how
 * busy its GPUs really are (doc/simulator.md "Measured GPU utilisation").
 *
 * A node has pools: its CPU (cores), its disk bandwidth and memory
 * bandwidth (bytes/s) and each GPU (compute, 1 = one GPU busy all the
 * time). A task claims from some pools what it needs to run at its full
 * rate at this instant (its demand, already scaled by its load), with a
 * weight (CPU: its request in cores, as CFS shares by request; the others
 * share equally) and an optional cap (a CPU quota). A pool that is asked
 * for more than it has is shared by weighted max-min fairness (water
 * filling; work-conserving, as CFS shares and blkio/memory bandwidth
 * behave under contention). A task's rate is the least of got / wanted
 * over its claims, in [0, 1]: a pipelined job runs at the speed of its
 * scarcest input. A task asks of each pool only what its other pools let
 * it use (Jacobi iteration, a few rounds), so a task starved of disk does
 * not hoard CPU it cannot use.
 *
 * The supply curve: step time = compute / min(1, supply / demand). That
 * is the model fitted to the measurements of bench/util/calibrate.py
 * (tests/unit/test_utilmodel.c checks it against bench/util/
 * calibration.csv).
 *
 * Everything here is pure arithmetic: no allocation except scratch in
 * crater_util_solve(), no I/O.
 */
#ifndef CRATER_UTILMODEL_H
#define CRATER_UTILMODEL_H

#include <stddef.h>
#include <stdint.h>

#define CRATER_UTIL_MAX_CLAIMS 12

typedef struct crater_util_claim {
    uint32_t pool;
    double want;   /* > 0: needed for the full rate now */
    double weight; /* share weight; <= 0 counts as 0.001 */
    double cap;    /* quota: never more than this; 0 = none */
} crater_util_claim_t;

typedef struct crater_util_task {
    crater_util_claim_t claim[CRATER_UTIL_MAX_CLAIMS];
    uint32_t nclaim;
    double rate; /* out: achieved fraction of the full rate, [0, 1] */
} crater_util_task_t;

/* Weighted max-min fair shares of cap among n claimants: got[i] =
 * min(want[i], cap_i, weight[i] x lambda) with lambda as large as the pool
 * allows (everyone gets what it wants when the pool suffices). want[i]
 * may be 0. Returns -1 (ENOMEM) only when scratch cannot be allocated. */
int crater_util_waterfill(double cap,
                          const double *want,
                          const double *weight,
                          const double *quota,
                          size_t n,
                          double *got);

/* Rates of n tasks sharing pools of the given capacities (claims name
 * pools 0..npool-1). Sets t[i].rate. -1 on ENOMEM (rates left 1). */
int crater_util_solve(const double *pool_cap,
                      size_t npool,
                      crater_util_task_t *t,
                      size_t n);

/* The supply curve: the rate at which a job needing demand of a resource
 * runs when it gets supply of it: min(1, supply / demand); 1 when demand
 * is 0. */
double crater_util_supply_ratio(double demand, double supply);
/* Step time of a job whose step computes for compute_s when fed and whose
 * loader needs demand of a resource it gets supply of. */
double crater_util_step_time(double compute_s, double demand, double supply);

/* A calibration point: supply given (a quota, a throttle; <= 0 or inf:
 * none), step time measured. */
typedef struct crater_util_point {
    double supply, step_s;
} crater_util_point_t;

/* Fit the two unknowns of a calibration series: the demand (same unit as
 * supply) and the most the machine itself gives the loaders when the
 * quota does not bind (avail: on the calibration host, its cores less
 * what the training process and everything else running take), so that
 * crater_util_step_time(compute_s, demand, min(supply, avail)) is
 * closest to the measured step times (least squares of the relative
 * error, a coarse grid refined three times). */
void crater_util_fit(const crater_util_point_t *pt,
                     size_t n,
                     double compute_s,
                     double *demand,
                     double *avail);
/* The model's step time for point p given a fit. */
double crater_util_fit_step(const crater_util_point_t *p,
                            double compute_s,
                            double demand,
                            double avail);

/* Diurnal load of an inference service at t_ms (time 0 = midnight):
 * trough + (1 - trough) x (1 + cos(2 pi (h - 14) / 24)) / 2 with h the
 * hour of the day, evaluated at the middle of that hour (piecewise
 * constant by the hour, so the simulator integrates it exactly): peak 1
 * at 14:00, trough at 02:00. */
double crater_util_diurnal(uint64_t t_ms, double trough);

#endif /* CRATER_UTILMODEL_H */
