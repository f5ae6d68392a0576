/* http.h - Crater's HTTP server: a router over libmicrohttpd.
 *
 * The daemon registers handlers on a router, then starts a server with it:
 *
 *     crater_router_t *rt = crater_router_create();
 *     crater_router_add(rt, "GET", "/api/v1/jobs/{id}", get_job, ctx, &err);
 *     crater_http_server_t *s = crater_http_start(&opts, rt, &err);
 *     ...
 *     crater_http_stop(s);
 *     crater_router_destroy(rt);
 *
 * Threads. The server runs a pool of event-loop threads (epoll); a handler
 * runs on whichever pool thread owns the connection, so handlers for
 * different requests run CONCURRENTLY and must synchronise any shared state
 * themselves. A handler must not block for long: it holds a pool thread.
 * To wait for something (long poll, work for an agent), suspend the request
 * (crater_http_suspend) and complete it later from any thread.
 *
 * Errors the server produces itself are JSON, like every API error:
 *   404 {"error": "no route for GET /x", "code": "ENOENT"}
 *   405 with an Allow header when the path exists with other methods,
 *   413 when a body exceeds opts.max_body (Content-Length is checked before
 *       the body is read; chunked bodies are counted as they arrive),
 *   400 for a malformed percent-encoding in the path,
 *   429 with Retry-After for a client over its request rate (opts.rate).
 * HEAD is served by the GET handler when no HEAD route exists (the body is
 * not sent).
 */
#ifndef CRATER_HTTP_H
#define CRATER_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

/* Maximum number of {param} segments in one route pattern. */
#define CRATER_HTTP_MAX_PARAMS 8

/* One request. Opaque; valid only during the handler call (a suspended
 * request may not be touched after the handler returns). All strings
 * returned by the accessors below are owned by the request. */
typedef struct crater_http_req crater_http_req_t;

const char *crater_http_method(const crater_http_req_t *r); /* "GET" ... */
/* The path as sent, without the query string (not percent-decoded). */
const char *crater_http_path(const crater_http_req_t *r);
/* Query parameter, url-decoded ('+' is a space); NULL if absent, "" when
 * given without a value ("?watch"). */
const char *crater_http_query(const crater_http_req_t *r, const char *name);
/* Request header, name matched case-insensitively; NULL if absent. */
const char *crater_http_header(const crater_http_req_t *r, const char *name);
/* Path parameter named in the route pattern ({id}), percent-decoded;
 * NULL if the route has no such parameter. */
const char *crater_http_param(const crater_http_req_t *r, const char *name);
/* The request body, NUL-terminated; "" (len 0) when none. len may be NULL.
 * The body may itself contain NUL bytes: use len. */
const char *crater_http_body(const crater_http_req_t *r, size_t *len);
/* The client's address as numeric text ("127.0.0.1", "::1") into buf;
 * -1 (buf "") when unknown. */
int crater_http_peer(const crater_http_req_t *r, char *buf, size_t n);

/* The handler's answer. The server initialises it (status 200, no body,
 * "application/json", no location or headers) before calling the handler.
 * Initialise one you fill yourself (for crater_http_complete) with
 * designated initialisers so unused pointers are NULL. */
typedef struct crater_http_resp {
    int status;               /* default 200 */
    char *body;               /* malloc'd; the server frees it after sending */
    size_t len;               /* bytes of body */
    const char *content_type; /* static string; default "application/json" */
    char *location; /* optional malloc'd Location value; server frees it */
    /* optional malloc'd extra headers, "Name: value" lines separated by
     * "\r\n" ("X-A: 1\r\nX-B: 2"); the server frees it. Lines without a
     * colon are ignored. */
    char *headers;
} crater_http_resp_t;

/* Fill resp with a JSON error {"error": err->text, "field": err->field
 * (omitted when empty), "code": "ENOENT"} and the status from
 * crater_errno_http_status(err->errnum). Any previous resp->body is freed.
 * On out-of-memory resp becomes a 500 with an empty body. */
void crater_http_error(crater_http_resp_t *resp, const crater_error_t *err);

/* Steal a jansson value: serialise it compactly into resp->body with
 * status, then decref v (v may be NULL, which counts as out of memory).
 * Any previous resp->body is freed. Returns 0, or -1 on ENOMEM, in which
 * case resp is a 500 JSON error. */
int crater_http_json(crater_http_resp_t *resp, int status, json_t *v);

/* Long poll / asynchronous completion.
 *
 * A handler may call crater_http_suspend(r) and return: the connection then
 * waits, holding no server thread and with no idle timeout, until
 * crater_http_complete(p, resp) is called from ANY thread (even before the
 * handler has returned), exactly once per pending. complete() takes resp's
 * buffers (body, location, headers) and the caller must not use p afterwards.
 * Once the handler has suspended, whatever it leaves in its own resp is freed
 * and ignored.
 *
 * If the client has gone away meanwhile, complete() still works; the
 * response is dropped when the send fails.
 *
 * crater_http_stop() with requests still suspended: the server answers
 * each of them 503 {"error": "server shutting down", "code": "EUNAVAIL"}
 * before closing, and keeps their pending objects alive; the owner's later
 * crater_http_complete(p, resp) on such an orphan just frees resp's buffers
 * and the pending. So every pending must still be completed exactly once,
 * before or after stop; one that never is leaks a small object. */
typedef struct crater_http_pending crater_http_pending_t;

/* NULL on out-of-memory or when the server is stopping; the handler then
 * fills its resp normally (e.g. a 503). */
crater_http_pending_t *crater_http_suspend(crater_http_req_t *r);
void crater_http_complete(crater_http_pending_t *p, crater_http_resp_t *resp);

