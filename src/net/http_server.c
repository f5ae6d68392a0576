/* http_server.c - the REST server: libmicrohttpd + the router.
 *
 * Shape. libmicrohttpd runs a pool of epoll event-loop threads
 * (MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL with
 * MHD_OPTION_THREAD_POOL_SIZE); a slow or stalled client costs a socket and a
 * small memory pool, never a thread, and is dropped after conn_timeout_s.
 *
 * Per-request cost. The workload is many small GET requests on keep-alive
 * connections (wrk, the CLI, agents' heartbeats), so state lives in one
 * struct crater_http_req per CONNECTION (MHD_OPTION_NOTIFY_CONNECTION),
 * reset for each request; its body and path buffers are reused. A GET costs
 * no allocation here beyond the handler's body and MHD's response object.
 *
 * Raw paths. MHD percent-decodes the path before the handler sees it, which
 * would turn "/jobs/a%2Fb" into three segments. Our unescape callback leaves
 * the path alone (it recognises it by the pointer the URI-log callback saw
 * first) and decodes query arguments as MHD would; the router then decodes
 * each path segment separately.
 *
 * Body limit. Content-Length above max_body is answered 413 on the first
 * call, before any body is read (MHD then closes the connection). Chunked
 * bodies are counted as they arrive: beyond max_body the data is discarded
 * and the request answered 413 at its end (MHD 0.9.75 cannot queue a
 * response in the middle of an upload); beyond twice max_body the
 * connection is simply closed so a client cannot stream forever.
 *
 * Suspended requests. A pending holds two references: the connection's
 * (dropped when MHD reports the request finished) and the owner's (dropped
 * by crater_http_complete). Its state and each server's list of suspended
 * requests are guarded by one process-wide mutex, so complete() never needs
 * the server to be alive: stop() unlinks every suspended pending, marks it
 * orphaned, stores a 503 and resumes it; a later complete() on an orphan
 * only frees. stop() then waits (up to STOP_DRAIN_MS) until every resumed
 * request's answer, 503 or completed, has been sent. MHD_suspend_connection is
 * called inside crater_http_suspend (on the connection's own thread, as MHD
 * requires) before the pending is visible to anyone, so a resume can never
 * overtake its suspend.
 *
 * Slow clients. MHD's connection timeout is an idle timeout: a client
 * that sends one header line every few seconds is never idle and held a
 * connection forever (4,200 of them filled the 4,096 cap; issue 12). Three
 * guards, per client address:
 *  - MHD_OPTION_PER_IP_CONNECTION_LIMIT (MHD counts it in the master
 *    daemon, so over all pool threads);
 *  - a header deadline per connection (an atomic in its state: set when it
 *    opens or its request line arrives, cleared when the header is
 *    complete, re-armed with the idle timeout added when a request ends).
 *    MHD 0.9.75 has no header timeout, so a sweeper thread walks the list
 *    of open connections a few times a second and shutdown()s the socket
 *    of each one past its deadline; MHD then sees EOF on its own thread
 *    and closes it as usual. The list is guarded by conns_mu and a
 *    connection leaves it in MHD's CLOSED notification, before MHD closes
 *    the descriptor, so the sweeper never touches a reused descriptor;
 *  - a token bucket per address (ratelimit.c), checked when the header is
 *    in; requests the owner's rate_exempt hook vouches for (the daemon:
 *    admin and agent tokens) take no token, so agents sharing an address
 *    with users neither starve them nor get throttled themselves.
 */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "crater/http.h"
#include "crater/log.h"
#include "net/ratelimit.h"

#define DEFAULT_LISTEN "127.0.0.1:7480"
#define DEFAULT_MAX_BODY (4u << 20)
#define CONN_MEMORY_LIMIT (64u << 10)
#define KEEP_BODY_CAP (64u << 10) /* larger body buffers are not kept */
#define STOP_DRAIN_MS 1000        /* how long stop() lets answers go out */
#define DEFAULT_CONN_TIMEOUT_S 30

enum pend_state {
    PEND_SUSPENDED,
    PEND_DONE,
    PEND_ORPHAN
};

struct crater_http_pending {
    crater_http_pending_t *prev, *next; /* srv->suspended, while SUSPENDED */
    crater_http_server_t *srv;
    struct MHD_Connection *conn;
    crater_http_resp_t resp; /* the reply, once DONE or ORPHAN */
    enum pend_state state;
    atomic_int refs;
};

