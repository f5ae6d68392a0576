/* standby.c - what a craterd that does not lead serves on its API port
 * (issue 17; the answer is documented in doc/api.md "Not the leader").
 *
 * A standby holds no decoded cluster state: at most a warm copy of the
 * store's records (warm.h, kept by ha.c), which it decodes when it is
 * promoted, caught up to the revision it then reads, before it schedules
 * (correctness first, see doc/operations.md). Records are not what the
 * API answers, so it answers every API request, reads included, with 503
 * and where the leader is:
 *
 *   503 {"error": "not the leader: ... the leader is URL", "code":
 *        "EUNAVAIL", "leader": URL}
 *   Retry-After: 1, X-Crater-Leader: URL (or "none": no leader known)
 *
 * 503 rather than a 307 redirect: a POST a client resends to another
 * server must be the client's decision (crater's HTTP client follows it
 * for every request because a standby never applied it), and every client
 * already treats 503 as "retry later". /healthz is 200 (the process is
 * alive), /readyz 503, GET /api/v1/leader 200 with the roles.
 */
#include "daemon/standby.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct crater_standby {
    crater_router_t *rt;
    crater_http_server_t *http;
    crater_leader_t *l;
    char *self;
};

static int leader_json(crater_http_resp_t *resp,
                       int status,
                       const char *role,
                       const char *leader,
                       const char *self)
{
    return crater_http_json(resp,
                            status,
                            json_pack("{s:s, s:s, s:s}",
                                      "role",
                                      role,
                                      "leader",
                                      leader,
                                      "self",
                                      self));
}

static void not_leader(crater_http_resp_t *resp, const char *cur)
{
    char text[640];

    snprintf(text,
             sizeof(text),
             "not the leader: this craterd stands by; %s%s",
             cur[0] ? "the leader is " : "no leader is elected yet",
             cur);
    crater_http_json(resp,
                     503,
                     json_pack("{s:s, s:s, s:s}",
                               "error",
                               text,
                               "code",
                               "EUNAVAIL",
                               "leader",
                               cur));
    /* present even when empty: "a standby answered, nothing applied" */
    if (asprintf(&resp->headers,
                 "Retry-After: 1\r\nX-Crater-Leader: %s",
                 cur[0] ? cur : "none")
        < 0)
        resp->headers = NULL;
}

static void h_any(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_standby_t *s = arg;
    const char *path = crater_http_path(r);
    char cur[512];

    cur[0] = 0;
    if (s->l)
        crater_leader_current(s->l, cur, sizeof(cur));
    if (strcmp(path, "/healthz") == 0)
        crater_http_json(resp,
                         200,
                         json_pack("{s:s, s:s}",
                                   "status",
                                   "ok",
                                   "role",
                                   "standby"));
    else if (strcmp(path, "/api/v1/leader") == 0
             && strcmp(crater_http_method(r), "GET") == 0)
        leader_json(resp, 200, "standby", cur, s->self);
    else
        not_leader(resp, cur);
}

crater_standby_t *crater_standby_start(const char *listen,
                                       crater_leader_t *l,
                                       const char *self_url,
                                       crater_error_t *err)
{
    crater_standby_t *s = calloc(1, sizeof(*s));
    crater_http_opts_t ho = {.listen = listen, .threads = 2};

    if (!s || !(s->rt = crater_router_create())
        || !(s->self = strdup(self_url ? self_url : ""))) {
        crater_standby_stop(s);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    s->l = l;
    crater_router_fallback(s->rt, h_any, s);
    if (!(s->http = crater_http_start(&ho, s->rt, err))) {
        crater_standby_stop(s);
        return NULL;
    }
    return s;
}

uint16_t crater_standby_port(const crater_standby_t *s)
{
    return crater_http_port(s->http);
}

void crater_standby_stop(crater_standby_t *s)
{
    if (!s)
        return;
    crater_http_stop(s->http);
    crater_router_destroy(s->rt);
    free(s->self);
    free(s);
}
