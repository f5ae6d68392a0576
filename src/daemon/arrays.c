/* arrays.c - job arrays: one spec with `array: "0-999%10"` becomes one job
 * per index, submitted in one durable commit (api_jobs.c), with
 * consecutive ids; the array's id is its first job's. Each job carries
 * its array id and index (CRATER_ARRAY_ID, CRATER_ARRAY_INDEX in its
 * environment) and is otherwise an ordinary job: it is scheduled, runs,
 * is listed and cancelled like any other.
 *
 * What belongs to the array as a whole lives here, in d->arrays (sorted
 * by id): how many of its jobs craterd holds (count) and how many of them
 * hold resources right now (active), so the scheduler can keep the
 * parallelism cap (%P) without scanning the array. The counts are kept by
 * the three places a job enters, moves and leaves: job_insert (submission
 * and restart), job_step (jobs.c), and retention. The API: GET
 * /api/v1/arrays/{id} (counts by state) and POST /api/v1/arrays/{id}/cancel
 * (every unfinished job of it); a job of an array is also found as
 * "{array id}_{index}" wherever a job id is taken.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/internal.h"

darray_t *array_find(crater_daemon_t *d, uint64_t id)
{
    size_t lo = 0, hi = d->narrays;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->arrays[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->narrays && d->arrays[lo].id == id ? &d->arrays[lo] : NULL;
}

static darray_t *array_add(crater_daemon_t *d, uint64_t id)
{
    size_t i = d->narrays;

    if (d->narrays == d->caparrays) {
        size_t cap = d->caparrays ? d->caparrays * 2 : 16;
        darray_t *n = realloc(d->arrays, cap * sizeof(*n));
        if (!n)
            return NULL;
        d->arrays = n;
        d->caparrays = cap;
    }
    while (i > 0 && d->arrays[i - 1].id > id) {
        d->arrays[i] = d->arrays[i - 1];
        i--;
    }
    d->arrays[i] = (darray_t){.id = id};
    d->narrays++;
    return &d->arrays[i];
}

void array_track(crater_daemon_t *d, const djob_t *j, int delta)
{
    darray_t *a;

    if (!j->array_id)
        return;
    if (!(a = array_find(d, j->array_id)) && delta > 0
        && !(a = array_add(d, j->array_id)))
        return;
    if (!a)
        return;
    a->parallelism = j->spec ? j->spec->array_parallelism : 0;
    if (j->id > a->last)
        a->last = j->id;
    a->count += (uint32_t)delta;
    if (job_state_holds(j->state))
        a->active += (uint32_t)delta;
    if (a->count == 0) {
        size_t i = (size_t)(a - d->arrays);
        memmove(a, a + 1, (d->narrays - i - 1) * sizeof(*a));
        d->narrays--;
    }
}

void array_moved(crater_daemon_t *d,
                 const djob_t *j,
                 job_state_t from,
                 job_state_t to)
{
    darray_t *a = j->array_id ? array_find(d, j->array_id) : NULL;

    if (!a || job_state_holds(from) == job_state_holds(to))
        return;
    if (job_state_holds(to))
        a->active++;
    else if (a->active > 0)
        a->active--;
}

bool array_at_cap(crater_daemon_t *d, const djob_t *j, crater_error_t *err)
{
    darray_t *a = j->array_id ? array_find(d, j->array_id) : NULL;

    if (!a || !a->parallelism || a->active < a->parallelism)
        return false;
    crater_errorf(err,
                  CRATER_EUNAVAIL,
                  "array %" PRIu64 " runs %u of its jobs, its limit (%%%u)",
                  a->id,
                  a->active,
                  a->parallelism);
    return true;
}

djob_t *array_job(crater_daemon_t *d, uint64_t array_id, uint32_t index)
{
    darray_t *a = array_find(d, array_id);
    djob_t *j;

    for (uint64_t id = array_id; a && id <= a->last; id++)
        if ((j = job_find(d, id)) && j->array_id == array_id
            && j->array_index == index)
            return j;
    return NULL;
}

/* Every job of array a, in id order, through fn. */
static void each_job(crater_daemon_t *d,
                     const darray_t *a,
                     void (*fn)(crater_daemon_t *, djob_t *, void *),
                     void *arg)
{
    for (uint64_t id = a->id; id <= a->last; id++) {
        djob_t *j = job_find(d, id);
        if (j && j->array_id == a->id)
            fn(d, j, arg);
    }
}

