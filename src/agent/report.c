/* report.c - what the agent tells craterd as it happens: task events and
 * task output, each on its own thread with its own HTTP client.
 *
 * Event thread: sleeps on a->ev_wake until a task has an unacknowledged
 * event (started: pid and real start time; exited: code, signal, OOM,
 * reason, end time and the size of each log at exit), then POSTs every
 * pending event in one request to /agents/{node}/events. Acknowledged
 * events are marked sent; a failure marks the agent for registering again
 * and retries after a backoff. After every register all events are sent
 * again (craterd treats repeats as no-ops), so a restarted craterd learns
 * what its store missed.
 *
 * Log thread: ships each task's stdout and stderr as a stream, 1 MiB per
 * request and as fast as craterd takes them, from the offset craterd
 * holds (for adopted tasks, from the register answer). A running task's
 * new bytes are picked up within LOG_IDLE_MS. An exited task's output is
 * shipped up to its size at exit; a stream is done when all of it is
 * there, when craterd says logs.maxBytes cut it, or when the job is gone.
 * A task whose exit was acknowledged and whose output is done is removed
 * here (its logs, record and working directory deleted): only this thread
 * removes tasks.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/log.h"

#define LOG_CHUNK (1024 * 1024)
#define LOG_IDLE_MS 100

void report_kick(crater_agent_t *a)
{
    pthread_cond_broadcast(&a->ev_wake);
    pthread_cond_broadcast(&a->log_wake);
}

/* The upload's answer says logs.maxBytes cut the stream. */
static bool truncated(const char *resp)
{
    json_t *v = resp ? json_loads(resp, 0, NULL) : NULL;
    bool t = json_is_true(json_object_get(v, "truncated"));

    json_decref(v);
    return t;
}

static void wait_ms(crater_agent_t *a, pthread_cond_t *c, uint64_t ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(c, &a->mu, &ts);
}

/* ---- events ---------------------------------------------------------------
 */

/* The request body of every pending event (caller holds a->mu), NULL
 * when there are none; *sent says which events it carries (their job ids
 * copied: a task may go once a->mu is released). */
/* t's checkpoint and progress reports, in the order they came, before
 * its exit (craterd records the last checkpoint of an attempt before it
 * requeues the job). The events borrow t's strings. */
static size_t report_events(const atask_t *t, crater_proto_event_t *ev)
{
    size_t n = 0;
    crater_proto_event_t e = {.job = t->job,
                              .attempt = t->attempt,
                              .replica = t->replica,
                              .time_ms = agent_now_ms()};

    if (!t->start_sent)
        return 0; /* craterd learns of the task first */
    for (unsigned k = 0; k < t->nckq; k++) {
        ev[n] = e;
        ev[n].event = CRATER_PROTO_CHECKPOINT;
        ev[n++].ckpt = t->ckq[k];
    }
    if (t->progress_pending) {
        ev[n] = e;
        ev[n].event = CRATER_PROTO_PROGRESS;
        ev[n++].ckpt.step = t->progress_step;
    }
    if (t->ready_pending && t->state == AT_RUNNING) {
        ev[n] = e;
        ev[n].event = CRATER_PROTO_READY;
        ev[n++].ready = t->ready;
    }
    return n;
}

static json_t *pending_events(crater_agent_t *a, crater_proto_events_t *sent)
{
    crater_proto_event_t *ev =
        calloc((4 + AGENT_CKQ_MAX) * a->ntasks + 1, sizeof(*ev));
    crater_proto_events_t evs = {.events = ev};
    json_t *body = NULL;

    memset(sent, 0, sizeof(*sent));
    for (size_t i = 0; ev && i < a->ntasks; i++) {
        atask_t *t = a->tasks[i];
        if (!t->start_sent && t->pid > 0)
            ev[evs.nevents++] = task_event(t, false);
        evs.nevents += report_events(t, ev + evs.nevents);
        if (t->state == AT_EXITED && !t->exit_sent)
            ev[evs.nevents++] = task_event(t, true);
    }
    if (evs.nevents > 0)
        body = crater_proto_events_encode(&evs);
    for (size_t i = 0; body && i < evs.nevents; i++) {
        /* what mark_sent() needs: which task, which event, which step */
        ev[i] = (crater_proto_event_t){.job = strdup(ev[i].job),
                                       .attempt = ev[i].attempt,
                                       .replica = ev[i].replica,
                                       .event = ev[i].event,
                                       .ckpt.step = ev[i].ckpt.step,
                                       .ready = ev[i].ready};
    }
    if (body)
        *sent = evs;
    else
        free(ev);
    return body;
}

