/* replay_openb.c - replay jobs from an openb pod list.
 *
 * Kept apart from replay.c so that the replay engine links (and its unit
 * test runs) without the trace loaders. A pod becomes one job: it arrives
 * at creation_time and runs for deletion_time - scheduled_time (the time
 * it really ran in the trace; the trace's own queueing delay is not
 * replayed, the simulated scheduler makes its own). Pods that never ran
 * (still Pending in the snapshot: no scheduled_time) are skipped and
 * counted, as are pods with no positive run time.
 */
#include <stdlib.h>

#include "crater/replay.h"

static bool ran(const crater_trace_pod_t *p)
{
    return p->creation >= 0 && p->scheduled >= 0 && p->deletion >= 0
           && p->deletion > p->scheduled;
}

static int64_t first_creation(const crater_trace_pod_t *pods, size_t n)
{
    int64_t first = INT64_MAX;

    for (size_t i = 0; i < n; i++)
        if (ran(&pods[i]) && pods[i].creation < first)
            first = pods[i].creation;
    return first == INT64_MAX ? 0 : first;
}

static int pod_job(const crater_sched_t *s,
                   const crater_trace_pod_t *p,
                   int64_t t0,
                   crater_replay_policy_t pol,
                   crater_replay_job_t *j,
                   crater_error_t *err)
{
    if (crater_openb_request(s, p, 1, &j->req, err) < 0)
        return -1;
    j->submit_ms = (uint64_t)(p->creation - t0) * 1000u;
    j->runtime_ms = (uint64_t)(p->deletion - p->scheduled) * 1000u;
    /* gpu_milli is a share of one GPU only when num_gpu == 1 */
    j->gpu_milli = p->num_gpu == 1 ? p->gpu_milli : p->num_gpu * 1000u;
    crater_replay_job_class(j, crater_replay_class_of_qos(p->qos), pol);
    return 0;
}

int crater_replay_jobs_from_trace(const crater_sched_t *s,
                                  const crater_trace_pod_t *pods,
                                  size_t n,
                                  crater_replay_policy_t p,
                                  crater_replay_job_t **jobs,
                                  size_t *njobs,
                                  size_t *skipped,
                                  crater_error_t *err)
{
    crater_replay_job_t *j = calloc(n ? n : 1, sizeof(*j));
    int64_t t0 = first_creation(pods, n);
    size_t k = 0;

    if (!j)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!ran(&pods[i]))
            continue;
        if (pod_job(s, &pods[i], t0, p, &j[k], err) < 0) {
            free(j);
            return -1;
        }
        k++;
    }
    *jobs = j;
    *njobs = k;
    *skipped = n - k;
    return 0;
}
