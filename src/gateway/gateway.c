/* gateway.c - crater-gateway's engine.
 *
 * Shape. The HTTP front is src/net's server (libmicrohttpd, a pool of
 * event-loop threads, its body limit, suspend/complete). A handler checks
 * what it can alone (the service exists, the infer body is V2, the
 * service's queue has room), suspends the request and hands it to ONE loop
 * thread through an inbox (a mutex and curl_multi_wakeup). The loop thread
 * owns everything else without locks: the batching groups, the transfers
 * to backends (libcurl's multi interface: many transfers on one thread,
 * keep-alive connections in the multi handle's cache, easy handles
 * recycled), the deadlines and the health probes. It answers each request
 * with crater_http_complete(), from whichever path ends it first.
 *
 * Batching. Requests to a batching service's /v2/models/{m}/infer join the
 * group of their compatibility key (batch.h: same model, same input names,
 * datatypes and non-batch dimensions). A group is sent when its rows reach
 * maxBatchSize or its oldest request has waited batchTimeout: the first
 * requests in arrival order whose rows fit (at least one) become one V2
 * request, and the answer is split back by rows. A request that cannot
 * batch (inputs with different first dimensions, no batch dimension) is
 * proxied alone, as it came.
 *
 * Settling after a batch (issue 15, bench B9). When a batch of a service
 * is answered, its groups that were due but waiting for a busy backend
 * wait one more batchTimeout from that moment before a partial batch is
 * sent (a full one goes at once). Why: under
 * load the callers of the batch just answered send their next requests
 * within milliseconds; without the wait, the requests that came in while
 * the batch ran (due long ago) went out alone as a small batch the
 * moment the backend freed, and the callers just answered then waited
 * for that small batch and their own: batches alternated big and small
 * and p99 was about two batch times. With it they join one batch. The
 * cost: a partial batch waiting for a busy backend waits up to
 * batchTimeout more once it frees (at most the bound batchTimeout +
 * one batch's service time promises for a request that finds it idle).
 *
 * Limits. Each service counts its accepted, unanswered requests; past
 * queue_max a request is answered 429 with Retry-After at once. Each
 * request has a deadline (timeout_ms after arrival): waiting or in flight,
 * it is answered 504 when it passes (an in-flight batch still completes
 * for the others). No ready backend: 503, unless the service holds
 * requests (gw__table_set_hold: craterd's services scaled to zero). A held
 * request waits, on the loop thread's held list (or in its batching group),
 * for a first ready backend up to the service's hold time, then is answered
 * 503; once a backend is ready it is sent and has its full timeout from
 * then. Why hold in the gateway: a model scaled to zero takes seconds to
 * load, and a caller that gets 503 must retry blindly; the gateway knows
 * the moment a replica is ready.
 *
 * Why one loop thread: batching is a decision over all waiting requests of
 * a group, and the loop's work per request (JSON concat and split, a few
 * microseconds per row) is small next to a backend's milliseconds; a
 * single owner keeps that state lock-free and the order of answers simple.
 */
#include "gateway.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "crater/http.h"
#include "crater/metrics.h"

#define PROBE_TIMEOUT_MS 2000
#define MAX_PROBES 256
#define FREE_HANDLES 256
#define HOLD_POLL_MS 20

typedef struct call {
    crater_http_pending_t *p;
    gw_service_t *svc;
    int64_t arrive_us, deadline_us, sent_us;
    gw_v2_t *req; /* batching: the parsed request; NULL: proxied */
    char *method; /* proxied: method, path on the backend, body */
    char *path;   /* "/v2/models/m/infer" for a batch */
    char *body;
    size_t len;
    char ctype[96]; /* the request's Content-Type, proxied as is */
    bool answered;
    bool held;             /* waiting for a first ready backend now */
    int64_t held_until_us; /* 0: never held; else when the hold ends */
    struct call *next;
} call_t;

typedef struct group {
    gw_service_t *svc;
    bool blocked;      /* due, but every ready backend is busy */
    int64_t settle_us; /* a partial batch waits until then (settling) */
    char *key;         /* owned copy */
    call_t *head, *tail;
    int64_t rows;
    struct group *next;
} group_t;

typedef struct rbuf {
    char *p;
    size_t len, cap;
    bool oom;
} rbuf_t;

typedef struct xfer {
    CURL *h;
    struct curl_slist *hdrs;
    char *body; /* owned */
    rbuf_t out;
    char ctype[128];
    gw_backend_t *be;
    gw_service_t *svc;
    call_t **calls; /* owned array; NULL for a probe */
    size_t n;
    int64_t rows, start_us;
    bool batch;
    char errbuf[CURL_ERROR_SIZE];
    struct xfer *prev, *next;
} xfer_t;

typedef struct fams {
    crater_metric_t *requests, *batch, *queue_s, *backend_s;
    crater_metric_t *ready, *total, *depth, *held;
} fams_t;

struct gw {
    gw_table_t *t;
    gw_opts_t o;
    crater_router_t *rt;
    crater_http_server_t *srv;
    crater_metrics_t *m;
    fams_t f;
    CURLM *multi;
    pthread_t loop;
    bool loop_started;
    pthread_mutex_t mu; /* inbox and stop */
    call_t *in_head, *in_tail;
    bool stop;
    atomic_bool draining; /* gw__drain(): new requests get 503 */
    /* the loop thread's own */
    group_t *groups;
    call_t *held; /* proxied requests held for a first ready backend */
    bool holding; /* something is held: poll often */
    xfer_t *xfers;
    CURL *free_h[FREE_HANDLES];
    unsigned nfree;
    int64_t next_probe_us;
};

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- answering ------------------------------------------------------ */

