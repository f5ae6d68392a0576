/* http_client.c - libcurl wrapper used by the CLI and the agent.
 *
 * One easy handle per client, reset (curl_easy_reset keeps the connection
 * cache) and configured afresh for every request, so no option set for one
 * request (a body, a custom method) leaks into the next while the TCP
 * connection is reused. curl_global_init runs once per process through
 * pthread_once because it is not safe to race with other threads.
 *
 * Several servers (craterd with leader election, issue 17): base may be a
 * comma-separated list. A request goes to the current server; it moves to
 * another one and is sent again when the answer proves the request was
 * not applied: the connection could not be made (nothing was sent), a
 * standby (or a leader unsure it still leads) answered 503 with
 * X-Crater-Leader (they apply nothing; the client goes to the leader it
 * names when that is in the list, else to the next server; "none" while
 * no leader is known), or a GET/HEAD failed in any way. With one server
 * only that 503 is tried again (on the same server). Other
 * failures are returned: a POST whose connection broke may have been
 * applied, and only the caller may decide to send it again. It keeps
 * trying, one pause of 200 ms after each round over the list, for at most
 * the failover time (crater_client_set_failover_ms, default 15 s: a
 * failover takes leaseDuration + retryPeriod + the new leader's load).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "crater/client.h"

#define DEFAULT_TIMEOUT_MS 30000L
#define DEFAULT_FAILOVER_MS 15000L
#define MAX_SERVERS 16
#define ROUND_PAUSE_MS 200

struct crater_client {
    CURL *h;
    char *bases[MAX_SERVERS]; /* no trailing slash */
    size_t nbases, cur;
    char *base; /* bases[cur] */
    char *auth; /* "Authorization: Bearer ..." or NULL */
    long timeout_ms, failover_ms;
    unsigned switches;
    char leader[256]; /* X-Crater-Leader of the last answer, "" none */
    CURLcode last_rc;
    char errbuf[CURL_ERROR_SIZE];
};

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void crater_client_destroy(crater_client_t *c)
{
    if (c == NULL)
        return;
    if (c->h != NULL)
        curl_easy_cleanup(c->h);
    for (size_t i = 0; i < c->nbases; i++)
        free(c->bases[i]);
    free(c->auth);
    free(c);
}

static int set_auth(crater_client_t *c, const char *token)
{
    size_t n;

    if (token == NULL)
        return 0;
    n = strlen(token) + sizeof "Authorization: Bearer ";
    c->auth = malloc(n);
    if (c->auth == NULL)
        return -1;
    snprintf(c->auth, n, "Authorization: Bearer %s", token);
    return 0;
}

static bool is_url(const char *s, size_t n)
{
    return (n > 7 && strncmp(s, "http://", 7) == 0)
           || (n > 8 && strncmp(s, "https://", 8) == 0);
}

/* Splits "URL[,URL...]" into c->bases; -1 with err naming the bad one. */
static int parse_bases(crater_client_t *c,
                       const char *list,
                       crater_error_t *err)
{
    const char *p = list;

    do {
        size_t n = strcspn(p, ",");
        if (c->nbases == MAX_SERVERS)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "server",
                                       "more than %d servers in '%s'",
                                       MAX_SERVERS,
                                       list);
        if (!is_url(p, n))
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "server",
                                       "bad server URL '%.*s': expected "
                                       "http://host:port",
                                       (int)n,
                                       p);
        if (!(c->bases[c->nbases] = strndup(p, n)))
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        while (n > 0 && c->bases[c->nbases][n - 1] == '/')
            c->bases[c->nbases][--n] = '\0';
        c->nbases++;
        p += n;
        p += strcspn(p, ",");
    } while (*p++ == ',');
    return 0;
}

crater_client_t *crater_client_create(const char *base,
                                      const char *token,
                                      crater_error_t *err)
{
    crater_client_t *c;
    crater_error_t e2;

    pthread_once(&curl_once, curl_init);
    c = calloc(1, sizeof(*c));
    if (c != NULL && parse_bases(c, base ? base : "", &e2) < 0) {
        crater_client_destroy(c);
        *err = e2;
        return NULL;
    }
    if (c == NULL || curl_init_rc != CURLE_OK || set_auth(c, token) < 0
        || (c->h = curl_easy_init()) == NULL) {
        crater_client_destroy(c);
        crater_errorf(err, CRATER_ENOMEM, "cannot create an HTTP client");
        return NULL;
    }
    c->base = c->bases[0];
    c->timeout_ms = DEFAULT_TIMEOUT_MS;
    c->failover_ms = DEFAULT_FAILOVER_MS;
    return c;
}

void crater_client_set_failover_ms(crater_client_t *c, long ms)
{
    c->failover_ms = ms >= 0 ? ms : DEFAULT_FAILOVER_MS;
}

unsigned crater_client_switches(const crater_client_t *c)
{
    return c->switches;
}