struct crater_http_server {
    struct MHD_Daemon *d;
    crater_router_t *rt;
    uint64_t max_body;
    uint16_t port;
    int listen_fd;
    /* under pend_mu: */
    bool stopping;
    crater_http_pending_t *suspended;
    unsigned unsent; /* resumed pendings (DONE or ORPHAN) not yet sent */
    pthread_cond_t drained;
    /* slow clients (see the file comment) */
    int64_t header_ms, idle_ms;
    crater__rl_t *rl; /* NULL: no rate limit */
    crater_http_exempt_f exempt;
    void *exempt_arg;
    pthread_mutex_t conns_mu;
    crater_http_req_t *conns; /* open connections, under conns_mu */
    pthread_t sweeper;
    bool sweeping, sweep_stop; /* sweep_stop under conns_mu */
    pthread_cond_t sweep_cv;
};

/* One per connection, reset by on_uri() for every request. */
struct crater_http_req {
    crater_http_server_t *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    const char *raw_uri; /* identity of the path for on_unescape() */
    char *body;
    size_t body_len, body_cap;
    uint64_t received;
    bool started, too_large, oom, replied;
    crater_http_pending_t *pending;
    char *segbuf;
    size_t segcap;
    crater_route_match_t m;
    char allow[64];
    /* slow clients */
    crater_http_req_t *cprev, *cnext; /* srv->conns, under conns_mu */
    int fd;
    atomic_llong deadline_ms; /* header deadline (monotonic); 0 = none */
    crater__rl_key_t key;
    bool has_key;
    char *auth_seen; /* the Authorization value rate_exempt was asked for */
    bool auth_exempt;
};

static pthread_mutex_t pend_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- responses ---------------------------------------------------- */

static void resp_init(crater_http_resp_t *resp)
{
    resp->status = 200;
    resp->body = NULL;
    resp->len = 0;
    resp->content_type = "application/json";
    resp->location = NULL;
    resp->headers = NULL;
}

static void resp_release(crater_http_resp_t *resp)
{
    free(resp->body);
    free(resp->location);
    free(resp->headers);
    resp->body = NULL;
    resp->location = NULL;
    resp->headers = NULL;
    resp->len = 0;
}

/* The JSON error body with an explicit status (405 has no errno). */
static void error_body(crater_http_resp_t *resp,
                       int status,
                       crater_errno_t code,
                       const char *text,
                       const char *field)
{
    json_t *o = json_object();

    free(resp->body);
    resp->body = NULL;
    resp->len = 0;
    resp->status = status;
    resp->content_type = "application/json";
    if (o == NULL || json_object_set_new(o, "error", json_string(text)) < 0
        || (field != NULL && field[0] != '\0'
            && json_object_set_new(o, "field", json_string(field)) < 0)
        || json_object_set_new(o, "code", json_string(crater_errno_name(code)))
               < 0) {
        json_decref(o);
        resp->status = 500;
        return;
    }
    resp->body = json_dumps(o, JSON_COMPACT);
    resp->len = resp->body != NULL ? strlen(resp->body) : 0;
    if (resp->body == NULL)
        resp->status = 500;
    json_decref(o);
}

void crater_http_error(crater_http_resp_t *resp, const crater_error_t *err)
{
    error_body(resp,
               crater_errno_http_status(err->errnum),
               err->errnum,
               err->text,
               err->field);
}

int crater_http_json(crater_http_resp_t *resp, int status, json_t *v)
{
    char *s = v != NULL ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    json_decref(v);
    if (s == NULL) {
        error_body(resp, 500, CRATER_ENOMEM, "out of memory", NULL);
        return -1;
    }
    free(resp->body);
    resp->body = s;
    resp->len = strlen(s);
    resp->status = status;
    resp->content_type = "application/json";
    return 0;
}

static void fail(crater_http_resp_t *resp,
                 int status,
                 crater_errno_t code,
                 const char *fmt,
                 ...) __attribute__((format(printf, 4, 5)));

static void fail(crater_http_resp_t *resp,
                 int status,
                 crater_errno_t code,
                 const char *fmt,
                 ...)
{
    char text[CRATER_ERROR_TEXT];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    error_body(resp, status, code, text, NULL);
}

/* Add the handler's "Name: value\r\n..." lines; edits the buffer. */
static void add_extra_headers(struct MHD_Response *mr, char *h)
{
    while (h != NULL && *h != '\0') {
        char *end = strchr(h, '\n'), *colon, *v;
        if (end != NULL)
            *end = '\0';
        if (end != NULL && end > h && end[-1] == '\r')
            end[-1] = '\0';
        colon = strchr(h, ':');
        if (colon != NULL && colon > h) {
            *colon = '\0';
            for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
                ;
            MHD_add_response_header(mr, h, v);
        }
        h = end != NULL ? end + 1 : NULL;
    }
}