static void count(gw_t *g, const gw_service_t *s, int status)
{
    char code[8];
    const char *lv[] = {s->name, code};

    snprintf(code, sizeof code, "%d", status);
    crater_metric_add(g->f.requests, lv, 1);
}

/* Answer c unless it has been: body and headers are taken (malloc'd, may
 * be NULL; "Content-Type: ..." in headers when ctype, a static string, is
 * NULL). The call itself stays with its owner (a group or a transfer). */
static void answer(gw_t *g,
                   call_t *c,
                   int status,
                   char *body,
                   size_t len,
                   const char *ctype,
                   char *headers)
{
    crater_http_resp_t resp = {.status = status,
                               .body = body,
                               .len = len,
                               .content_type = ctype,
                               .headers = headers};

    if (c->answered) {
        free(body);
        free(headers);
        return;
    }
    c->answered = true;
    if (c->held) {
        c->held = false;
        atomic_fetch_sub(&c->svc->held, 1);
    }
    crater_http_complete(c->p, &resp);
    c->p = NULL;
    atomic_fetch_sub(&c->svc->queued, 1);
    atomic_fetch_add(&c->svc->answered, 1);
    count(g, c->svc, status);
}

static char *error_json(const char *code, const char *text, size_t *len)
{
    json_t *j = json_pack("{s:s,s:s}", "error", text, "code", code);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    *len = s ? strlen(s) : 0;
    return s;
}

static void answer_error(
    gw_t *g, call_t *c, int status, const char *code, const char *text)
{
    size_t len;
    char *body = error_json(code, text, &len);

    answer(g, c, status, body, len, "application/json", NULL);
}

static void call_free(call_t *c)
{
    if (c == NULL)
        return;
    gw__v2_free(c->req);
    free(c->method);
    free(c->path);
    free(c->body);
    free(c);
}

/* ---- transfers ------------------------------------------------------ */

static size_t on_data(char *ptr, size_t size, size_t n, void *arg)
{
    rbuf_t *b = arg;
    size_t len = size * n;

    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        char *p;
        while (cap < b->len + len + 1)
            cap *= 2;
        if ((p = realloc(b->p, cap)) == NULL) {
            b->oom = true;
            return 0;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, ptr, len);
    b->len += len;
    b->p[b->len] = '\0';
    return len;
}

static size_t on_header(char *ptr, size_t size, size_t n, void *arg)
{
    xfer_t *x = arg;
    size_t len = size * n;

    if (len > 13 && strncasecmp(ptr, "Content-Type:", 13) == 0) {
        size_t i = 13, e = len;
        while (i < e && (ptr[i] == ' ' || ptr[i] == '\t'))
            i++;
        while (e > i && (ptr[e - 1] == '\r' || ptr[e - 1] == '\n'))
            e--;
        snprintf(x->ctype, sizeof x->ctype, "%.*s", (int)(e - i), ptr + i);
    }
    return len;
}

static CURL *handle_get(gw_t *g)
{
    if (g->nfree > 0) {
        CURL *h = g->free_h[--g->nfree];
        curl_easy_reset(h);
        return h;
    }
    return curl_easy_init();
}

static void handle_put(gw_t *g, CURL *h)
{
    if (g->nfree < FREE_HANDLES)
        g->free_h[g->nfree++] = h;
    else
        curl_easy_cleanup(h);
}

static void xfer_free(gw_t *g, xfer_t *x)
{
    if (x->h != NULL) {
        curl_multi_remove_handle(g->multi, x->h);
        handle_put(g, x->h);
    }
    curl_slist_free_all(x->hdrs);
    free(x->body);
    free(x->out.p);
    for (size_t i = 0; x->calls != NULL && i < x->n; i++)
        call_free(x->calls[i]);
    free(x->calls);
    free(x);
}

/* Set up x->h for method on be->url + path; body (x->body) if any. */
static int xfer_setup(gw_t *g,
                      xfer_t *x,
                      const char *method,
                      const char *path,
                      const char *ctype,
                      size_t len,
                      int64_t timeout_ms)
{
    char url[GW_URL_MAX + 1024], hdr[128];

    snprintf(url, sizeof url, "%s%s", x->be->url, path);
    if ((x->h = handle_get(g)) == NULL)
        return -1;
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, &x->out);
    curl_easy_setopt(x->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, timeout_ms > 1 ? timeout_ms : 1);
    curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    x->hdrs = curl_slist_append(x->hdrs, "Expect:");
    if (ctype != NULL && ctype[0] != '\0') {
        snprintf(hdr, sizeof hdr, "Content-Type: %s", ctype);
        x->hdrs = curl_slist_append(x->hdrs, hdr);
    }
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(x->h, CURLOPT_NOBODY, 1L);
    } else if (x->body != NULL) {
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(x->h, CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(x->h, CURLOPT_CUSTOMREQUEST, method);
    }
    if (curl_multi_add_handle(g->multi, x->h) != CURLM_OK)
        return -1;
    x->start_us = now_us();
    x->next = g->xfers;
    if (g->xfers != NULL)
        g->xfers->prev = x;
    g->xfers = x;
    return 0;
}

