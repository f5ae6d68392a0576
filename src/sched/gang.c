/* gang.c - gang placement: all replicas of a job are placed together or
 * none are.
 *
 * Replicas are placed one by one through the normal path
 * (crater_sched_place) and committed at once, so each replica sees the
 * resources the earlier ones took: two replicas never count the same free
 * GPU twice. On the first replica that does not fit, the replicas
 * committed so far are released in reverse order; commit and release are
 * exact inverses (state.c), so the cluster is left as it was. A gang
 * that succeeds stays committed: the caller owns those task ids.
 */
#include "sched/internal.h"

/* Release tasks first..first+n-1, newest first. */
static int rollback(crater_sched_t *s, uint64_t first, uint32_t n)
{
    int rc = 0;

    for (uint32_t i = n; i-- > 0;)
        if (crater_sched_release(s, first + i, NULL) < 0)
            rc = -1;
    return rc;
}

static int check_args(uint32_t replicas,
                      uint64_t first_task,
                      crater_error_t *err)
{
    if (replicas == 0)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "a gang needs at least one replica");
    if (first_task == 0 || first_task > UINT64_MAX - (replicas - 1))
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "task ids %llu..+%u are not all valid (0 is "
                             "reserved, ids must not wrap)",
                             (unsigned long long)first_task,
                             replicas - 1);
    return 0;
}

/* Place and commit replica i; on failure say which replica and why. */
static int place_one(crater_sched_t *s,
                     const crater_request_t *req,
                     uint32_t i,
                     uint32_t replicas,
                     uint64_t task,
                     crater_placement_t *out,
                     crater_error_t *err)
{
    crater_error_t why;
    const char *step;

    if (crater_sched_place(s, req, out, &why) < 0)
        step = "does not fit";
    else if (crater_sched_commit(s, task, req, out, &why) < 0)
        step = "cannot be committed";
    else
        return 0;
    return crater_errorf(err,
                         why.errnum,
                         "gang replica %u of %u (task %llu) %s: %s",
                         i + 1,
                         replicas,
                         (unsigned long long)task,
                         step,
                         why.text);
}

int crater_sched_place_gang(crater_sched_t *s,
                            const crater_request_t *req,
                            uint32_t replicas,
                            uint64_t first_task,
                            crater_placement_t *out,
                            crater_error_t *err)
{
    if (check_args(replicas, first_task, err) < 0)
        return -1;
    for (uint32_t i = 0; i < replicas; i++) {
        if (place_one(s, req, i, replicas, first_task + i, &out[i], err) == 0)
            continue;
        if (rollback(s, first_task, i) < 0)
            return crater_errorf(err,
                                 CRATER_ENOMEM,
                                 "out of memory while undoing a gang");
        return -1;
    }
    return 0;
}