void crater_client_set_timeout_ms(crater_client_t *c, long ms)
{
    c->timeout_ms = ms > 0 ? ms : DEFAULT_TIMEOUT_MS;
}

const char *crater_client_base(const crater_client_t *c)
{
    return c->base;
}

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    buf_t *b = arg;
    size_t len = size * n;

    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        char *p;
        while (cap < b->len + len + 1)
            cap *= 2;
        p = realloc(b->p, cap);
        if (p == NULL) {
            b->oom = true;
            return 0; /* makes curl fail with CURLE_WRITE_ERROR */
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return len;
}

/* Keeps X-Crater-Leader (a standby's pointer to the leader). */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
    crater_client_t *c = arg;
    size_t len = size * n;
    static const char name[] = "x-crater-leader:";

    if (len > sizeof(name) - 1
        && strncasecmp(data, name, sizeof(name) - 1) == 0) {
        const char *v = data + sizeof(name) - 1;
        size_t vl = len - (sizeof(name) - 1);
        while (vl > 0 && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
            vl--;
        snprintf(c->leader, sizeof(c->leader), "%.*s", (int)vl, v);
    }
    return len;
}

/* Method and body options. */
static void set_method(CURL *h,
                       const char *method,
                       const char *body,
                       size_t len)
{
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        return;
    }
    if (body != NULL || strcmp(method, "POST") == 0
        || strcmp(method, "PUT") == 0) {
        curl_easy_setopt(h,
                         CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(body != NULL ? len : 0));
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body != NULL ? body : "");
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

static int transport_error(crater_client_t *c,
                           CURLcode rc,
                           bool oom,
                           crater_error_t *err)
{
    long os_errno = 0;

    if (oom || rc == CURLE_OUT_OF_MEMORY)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "no answer from %s within %ld ms",
                             c->base,
                             c->timeout_ms);
    curl_easy_getinfo(c->h, CURLINFO_OS_ERRNO, &os_errno);
    return crater_errorf(err,
                         CRATER_EUNAVAIL,
                         "cannot reach %s: %s",
                         c->base,
                         os_errno != 0  ? strerror((int)os_errno)
                         : c->errbuf[0] ? c->errbuf
                                        : curl_easy_strerror(rc));
}

/* Build the header list; NULL with *ok false on out-of-memory. */
static struct curl_slist *make_headers(const crater_client_t *c,
                                       const char *content_type,
                                       bool *ok)
{
    struct curl_slist *l = NULL, *t;
    char ct[160];

    *ok = true;
    if (c->auth != NULL) {
        if ((t = curl_slist_append(l, c->auth)) == NULL)
            goto oom;
        l = t;
    }
    if (content_type != NULL) {
        snprintf(ct, sizeof ct, "Content-Type: %s", content_type);
        if ((t = curl_slist_append(l, ct)) == NULL)
            goto oom;
        l = t;
    }
    return l;
oom:
    curl_slist_free_all(l);
    *ok = false;
    return NULL;
}

static int setup(crater_client_t *c,
                 const char *url,
                 const char *method,
                 const char *content_type,
                 const char *body,
                 size_t len,
                 buf_t *b,
                 struct curl_slist **hdrs)
{
    bool ok;

    *hdrs = make_headers(c, content_type, &ok);
    if (!ok)
        return -1;
    curl_easy_reset(c->h);
    c->errbuf[0] = '\0';
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c->h, CURLOPT_HEADERDATA, c);
    c->leader[0] = '\0';
    set_method(c->h, method, body, len);
    return 0;
}