/* Hand resp (its buffers) to MHD. */
static enum MHD_Result queue(crater_http_req_t *r, crater_http_resp_t *resp)
{
    struct MHD_Response *mr;
    enum MHD_Result ret;
    unsigned status = (unsigned)resp->status;

    r->replied = true;
    if (status < 100 || status > 999)
        status = 500;
    mr = MHD_create_response_from_buffer_with_free_callback(resp->body != NULL
                                                                ? resp->len
                                                                : 0,
                                                            resp->body,
                                                            free);
    if (mr == NULL) {
        resp_release(resp);
        return MHD_NO;
    }
    resp->body = NULL; /* owned by mr now */
    if (resp->content_type != NULL)
        MHD_add_response_header(mr,
                                MHD_HTTP_HEADER_CONTENT_TYPE,
                                resp->content_type);
    if (resp->location != NULL)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_LOCATION, resp->location);
    add_extra_headers(mr, resp->headers);
    if (status == 405 && r->allow[0] != '\0')
        MHD_add_response_header(mr, MHD_HTTP_HEADER_ALLOW, r->allow);
    resp_release(resp);
    ret = MHD_queue_response(r->conn, status, mr);
    MHD_destroy_response(mr);
    return ret;
}

static enum MHD_Result reply_error(crater_http_req_t *r,
                                   int status,
                                   crater_errno_t code,
                                   const char *text)
{
    crater_http_resp_t resp;

    resp_init(&resp);
    error_body(&resp, status, code, text, NULL);
    return queue(r, &resp);
}

/* ---- request accessors --------------------------------------------- */

const char *crater_http_method(const crater_http_req_t *r)
{
    return r->method;
}

const char *crater_http_path(const crater_http_req_t *r)
{
    return r->path;
}

const char *crater_http_query(const crater_http_req_t *r, const char *name)
{
    const char *v = NULL;
    size_t len = 0;

    if (MHD_lookup_connection_value_n(r->conn,
                                      MHD_GET_ARGUMENT_KIND,
                                      name,
                                      strlen(name),
                                      &v,
                                      &len)
        != MHD_YES)
        return NULL;
    return v != NULL ? v : "";
}

