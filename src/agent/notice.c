/* notice.c - the agent socket's server: one thread answers every task's
 * socket (doc/agent.md "Checkpoints", doc/checkpoint.md "Runtime").
 *
 * A task speaks newline-delimited JSON, one request a line, one answer a
 * line, on its own socket (made by ckenv.c before the task starts):
 *
 *   {"op": "wait", "timeout_ms": 30000}  long poll: answered when a
 *       preemption notice comes ({"preempt": true, "reason": "priority",
 *       "deadline_ms": ms left before SIGKILL}) or at the timeout
 *       ({"preempt": false})
 *   {"op": "ack"}                        the task saw the notice
 *   {"op": "checkpoint", "step": N, "path": ..., "digest": ...,
 *    "bytes": N, "seconds": S}           a finished checkpoint
 *   {"op": "progress", "step": N}        how far it is
 *
 * Everything else is answered {"ok": false, "error": ..., "field": ...}.
 * Checkpoint and progress reports are queued on the task (ckenv.c) for
 * the event thread, which sends them to craterd before the task's exit.
 *
 * Why one thread with poll() rather than a thread per task: a node runs
 * tens of tasks, each with at most a waiting long poll, and the requests
 * are rare (a few per checkpoint). The thread owns the descriptors: it
 * takes a task's listening socket from the task table (under a->mu) and
 * closes it when the task is gone or exited, so no other thread ever
 * closes a descriptor it polls. A peer whose uid is not the task's (or
 * root) is dropped at accept: the socket's abstract name has no
 * permissions, so this check is what keeps other users out. Lines are
 * at most LINE_MAX_BYTES; a client that sends more, or does not read its
 * answers, is dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/internal.h"
#include "crater/log.h"

#define LINE_MAX_BYTES 4096
#define CLIENTS_PER_TASK 4
#define WAIT_DEFAULT_MS 30000
#define WAIT_MAX_MS 3600000
#define TICK_MS 1000

typedef struct client {
    int fd; /* -1: free */
    char buf[LINE_MAX_BYTES];
    size_t len;
    bool waiting;
    int64_t wait_until_ms;
} client_t;

typedef struct endpoint {
    char job[CRATER_PROTO_JOB_MAX + 1];
    uint32_t attempt, replica;
    uid_t uid;
    bool check_uid;
    int lfd;
    crater_proto_notice_t notice; /* copied from the task */
    int64_t kill_at_ms;
    client_t c[CLIENTS_PER_TASK];
} endpoint_t;

struct notice_srv {
    int pipe[2]; /* wake-ups */
    endpoint_t **ep;
    size_t nep, capep;
};