static int finish(buf_t *b, char **resp, size_t *resp_len, crater_error_t *err)
{
    if (b->p == NULL && (b->p = calloc(1, 1)) == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    *resp = b->p;
    if (resp_len != NULL)
        *resp_len = b->len;
    return 0;
}

static int request_once(crater_client_t *c,
                        const char *method,
                        const char *path,
                        const char *content_type,
                        const char *body,
                        size_t len,
                        long *status,
                        char **resp,
                        size_t *resp_len,
                        crater_error_t *err)
{
    buf_t b = {0};
    struct curl_slist *hdrs = NULL;
    char *url;
    CURLcode rc;
    int ret;

    *resp = NULL;
    if (method == NULL || path == NULL)
        return crater_errorf(err, CRATER_EINVAL, "missing method or path");
    if (asprintf(&url, "%s%s%s", c->base, path[0] == '/' ? "" : "/", path) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (setup(c, url, method, content_type, body, len, &b, &hdrs) < 0) {
        free(url);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    rc = c->last_rc = curl_easy_perform(c->h);
    curl_slist_free_all(hdrs);
    free(url);
    if (rc != CURLE_OK) {
        free(b.p);
        return transport_error(c, rc, b.oom, err);
    }
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, status);
    ret = finish(&b, resp, resp_len, err);
    if (ret < 0)
        free(b.p);
    return ret;
}

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether the last attempt was certainly not applied and may be sent to
 * another server (see the top of the file). */
static bool may_resend(const crater_client_t *c,
                       const char *method,
                       int rc,
                       long status,
                       const crater_error_t *err)
{
    if (rc == 0) /* a standby's 503: it applied nothing */
        return status == 503 && c->leader[0];
    if (err->errnum != CRATER_EUNAVAIL)
        return false;
    return c->last_rc == CURLE_COULDNT_CONNECT
           || c->last_rc == CURLE_COULDNT_RESOLVE_HOST
           || strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

/* The server to try next: the leader a standby named, else the next. */
static void move_on(crater_client_t *c)
{
    size_t next = (c->cur + 1) % c->nbases;

    for (size_t i = 0; c->leader[0] && i < c->nbases; i++)
        if (strcmp(c->bases[i], c->leader) == 0 && i != c->cur)
            next = i;
    c->cur = next;
    c->base = c->bases[next];
    c->switches++;
}

int crater_client_request(crater_client_t *c,
                          const char *method,
                          const char *path,
                          const char *content_type,
                          const char *body,
                          size_t len,
                          long *status,
                          char **resp,
                          size_t *resp_len,
                          crater_error_t *err)
{
    long until = mono_ms() + c->failover_ms;

    *status = 0;
    for (size_t tries = 1;; tries++) {
        int rc = request_once(c,
                              method,
                              path,
                              content_type,
                              body,
                              len,
                              status,
                              resp,
                              resp_len,
                              err);
        /* one server: tried again only on a 503 that names a leader
           (it applied nothing; a load balancer in front of several, or a
           leader pausing), never when it cannot be reached */
        if ((c->nbases < 2 && rc != 0)
            || !may_resend(c, method, rc, *status, err)
            || (mono_ms() >= until && tries >= c->nbases))
            return rc;
        free(*resp);
        *resp = NULL;
        move_on(c);
        if (tries % c->nbases == 0)
            usleep(ROUND_PAUSE_MS * 1000);
    }
}

crater_errno_t crater_client_status_errno(long status)
{
    switch (status) {
    case 400:
        return CRATER_EINVAL;
    case 401:
        return CRATER_EAUTH;
    case 403:
        return CRATER_EPERM;
    case 404:
        return CRATER_ENOENT;
    case 409:
        return CRATER_EEXIST;
    case 413:
        return CRATER_ELIMIT;
    case 422:
        return CRATER_EIMPOSSIBLE;
    case 429:
        return CRATER_ERATE;
    case 503:
        return CRATER_EUNAVAIL;
    default:
        return status >= 500 ? CRATER_EINTERNAL : CRATER_EINVAL;
    }
}

static crater_errno_t errno_by_name(const char *name, crater_errno_t dflt)
{
    for (int i = 1; i < CRATER_ERRNO_MAX; i++)
        if (strcmp(crater_errno_name((crater_errno_t)i), name) == 0)
            return (crater_errno_t)i;
    return dflt;
}

/* Turn an error response into err; always returns -1. */
static int http_error(const crater_client_t *c,
                      long status,
                      const char *body,
                      size_t len,
                      crater_error_t *err)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    crater_errno_t e = crater_client_status_errno(status);
    const char *text = NULL, *field = NULL, *code = NULL;
    int ret;

    if (json_is_object(j)) {
        text = json_string_value(json_object_get(j, "error"));
        field = json_string_value(json_object_get(j, "field"));
        code = json_string_value(json_object_get(j, "code"));
    }
    if (code != NULL)
        e = errno_by_name(code, e);
    if (text != NULL)
        ret = crater_errorf_field(err, e, field, "%s", text);
    else
        ret = crater_errorf_field(err,
                                  e,
                                  field,
                                  "HTTP %ld from %s",
                                  status,
                                  c->base);
    json_decref(j);
    return ret;
}

int crater_client_json(crater_client_t *c,
                       const char *method,
                       const char *path,
                       const json_t *body,
                       json_t **out,
                       crater_error_t *err)
{
    char *s = NULL, *r = NULL;
    size_t len = 0;
    long status = 0;
    json_error_t jerr;
    int rc;

    *out = NULL;
    if (body != NULL
        && (s = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY)) == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    rc = crater_client_request(c,
                               method,
                               path,
                               s != NULL ? "application/json" : NULL,
                               s,
                               s != NULL ? strlen(s) : 0,
                               &status,
                               &r,
                               &len,
                               err);
    free(s);
    if (rc < 0)
        return -1;
    if (status >= 400)
        rc = http_error(c, status, r, len, err);
    else if (len == 0)
        *out = json_null();
    else if ((*out = json_loadb(r, len, JSON_DECODE_ANY, &jerr)) == NULL)
        rc = crater_errorf(err,
                           CRATER_EPARSE,
                           "invalid JSON from %s: %s (line %d)",
                           c->base,
                           jerr.text,
                           jerr.line);
    free(r);
    return rc;
}