static void xfer_unlink(gw_t *g, xfer_t *x)
{
    if (x->prev != NULL)
        x->prev->next = x->next;
    else
        g->xfers = x->next;
    if (x->next != NULL)
        x->next->prev = x->prev;
}

/* ---- held requests (a service with no ready backend yet) ------------- */

/* Mark c held (the first time: its hold starts, counted as unserved, the
 * autoscaler's activation signal). false: the service does not hold, or
 * c's hold is over. */
static bool mark_held(gw_t *g, call_t *c, int64_t now)
{
    int64_t hold = atomic_load(&c->svc->hold_us);

    if (hold <= 0)
        return false;
    if (c->held_until_us == 0) {
        c->held_until_us = c->arrive_us + hold;
        atomic_fetch_add(&c->svc->unserved, 1);
    }
    if (now >= c->held_until_us)
        return false;
    if (!c->held) {
        c->held = true;
        atomic_fetch_add(&c->svc->held, 1);
    }
    g->holding = true;
    return true;
}

/* Keep proxied call c on the held list; false as mark_held. */
static bool hold_call(gw_t *g, call_t *c, int64_t now)
{
    if (!mark_held(g, c, now))
        return false;
    c->next = g->held;
    g->held = c;
    return true;
}

/* c leaves its hold to be sent: its timeout starts again from now. */
static void unhold(gw_t *g, call_t *c, int64_t now)
{
    if (c->held_until_us && c->deadline_us < now + g->o.timeout_ms * 1000)
        c->deadline_us = now + g->o.timeout_ms * 1000;
    if (c->held) {
        c->held = false;
        atomic_fetch_sub(&c->svc->held, 1);
    }
}

static void answer_hold_over(gw_t *g, call_t *c)
{
    char text[160];

    snprintf(text,
             sizeof text,
             "service '%s' had no ready backend within %lld ms",
             c->svc->name,
             (long long)(atomic_load(&c->svc->hold_us) / 1000));
    answer_error(g, c, 503, "EUNAVAIL", text);
}

static void launch_proxy(gw_t *g, call_t *c);

/* Send the held requests whose service has a ready backend now; answer
 * 503 to those whose hold is over. */
static void retry_held(gw_t *g, int64_t now)
{
    call_t *c = g->held, *next;

    g->held = NULL;
    for (; c != NULL; c = next) {
        next = c->next;
        c->next = NULL;
        if (gw__table_can_pick(g->t, c->svc, 0)) {
            launch_proxy(g, c);
        } else if (!hold_call(g, c, now)) {
            answer_hold_over(g, c);
            call_free(c);
        }
    }
}

/* Start a transfer for calls[0..n-1] (taken) on a ready backend of s. */
static void launch(gw_t *g,
                   gw_service_t *s,
                   call_t **calls,
                   size_t n,
                   char *body,
                   size_t len,
                   bool batch)
{
    xfer_t *x = calloc(1, sizeof(*x));
    call_t *c0 = calls[0];
    int64_t now = now_us(), last = 0;
    const char *lv[] = {s->name};

    for (size_t i = 0; i < n; i++) {
        unhold(g, calls[i], now);
        calls[i]->sent_us = now;
        if (calls[i]->deadline_us > last)
            last = calls[i]->deadline_us;
        crater_metric_observe(g->f.queue_s,
                              lv,
                              (now - calls[i]->arrive_us) / 1e6);
    }
    if (x == NULL) {
        free(body);
        for (size_t i = 0; i < n; i++) {
            answer_error(g, calls[i], 500, "ENOMEM", "out of memory");
            call_free(calls[i]);
        }
        free(calls);
        return;
    }
    *x = (xfer_t){.svc = s,
                  .calls = calls,
                  .n = n,
                  .body = body,
                  .batch = batch};
    for (size_t i = 0; batch && i < n; i++)
        x->rows += calls[i]->req->rows;
    x->be = gw__table_pick(g->t, s, batch ? s->max_inflight : 0);
    if (x->be == NULL && !batch && hold_call(g, c0, now)) {
        c0->body = body; /* back with the call until it is sent */
        x->body = NULL;
        x->calls = NULL;
        free(calls);
        xfer_free(g, x);
        return;
    }
    if (x->be == NULL) {
        char text[160];
        snprintf(text,
                 sizeof text,
                 "service '%s' has no ready backend",
                 s->name);
        atomic_fetch_add(&s->unserved, n);
        for (size_t i = 0; i < n; i++)
            answer_error(g, calls[i], 503, "EUNAVAIL", text);
        xfer_free(g, x);
        return;
    }
    if (batch)
        crater_metric_observe(g->f.batch, lv, (double)x->rows);
    if (xfer_setup(g,
                   x,
                   batch ? "POST" : c0->method,
                   c0->path,
                   batch ? "application/json" : c0->ctype,
                   len,
                   (last - now) / 1000 + 1)
        < 0) {
        for (size_t i = 0; i < n; i++)
            answer_error(g, calls[i], 500, "ENOMEM", "out of memory");
        gw__table_done(g->t, x->be);
        xfer_free(g, x);
    }
}