const char *crater_http_header(const crater_http_req_t *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *crater_http_param(const crater_http_req_t *r, const char *name)
{
    for (unsigned i = 0; i < r->m.nparams; i++)
        if (strcmp(r->m.names[i], name) == 0)
            return r->m.values[i];
    return NULL;
}

const char *crater_http_body(const crater_http_req_t *r, size_t *len)
{
    if (len != NULL)
        *len = r->body_len;
    return r->body_len > 0 ? r->body : "";
}

int crater_http_peer(const crater_http_req_t *r, char *buf, size_t n)
{
    const union MHD_ConnectionInfo *ad =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ad != NULL ? ad->client_addr : NULL;
    socklen_t len = sa && sa->sa_family == AF_INET6
                        ? sizeof(struct sockaddr_in6)
                        : sizeof(struct sockaddr_in);

    if (n)
        buf[0] = '\0';
    if (!sa || n == 0
        || getnameinfo(sa, len, buf, (socklen_t)n, NULL, 0, NI_NUMERICHOST)
               != 0)
        return -1;
    return 0;
}

/* ---- suspend / complete ------------------------------------------- */

static void pend_unref(crater_http_pending_t *p)
{
    if (atomic_fetch_sub(&p->refs, 1) == 1) {
        resp_release(&p->resp);
        free(p);
    }
}

static void pend_unlink(crater_http_pending_t *p)
{
    crater_http_server_t *s = p->srv;

    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        s->suspended = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    p->prev = p->next = NULL;
}

crater_http_pending_t *crater_http_suspend(crater_http_req_t *r)
{
    crater_http_pending_t *p;

    if (r->pending != NULL)
        return NULL; /* only once per request */
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->srv = r->srv;
    p->conn = r->conn;
    p->state = PEND_SUSPENDED;
    resp_init(&p->resp);
    atomic_init(&p->refs, 2);
    pthread_mutex_lock(&pend_mu);
    if (r->srv->stopping) {
        pthread_mutex_unlock(&pend_mu);
        free(p);
        return NULL;
    }
    p->next = r->srv->suspended;
    if (p->next != NULL)
        p->next->prev = p;
    r->srv->suspended = p;
    MHD_suspend_connection(r->conn);
    r->pending = p;
    pthread_mutex_unlock(&pend_mu);
    return p;
}

void crater_http_complete(crater_http_pending_t *p, crater_http_resp_t *resp)
{
    pthread_mutex_lock(&pend_mu);
    if (p->state == PEND_SUSPENDED) {
        p->resp = *resp;
        p->state = PEND_DONE;
        p->srv->unsent++;
        pend_unlink(p);
        MHD_resume_connection(p->conn);
    } else {
        resp_release(resp); /* orphaned by stop(): already answered 503 */
    }
    pthread_mutex_unlock(&pend_mu);
    resp->body = NULL;
    resp->location = NULL;
    resp->headers = NULL;
    resp->len = 0;
    pend_unref(p);
}

/* The access handler's call after a resume: send what complete() left. */
static enum MHD_Result reply_resumed(crater_http_req_t *r)
{
    crater_http_resp_t resp;

    if (r->replied)
        return MHD_YES;
    pthread_mutex_lock(&pend_mu);
    resp = r->pending->resp;
    resp_init(&r->pending->resp);
    pthread_mutex_unlock(&pend_mu);
    return queue(r, &resp);
}

/* The connection's side is done with the pending (request finished). */
static void release_pending(crater_http_req_t *r)
{
    crater_http_pending_t *p = r->pending;

    r->pending = NULL;
    pthread_mutex_lock(&pend_mu);
    if (p->state != PEND_SUSPENDED && --p->srv->unsent == 0)
        pthread_cond_broadcast(&p->srv->drained);
    pthread_mutex_unlock(&pend_mu);
    pend_unref(p);
}

/* ---- slow clients (see the file comment) --------------------------- */

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Set the header deadline to at; with only_earlier, keep an earlier one. */
static void arm_deadline(crater_http_req_t *r, int64_t at, bool only_earlier)
{
    long long cur = atomic_load(&r->deadline_ms);

    if (r->srv->header_ms == 0)
        return;
    if (only_earlier && cur != 0 && cur <= at)
        return;
    atomic_store(&r->deadline_ms, at);
}

/* Does the owner vouch for this request? Asked once per Authorization
 * value per connection. */
static bool rate_exempt(crater_http_req_t *r)
{
    const char *h = crater_http_header(r, "Authorization");

    if (r->srv->exempt == NULL || h == NULL)
        return false;
    if (r->auth_seen != NULL && strcmp(r->auth_seen, h) == 0)
        return r->auth_exempt;
    free(r->auth_seen);
    r->auth_seen = strdup(h);
    r->auth_exempt = r->srv->exempt(r, r->srv->exempt_arg);
    if (r->auth_seen == NULL)
        return r->auth_exempt; /* asked again next time */
    return r->auth_exempt;
}

/* true: the request must be refused, after *retry_s seconds it would not */
static bool over_rate(crater_http_req_t *r, unsigned *retry_s)
{
    if (r->srv->rl == NULL || !r->has_key || rate_exempt(r))
        return false;
    return !crater__rl_take(r->srv->rl, &r->key, mono_ms(), retry_s);
}

static enum MHD_Result too_many(crater_http_req_t *r, unsigned retry_s)
{
    crater_http_resp_t resp;
    char hdr[48];

    resp_init(&resp);
    fail(&resp,
         429,
         CRATER_ERATE,
         "too many requests from this address: retry after %u s",
         retry_s);
    snprintf(hdr, sizeof hdr, "Retry-After: %u", retry_s);
    resp.headers = strdup(hdr); /* NULL: answered without it */
    return queue(r, &resp);
}

static void conns_add(crater_http_server_t *s, crater_http_req_t *r)
{
    pthread_mutex_lock(&s->conns_mu);
    r->cnext = s->conns;
    if (r->cnext != NULL)
        r->cnext->cprev = r;
    s->conns = r;
    pthread_mutex_unlock(&s->conns_mu);
}

static void conns_del(crater_http_server_t *s, crater_http_req_t *r)
{
    pthread_mutex_lock(&s->conns_mu);
    if (r->cprev != NULL)
        r->cprev->cnext = r->cnext;
    else
        s->conns = r->cnext;
    if (r->cnext != NULL)
        r->cnext->cprev = r->cprev;
    r->cprev = r->cnext = NULL;
    pthread_mutex_unlock(&s->conns_mu);
}

/* Under conns_mu: end every connection past its header deadline. */
static unsigned sweep_once(crater_http_server_t *s, int64_t now)
{
    unsigned n = 0;

    for (crater_http_req_t *r = s->conns; r != NULL; r = r->cnext) {
        long long at = atomic_load(&r->deadline_ms);
        if (at == 0 || at > now)
            continue;
        atomic_store(&r->deadline_ms, 0); /* once: MHD closes it now */
        shutdown(r->fd, SHUT_RDWR);
        n++;
    }
    return n;
}

static void *sweep_main(void *arg)
{
    crater_http_server_t *s = arg;
    int64_t step = s->header_ms / 4;
    struct timespec until;
    unsigned n;

    pthread_setname_np(pthread_self(), "http-sweep"); /* top -H, perf, gdb */

    step = step < 100 ? 100 : step > 1000 ? 1000 : step;
    pthread_mutex_lock(&s->conns_mu);
    while (!s->sweep_stop) {
        n = sweep_once(s, mono_ms());
        if (n > 0)
            crater_debug(CRATER_SUB_NET,
                         "closed %u connection(s) past the header timeout",
                         n);
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)(step % 1000) * 1000000;
        until.tv_sec += (time_t)(step / 1000) + until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        pthread_cond_timedwait(&s->sweep_cv, &s->conns_mu, &until);
    }
    pthread_mutex_unlock(&s->conns_mu);
    return NULL;
}