/* r and resp are valid during the call only; arg is the route's. */
typedef void (*crater_http_handler_f)(crater_http_req_t *r,
                                      crater_http_resp_t *resp,
                                      void *arg);

/* Router: method + pattern -> handler. Matching is segment by segment;
 * a static segment beats a {param} at the same position; a trailing slash
 * on the request path is tolerated ("/jobs/" matches "/jobs"). Parameter
 * values are percent-decoded. Routes are added before the server starts;
 * the router is read-only (and so thread-safe) while serving. */
typedef struct crater_router crater_router_t;

crater_router_t *crater_router_create(void);     /* NULL on ENOMEM */
void crater_router_destroy(crater_router_t *rt); /* NULL accepted */
/* pattern: "/api/v1/jobs/{id}/explain". method and pattern are copied.
 * Returns 0, or -1 (EINVAL: bad pattern, more than CRATER_HTTP_MAX_PARAMS
 * params, duplicate route; ENOMEM). */
int crater_router_add(crater_router_t *rt,
                      const char *method,
                      const char *pattern,
                      crater_http_handler_f fn,
                      void *arg,
                      crater_error_t *err);

/* A handler for every request no route matches, whatever its method and
 * path (a gateway's catch-all; it reads crater_http_path()). Without one,
 * such requests get 404 or 405 as above. fn NULL removes it. Set before
 * the server starts. */
void crater_router_fallback(crater_router_t *rt,
                            crater_http_handler_f fn,
                            void *arg);

/* Result of a router lookup (used by the server; exposed for tests). */
typedef struct crater_route_match {
    crater_http_handler_f fn;
    void *arg;
    unsigned nparams;
    const char *names[CRATER_HTTP_MAX_PARAMS];
    const char *values[CRATER_HTTP_MAX_PARAMS]; /* point into segs buffer */
} crater_route_match_t;

/* Match a request. path is the raw path; buf (cap bytes) receives the
 * decoded segments that m->values point into. Returns 200 with *m filled,
 * 404 (no route for the path), 405 (path known, other methods: allow gets
 * "GET, POST", NUL-terminated, if allow_cap > 0), 400 (bad escape) or
 * 500 (path longer than cap - 1). */
int crater_router_match(const crater_router_t *rt,
                        const char *method,
                        const char *path,
                        char *buf,
                        size_t cap,
                        crater_route_match_t *m,
                        char *allow,
                        size_t allow_cap);

/* A number in a path or query value: 1 to 20 ASCII digits and nothing
 * else (no sign, space or 0x), at most max. Returns 0 with *out set, or
 * -1 (then *out is untouched). */
int crater_http_parse_uint(const char *s, uint64_t max, uint64_t *out);

/* Asked, on a pool thread, whether a request is exempt from the per-client
 * request rate (the daemon exempts admin and agent tokens). Only requests
 * that carry an Authorization header are asked; the answer is cached per
 * connection while the header stays the same. */
typedef bool (*crater_http_exempt_f)(const crater_http_req_t *r, void *arg);

/* Clients. A client is a source address (IPv4, or a whole IPv6 address):
 * 127.0.0.1 and 127.0.0.2 are two clients, every agent behind one address
 * is one client.
 *
 * max_conns_per_client: a connection beyond it is closed as soon as it is
 * accepted (libmicrohttpd's per-IP limit, counted over all pool threads).
 *
 * header_timeout_ms: a request's header must be complete this long after
 * its request line arrived (after the connection opened, for its first
 * request), however slowly the bytes keep coming; otherwise the connection
 * is closed without an answer. Between two requests a keep-alive
 * connection may stay idle up to conn_timeout_s first.
 *
 * rate, burst: a token bucket per client; a request that finds it empty is
 * answered 429 {"error": ..., "code": "ERATE"} with Retry-After (seconds)
 * and the connection is closed. Exempt requests (see rate_exempt) take no
 * token. */
typedef struct crater_http_opts {
    const char *listen;      /* "127.0.0.1:7480", "0.0.0.0:0" (0 = any free
                                port), "[::1]:7480"; NULL = "127.0.0.1:7480" */
    unsigned threads;        /* event-loop threads; 0 = number of CPUs */
    uint64_t max_body;       /* bytes; larger bodies get 413; 0 = 4 MiB */
    unsigned conn_timeout_s; /* idle/slow client timeout; 0 = 30 */
    unsigned max_conns;      /* 0 = 4096 */
    unsigned max_conns_per_client;    /* 0 = no limit */
    unsigned header_timeout_ms;       /* 0 = none */
    double rate;                      /* requests/s per client; 0 = no limit */
    unsigned burst;                   /* 0 = rate rounded up (at least 1) */
    crater_http_exempt_f rate_exempt; /* NULL: nobody is exempt */
    void *rate_exempt_arg;
} crater_http_opts_t;

typedef struct crater_http_server crater_http_server_t;

/* Start serving with the router (borrowed; must outlive the server).
 * NULL on error (EINVAL bad listen address, EIO cannot bind/listen,
 * ENOMEM, EINTERNAL libmicrohttpd failed). */
crater_http_server_t *crater_http_start(const crater_http_opts_t *o,
                                        crater_router_t *rt,
                                        crater_error_t *err);
/* The bound port (useful with ":0"). */
uint16_t crater_http_port(const crater_http_server_t *s);
/* Stop accepting, answer suspended requests 503 (see above), close all
 * connections and join the threads. Frees s; NULL accepted. Must not be
 * called from a handler. */
void crater_http_stop(crater_http_server_t *s);

#endif /* CRATER_HTTP_H */