int notice_create(crater_agent_t *a)
{
    notice_srv_t *s = calloc(1, sizeof(*s));

    if (!s || pipe2(s->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        free(s);
        return -1;
    }
    a->notice_srv = s;
    return 0;
}

static void ep_free(endpoint_t *e)
{
    for (int i = 0; i < CLIENTS_PER_TASK; i++)
        if (e->c[i].fd >= 0)
            close(e->c[i].fd);
    close(e->lfd);
    free(e);
}

void notice_destroy(crater_agent_t *a)
{
    notice_srv_t *s = a->notice_srv;

    if (!s)
        return;
    for (size_t i = 0; i < s->nep; i++)
        ep_free(s->ep[i]);
    free(s->ep);
    close(s->pipe[0]);
    close(s->pipe[1]);
    free(s);
    a->notice_srv = NULL;
}

void notice_kick(crater_agent_t *a)
{
    char c = 1;

    if (a->notice_srv && write(a->notice_srv->pipe[1], &c, 1) < 0) {
        /* full: a wake-up is pending anyway */
    }
}

/* ---- the task table, under a->mu ---------------------------------------- */

static int ep_take(notice_srv_t *s, atask_t *t)
{
    endpoint_t *e;

    if (s->nep == s->capep) {
        size_t cap = s->capep ? s->capep * 2 : 16;
        endpoint_t **n = realloc(s->ep, cap * sizeof(*n));
        if (!n)
            return -1;
        s->ep = n;
        s->capep = cap;
    }
    if (!(e = calloc(1, sizeof(*e))))
        return -1;
    snprintf(e->job, sizeof(e->job), "%s", t->job);
    e->attempt = t->attempt;
    e->replica = t->replica;
    e->uid = t->uid;
    e->check_uid = true; /* an abstract name has no permissions (ckenv.c) */
    e->lfd = t->notice_fd;
    for (int i = 0; i < CLIENTS_PER_TASK; i++)
        e->c[i].fd = -1;
    t->notice_fd_held = false;
    s->ep[s->nep++] = e;
    return 0;
}

/* Take new sockets, drop those of tasks gone or exited, copy notices. */
static void sync_tasks(crater_agent_t *a, notice_srv_t *s)
{
    for (size_t i = 0; i < a->ntasks; i++)
        if (a->tasks[i]->notice_fd_held)
            ep_take(s, a->tasks[i]);
    for (size_t i = 0; i < s->nep;) {
        endpoint_t *e = s->ep[i];
        atask_t *t = task_find(a, e->job, e->attempt, e->replica);
        if (!t || t->state != AT_RUNNING) {
            ep_free(e);
            s->ep[i] = s->ep[--s->nep];
            continue;
        }
        e->notice = t->notice;
        e->kill_at_ms = t->kill_at_ms;
        i++;
    }
}

/* ---- answers --------------------------------------------------------------
 */

static void drop(client_t *c)
{
    close(c->fd);
    c->fd = -1;
    c->len = 0;
    c->waiting = false;
}

/* One line; a client that cannot take it is dropped. */
static void answer(client_t *c, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    size_t n = s ? strlen(s) : 0;

    json_decref(v);
    if (!s || n + 1 > LINE_MAX_BYTES) {
        free(s);
        drop(c);
        return;
    }
    s[n] = '\n';
    if (send(c->fd, s, n + 1, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n + 1)
        drop(c);
    free(s);
}

static void answer_error(client_t *c, const char *field, const char *text)
{
    answer(c,
           json_pack("{s:b, s:s, s:s}",
                     "ok",
                     0,
                     "error",
                     text,
                     "field",
                     field));
}

static json_t *notice_json(const endpoint_t *e, int64_t now)
{
    int64_t left = e->kill_at_ms > now ? e->kill_at_ms - now : 0;

    return json_pack("{s:b, s:s, s:I}",
                     "preempt",
                     1,
                     "reason",
                     crater_proto_notice_name(e->notice),
                     "deadline_ms",
                     (json_int_t)left);
}

/* Answer the long polls a notice or their timeout ended; the earliest
 * timeout still pending, for poll(). */
static int64_t answer_waiters(notice_srv_t *s, int64_t now)
{
    int64_t next = now + TICK_MS;

    for (size_t i = 0; i < s->nep; i++)
        for (int k = 0; k < CLIENTS_PER_TASK; k++) {
            endpoint_t *e = s->ep[i];
            client_t *c = &e->c[k];
            if (c->fd < 0 || !c->waiting)
                continue;
            if (e->notice != CRATER_NOTICE_NONE) {
                c->waiting = false;
                answer(c, notice_json(e, now));
            } else if (now >= c->wait_until_ms) {
                c->waiting = false;
                answer(c, json_pack("{s:b}", "preempt", 0));
            } else if (c->wait_until_ms < next)
                next = c->wait_until_ms;
        }
    return next;
}

/* ---- requests -------------------------------------------------------------
 */

static void op_wait(endpoint_t *e, client_t *c, json_t *req, int64_t now)
{
    json_t *to = json_object_get(req, "timeout_ms");
    json_int_t ms = to ? json_integer_value(to) : WAIT_DEFAULT_MS;

    if (to && (!json_is_integer(to) || ms < 0 || ms > WAIT_MAX_MS)) {
        answer_error(c, "timeout_ms", "an integer 0 to 3600000");
        return;
    }
    if (e->notice != CRATER_NOTICE_NONE) {
        answer(c, notice_json(e, now));
        return;
    }
    c->waiting = true;
    c->wait_until_ms = now + ms;
}

static int f_pstep(crater_dec_t *d, json_t *v, void *obj)
{
    return crater_dec_uint(d, v, 0, (uint64_t)INT64_MAX, obj);
}

static const crater_dec_field_t progress_fields[] = {
    {"step", f_pstep, CRATER_FIELD_REQUIRED},
    {NULL, NULL, 0},
};

/* A report: decoded (the same strict decoder craterd uses), then queued
 * on the task under a->mu. */
static void op_report(
    crater_agent_t *a, endpoint_t *e, client_t *c, json_t *req, const char *op)
{
    bool ck = strcmp(op, "checkpoint") == 0;
    crater_proto_ckpt_t r = {0};
    crater_error_t err = {0};
    uint64_t step = 0;
    crater_dec_t d;
    atask_t *t;

    json_object_del(req, "op");
    crater_dec_init(&d, NULL, 0, &err);
    if (ck ? crater_proto_ckpt_decode(&d, req, &r) < 0
           : crater_dec_object(&d, req, progress_fields, &step) < 0) {
        answer_error(c, err.field[0] ? err.field : op, err.text);
        return;
    }
    pthread_mutex_lock(&a->mu);
    t = task_find(a, e->job, e->attempt, e->replica);
    if (t && ck)
        ckenv_report(a, t, &r);
    else if (t)
        ckenv_progress(a, t, step);
    pthread_mutex_unlock(&a->mu);
    crater_proto_ckpt_clear(&r);
    answer(c, json_pack("{s:b}", "ok", 1));
}

static void op_ack(crater_agent_t *a, endpoint_t *e, client_t *c)
{
    atask_t *t;

    pthread_mutex_lock(&a->mu);
    if ((t = task_find(a, e->job, e->attempt, e->replica))) {
        t->notice_acked = true;
        crater_log(LOG_INFO,
                   "job %s attempt %u: the task acknowledged its notice",
                   t->job,
                   t->attempt);
    }
    pthread_mutex_unlock(&a->mu);
    answer(c, json_pack("{s:b}", "ok", 1));
}

static void request(crater_agent_t *a, endpoint_t *e, client_t *c, char *line)
{
    json_t *req = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
    const char *op = json_string_value(json_object_get(req, "op"));

    if (!json_is_object(req))
        answer_error(c, "", "a request is one JSON object a line");
    else if (!op)
        answer_error(c, "op", "missing: wait, ack, checkpoint or progress");
    else if (strcmp(op, "wait") == 0)
        op_wait(e, c, req, agent_now_ms());
    else if (strcmp(op, "ack") == 0)
        op_ack(a, e, c);
    else if (strcmp(op, "checkpoint") == 0 || strcmp(op, "progress") == 0)
        op_report(a, e, c, req, op);
    else
        answer_error(c, "op", "not one of wait, ack, checkpoint, progress");
    json_decref(req);
}

/* ---- descriptors ----------------------------------------------------------
 */

static bool peer_ok(const endpoint_t *e, int fd)
{
    struct ucred cr;
    socklen_t n = sizeof(cr);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) < 0)
        return false;
    return !e->check_uid || cr.uid == e->uid || cr.uid == 0;
}