/* ---- request flow --------------------------------------------------- */

static int ensure_segbuf(crater_http_req_t *r, size_t need)
{
    char *b;

    if (need <= r->segcap)
        return 0;
    b = realloc(r->segbuf, need);
    if (b == NULL)
        return -1;
    r->segbuf = b;
    r->segcap = need;
    return 0;
}

static enum MHD_Result dispatch(crater_http_req_t *r)
{
    crater_http_resp_t resp;
    int code = 500;

    resp_init(&resp);
    if (r->oom) {
        fail(&resp, 500, CRATER_ENOMEM, "out of memory reading the body");
        return queue(r, &resp);
    }
    if (ensure_segbuf(r, strlen(r->path) + 1) == 0)
        code = crater_router_match(r->srv->rt,
                                   r->method,
                                   r->path,
                                   r->segbuf,
                                   r->segcap,
                                   &r->m,
                                   r->allow,
                                   sizeof r->allow);
    if (code == 200) {
        r->m.fn(r, &resp, r->m.arg);
        if (r->pending != NULL) {
            resp_release(&resp); /* the reply comes from complete() */
            return MHD_YES;
        }
    } else if (code == 404) {
        fail(&resp,
             404,
             CRATER_ENOENT,
             "no route for %s %.100s",
             r->method,
             r->path);
    } else if (code == 405) {
        fail(&resp,
             405,
             CRATER_EINVAL,
             "method %s not allowed for %.100s",
             r->method,
             r->path);
    } else if (code == 400) {
        fail(&resp, 400, CRATER_EINVAL, "bad percent-encoding in path");
    } else {
        fail(&resp, 500, CRATER_ENOMEM, "out of memory");
    }
    return queue(r, &resp);
}

static enum MHD_Result too_large(crater_http_req_t *r)
{
    char text[CRATER_ERROR_TEXT];

    snprintf(text,
             sizeof text,
             "request body exceeds the limit of %llu bytes",
             (unsigned long long)r->srv->max_body);
    return reply_error(r, 413, CRATER_ELIMIT, text);
}

/* First call: headers are in. Refuse a too large body before reading it
 * (MHD then closes the connection), otherwise prepare to receive it. */
static enum MHD_Result first_call(crater_http_req_t *r,
                                  const char *url,
                                  const char *method)
{
    const char *cl =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    const char *te = MHD_lookup_connection_value(r->conn,
                                                 MHD_HEADER_KIND,
                                                 "Transfer-Encoding");
    unsigned long long n = cl != NULL ? strtoull(cl, NULL, 10) : 0;
    unsigned retry_s = 1;

    atomic_store(&r->deadline_ms, 0); /* the header is complete */
    r->started = true;
    r->method = method;
    r->path = url;
    /* answered at once: MHD closes the connection after it (see below),
     * which suits a client over its rate */
    if (over_rate(r, &retry_s))
        return too_many(r, retry_s);
    if (n > r->srv->max_body)
        return too_large(r);
    /* Even a bodiless request is dispatched on the next ("final") call:
     * MHD 0.9.75 closes the connection after a response queued this
     * early, which would defeat keep-alive. */
    if (n == 0 && te == NULL)
        return MHD_YES;
    if (n + 1 > r->body_cap) {
        char *b = realloc(r->body, n + 1);
        if (b == NULL)
            return reply_error(r, 500, CRATER_ENOMEM, "out of memory");
        r->body = b;
        r->body_cap = n + 1;
    }
    return MHD_YES;
}