static void launch_proxy(gw_t *g, call_t *c)
{
    call_t **calls = malloc(sizeof(*calls));
    char *body = c->body;

    if (calls == NULL) {
        answer_error(g, c, 500, "ENOMEM", "out of memory");
        call_free(c);
        return;
    }
    c->body = NULL; /* the transfer owns it now */
    calls[0] = c;
    launch(g, c->svc, calls, 1, body, c->len, false);
}

/* ---- batching groups ------------------------------------------------ */

static void group_add(gw_t *g, call_t *c)
{
    group_t *gr;

    for (gr = g->groups; gr != NULL; gr = gr->next)
        if (gr->svc == c->svc && strcmp(gr->key, c->req->key) == 0)
            break;
    if (gr == NULL) {
        gr = calloc(1, sizeof(*gr));
        if (gr == NULL || (gr->key = strdup(c->req->key)) == NULL) {
            free(gr);
            answer_error(g, c, 500, "ENOMEM", "out of memory");
            call_free(c);
            return;
        }
        gr->svc = c->svc;
        gr->next = g->groups;
        g->groups = gr;
    }
    c->next = NULL;
    if (gr->tail != NULL)
        gr->tail->next = c;
    else
        gr->head = c;
    gr->tail = c;
    gr->rows += c->req->rows;
}

static call_t *group_pop(group_t *gr)
{
    call_t *c = gr->head;

    gr->head = c->next;
    if (gr->head == NULL)
        gr->tail = NULL;
    gr->rows -= c->req->rows;
    c->next = NULL;
    return c;
}

/* Send the first requests of gr whose rows fit in one batch. -1 on out
 * of memory (nothing taken; the loop tries again on its next turn). */
