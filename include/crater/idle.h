/* idle.h - idle-GPU detection: is a job that holds GPUs leaving them
 * idle, for how long, and is it time to warn or to reclaim it.
 *
 * Pure state machine, no clock and no I/O: craterd feeds it one reading
 * per heartbeat and the simulator can feed it synthetic ones. See
 * doc/scheduling.md "Idle-GPU reclaim" for the policy and why these
 * readings. */
#ifndef CRATER_IDLE_H
#define CRATER_IDLE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct crater_idle_params {
    double threshold;   /* a GPU reads idle below this SM utilisation
                           (and memory activity), fraction in (0, 1] */
    uint64_t window_ms; /* idle this long: warn; 0 = detection off */
    uint64_t grace_ms;  /* idle this long after the warning: reclaim */
} crater_idle_params_t;

/* One job's idle run. Zero-initialised = busy, not warned. */
typedef struct crater_idle {
    bool idle;         /* the last reading was idle */
    int64_t since_ms;  /* first idle reading of the current run */
    bool warned;       /* the window elapsed and the warning went out */
    int64_t warned_ms; /* when */
    bool reclaimed;    /* RECLAIM was returned (once per run) */
} crater_idle_t;

typedef enum crater_idle_action {
    CRATER_IDLE_NONE,      /* nothing to do */
    CRATER_IDLE_WARN,      /* idle for the whole window: warn now */
    CRATER_IDLE_RECLAIM,   /* warned, still idle after the grace: reclaim */
    CRATER_IDLE_BUSY_AGAIN /* was warned, now busy: the warning is over */
} crater_idle_action_t;

/* Is one GPU reading idle? sm and mem_activity are NVML's utilisation
 * rates as fractions: the share of the last sample period a kernel ran,
 * and the share in which device memory was read or written (bandwidth
 * activity, NOT memory held: an idle job holding 70 GiB reads 0).
 * mem_activity < 0 means unknown (old agents): sm decides alone. */
bool crater_idle_reading(const crater_idle_params_t *p,
                         double sm,
                         double mem_activity);

/* Feed one reading of the job (idle: every GPU it holds read idle) at
 * now_ms; returns what to do. Readings must come in time order. With
 * window_ms 0 the state is reset and NONE returned. */
crater_idle_action_t crater_idle_observe(crater_idle_t *s,
                                         const crater_idle_params_t *p,
                                         bool idle,
                                         int64_t now_ms);

/* When RECLAIM is due (warned_ms + grace), or 0 when not warned. */
int64_t crater_idle_reclaim_at(const crater_idle_t *s,
                               const crater_idle_params_t *p);

#endif