/* A piece of the body. false: close the connection. */
static bool take_body(crater_http_req_t *r, const char *data, size_t len)
{
    uint64_t max = r->srv->max_body;
    size_t need;

    r->received += len;
    if (r->received > 2 * max)
        return false;
    if (r->received > max)
        r->too_large = true;
    if (r->too_large || r->oom)
        return true;
    need = r->body_len + len + 1;
    if (need > r->body_cap) {
        size_t cap = r->body_cap * 2 > need ? r->body_cap * 2 : need;
        char *b = realloc(r->body, cap);
        if (b == NULL) {
            r->oom = true;
            return true;
        }
        r->body = b;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, len);
    r->body_len += len;
    r->body[r->body_len] = '\0';
    return true;
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload,
                                  size_t *upload_size,
                                  void **req_cls)
{
    crater_http_req_t *r = *req_cls;

    (void)cls;
    (void)conn;
    (void)version;
    if (r == NULL)
        return MHD_NO; /* no per-connection state: out of memory */
    if (r->pending != NULL)
        return reply_resumed(r);
    if (!r->started)
        return first_call(r, url, method);
    if (*upload_size != 0) {
        bool keep = take_body(r, upload, *upload_size);
        *upload_size = 0;
        return keep ? MHD_YES : MHD_NO;
    }
    if (r->replied)
        return MHD_YES;
    if (r->too_large)
        return too_large(r);
    return dispatch(r);
}

/* ---- MHD callbacks around the request ----------------------------- */

/* A new connection's state: its address, descriptor and header deadline. */
static void conn_init(crater_http_server_t *s,
                      crater_http_req_t *r,
                      struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ad != NULL ? ad->client_addr : NULL;

    r->srv = s;
    r->conn = conn;
    r->fd = fd != NULL ? fd->connect_fd : -1;
    atomic_init(&r->deadline_ms, 0);
    r->has_key = sa != NULL
                 && crater__rl_key(sa,
                                   sa->sa_family == AF_INET6
                                       ? sizeof(struct sockaddr_in6)
                                       : sizeof(struct sockaddr_in),
                                   &r->key)
                        == 0;
    if (s->header_ms > 0 && r->fd >= 0) {
        arm_deadline(r, mono_ms() + s->header_ms, false);
        conns_add(s, r);
    }
}

static void on_connection(void *cls,
                          struct MHD_Connection *conn,
                          void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
    crater_http_req_t *r = *socket_ctx;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        r = calloc(1, sizeof(*r));
        if (r != NULL)
            conn_init(cls, r, conn);
        *socket_ctx = r;
        return;
    }
    if (r != NULL) {
        if (r->srv->header_ms > 0)
            conns_del(r->srv, r);
        free(r->auth_seen);
        free(r->body);
        free(r->segbuf);
        free(r);
    }
    *socket_ctx = NULL;
}

static crater_http_req_t *conn_req(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci != NULL ? ci->socket_context : NULL;
}

/* Called once per request, first: reset the connection's request state.
 * The return value becomes the request's context (*req_cls). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    crater_http_req_t *r = conn_req(conn);

    (void)cls;
    if (r == NULL)
        return NULL;
    arm_deadline(r, mono_ms() + r->srv->header_ms, true);
    r->raw_uri = uri;
    r->method = r->path = NULL;
    r->body_len = 0;
    r->received = 0;
    r->started = r->too_large = r->oom = r->replied = false;
    r->pending = NULL;
    r->m.nparams = 0;
    r->allow[0] = '\0';
    return r;
}

static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    crater_http_req_t *r = conn_req(conn);

    (void)cls;
    if (r != NULL && s == r->raw_uri)
        return strlen(s); /* the path: the router decodes per segment */
    return MHD_http_unescape(s);
}

static void on_completed(void *cls,
                         struct MHD_Connection *conn,
                         void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    crater_http_req_t *r = *req_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (r == NULL)
        return;
    if (r->pending != NULL)
        release_pending(r);
    /* the next request line may take the idle timeout to start */
    arm_deadline(r, mono_ms() + r->srv->idle_ms + r->srv->header_ms, false);
    if (r->body_cap > KEEP_BODY_CAP) {
        free(r->body);
        r->body = NULL;
        r->body_cap = 0;
    }
    r->body_len = 0;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[256];
    size_t n;

    (void)cls;
    if (!(crater_log_get_debug() & CRATER_SUB_NET))
        return;
    vsnprintf(buf, sizeof buf, fmt, ap);
    n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    crater_debug(CRATER_SUB_NET, "libmicrohttpd: %s", buf);
}