static int send_batch(gw_t *g, group_t *gr)
{
    unsigned max = gr->svc->max_batch;
    size_t n = 0, len = 0;
    int64_t rows = 0;
    call_t **calls, *c;
    gw_v2_t **reqs;
    char *body;
    crater_error_t err;

    for (c = gr->head; c != NULL; c = c->next, n++) {
        if (n > 0 && rows + c->req->rows > (int64_t)max)
            break;
        rows += c->req->rows;
    }
    calls = malloc(n * sizeof(*calls));
    reqs = malloc(n * sizeof(*reqs));
    c = gr->head;
    for (size_t i = 0; reqs != NULL && i < n; i++, c = c->next)
        reqs[i] = c->req;
    body = reqs && calls ? gw__v2_concat(reqs, n, &len, &err) : NULL;
    free(reqs);
    if (body == NULL) {
        free(calls);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        calls[i] = group_pop(gr);
    launch(g, gr->svc, calls, n, body, len, true);
    return 0;
}

/* When the group's partial batch may go: its oldest request has waited
 * batchTimeout, and the settling after the service's last batch is over. */
static int64_t send_at(const group_t *gr)
{
    int64_t t = gr->head->arrive_us + gr->svc->batch_timeout_us;

    return t > gr->settle_us ? t : gr->settle_us;
}

static bool due(const group_t *gr, int64_t now)
{
    return gr->head != NULL
           && (gr->rows >= (int64_t)gr->svc->max_batch || now >= send_at(gr));
}

/* A batch of svc was answered: its groups that were waiting for a
 * backend settle (above). Only those: a group not yet due whose send
 * time moved at each answer of a busy service's many backends could
 * wait without end; a blocked one settles once per wait. */
static void groups_settle(gw_t *g, const gw_service_t *svc, int64_t now)
{
    for (group_t *gr = g->groups; gr != NULL; gr = gr->next)
        if (gr->svc == svc && gr->blocked)
            gr->settle_us = now + svc->batch_timeout_us;
}

/* No ready backend: hold the group's requests (false: the service does
 * not hold; they are sent, for 503). */
static bool group_hold(gw_t *g, group_t *gr, int64_t now)
{
    if (atomic_load(&gr->svc->hold_us) <= 0)
        return false;
    for (call_t *c = gr->head; c != NULL; c = c->next)
        mark_held(g, c, now); /* those whose hold is over: expire_group */
    return true;
}

/* Send what is due to backends with room; drop empty groups. A due group
 * whose backends are all busy (max_inflight) waits for one to answer and
 * meanwhile fills up. With no ready backend at all it is sent, to be
 * answered 503. */
static void flush_groups(gw_t *g, int64_t now)
{
    group_t **p = &g->groups;

    while (*p != NULL) {
        group_t *gr = *p;
        gr->blocked = false;
        while (due(gr, now)) {
            if (!gw__table_can_pick(g->t, gr->svc, 0)
                && group_hold(g, gr, now)) {
                gr->blocked = true;
                break;
            }
            if (gw__table_can_pick(g->t, gr->svc, 0)
                && !gw__table_can_pick(g->t, gr->svc, gr->svc->max_inflight)) {
                gr->blocked = true;
                break;
            }
            if (send_batch(g, gr) < 0)
                break;
        }
        if (gr->head == NULL) {
            *p = gr->next;
            free(gr->key);
            free(gr);
        } else {
            p = &gr->next;
        }
    }
}

/* ---- completions ---------------------------------------------------- */

static void answer_all(
    gw_t *g, xfer_t *x, int status, const char *code, const char *text)
{
    for (size_t i = 0; i < x->n; i++)
        answer_error(g, x->calls[i], status, code, text);
}

/* A proxied answer goes back as it came (status, body, content type). */
static void finish_proxy(gw_t *g, xfer_t *x, long status)
{
    char *hdr = NULL;
    const char *ctype = NULL;
    size_t n = strlen(x->ctype) + sizeof "Content-Type: ";

    if (strncmp(x->ctype, "application/json", 16) == 0)
        ctype = "application/json";
    else if (x->ctype[0] != '\0' && (hdr = malloc(n)) != NULL)
        snprintf(hdr, n, "Content-Type: %s", x->ctype);
    answer(g, x->calls[0], (int)status, x->out.p, x->out.len, ctype, hdr);
    x->out.p = NULL;
}

static void finish_batch(gw_t *g, xfer_t *x, long status)
{
    gw_v2_t **reqs = malloc(x->n * sizeof(*reqs));
    char **bodies = calloc(x->n, sizeof(*bodies));
    size_t *lens = calloc(x->n, sizeof(*lens));
    crater_error_t err;
    char text[CRATER_ERROR_TEXT + GW_URL_MAX + 32];

    if (reqs == NULL || bodies == NULL || lens == NULL) {
        answer_all(g, x, 500, "ENOMEM", "out of memory");
    } else if (status != 200) {
        for (size_t i = 0; i < x->n; i++)
            answer(g,
                   x->calls[i],
                   (int)status,
                   strndup(x->out.p ? x->out.p : "", x->out.len),
                   x->out.len,
                   "application/json",
                   NULL);
    } else {
        for (size_t i = 0; i < x->n; i++)
            reqs[i] = x->calls[i]->req;
        if (gw__v2_split(x->out.p ? x->out.p : "",
                         x->out.len,
                         reqs,
                         x->n,
                         bodies,
                         lens,
                         &err)
            < 0) {
            snprintf(text,
                     sizeof text,
                     "backend %s: bad answer: %.900s",
                     x->be->url,
                     err.text);
            answer_all(g, x, 502, "EIO", text);
        } else {
            for (size_t i = 0; i < x->n; i++)
                answer(g,
                       x->calls[i],
                       200,
                       bodies[i],
                       lens[i],
                       "application/json",
                       NULL);
        }
    }
    free(reqs);
    free(bodies);
    free(lens);
}

static void finish(gw_t *g, xfer_t *x, CURLcode rc)
{
    long status = 0;
    const char *lv[] = {x->svc->name};
    char text[CRATER_ERROR_TEXT];

    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
    if (x->calls == NULL) { /* a health probe */
        x->be->probing = false;
        gw__table_mark(g->t, x->be, rc == CURLE_OK && status == 200);
        gw__table_release(g->t, x->be);
        return;
    }
    crater_metric_observe(g->f.backend_s, lv, (now_us() - x->start_us) / 1e6);
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(text,
                 sizeof text,
                 "backend %s did not answer in time",
                 x->be->url);
        answer_all(g, x, 504, "ETIMEDOUT", text);
    } else if (rc != CURLE_OK || x->out.oom) {
        snprintf(text,
                 sizeof text,
                 "backend %s: %s",
                 x->be->url,
                 x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
        if (rc == CURLE_COULDNT_CONNECT)
            gw__table_mark(g->t, x->be, false); /* the probe revives it */
        answer_all(g, x, 502, "EIO", text);
    } else if (!x->batch) {
        finish_proxy(g, x, status);
    } else {
        finish_batch(g, x, status);
    }
    if (x->batch)
        groups_settle(g, x->svc, now_us());
    gw__table_done(g->t, x->be);
}

/* Finish the transfers that are done; how many batches were. */
static size_t reap(gw_t *g)
{
    CURLMsg *msg;
    int left;
    size_t batches = 0;

    while ((msg = curl_multi_info_read(g->multi, &left)) != NULL) {
        xfer_t *x = NULL;
        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        xfer_unlink(g, x);
        batches += x->batch;
        finish(g, x, msg->data.result);
        xfer_free(g, x);
    }
    return batches;
}

/* ---- deadlines ------------------------------------------------------ */

static void expire_group(gw_t *g, group_t *gr, int64_t now)
{
    call_t *keep = NULL, **tail = &keep, *c, *next;

    for (c = gr->head; c != NULL; c = next) {
        next = c->next;
        if ((c->held ? c->held_until_us : c->deadline_us) > now) {
            *tail = c;
            tail = &c->next;
            gr->tail = c;
            continue;
        }
        gr->rows -= c->req->rows;
        if (c->held)
            answer_hold_over(g, c);
        else
            answer_error(g,
                         c,
                         504,
                         "ETIMEDOUT",
                         "timed out waiting for a batch to be sent");
        call_free(c);
    }
    *tail = NULL;
    gr->head = keep;
    if (keep == NULL)
        gr->tail = NULL;
}

/* Answer 504 to whatever passed its deadline; returns the next deadline
 * or batch send time (INT64_MAX: none). */
static int64_t expire(gw_t *g, int64_t now)
{
    int64_t next = INT64_MAX;

    for (group_t *gr = g->groups; gr != NULL; gr = gr->next) {
        expire_group(g, gr, now);
        if (gr->head == NULL)
            continue;
        if (gr->head->held && gr->head->held_until_us < next)
            next = gr->head->held_until_us;
        else if (gr->head->deadline_us < next)
            next = gr->head->deadline_us;
        if (!gr->blocked && send_at(gr) < next)
            next = send_at(gr);
    }
    for (xfer_t *x = g->xfers; x != NULL; x = x->next)
        for (size_t i = 0; i < x->n; i++) {
            call_t *c = x->calls[i];
            if (c->answered)
                continue;
            if (c->deadline_us <= now)
                answer_error(g,
                             c,
                             504,
                             "ETIMEDOUT",
                             "timed out waiting for the backend");
            else if (c->deadline_us < next)
                next = c->deadline_us;
        }
    return next;
}

/* ---- health probes -------------------------------------------------- */

typedef struct probes {
    gw_backend_t *b[MAX_PROBES];
    gw_service_t *s[MAX_PROBES];
    unsigned n;
} probes_t;

static void want_probe(gw_service_t *s, gw_backend_t *b, bool *take, void *arg)
{
    probes_t *p = arg;

    if (b->probing || p->n == MAX_PROBES)
        return;
    b->probing = true;
    *take = true;
    p->b[p->n] = b;
    p->s[p->n++] = s;
}

static void probe_all(gw_t *g)
{
    probes_t p = {.n = 0};

    gw__table_each(g->t, want_probe, &p);
    for (unsigned i = 0; i < p.n; i++) {
        xfer_t *x = calloc(1, sizeof(*x));
        if (x != NULL) {
            x->be = p.b[i];
            x->svc = p.s[i];
            if (xfer_setup(g,
                           x,
                           "GET",
                           "/v2/health/ready",
                           NULL,
                           0,
                           PROBE_TIMEOUT_MS)
                == 0)
                continue;
            xfer_free(g, x);
        }
        p.b[i]->probing = false;
        gw__table_release(g->t, p.b[i]);
    }
}

/* ---- the loop thread ------------------------------------------------ */

static call_t *take_inbox(gw_t *g, bool *stop)
{
    call_t *c;

    pthread_mutex_lock(&g->mu);
    c = g->in_head;
    g->in_head = g->in_tail = NULL;
    *stop = g->stop;
    pthread_mutex_unlock(&g->mu);
    return c;
}

static void take_calls(gw_t *g, call_t *c, bool stop)
{
    call_t *next;

    for (; c != NULL; c = next) {
        next = c->next;
        c->next = NULL;
        if (stop) {
            answer_error(g, c, 503, "EUNAVAIL", "gateway shutting down");
            call_free(c);
        } else if (c->req != NULL) {
            group_add(g, c);
        } else {
            launch_proxy(g, c);
        }
    }
}

static void drain_all(gw_t *g)
{
    while (g->held != NULL) {
        call_t *c = g->held;
        g->held = c->next;
        answer_error(g, c, 503, "EUNAVAIL", "gateway shutting down");
        call_free(c);
    }
    while (g->groups != NULL) {
        group_t *gr = g->groups;
        g->groups = gr->next;
        while (gr->head != NULL) {
            call_t *c = group_pop(gr);
            answer_error(g, c, 503, "EUNAVAIL", "gateway shutting down");
            call_free(c);
        }
        free(gr->key);
        free(gr);
    }
    while (g->xfers != NULL) {
        xfer_t *x = g->xfers;
        xfer_unlink(g, x);
        if (x->calls == NULL)
            gw__table_release(g->t, x->be);
        else
            gw__table_done(g->t, x->be);
        answer_all(g, x, 503, "EUNAVAIL", "gateway shutting down");
        xfer_free(g, x);
    }
}

static void *loop_main(void *arg)
{
    gw_t *g = arg;
    bool stop = false;

    pthread_setname_np(pthread_self(), "gateway"); /* top -H, perf, gdb */

    while (!stop) {
        int64_t now, next;
        int running, wait_ms;
        size_t freed;
        take_calls(g, take_inbox(g, &stop), stop);
        now = now_us();
        g->holding = false;
        retry_held(g, now);
        if (!stop && now >= g->next_probe_us) {
            probe_all(g);
            g->next_probe_us = now + g->o.health_ms * 1000;
        }
        flush_groups(g, now);
        curl_multi_perform(g->multi, &running);
        freed = reap(g);
        now = now_us();
        next = expire(g, now);
        if (freed) /* a backend has room: flush the blocked groups now */
            next = now;
        if (g->next_probe_us < next)
            next = g->next_probe_us;
        wait_ms = next <= now ? 0 : (int)((next - now + 999) / 1000);
        if (g->holding && wait_ms > HOLD_POLL_MS) /* a backend may come */
            wait_ms = HOLD_POLL_MS;
        if (!stop)
            curl_multi_poll(g->multi,
                            NULL,
                            0,
                            wait_ms > 1000 ? 1000 : wait_ms,
                            NULL);
    }
    drain_all(g);
    return NULL;
}

/* ---- the HTTP side (pool threads) ----------------------------------- */

static void push_inbox(gw_t *g, call_t *c)
{
    pthread_mutex_lock(&g->mu);
    if (g->in_tail != NULL)
        g->in_tail->next = c;
    else
        g->in_head = c;
    g->in_tail = c;
    pthread_mutex_unlock(&g->mu);
    curl_multi_wakeup(g->multi);
}

static void fail_resp(crater_http_resp_t *resp,
                      crater_errno_t code,
                      const char *field,
                      const char *text)
{
    crater_error_t err;

    crater_errorf_field(&err, code, field, "%s", text);
    crater_http_error(resp, &err);
}

/* "/v2/models/{model}/infer" -> model into buf; false for other paths. */
static bool infer_model(const char *rest, char *buf, size_t n)
{
    const char *m = rest + strlen("/v2/models/"), *slash;

    if (strncmp(rest, "/v2/models/", 11) != 0
        || (slash = strchr(m, '/')) == NULL || slash == m
        || strcmp(slash, "/infer") != 0 || (size_t)(slash - m) >= n)
        return false;
    memcpy(buf, m, (size_t)(slash - m));
    buf[slash - m] = '\0';
    return true;
}

/* Fill c for the request: parsed V2 body when it batches, else a copy of
 * method, path and body. -1 with resp answered (400, 500). */
static int prepare(crater_http_req_t *r,
                   crater_http_resp_t *resp,
                   gw_service_t *s,
                   const char *rest,
                   call_t *c)
{
    const char *method = crater_http_method(r);
    const char *ct = crater_http_header(r, "Content-Type");
    const char *body = crater_http_body(r, &c->len);
    char model[128];
    crater_error_t err;

    if (s->max_batch > 1 && strcmp(method, "POST") == 0
        && infer_model(rest, model, sizeof model)) {
        c->req = gw__v2_parse(model, body, c->len, &err);
        if (c->req == NULL) {
            crater_http_error(resp, &err);
            return -1;
        }
        if (c->req->key == NULL) { /* cannot batch: proxied alone */
            gw__v2_free(c->req);
            c->req = NULL;
        }
    }
    snprintf(c->ctype, sizeof c->ctype, "%s", ct ? ct : "");
    c->method = strdup(method);
    c->path = strdup(rest[0] ? rest : "/");
    if (c->req == NULL && c->len > 0 && (c->body = malloc(c->len)) != NULL)
        memcpy(c->body, body, c->len);
    if (c->method == NULL || c->path == NULL
        || (c->req == NULL && c->len > 0 && c->body == NULL)) {
        fail_resp(resp, CRATER_ENOMEM, "", "out of memory");
        return -1;
    }
    return 0;
}

/* Room in the service's queue? false: resp is the 429. */
static bool admit(gw_t *g, gw_service_t *s, crater_http_resp_t *resp)
{
    char text[160];

    if (atomic_fetch_add(&s->queued, 1) < g->o.queue_max)
        return true;
    atomic_fetch_sub(&s->queued, 1);
    snprintf(text,
             sizeof text,
             "service '%s' has %u requests waiting: try again later",
             s->name,
             g->o.queue_max);
    fail_resp(resp, CRATER_ERATE, "", text);
    resp->headers = strdup("Retry-After: 1");
    return false;
}

static gw_service_t *lookup(gw_t *g,
                            const char *path,
                            const char **rest,
                            crater_http_resp_t *resp)
{
    char name[GW_NAME_MAX + 1], text[200];
    const char *p = path + 1, *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    gw_service_t *s = NULL;

    if (n > 0 && n < sizeof name) {
        memcpy(name, p, n);
        name[n] = '\0';
        s = gw__table_service(g->t, name);
    }
    if (s == NULL) {
        snprintf(text,
                 sizeof text,
                 "no service '%.*s'",
                 (int)(n > 64 ? 64 : n),
                 p);
        fail_resp(resp, CRATER_ENOENT, "service", text);
    }
    *rest = p + n;
    return s;
}

static void h_any(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    gw_t *g = arg;
    const char *rest;
    gw_service_t *s = lookup(g, crater_http_path(r), &rest, resp);
    call_t *c = NULL;

    if (s == NULL)
        return;
    if (atomic_load(&g->draining)) {
        fail_resp(resp,
                  CRATER_EUNAVAIL,
                  "",
                  "gateway draining (shutting down): try another");
        resp->headers = strdup("Retry-After: 1");
    } else if ((c = calloc(1, sizeof(*c))) == NULL) {
        fail_resp(resp, CRATER_ENOMEM, "", "out of memory");
    } else if (prepare(r, resp, s, rest, c) == 0 && admit(g, s, resp)) {
        c->svc = s;
        c->arrive_us = now_us();
        c->deadline_us = c->arrive_us + g->o.timeout_ms * 1000;
        if ((c->p = crater_http_suspend(r)) != NULL) {
            push_inbox(g, c);
            return;
        }
        atomic_fetch_sub(&s->queued, 1);
        fail_resp(resp, CRATER_EUNAVAIL, "", "gateway shutting down");
    }
    call_free(c);
    count(g, s, resp->status);
}

static void publish(gw_service_t *s, void *arg)
{
    gw_t *g = arg;
    const char *lv[] = {s->name};
    unsigned ready = 0, total = 0;

    for (gw_backend_t *b = s->backends; b != NULL; b = b->next) {
        total++;
        ready += b->ready;
    }
    crater_metric_set(g->f.ready, lv, ready);
    crater_metric_set(g->f.total, lv, total);
    crater_metric_set(g->f.depth, lv, atomic_load(&s->queued));
    crater_metric_set(g->f.held, lv, atomic_load(&s->held));
}

char *gw__metrics_render(gw_t *g, size_t *len)
{
    gw__table_services(g->t, publish, g);
    return crater_metrics_render(g->m, len);
}

static void h_metrics(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    gw_t *g = arg;

    (void)r;
    resp->body = gw__metrics_render(g, &resp->len);
    if (resp->body == NULL) {
        fail_resp(resp, CRATER_ENOMEM, "", "out of memory");
        return;
    }
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

/* ---- start and stop ------------------------------------------------- */

static int families(gw_t *g, crater_error_t *err)
{
    static const char *const svc[] = {"service", NULL};
    static const char *const svc_code[] = {"service", "code", NULL};
    static const double rows[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
    static const double secs[] = {0.0005,
                                  0.001,
                                  0.002,
                                  0.005,
                                  0.01,
                                  0.02,
                                  0.05,
                                  0.1,
                                  0.2,
                                  0.5,
                                  1,
                                  2,
                                  5,
                                  10};
    crater_metrics_t *m = g->m;
    fams_t *f = &g->f;

    f->requests = crater_metrics_counter(m,
                                         "crater_gateway_requests_total",
                                         "Requests answered, by service and "
                                         "HTTP status",
                                         svc_code,
                                         err);
    f->batch = crater_metrics_histogram(m,
                                        "crater_gateway_batch_size",
                                        "Rows per batch sent to a backend",
                                        svc,
                                        rows,
                                        9,
                                        err);
    f->queue_s = crater_metrics_histogram(m,
                                          "crater_gateway_queue_seconds",
                                          "Time from a request's arrival to "
                                          "its sending to a backend (batch "
                                          "wait, hold at zero)",
                                          svc,
                                          secs,
                                          14,
                                          err);
    f->backend_s = crater_metrics_histogram(m,
                                            "crater_gateway_backend_seconds",
                                            "Time from sending to a backend to "
                                            "its whole answer",
                                            svc,
                                            secs,
                                            14,
                                            err);
    f->ready = crater_metrics_gauge(m,
                                    "crater_gateway_backends_ready",
                                    "Backends answering their readiness probe",
                                    svc,
                                    err);
    f->total = crater_metrics_gauge(m,
                                    "crater_gateway_backends",
                                    "Backends configured",
                                    svc,
                                    err);
    f->depth = crater_metrics_gauge(m,
                                    "crater_gateway_queue_depth",
                                    "Requests accepted and not yet answered",
                                    svc,
                                    err);
    f->held = crater_metrics_gauge(m,
                                   "crater_gateway_held",
                                   "Requests waiting for a first ready "
                                   "backend (a service at zero)",
                                   svc,
                                   err);
    return f->requests && f->batch && f->queue_s && f->backend_s && f->ready
                   && f->total && f->depth && f->held
               ? 0
               : -1;
}

static void gw_free(gw_t *g)
{
    while (g->nfree > 0)
        curl_easy_cleanup(g->free_h[--g->nfree]);
    if (g->multi != NULL)
        curl_multi_cleanup(g->multi);
    crater_metrics_destroy(g->m);
    crater_router_destroy(g->rt);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void defaults(gw_opts_t *o)
{
    if (o->queue_max == 0)
        o->queue_max = 1024;
    if (o->timeout_ms <= 0)
        o->timeout_ms = 30000;
    if (o->health_ms <= 0)
        o->health_ms = 1000;
}

static int setup(gw_t *g, crater_error_t *err)
{
    if ((g->m = crater_metrics_create()) == NULL
        || (g->rt = crater_router_create()) == NULL
        || (g->multi = curl_multi_init()) == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (families(g, err) < 0
        || crater_router_add(g->rt, "GET", "/metrics", h_metrics, g, err) < 0)
        return -1;
    crater_router_fallback(g->rt, h_any, g);
    curl_multi_setopt(g->multi, CURLMOPT_MAXCONNECTS, 512L);
    if (pthread_create(&g->loop, NULL, loop_main, g) != 0)
        return crater_errorf(err, CRATER_EINTERNAL, "cannot start a thread");
    g->loop_started = true;
    return 0;
}

static void stop_loop(gw_t *g)
{
    if (!g->loop_started)
        return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_mutex_unlock(&g->mu);
    curl_multi_wakeup(g->multi);
    pthread_join(g->loop, NULL);
}

gw_t *gw__start(const gw_opts_t *o, gw_table_t *t, crater_error_t *err)
{
    gw_t *g = calloc(1, sizeof(*g));
    crater_http_opts_t ho;

    if (g == NULL) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    g->t = t;
    g->o = *o;
    defaults(&g->o);
    ho = (crater_http_opts_t){.listen = o->listen,
                              .threads = o->threads,
                              .max_body = o->max_body};
    if (setup(g, err) < 0
        || (g->srv = crater_http_start(&ho, g->rt, err)) == NULL) {
        stop_loop(g);
        gw_free(g);
        return NULL;
    }
    return g;
}

uint16_t gw__port(const gw_t *g)
{
    return crater_http_port(g->srv);
}

void gw__drain(gw_t *g)
{
    atomic_store(&g->draining, true);
}

static void add_queued(gw_service_t *s, void *arg)
{
    *(unsigned *)arg += atomic_load(&s->queued);
}

unsigned gw__inflight(gw_t *g)
{
    unsigned n = 0;

    gw__table_services(g->t, add_queued, &n);
    return n;
}

void gw__stop(gw_t *g)
{
    if (g == NULL)
        return;
    crater_http_stop(g->srv); /* answers suspended requests 503 */
    stop_loop(g);
    gw_free(g);
}
