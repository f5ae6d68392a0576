/* lifecycle.c - the job lifecycle's transition table (see lifecycle.h).
 *
 * One row per legal (state, event): the state that follows and the
 * effects. Rows are few (about forty) and an event is looked up once per
 * agent report or decision, so a linear scan of a constant array is the
 * whole implementation; it keeps the table readable as a table, which is
 * the point (doc/queue.md copies it).
 *
 * Rules the rows follow (test_lifecycle checks each over the table):
 *   - a final state (succeeded, failed, cancelled) has no way out;
 *   - every way into a final state notes the end time, returns the
 *     job's resources and takes it off the queue;
 *   - every way into pending queues it; from a state that ran an attempt
 *     (all but restart, where the loader does its own bookkeeping) the
 *     next attempt is counted and the resources returned;
 *   - every way out of preempting but a cancel (which stays) tells the
 *     job that preempted it that it waits for one fewer;
 *   - cancelling a job that holds tasks on a node keeps its state and
 *     stops the tasks: the agent's report of their exit ends it.
 */
#include "daemon/lifecycle.h"

#include <stddef.h>
#include <string.h>

#define END (JF_FINISHED | JF_RELEASE | JF_DEQUEUE)
#define REQ (JF_ATTEMPT | JF_RELEASE | JF_QUEUE)

static const struct row {
    job_state_t from;
    job_ev_t ev;
    job_state_t to;
    unsigned fx;
} rows[] = {
    {JS_PENDING, JE_BIND, JS_BOUND, JF_DEQUEUE},
    {JS_PENDING, JE_CANCEL, JS_CANCELLED, JF_CANCEL | END},
    {JS_PENDING, JE_FAIL, JS_FAILED, END},

    {JS_BOUND, JE_START, JS_RUNNING, JF_STARTED},
    {JS_BOUND, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_BOUND, JE_CANCEL, JS_BOUND, JF_CANCEL | JF_STOP},
    {JS_BOUND, JE_PREEMPT, JS_PREEMPTING, JF_STOP},
    {JS_BOUND, JE_REQUEUE, JS_PENDING, REQ},
    {JS_BOUND, JE_FAIL, JS_FAILED, END},
    {JS_BOUND, JE_RESTORE, JS_PENDING, JF_QUEUE},

    {JS_RUNNING, JE_EXIT_OK, JS_SUCCEEDED, END},
    {JS_RUNNING, JE_EXIT_FAIL, JS_FAILED, END},
    {JS_RUNNING, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_RUNNING, JE_CANCEL, JS_RUNNING, JF_CANCEL | JF_STOP},
    {JS_RUNNING, JE_PREEMPT, JS_PREEMPTING, JF_STOP},
    {JS_RUNNING, JE_REQUEUE, JS_PENDING, REQ},
    {JS_RUNNING, JE_NODE_SILENT, JS_LOST, 0},
    {JS_RUNNING, JE_FAIL, JS_FAILED, END},
    {JS_RUNNING, JE_RESTORE, JS_PENDING, JF_QUEUE},

    {JS_PREEMPTING, JE_EXIT_STOPPED, JS_PREEMPTED, JF_UNBLOCK | JF_RELEASE},
    {JS_PREEMPTING, JE_CANCEL, JS_PREEMPTING, JF_CANCEL | JF_STOP},
    {JS_PREEMPTING, JE_REQUEUE, JS_PENDING, JF_UNBLOCK | REQ},
    {JS_PREEMPTING, JE_FAIL, JS_FAILED, JF_UNBLOCK | END},
    {JS_PREEMPTING, JE_RESTORE, JS_PENDING, JF_QUEUE},

    {JS_PREEMPTED, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_PREEMPTED, JE_CANCEL, JS_CANCELLED, JF_CANCEL | END},
    {JS_PREEMPTED, JE_REQUEUE, JS_PENDING, REQ},
    {JS_PREEMPTED, JE_RESTORE, JS_PENDING, JF_QUEUE},

    {JS_LOST, JE_RECONNECT, JS_RUNNING, 0},
    {JS_LOST, JE_EXIT_OK, JS_SUCCEEDED, END},
    {JS_LOST, JE_EXIT_FAIL, JS_FAILED, END},
    {JS_LOST, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_LOST, JE_CANCEL, JS_CANCELLED, JF_CANCEL | END},
    {JS_LOST, JE_REQUEUE, JS_PENDING, REQ},
    {JS_LOST, JE_FAIL, JS_FAILED, END},
    {JS_LOST, JE_RESTORE, JS_PENDING, JF_QUEUE},
};

int job_life_step(job_state_t from, job_ev_t ev, job_step_t *out)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        if (rows[i].from == from && rows[i].ev == ev) {
            out->to = rows[i].to;
            out->effects = rows[i].fx;
            return 0;
        }
    return -1;
}

int job_life_apply(job_state_t *state, job_ev_t ev, unsigned *effects)
{
    job_step_t s;

    if (job_life_step(*state, ev, &s) < 0)
        return -1;
    *state = s.to;
    if (effects)
        *effects = s.effects;
    return 0;
}

/* ---- names ---------------------------------------------------------------
 */

static const char *const state_names[JS_COUNT] = {
    "pending",
    "bound",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "preempting",
    "preempted",
    "lost",
};

static const char *const ev_names[JE_COUNT] = {
    "bind",
    "start",
    "reconnect",
    "exit-ok",
    "exit-fail",
    "exit-stopped",
    "exit-cancelled",
    "cancel",
    "preempt",
    "requeue",
    "node-silent",
    "fail",
    "restore",
};

static const char *const fx_names[] = {
    "attempt",
    "unblock",
    "cancel",
    "stop",
    "started",
    "release",
    "finished",
    "queue",
    "dequeue",
};

const char *job_state_name(job_state_t s)
{
    return (unsigned)s < JS_COUNT ? state_names[s] : "unknown";
}

const char *job_ev_name(job_ev_t ev)
{
    return (unsigned)ev < JE_COUNT ? ev_names[ev] : "unknown";
}

const char *job_fx_name(job_fx_t fx)
{
    for (unsigned i = 0; i < sizeof(fx_names) / sizeof(fx_names[0]); i++)
        if ((unsigned)fx == 1u << i)
            return fx_names[i];
    return "unknown";
}

int job_state_parse(const char *s)
{
    for (int i = 0; i < JS_COUNT; i++)
        if (strcmp(s, state_names[i]) == 0)
            return i;
    return -1;
}

bool job_state_final(job_state_t s)
{
    return s == JS_SUCCEEDED || s == JS_FAILED || s == JS_CANCELLED;
}

bool job_state_holds(job_state_t s)
{
    return s == JS_BOUND || s == JS_RUNNING || s == JS_PREEMPTING
           || s == JS_LOST;
}
