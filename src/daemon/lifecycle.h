/* lifecycle.h - craterd's job lifecycle as one transition table.
 *
 * A job is in one state (job_state_t); something happens to it (an
 * event, job_ev_t: the pass bound it, its agent says it started or
 * exited, a user cancels it, a node went silent ...); the table says
 * which state follows and what must be done on the way (effects,
 * job_fx_t: return its resources, queue it, count an attempt, ...). A
 * pair the table does not hold is refused: nothing changes. That is what
 * keeps a late agent event from reviving a cancelled or finished job,
 * and what makes every way out of "preempting" release the preemptor
 * that waits for it.
 *
 * This module is pure (no daemon, HTTP or store): craterd's jobs.c
 * (job_apply) looks the pair up here and performs the effects on its
 * job; tests/unit/test_lifecycle.c walks the whole table. doc/queue.md
 * "Job lifecycle" prints the same table for people.
 */
#ifndef CRATER_DAEMON_LIFECYCLE_H
#define CRATER_DAEMON_LIFECYCLE_H

#include <stdbool.h>

typedef enum job_state {
    JS_PENDING,
    JS_BOUND,
    JS_RUNNING,
    JS_SUCCEEDED,
    JS_FAILED,
    JS_CANCELLED,
    JS_PREEMPTING,
    JS_PREEMPTED,
    JS_LOST,
    JS_COUNT
} job_state_t;

/* What happens to a job. The comment says who reports it. */
typedef enum job_ev {
    JE_BIND,           /* the pass placed it (a gang: every replica) */
    JE_START,          /* agent: it started (a gang: its first replica) */
    JE_RECONNECT,      /* agent: its silent node holds it still */
    JE_EXIT_OK,        /* agent: it exited 0 (a gang: its last replica) */
    JE_EXIT_FAIL,      /* agent: it failed (a gang: its first failure) */
    JE_EXIT_STOPPED,   /* agent: a task being preempted is gone (a gang:
                          its last replica) */
    JE_EXIT_CANCELLED, /* agent: a task whose cancel was requested is gone;
                          or it was cancelled before any start went out */
    JE_CANCEL,         /* user or admin: cancel it */
    JE_PREEMPT,        /* craterd: stop it to requeue it (a preemption
                          victim, a drained node, the safety watermark) */
    JE_REQUEUE,        /* craterd: queue it again (after its preemption;
                          node lost; GPU force-released; its agent
                          restarted without it) */
    JE_NODE_SILENT,    /* craterd: its node stopped heartbeating; wait for
                          it (migrationPolicy conservative) */
    JE_FAIL,           /* craterd: a dependency failed, a hard deadline
                          passed, its node was lost (migrationPolicy
                          never) */
    JE_RESTORE,        /* craterd at restart: a stored preempted job, or
                          a placement that no longer fits, is queued */
    JE_COUNT
} job_ev_t;

/* Effects, in the order job_apply performs them. */
typedef enum job_fx {
    JF_ATTEMPT = 1u << 0,  /* count a new attempt */
    JF_UNBLOCK = 1u << 1,  /* the job that preempted it waits for one fewer */
    JF_CANCEL = 1u << 2,   /* note that its cancel was requested */
    JF_STOP = 1u << 3,     /* order its agents to stop its tasks */
    JF_STARTED = 1u << 4,  /* note its start time (when not yet noted) */
    JF_RELEASE = 1u << 5,  /* return its charges to the scheduling core (a
                              gang: stop the replicas still running) */
    JF_FINISHED = 1u << 6, /* note its end time */
    JF_QUEUE = 1u << 7,    /* enter the pending queue, start time forgotten,
                              the previous attempt noted for its output */
    JF_DEQUEUE = 1u << 8,  /* leave the pending queue */
} job_fx_t;
#define JF_ALL 0x1ffu

/* The outcome of a legal (state, event). */
typedef struct job_step {
    job_state_t to;   /* may equal the state it came from: a stay */
    unsigned effects; /* job_fx_t bits */
} job_step_t;

/* Look up (from, ev): 0 and *out when the table holds it; -1 when the
 * event is illegal in that state (or either is out of range), *out
 * untouched. Pure. */
int job_life_step(job_state_t from, job_ev_t ev, job_step_t *out);

/* Apply ev to *state: 0, *state moved and *effects (may be NULL) set;
 * -1 on an illegal pair, nothing written. Pure. */
int job_life_apply(job_state_t *state, job_ev_t ev, unsigned *effects);

/* Names ("pending", "bind", "release"); "unknown" out of range. Static
 * strings. */
const char *job_state_name(job_state_t s);
const char *job_ev_name(job_ev_t ev);
const char *job_fx_name(job_fx_t fx); /* one bit */
int job_state_parse(const char *s);   /* -1 when unknown */
bool job_state_final(job_state_t s);
bool job_state_holds(job_state_t s); /* holds a placement */

#endif /* CRATER_DAEMON_LIFECYCLE_H */