static void accept_on(endpoint_t *e)
{
    int fd, k;

    while ((fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK))
           >= 0) {
        for (k = 0; k < CLIENTS_PER_TASK && e->c[k].fd >= 0; k++)
            ;
        if (k == CLIENTS_PER_TASK || !peer_ok(e, fd)) {
            close(fd);
            continue;
        }
        e->c[k] = (client_t){.fd = fd};
    }
}

/* Read what c sent; answer each complete line. */
static void read_from(crater_agent_t *a, endpoint_t *e, client_t *c)
{
    ssize_t got = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    char *nl;

    if (got <= 0) {
        if (got == 0 || (errno != EAGAIN && errno != EINTR))
            drop(c);
        return;
    }
    c->len += (size_t)got;
    while (c->fd >= 0 && (nl = memchr(c->buf, '\n', c->len))) {
        size_t n = (size_t)(nl - c->buf) + 1;
        *nl = '\0';
        request(a, e, c, c->buf);
        if (c->fd < 0)
            return;
        memmove(c->buf, c->buf + n, c->len - n);
        c->len -= n;
    }
    if (c->len == sizeof(c->buf)) /* a line longer than we take */
        drop(c);
}

/* pfd: the wake pipe, then per endpoint its socket and its clients. */
static size_t fill_pollfds(notice_srv_t *s, struct pollfd *pfd)
{
    size_t n = 0;

    pfd[n++] = (struct pollfd){.fd = s->pipe[0], .events = POLLIN};
    for (size_t i = 0; i < s->nep; i++) {
        pfd[n++] = (struct pollfd){.fd = s->ep[i]->lfd, .events = POLLIN};
        for (int k = 0; k < CLIENTS_PER_TASK; k++)
            pfd[n++] =
                (struct pollfd){.fd = s->ep[i]->c[k].fd, .events = POLLIN};
    }
    return n;
}

static void serve(crater_agent_t *a, notice_srv_t *s, struct pollfd *pfd)
{
    char buf[64];
    size_t n = 1;

    while (read(s->pipe[0], buf, sizeof(buf)) > 0)
        ;
    for (size_t i = 0; i < s->nep; i++) {
        endpoint_t *e = s->ep[i];
        if (pfd[n++].revents)
            accept_on(e);
        for (int k = 0; k < CLIENTS_PER_TASK; k++, n++)
            if (pfd[n].revents && e->c[k].fd >= 0 && pfd[n].fd == e->c[k].fd)
                read_from(a, e, &e->c[k]);
    }
}

void *notice_main(void *arg)
{
    crater_agent_t *a = arg;
    notice_srv_t *s = a->notice_srv;
    struct pollfd *pfd = NULL;

    for (;;) {
        int64_t now, next;
        size_t n;
        pthread_mutex_lock(&a->mu);
        if (a->stopping) {
            pthread_mutex_unlock(&a->mu);
            break;
        }
        sync_tasks(a, s);
        pthread_mutex_unlock(&a->mu);
        now = agent_now_ms();
        next = answer_waiters(s, now);
        free(pfd);
        if (!(pfd = calloc(1 + s->nep * (1 + CLIENTS_PER_TASK), sizeof(*pfd))))
            break;
        n = fill_pollfds(s, pfd);
        if (poll(pfd, n, (int)(next > now ? next - now : 0)) > 0)
            serve(a, s, pfd);
    }
    free(pfd);
    return NULL;
}