static void count_state(crater_daemon_t *d, djob_t *j, void *arg)
{
    uint32_t *by = arg;

    (void)d;
    by[j->state]++;
}

json_t *array_to_json(crater_daemon_t *d, const darray_t *a)
{
    uint32_t by[JS_COUNT] = {0};
    json_t *states = json_object();
    djob_t *first = job_find(d, a->id);
    char *text = NULL;

    each_job(d, a, count_state, by);
    for (int s = 0; s < JS_COUNT; s++)
        if (by[s])
            json_object_set_new(states,
                                job_state_name((job_state_t)s),
                                json_integer(by[s]));
    if (first && first->spec)
        text = crater_array_format(first->spec->array,
                                   first->spec->narray,
                                   first->spec->array_parallelism);
    json_t *o = json_pack("{s:i, s:i, s:i, s:o, s:s?}",
                          "count",
                          (int)a->count,
                          "parallelism",
                          (int)a->parallelism,
                          "active",
                          (int)a->active,
                          "states",
                          states,
                          "indexes",
                          text);
    free(text);
    if (o)
        json_object_set_new(o, "id", json_sprintf("%" PRIu64, a->id));
    return o;
}

/* ---- API ------------------------------------------------------------------
 */

/* The array {id} if p may see it (its first job's tenant); else 404. */
static darray_t *visible_array(crater_daemon_t *d,
                               crater_http_req_t *r,
                               const principal_t *p,
                               crater_http_resp_t *resp)
{
    const char *s = crater_http_param(r, "id");
    darray_t *a = s ? array_find(d, strtoull(s, NULL, 10)) : NULL;
    djob_t *j = NULL;

    for (uint64_t id = a ? a->id : 1; a && !j && id <= a->last; id++)
        if ((j = job_find(d, id)) && j->array_id != a->id)
            j = NULL;
    if (!j || !j->durable || p->role == CRATER_ROLE_AGENT
        || (p->role == CRATER_ROLE_USER && strcmp(j->tenant, p->tenant) != 0)) {
        api_errorf(resp, CRATER_ENOENT, "id", "no array '%s'", s ? s : "");
        return NULL;
    }
    return a;
}

static void h_array(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    principal_t p;
    darray_t *a;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (a = visible_array(d, r, &p, resp)))
        crater_http_json(resp, 200, array_to_json(d, a));
    pthread_mutex_unlock(&d->mu);
}

typedef struct cancel_arg {
    const char *reason;
    uint32_t n;
} cancel_arg_t;

static void cancel_one(crater_daemon_t *d, djob_t *j, void *arg)
{
    cancel_arg_t *c = arg;

    if (job_state_final(j->state) || j->cancel_requested)
        return;
    job_cancel(d, j, c->reason);
    c->n++;
}

static void h_array_cancel(crater_http_req_t *r,
                           crater_http_resp_t *resp,
                           void *arg)
{
    crater_daemon_t *d = arg;
    char reason[256], *why = NULL;
    cancel_arg_t c = {reason, 0};
    principal_t p;
    darray_t *a;
    json_t *o;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) == 0 && (a = visible_array(d, r, &p, resp))
        && api_body_reason(r, &why, resp) == 0) {
        snprintf(reason,
                 sizeof(reason),
                 "cancelled with its array%s%s",
                 *why ? ": " : "",
                 why);
        each_job(d, a, cancel_one, &c);
        loop_kick(d);
        o = array_to_json(d, a);
        json_object_set_new(o, "cancelled", json_integer(c.n));
        crater_http_json(resp, 200, o);
        api_answer_when_stored(d, r, resp);
    }
    pthread_mutex_unlock(&d->mu);
    free(why);
}

int api_arrays_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"GET", "/api/v1/arrays/{id}", h_array},
        {"POST", "/api/v1/arrays/{id}/cancel", h_array_cancel},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
