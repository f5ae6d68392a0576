/* idle.c - idle-GPU detection state machine (see idle.h).
 *
 * A job's readings arrive with its nodes' heartbeats (seconds apart). A
 * run of idle readings starts at the first idle one; a single busy
 * reading ends it, so a job that computes in bursts shorter than the
 * window is never flagged. When the run has lasted window_ms the caller
 * warns; when it has lasted grace_ms more the caller reclaims, once.
 * Missing readings (no heartbeat) do not end a run: a silent node is
 * handled by the node-lost path, not here. */
#include "crater/idle.h"

bool crater_idle_reading(const crater_idle_params_t *p,
                         double sm,
                         double mem_activity)
{
    if (sm >= p->threshold)
        return false;
    return mem_activity < 0 || mem_activity < p->threshold;
}

static crater_idle_action_t busy(crater_idle_t *s)
{
    bool was_warned = s->warned;

    *s = (crater_idle_t){0};
    return was_warned ? CRATER_IDLE_BUSY_AGAIN : CRATER_IDLE_NONE;
}

crater_idle_action_t crater_idle_observe(crater_idle_t *s,
                                         const crater_idle_params_t *p,
                                         bool idle,
                                         int64_t now_ms)
{
    if (!p->window_ms) {
        *s = (crater_idle_t){0};
        return CRATER_IDLE_NONE;
    }
    if (!idle)
        return busy(s);
    if (!s->idle) {
        s->idle = true;
        s->since_ms = now_ms;
    }
    if (!s->warned) {
        if (now_ms - s->since_ms < (int64_t)p->window_ms)
            return CRATER_IDLE_NONE;
        s->warned = true;
        s->warned_ms = now_ms;
        return CRATER_IDLE_WARN;
    }
    if (s->reclaimed || now_ms - s->warned_ms < (int64_t)p->grace_ms)
        return CRATER_IDLE_NONE;
    s->reclaimed = true;
    return CRATER_IDLE_RECLAIM;
}

int64_t crater_idle_reclaim_at(const crater_idle_t *s,
                               const crater_idle_params_t *p)
{
    return s->warned ? s->warned_ms + (int64_t)p->grace_ms : 0;
}