/* ---- start / stop -------------------------------------------------- */

/* "host:port" or "[v6]:port" -> host and port strings in buf. */
static int split_listen(const char *spec,
                        char *host,
                        size_t cap,
                        const char **port,
                        crater_error_t *err)
{
    const char *colon;
    size_t hlen;

    if (spec[0] == '[') {
        const char *end = strchr(spec, ']');
        if (end == NULL || end[1] != ':')
            goto bad;
        spec++;
        hlen = (size_t)(end - spec);
        colon = end + 1;
    } else {
        colon = strrchr(spec, ':');
        if (colon == NULL)
            goto bad;
        hlen = (size_t)(colon - spec);
    }
    if (hlen >= cap || colon[1] == '\0'
        || strspn(colon + 1, "0123456789") != strlen(colon + 1)
        || strtoul(colon + 1, NULL, 10) > 65535)
        goto bad;
    memcpy(host, spec, hlen);
    host[hlen] = '\0';
    *port = colon + 1;
    return 0;
bad:
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               "listen",
                               "bad listen address '%s': expected host:port "
                               "or [v6]:port",
                               spec);
}

static int bind_socket(const struct addrinfo *ai,
                       const char *spec,
                       crater_error_t *err)
{
    int one = 1;
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

    if (fd < 0)
        return crater_errorf(err,
                             CRATER_EIO,
                             "cannot listen on %s: %s",
                             spec,
                             strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0) {
        int e = errno;
        close(fd);
        return crater_errorf(err,
                             CRATER_EIO,
                             "cannot listen on %s: %s",
                             spec,
                             strerror(e));
    }
    return fd;
}

/* Bind and listen; returns the socket and fills *port. */
static int open_listener(const char *spec, uint16_t *port, crater_error_t *err)
{
    char host[256];
    const char *service = NULL;
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd, rc;

    if (split_listen(spec, host, sizeof host, &service, err) < 0)
        return -1;
    rc = getaddrinfo(host[0] ? host : NULL, service, &hints, &res);
    if (rc != 0)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "listen",
                                   "bad listen address '%s': %s",
                                   spec,
                                   gai_strerror(rc));
    fd = bind_socket(res, spec, err);
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *port =
        ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                       : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

static struct MHD_Daemon *start_mhd(crater_http_server_t *s,
                                    const crater_http_opts_t *o)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned threads =
        o->threads ? o->threads : (ncpu > 0 ? (unsigned)ncpu : 1);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL
                     | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem ops[] = {
        {MHD_OPTION_CONNECTION_TIMEOUT, s->idle_ms / 1000, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, o->max_conns ? o->max_conns : 4096, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, CONN_MEMORY_LIMIT, NULL},
        {MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_conns_per_client, NULL},
        {MHD_OPTION_THREAD_POOL_SIZE, threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };

    if (threads < 2)
        ops[4].option = MHD_OPTION_END; /* MHD wants no pool for one */
    return MHD_start_daemon(flags,
                            0,
                            NULL,
                            NULL,
                            on_request,
                            s,
                            MHD_OPTION_ARRAY,
                            ops,
                            MHD_OPTION_LISTEN_SOCKET,
                            s->listen_fd,
                            MHD_OPTION_NOTIFY_CONNECTION,
                            on_connection,
                            s,
                            MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed,
                            s,
                            MHD_OPTION_URI_LOG_CALLBACK,
                            on_uri,
                            s,
                            MHD_OPTION_UNESCAPE_CALLBACK,
                            on_unescape,
                            s,
                            MHD_OPTION_EXTERNAL_LOGGER,
                            on_mhd_log,
                            s,
                            MHD_OPTION_END);
}

static int init_cond(pthread_cond_t *c)
{
    pthread_condattr_t a;
    int rc;

    if (pthread_condattr_init(&a) != 0)
        return -1;
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    rc = pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
    return rc == 0 ? 0 : -1;
}