/* The first queued report of step was acknowledged: drop it. */
static void ckq_sent(atask_t *t, uint64_t step)
{
    for (unsigned k = 0; k < t->nckq; k++)
        if (t->ckq[k].step == step) {
            crater_proto_ckpt_clear(&t->ckq[k]);
            memmove(&t->ckq[k],
                    &t->ckq[k + 1],
                    (t->nckq - k - 1) * sizeof(t->ckq[0]));
            t->nckq--;
            return;
        }
}

static void mark_sent(crater_agent_t *a, const crater_proto_events_t *evs)
{
    for (size_t i = 0; i < evs->nevents; i++) {
        const crater_proto_event_t *e = &evs->events[i];
        atask_t *t =
            e->job ? task_find(a, e->job, e->attempt, e->replica) : NULL;
        if (!t)
            continue;
        if (e->event == CRATER_PROTO_STARTED)
            t->start_sent = true;
        else if (e->event == CRATER_PROTO_EXITED)
            t->exit_sent = true;
        else if (e->event == CRATER_PROTO_PROGRESS)
            t->progress_pending &= t->progress_step != e->ckpt.step;
        else if (e->event == CRATER_PROTO_READY)
            t->ready_pending &= t->ready != e->ready; /* a newer answer */
        else
            ckq_sent(t, e->ckpt.step);
    }
}

