/* timelimit.c - a task's time limit (the job's timeLimit): the agent stops
 * the task when it has run that long, as for a stop order (SIGTERM now,
 * SIGKILL of its cgroup after the grace period), and reports the exit with
 * the reason "time limit (2h) exceeded", which fails the job.
 *
 * Why the agent and not craterd. The agent is where the process is: the
 * limit holds while craterd is down or the node is cut off from it, and
 * the stop costs no round trip. Why CLOCK_BOOTTIME. The deadline is kept
 * on this machine's boot clock, which wall-clock steps (NTP, an operator's
 * date -s) and clock skew between craterd and the node cannot move, and
 * which counts time spent suspended. Adoption: the deadline (boot clock),
 * the grace period and whether the limit was already hit go into the
 * task record (taskstate.c), so an agent that restarts keeps the original
 * deadline instead of starting the clock again, and one that finds the
 * task exited after a limit stop still reports the reason. A record from
 * an earlier boot cannot be running (its shim died with the machine), so
 * a boot-clock deadline is never compared across boots.
 *
 * Callers hold a->mu (task.c, taskstate.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/internal.h"
#include "crater/log.h"
#include "crater/units.h"

int64_t timelimit_boot_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void timelimit_arm(atask_t *t, uint64_t limit_ms, uint64_t grace_ms)
{
    t->time_limit_ms = limit_ms;
    t->grace_ms = grace_ms;
    t->limit_at_boot_ms =
        limit_ms ? timelimit_boot_ms() + (int64_t)limit_ms : 0;
}

/* "time limit (2h) exceeded": the reason craterd shows. */
static char *reason(uint64_t limit_ms)
{
    char q[32], *s = NULL;

    crater_format_quantity(limit_ms * 1000000ull,
                           CRATER_DIM_DURATION,
                           q,
                           sizeof(q));
    if (asprintf(&s, "time limit (%s) exceeded", q) < 0)
        return NULL;
    return s;
}

/* The limit was hit: the reason, kept on disk for an adopting agent. */
static void hit(crater_agent_t *a, atask_t *t)
{
    crater_error_t err;

    t->limit_hit = true;
    free(t->error);
    t->error = reason(t->time_limit_ms);
    if (taskstate_save(a, t, &err) < 0)
        crater_log(LOG_WARNING, "job %s: %s", t->job, err.text);
}

void timelimit_check(crater_agent_t *a, atask_t *t)
{
    if (!t->limit_at_boot_ms || t->limit_hit || t->state != AT_RUNNING
        || timelimit_boot_ms() < t->limit_at_boot_ms)
        return;
    crater_log(LOG_INFO,
               "job %s attempt %u: time limit of %llu ms reached; stopping "
               "it",
               t->job,
               t->attempt,
               (unsigned long long)t->time_limit_ms);
    hit(a, t);
    task_notice(a, t, CRATER_NOTICE_TIME_LIMIT);
    task_stop(a, t, t->grace_ms);
}

static int set_int(json_t *o, const char *key, int64_t v)
{
    return json_object_set_new(o, key, json_integer((json_int_t)v));
}

int timelimit_save(const atask_t *t, json_t *record)
{
    int rc = 0;

    if (!t->time_limit_ms)
        return 0;
    rc |= set_int(record, "time_limit_ms", (int64_t)t->time_limit_ms);
    rc |= set_int(record, "limit_at_boot_ms", t->limit_at_boot_ms);
    rc |= set_int(record, "grace_ms", (int64_t)t->grace_ms);
    rc |= json_object_set_new(record, "limit_hit", json_boolean(t->limit_hit));
    return rc < 0 ? -1 : 0;
}

void timelimit_load(atask_t *t, json_t *record)
{
    json_t *v = json_object_get(record, "time_limit_ms");

    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return;
    t->time_limit_ms = (uint64_t)json_integer_value(v);
    t->limit_at_boot_ms =
        json_integer_value(json_object_get(record, "limit_at_boot_ms"));
    t->grace_ms =
        (uint64_t)json_integer_value(json_object_get(record, "grace_ms"));
    t->limit_hit = json_is_true(json_object_get(record, "limit_hit"));
    if (t->limit_hit && !t->error)
        t->error = reason(t->time_limit_ms);
}