/* The slow-client guards' state; -1 (err filled) on a bad rate. */
static int guards_init(crater_http_server_t *s,
                       const crater_http_opts_t *o,
                       crater_error_t *err)
{
    unsigned burst = o->burst;

    s->header_ms = o->header_timeout_ms;
    s->idle_ms = (int64_t)(o->conn_timeout_s ? o->conn_timeout_s
                                             : DEFAULT_CONN_TIMEOUT_S)
                 * 1000;
    s->exempt = o->rate_exempt;
    s->exempt_arg = o->rate_exempt_arg;
    if (o->rate <= 0)
        return 0;
    if (burst == 0)
        burst = o->rate < 1 ? 1 : (unsigned)(o->rate + 0.999);
    s->rl = crater__rl_create(o->rate, burst);
    if (s->rl == NULL)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "requestRate",
                                   "bad request rate %g (0 to 1e6 per s)",
                                   o->rate);
    return 0;
}

static int sweeper_start(crater_http_server_t *s, crater_error_t *err)
{
    if (s->header_ms == 0)
        return 0;
    if (pthread_create(&s->sweeper, NULL, sweep_main, s) != 0)
        return crater_errorf(err,
                             CRATER_EINTERNAL,
                             "cannot start the header-timeout thread");
    s->sweeping = true;
    return 0;
}

static void sweeper_stop(crater_http_server_t *s)
{
    if (!s->sweeping)
        return;
    pthread_mutex_lock(&s->conns_mu);
    s->sweep_stop = true;
    pthread_cond_signal(&s->sweep_cv);
    pthread_mutex_unlock(&s->conns_mu);
    pthread_join(s->sweeper, NULL);
    s->sweeping = false;
}

static void server_free(crater_http_server_t *s)
{
    crater__rl_destroy(s->rl);
    pthread_cond_destroy(&s->sweep_cv);
    pthread_mutex_destroy(&s->conns_mu);
    pthread_cond_destroy(&s->drained);
    free(s);
}

crater_http_server_t *crater_http_start(const crater_http_opts_t *o,
                                        crater_router_t *rt,
                                        crater_error_t *err)
{
    const char *spec = o->listen != NULL ? o->listen : DEFAULT_LISTEN;
    crater_http_server_t *s = calloc(1, sizeof(*s));

    if (s == NULL || init_cond(&s->drained) < 0) {
        free(s);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (init_cond(&s->sweep_cv) < 0) {
        pthread_cond_destroy(&s->drained);
        free(s);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->conns_mu, NULL);
    s->rt = rt;
    s->max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY;
    if (guards_init(s, o, err) < 0)
        goto fail;
    s->listen_fd = open_listener(spec, &s->port, err);
    if (s->listen_fd < 0)
        goto fail;
    s->d = start_mhd(s, o);
    if (s->d == NULL) {
        /* MHD may or may not have closed the socket on its failure paths;
         * closing it again could close someone else's descriptor, so a
         * failed start may leak this one descriptor. */
        crater_errorf(err,
                      CRATER_EINTERNAL,
                      "cannot start the HTTP server on %s",
                      spec);
        goto fail;
    }
    if (sweeper_start(s, err) < 0) {
        MHD_stop_daemon(s->d);
        goto fail;
    }
    return s;
fail:
    server_free(s);
    return NULL;
}

uint16_t crater_http_port(const crater_http_server_t *s)
{
    return s->port;
}

/* Answer every suspended request 503 and wait (bounded) for every resumed
 * request's answer to be sent: the 503s, and the answers complete() handed
 * over just before (a gateway's drain completes its last request and then
 * stops; MHD_stop_daemon() would close that connection unsent). */
static void orphan_suspended(crater_http_server_t *s)
{
    struct timespec until;
    crater_http_pending_t *p;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += STOP_DRAIN_MS / 1000;
    pthread_mutex_lock(&pend_mu);
    s->stopping = true;
    while ((p = s->suspended) != NULL) {
        pend_unlink(p);
        p->state = PEND_ORPHAN;
        fail(&p->resp, 503, CRATER_EUNAVAIL, "server shutting down");
        s->unsent++;
        MHD_resume_connection(p->conn);
    }
    while (s->unsent > 0)
        if (pthread_cond_timedwait(&s->drained, &pend_mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&pend_mu);
}

/* No MHD_quiesce_daemon() first: with a thread pool and epoll it races
 * the worker threads (both remove the listen socket from a worker's epoll
 * set, and the loser hits MHD_PANIC, which aborts; seen once at a Ctrl-C
 * of crater up under load, libmicrohttpd 0.9.75). Connections accepted
 * while the suspended ones drain are served normally; a new suspend is
 * refused (s->stopping). MHD_stop_daemon() closes the listen socket. */
void crater_http_stop(crater_http_server_t *s)
{
    if (s == NULL)
        return;
    orphan_suspended(s);
    sweeper_stop(s);
    MHD_stop_daemon(s->d);
    server_free(s);
}