void *report_events_main(void *arg)
{
    crater_agent_t *a = arg;
    uint64_t delay = 100;
    char path[512];

    snprintf(path, sizeof(path), "/api/v1/agents/%s/events", a->node.name);
    pthread_mutex_lock(&a->mu);
    while (!a->stopping) {
        crater_proto_events_t sent;
        json_t *body = a->need_register ? NULL : pending_events(a, &sent);
        json_t *resp = NULL;
        crater_error_t err;
        int rc;
        if (!body) {
            wait_ms(a, &a->ev_wake, 1000);
            continue;
        }
        pthread_mutex_unlock(&a->mu);
        rc = crater_client_json(a->ev_client, "POST", path, body, &resp, &err);
        json_decref(body);
        json_decref(resp);
        pthread_mutex_lock(&a->mu);
        if (rc == 0) {
            mark_sent(a, &sent);
            delay = 100;
        } else {
            crater_log(LOG_WARNING,
                       "node %s: events: %s",
                       a->node.name,
                       err.text);
            a->need_register = true;
            wait_ms(a, &a->ev_wake, delay);
            delay = delay * 2 > 5000 ? 5000 : delay * 2;
        }
        crater_proto_events_clear(&sent);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* ---- logs -----------------------------------------------------------------
 */

typedef enum {
    SHIP_MORE,
    SHIP_IDLE,
    SHIP_DONE,
    SHIP_ERROR
} ship_t;

/* One request: up to LOG_CHUNK bytes of stream s from t->log_sent[s]. */
static ship_t ship_chunk(
    crater_agent_t *a, atask_t *t, int s, char *buf, uint64_t end)
{
    static const char *const names[2] = {"stdout", "stderr"};
    uint64_t want = LOG_CHUNK;
    char path[512], *resp = NULL;
    long status = 0;
    ssize_t got;
    struct stat st;
    int fd;

    /* a running task's stream with nothing new (most rounds: every task
       of the node is looked at after each start and exit): one stat, not
       an open, a read and a close */
    if (!end
        && (stat(t->log_path[s], &st) < 0
            || (uint64_t)st.st_size <= t->log_sent[s]))
        return SHIP_IDLE;
    fd = open(t->log_path[s], O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) /* not opened by the task yet, or gone */
        return end ? SHIP_DONE : SHIP_IDLE;
    if (fd < 0)
        return SHIP_ERROR;
    if (end && end - t->log_sent[s] < want)
        want = end - t->log_sent[s];
    got = pread(fd, buf, want, (off_t)t->log_sent[s]);
    close(fd);
    if (got <= 0)
        return got == 0 ? SHIP_IDLE : SHIP_ERROR;
    snprintf(path,
             sizeof(path),
             "/api/v1/agents/%s/logs/%s?attempt=%u&replica=%u&stream=%s"
             "&offset=%" PRIu64,
             a->node.name,
             t->job,
             t->attempt,
             t->replica,
             names[s],
             t->log_sent[s]);
    if (crater_client_request(a->log_client,
                              "POST",
                              path,
                              "application/octet-stream",
                              buf,
                              (size_t)got,
                              &status,
                              &resp,
                              NULL,
                              NULL)
        < 0) {
        free(resp);
        return SHIP_ERROR;
    }
    if (status == 404 || status == 403 || truncated(resp)) {
        /* the job is gone, its attempt is not this node's (any more), or
         * craterd keeps no more */
        free(resp);
        return SHIP_DONE;
    }
    free(resp);
    if (status != 200)
        return SHIP_ERROR;
    t->log_sent[s] += (uint64_t)got;
    return SHIP_MORE;
}

/* Ship what stream s has now; false on a failure. */
static bool ship_stream(
    crater_agent_t *a, atask_t *t, int s, char *buf, bool exited)
{
    uint64_t end = exited ? t->log_final[s] : 0;

    while (!t->log_done[s]) {
        ship_t r;
        if (exited && t->log_sent[s] >= end) {
            r = SHIP_DONE;
        } else {
            r = ship_chunk(a, t, s, buf, end);
        }
        if (r == SHIP_DONE)
            t->log_done[s] = true;
        if (r == SHIP_ERROR)
            return false;
        if (r != SHIP_MORE)
            break;
    }
    return true;
}

/* Ship one task (without a->mu: see internal.h). */
static bool ship_task(crater_agent_t *a, atask_t *t, char *buf, bool exited)
{
    bool ok = true;

    for (int s = 0; s < 2 && ok; s++)
        ok = ship_stream(a, t, s, buf, exited);
    return ok;
}

/* Under a->mu: the next task to ship at or after *i, with its state. */
static atask_t *next_task(crater_agent_t *a, size_t *i, bool *exited)
{
    for (; *i < a->ntasks; (*i)++) {
        atask_t *t = a->tasks[*i];
        if (t->log_resync) /* adopted: wait for craterd's offsets */
            continue;
        if (t->state == AT_EXITED && t->exit_sent && t->log_done[0]
            && t->log_done[1]) {
            task_remove(a, t);
            (*i)--;
            continue;
        }
        *exited = t->state == AT_EXITED;
        return t;
    }
    return NULL;
}

void *report_logs_main(void *arg)
{
    crater_agent_t *a = arg;
    char *buf = malloc(LOG_CHUNK);
    uint64_t delay = LOG_IDLE_MS;

    pthread_mutex_lock(&a->mu);
    while (buf && !a->stopping) {
        bool ok = true, exited = false;
        size_t i = 0;
        atask_t *t;
        while (ok && !a->need_register && !a->stopping
               && (t = next_task(a, &i, &exited))) {
            i++;
            pthread_mutex_unlock(&a->mu);
            ok = ship_task(a, t, buf, exited);
            pthread_mutex_lock(&a->mu);
        }
        if (!ok) {
            a->need_register = true;
            delay = delay * 2 > 5000 ? 5000 : delay * 2;
        } else {
            delay = LOG_IDLE_MS;
        }
        if (!a->stopping)
            wait_ms(a, &a->log_wake, delay);
    }
    pthread_mutex_unlock(&a->mu);
    free(buf);
    return NULL;
}
