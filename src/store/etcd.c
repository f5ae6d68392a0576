/* etcd.c - the replicated store backend: etcd 3.4+ through its v3 JSON
 * gateway (grpc-gateway) over libcurl.
 *
 * Why the gateway: it is served by every etcd on its client port, needs no
 * gRPC/protobuf toolchain, and libcurl already handles TLS. Keys and
 * values are base64 in JSON, 64-bit numbers are strings.
 *
 * Mapping. A store key k is etcd key prefix+k. get/list are ranges;
 * a transaction is one /v3/kv/txn: each expect(k, 0) becomes
 * create_revision(k) == 0, each expect(k, r) mod_revision(k) == r, the ops
 * are the success branch, and the failure branch reads every compared key
 * so that ESTALE can name the one that failed. etcd applies a transaction
 * that changes nothing without a new revision, as the interface wants.
 * Leases are etcd leases (etcd owns the clock: now_ms is ignored, ttl is
 * rounded up to seconds, expire_leases() is a no-op). Compaction is
 * /v3/kv/compaction with physical=true. The compacted revision is not
 * exposed by etcd: open() finds it by a binary search of ranges at old
 * revisions; later it is learnt from compact() and from the change feed.
 *
 * Change feed. changes() opens a /v3/watch stream over the WHOLE key space
 * from after_rev+1 and reads until it has seen the store's revision at the
 * call (every etcd revision carries at least one event, so the stream
 * reaches it exactly, with no timer), filtering to prefix+prefix. A
 * stream that breaks is resumed from the revision after the last event on
 * the next endpoint. A watch from a compacted revision answers ESTALE. It
 * needs read access to every key when auth is on (craterd itself does not
 * use the feed).
 *
 * Writes. Every commit and compaction goes through one writer thread, in
 * order, so async commits apply in submission order as with SQLite; each
 * etcd answer means the write is in a quorum's fsynced log, so the
 * acknowledgement means durable. etcd has no group commit across
 * requests from one client in sequence, so throughput is one round trip
 * (and one etcd fsync) per transaction (bench/RESULTS.md B5).
 *
 * Failover: a request that could not connect is tried on the next
 * endpoint. A read is retried after any transport error; a write only when
 * it never reached etcd (retrying a sent transaction could apply it twice),
 * except a transaction without compares of its own (every write craterd
 * makes; not the leader's campaign): its unknown outcome (an election:
 * "etcdserver: request timed out") is resolved by sending it again until
 * the store's timeout (txn_call(): twice is the same as once).
 *
 * Fence (leader election): with crater_store_set_fence() every
 * transaction, and every batch, starts with one more compare,
 * mod_revision(leader key) == the revision this craterd created it at; the
 * failure branch reads it first, so a refusal by the fence is told apart
 * from a stale compare of the caller's and reported as EUNAVAIL "not the
 * leader". A revoked fence fails commits in the writer without a request
 * and aborts the writer's transfer in flight.
 *
 * Size: etcd refuses requests over --max-request-bytes (1.5 MiB by
 * default). A transaction whose keys and values exceed it less 8 KiB of
 * framing is refused before sending with ELIMIT naming its largest key.
 */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crater/dec.h"
#include "crater/log.h"
#include "store/store.h"

#define DEFAULT_PREFIX "/crater/"
#define DEFAULT_MAX_REQ (1572864u)
#define REQ_OVERHEAD 8192
#define DEFAULT_TIMEOUT_MS 10000
#define POOL_MAX 8
#define TXN_OPS_MAX 128 /* etcd --max-txn-ops default */

typedef struct buf {
    char *p;
    size_t n, cap;
} buf_t;

typedef enum req_kind {
    REQ_TXN,
    REQ_COMPACT
} req_kind_t;

typedef struct req {
    req_kind_t kind;
    crater_txn_t *txn;
    int64_t arg_rev;
    crater_store_done_f cb;
    void *cb_arg;
    bool sync, done;
    int rc;
    int64_t rev;
    crater_error_t err;
    struct req *next;
} req_t;

typedef struct et {
    crater_store_t base;
    char **eps;
    size_t nep;
    _Atomic size_t cur;
    char *prefix;
    size_t plen;
    char *ca, *cert, *key, *user, *password;
    size_t max_req;
    long timeout_ms;
    pthread_mutex_t lock; /* token, pool, queue */
    pthread_cond_t cv;
    char token[512];
    CURL *pool[POOL_MAX];
    size_t npool;
    req_t *head, *tail;
    bool stop;
    pthread_t writer;
    bool writer_started;
    CURL *wh; /* the writer's handle */
    _Atomic int64_t rev, compacted;
    char fence_key[CRATER_STORE_KEY_MAX + 1]; /* set before any commit */
    _Atomic int64_t fence_rev;                /* 0 none, -1 revoked */
} et_t;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- base64 ----------------------------------------------------------- */

static const char b64c[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxy"
                           "z0123456789+/";

static char *b64_enc(const unsigned char *s, size_t n)
{
    char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;

    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        *p++ = b64c[v >> 18 & 63];
        *p++ = b64c[v >> 12 & 63];
        *p++ = i + 1 < n ? b64c[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? b64c[v & 63] : '=';
    }
    *p = 0;
    return o;
}

static int b64v(char c)
{
    const char *p = c ? strchr(b64c, c) : NULL;
    return p ? (int)(p - b64c) : -1;
}

/* Decodes s into a malloc'd buffer with a NUL after the bytes. */
static char *b64_dec(const char *s, size_t *len)
{
    size_t n = strlen(s), o = 0;
    char *out = malloc(n / 4 * 3 + 4);
    uint32_t acc = 0;
    int bits = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        int v = b64v(s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        if ((bits += 6) >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits & 0xff);
        }
    }
    out[o] = 0;
    *len = o;
    return out;
}

/* ---- JSON helpers ------------------------------------------------------ */

static int64_t jint(json_t *o, const char *name)
{
    json_t *v = json_object_get(o, name);

    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

static const char *jstr(json_t *o, const char *name)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? s : "";
}

static void set_i64(json_t *o, const char *name, int64_t v)
{
    json_object_set_new(o, name, json_sprintf("%lld", (long long)v));
}

/* Sets o[name] to base64(a + b). */
static int set_b64(
    json_t *o, const char *name, const char *a, const char *b, size_t blen)
{
    size_t alen = strlen(a);
    char *raw = malloc(alen + blen + 1), *enc;

    if (!raw)
        return -1;
    memcpy(raw, a, alen);
    memcpy(raw + alen, b, blen);
    enc = b64_enc((unsigned char *)raw, alen + blen);
    free(raw);
    if (!enc)
        return -1;
    json_object_set_new(o, name, json_string(enc));
    free(enc);
    return 0;
}

/* The first key after every key starting with p ("" : all keys, "\0"). */
static void prefix_end(const char *p, char *end, size_t *len)
{
    size_t n = strlen(p);

    memcpy(end, p, n + 1);
    while (n > 0 && (unsigned char)end[n - 1] == 0xff)
        end[--n] = 0;
    if (n == 0) {
        end[0] = 0;
        *len = 1;
        return;
    }
    end[n - 1]++;
    *len = n;
}

/* o.key / o.range_end selecting every etcd key under e->prefix + p. */
static int set_range(et_t *e, json_t *o, const char *p)
{
    char full[CRATER_STORE_KEY_MAX * 2 + 2], end[sizeof(full)];
    size_t elen;

    snprintf(full, sizeof(full), "%s%s", e->prefix, p);
    prefix_end(full, end, &elen);
    if (full[0] == 0 && set_b64(o, "key", "", "\0", 1) < 0)
        return -1;
    if (full[0] && set_b64(o, "key", full, "", 0) < 0)
        return -1;
    return set_b64(o, "range_end", "", end, elen);
}

static void note_rev(et_t *e, json_t *resp)
{
    int64_t r = jint(json_object_get(resp, "header"), "revision");
    int64_t cur = atomic_load(&e->rev);

    while (r > cur && !atomic_compare_exchange_weak(&e->rev, &cur, r))
        ;
}

static void note_compacted(et_t *e, int64_t r)
{
    int64_t cur = atomic_load(&e->compacted);

    while (r > cur && !atomic_compare_exchange_weak(&e->compacted, &cur, r))
        ;
}

/* ---- HTTP ------------------------------------------------------------- */

static size_t on_data(char *d, size_t sz, size_t nm, void *u)
{
    buf_t *b = u;
    size_t n = sz * nm;

    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static CURL *handle_get(et_t *e)
{
    CURL *h = NULL;

    pthread_mutex_lock(&e->lock);
    if (e->npool)
        h = e->pool[--e->npool];
    pthread_mutex_unlock(&e->lock);
    return h ? h : curl_easy_init();
}

static void handle_put(et_t *e, CURL *h)
{
    pthread_mutex_lock(&e->lock);
    if (e->npool < POOL_MAX) {
        e->pool[e->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&e->lock);
    curl_easy_cleanup(h);
}

/* A revoked fence ends the writer's transfer in flight (libcurl asks this about
 * once a second while waiting): a leader stepping down does not wait for
 * a request to an etcd it cannot reach (the outcome is unknown: EUNAVAIL). */
static int on_progress(
    void *u, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return atomic_load(&((et_t *)u)->fence_rev) < 0;
}

/* Sets up h for one POST of body to endpoint ep; the caller frees *hdrs. */
static void prepare(et_t *e,
                    CURL *h,
                    size_t ep,
                    const char *path,
                    const char *body,
                    long timeout_ms,
                    struct curl_slist **hdrs)
{
    char url[1024], auth[600];

    curl_easy_reset(h);
    snprintf(url, sizeof(url), "%s%s", e->eps[ep], path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (h == e->wh) { /* the writer's: commits and compactions */
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, e);
    }
    if (e->ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
    if (e->cert)
        curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
    if (e->key)
        curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
    *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    pthread_mutex_lock(&e->lock);
    snprintf(auth, sizeof(auth), "Authorization: %s", e->token);
    pthread_mutex_unlock(&e->lock);
    if (e->token[0])
        *hdrs = curl_slist_append(*hdrs, auth);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
}

static bool never_sent(CURLcode c)
{
    return c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST
           || c == CURLE_OPERATION_TIMEDOUT; /* connect timeout only: below */
}

/* Whether a failed transfer may be tried again on the next endpoint. */
static bool retryable(CURL *h, CURLcode c, bool idempotent)
{
    curl_off_t up = 0;

    if (idempotent)
        return c != CURLE_WRITE_ERROR && c != CURLE_OUT_OF_MEMORY;
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    return never_sent(c) && up == 0;
}

static void next_endpoint(et_t *e, size_t ep, CURLcode c)
{
    size_t want = ep;

    crater_log(LOG_WARNING,
               "store: etcd %s: %s; trying the next endpoint",
               e->eps[ep],
               curl_easy_strerror(c));
    atomic_compare_exchange_strong(&e->cur, &want, (ep + 1) % e->nep);
}

/* POSTs body to path, failing over between endpoints; fills b. */
static int transfer(et_t *e,
                    CURL *h,
                    const char *path,
                    const char *body,
                    bool idempotent,
                    buf_t *b,
                    crater_error_t *err)
{
    CURLcode c = CURLE_OK;

    for (size_t i = 0; i < e->nep * 2; i++) {
        size_t ep = atomic_load(&e->cur) % e->nep;
        struct curl_slist *hdrs;

        b->n = 0;
        prepare(e, h, ep, path, body, e->timeout_ms, &hdrs);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
        c = curl_easy_perform(h);
        curl_slist_free_all(hdrs);
        if (c == CURLE_OK && b->p)
            return 0;
        if (c == CURLE_OK || !retryable(h, c, idempotent))
            break;
        next_endpoint(e, ep, c);
    }
    return crater_errorf_field(err,
                               CRATER_EUNAVAIL,
                               "store.etcdEndpoints",
                               "store.etcdEndpoints: etcd %s%s: %s",
                               e->eps[atomic_load(&e->cur) % e->nep],
                               path,
                               c == CURLE_OK ? "empty answer"
                                             : curl_easy_strerror(c));
}

/* Maps etcd's {"error", "code"} to a crater error. */
static int etcd_error(json_t *resp, const char *path, crater_error_t *err)
{
    const char *m = json_string_value(json_object_get(resp, "error"));
    int64_t code = jint(resp, "code");
    crater_errno_t en = CRATER_EIO;

    if (!m)
        m = "?";
    if (strstr(m, "lease not found"))
        en = CRATER_ENOENT;
    else if (strstr(m, "has been compacted"))
        en = CRATER_ESTALE;
    else if (strstr(m, "future revision"))
        en = CRATER_ERANGE;
    else if (strstr(m, "too large"))
        en = CRATER_ELIMIT;
    else if (code == 16 || strstr(m, "auth"))
        en = CRATER_EAUTH;
    else if (code == 7)
        en = CRATER_EPERM;
    else if (code == 14 || strstr(m, "request timed out")
             || strstr(m, "leader changed") || strstr(m, "no leader"))
        en = CRATER_EUNAVAIL;
    return crater_errorf(err, en, "etcd %s: %s", path, m);
}

static int authenticate(et_t *e, CURL *h, crater_error_t *err);

/* One request: body (consumed) to path; returns the parsed answer. */
static json_t *call_once(et_t *e,
                         CURL *h,
                         const char *path,
                         const char *txt,
                         bool idempotent,
                         crater_error_t *err)
{
    buf_t b = {0};
    json_t *resp = NULL;
    json_error_t je;

    if (transfer(e, h, path, txt, idempotent, &b, err) < 0)
        goto out;
    if (!(resp = json_loadb(b.p, b.n, 0, &je))) {
        crater_errorf(err, CRATER_EIO, "etcd %s: bad JSON: %s", path, je.text);
        goto out;
    }
    if (json_object_get(resp, "error")) {
        etcd_error(resp, path, err);
        json_decref(resp);
        resp = NULL;
        goto out;
    }
    note_rev(e, resp);
out:
    free(b.p);
    return resp;
}

static json_t *call(et_t *e,
                    CURL *h,
                    const char *path,
                    json_t *body,
                    bool idempotent,
                    crater_error_t *err)
{
    char *txt = json_dumps(body, JSON_COMPACT);
    json_t *resp;

    json_decref(body);
    if (!txt) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    resp = call_once(e, h, path, txt, idempotent, err);
    if (!resp && err->errnum == CRATER_EAUTH && e->user
        && strstr(err->text, "invalid auth token")
        && authenticate(e, h, err) == 0)
        resp = call_once(e, h, path, txt, idempotent, err);
    free(txt);
    return resp;
}

static int authenticate(et_t *e, CURL *h, crater_error_t *err)
{
    json_t *b = json_pack("{s:s, s:s}",
                          "name",
                          e->user,
                          "password",
                          e->password ? e->password : "");
    json_t *r;
    const char *tok;

    pthread_mutex_lock(&e->lock);
    e->token[0] = 0;
    pthread_mutex_unlock(&e->lock);
    if (!(r = call(e, h, "/v3/auth/authenticate", b, true, err)))
        return crater_errorf_field(err,
                                   CRATER_EAUTH,
                                   "store.etcdUser",
                                   "%s",
                                   err->text);
    tok = json_string_value(json_object_get(r, "token"));
    pthread_mutex_lock(&e->lock);
    snprintf(e->token, sizeof(e->token), "%s", tok ? tok : "");
    pthread_mutex_unlock(&e->lock);
    json_decref(r);
    return 0;
}

/* ---- reads ------------------------------------------------------------ */

/* Fills kv from an etcd KeyValue, stripping the prefix. */
static int kv_from(et_t *e, json_t *j, crater_skv_t *kv, crater_error_t *err)
{
    size_t klen = 0;
    char *k = b64_dec(jstr(j, "key"), &klen);
    const char *v = json_string_value(json_object_get(j, "value"));

    memset(kv, 0, sizeof(*kv));
    if (!k)
        return crater_errorf(err, CRATER_EIO, "etcd: bad key encoding");
    kv->key = strdup(strncmp(k, e->prefix, e->plen) == 0 ? k + e->plen : k);
    free(k);
    kv->value = b64_dec(v ? v : "", &kv->len);
    kv->create_rev = jint(j, "create_revision");
    kv->mod_rev = jint(j, "mod_revision");
    kv->version = jint(j, "version");
    kv->lease = jint(j, "lease");
    if (kv->key && kv->value)
        return 0;
    crater_skv_free(kv);
    return crater_errorf(err, CRATER_ENOMEM, "out of memory");
}

static json_t *range(et_t *e, json_t *body, crater_error_t *err)
{
    CURL *h = handle_get(e);
    json_t *r;

    if (!h) {
        json_decref(body);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    r = call(e, h, "/v3/kv/range", body, true, err);
    handle_put(e, h);
    return r;
}

static int et_get(crater_store_t *st,
                  const char *key,
                  crater_skv_t *out,
                  crater_error_t *err)
{
    et_t *e = (et_t *)st;
    json_t *b = json_object(), *r, *kvs;
    int rc;

    if (!b || set_b64(b, "key", e->prefix, key, strlen(key)) < 0) {
        json_decref(b);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (!(r = range(e, b, err)))
        return -1;
    kvs = json_object_get(r, "kvs");
    if (json_array_size(kvs) == 0)
        rc = crater_errorf_field(err, CRATER_ENOENT, key, "no key '%s'", key);
    else
        rc = kv_from(e, json_array_get(kvs, 0), out, err);
    json_decref(r);
    return rc;
}

static int et_list(crater_store_t *st,
                   const char *prefix,
                   crater_skv_list_t *out,
                   crater_error_t *err)
{
    et_t *e = (et_t *)st;
    json_t *b = json_object(), *r, *kvs;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (!b || set_range(e, b, prefix) < 0) {
        json_decref(b);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (!(r = range(e, b, err)))
        return -1;
    kvs = json_object_get(r, "kvs");
    n = json_array_size(kvs);
    out->revision = jint(json_object_get(r, "header"), "revision");
    if (n && !(out->items = calloc(n, sizeof(*out->items)))) {
        json_decref(r);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    for (; out->count < n; out->count++)
        if (kv_from(e,
                    json_array_get(kvs, out->count),
                    &out->items[out->count],
                    err)
            < 0) {
            crater_skv_list_free(out);
            json_decref(r);
            return -1;
        }
    json_decref(r);
    return 0;
}

static int64_t et_revision(crater_store_t *st)
{
    return atomic_load(&((et_t *)st)->rev);
}

static int64_t et_compacted_revision(crater_store_t *st)
{
    return atomic_load(&((et_t *)st)->compacted);
}

static int et_stats(crater_store_t *st,
                    crater_store_stats_t *out,
                    crater_error_t *err)
{
    (void)err;
    memset(out, 0, sizeof(*out));
    out->revision = et_revision(st);
    out->compacted = et_compacted_revision(st);
    out->events = -1;
    return 0;
}

/* Reads the current revision (any key will do: the header carries it). */
static int fetch_revision(et_t *e, int64_t at, crater_error_t *err)
{
    json_t *b = json_object(), *r;

    json_object_set_new(b, "count_only", json_true());
    if (at > 0)
        set_i64(b, "revision", at);
    if (set_b64(b, "key", e->prefix, "", 0) < 0 || !(r = range(e, b, err)))
        return -1;
    json_decref(r);
    return 0;
}

/* The compacted revision: the oldest revision a range can still read. */
static int find_compacted(et_t *e, crater_error_t *err)
{
    int64_t lo = 1, hi = atomic_load(&e->rev);

    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (fetch_revision(e, mid, err) == 0)
            hi = mid;
        else if (err->errnum == CRATER_ESTALE)
            lo = mid + 1;
        else
            return -1;
    }
    atomic_store(&e->compacted, lo > 1 ? lo : 0);
    return 0;
}

/* ---- change feed -------------------------------------------------------- */

typedef struct watch {
    et_t *e;
    char want[CRATER_STORE_KEY_MAX * 2 + 2]; /* prefix + caller's prefix */
    int64_t target, last;
    size_t limit;
    crater_store_event_list_t *out;
    size_t cap;
    buf_t line;
    bool done, stale, failed;
    crater_error_t err;
} watch_t;

static int add_event(watch_t *w, json_t *ev)
{
    crater_store_event_t *x;

    if (w->out->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        crater_store_event_t *p = realloc(w->out->items, cap * sizeof(*p));
        if (!p)
            return -1;
        w->out->items = p;
        w->cap = cap;
    }
    x = &w->out->items[w->out->count];
    if (kv_from(w->e, json_object_get(ev, "kv"), &x->kv, &w->err) < 0)
        return -1;
    x->revision = x->kv.mod_rev;
    x->type = json_is_string(json_object_get(ev, "type")) ? CRATER_STORE_DELETE
                                                          : CRATER_STORE_PUT;
    if (x->type == CRATER_STORE_DELETE) {
        free(x->kv.value);
        x->kv.value = NULL;
        x->kv.len = 0;
        x->kv.create_rev = x->kv.version = x->kv.lease = 0;
    }
    w->out->count++;
    return 0;
}

/* One watch response: events are taken under w->want, in order. */
static void watch_line(watch_t *w, json_t *msg)
{
    json_t *res = json_object_get(msg, "result"), *evs, *ev;
    size_t i, wl = strlen(w->want);
    char *k;
    size_t kl;

    if (!res) {
        w->failed = true;
        etcd_error(msg, "/v3/watch", &w->err);
        return;
    }
    if (jint(res, "compact_revision") > 0) {
        note_compacted(w->e, jint(res, "compact_revision"));
        w->stale = w->done = true;
        return;
    }
    evs = json_object_get(res, "events");
    json_array_foreach(evs, i, ev)
    {
        json_t *kv = json_object_get(ev, "kv");
        w->last = jint(kv, "mod_revision");
        k = b64_dec(jstr(kv, "key"), &kl);
        if (k && strncmp(k, w->want, wl) == 0 && add_event(w, ev) < 0)
            w->failed = true;
        free(k);
        if (w->failed || (w->limit && w->out->count >= w->limit)) {
            w->done = true;
            return;
        }
    }
    if (w->last >= w->target)
        w->done = true;
}

static size_t on_watch(char *d, size_t sz, size_t nm, void *u)
{
    watch_t *w = u;
    size_t n = sz * nm;
    char *nl;

    if (on_data(d, sz, nm, &w->line) != n)
        return 0;
    while (!w->done && !w->failed
           && (nl = memchr(w->line.p, '\n', w->line.n))) {
        json_t *msg = json_loadb(w->line.p, (size_t)(nl - w->line.p), 0, NULL);
        if (msg)
            watch_line(w, msg);
        json_decref(msg);
        w->line.n -= (size_t)(nl + 1 - w->line.p);
        memmove(w->line.p, nl + 1, w->line.n);
    }
    return w->done || w->failed ? 0 : n;
}

/* Streams from w->last + 1 until done, resuming on the next endpoint. */
static int watch_run(watch_t *w, crater_error_t *err)
{
    et_t *e = w->e;
    CURL *h = curl_easy_init();
    CURLcode c = CURLE_OK;

    for (size_t i = 0; h && !w->done && !w->failed && i < e->nep * 2; i++) {
        size_t ep = atomic_load(&e->cur) % e->nep;
        json_t *cr = json_object(), *b = json_object();
        struct curl_slist *hdrs;
        char *txt;

        set_b64(cr, "key", "", "\0", 1);
        set_b64(cr, "range_end", "", "\0", 1);
        set_i64(cr, "start_revision", w->last + 1);
        json_object_set_new(b, "create_request", cr);
        txt = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        w->line.n = 0;
        prepare(e, h, ep, "/v3/watch", txt, e->timeout_ms * 3, &hdrs);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
        c = curl_easy_perform(h);
        curl_slist_free_all(hdrs);
        free(txt);
        if (!w->done && !w->failed)
            next_endpoint(e, ep, c);
    }
    curl_easy_cleanup(h);
    free(w->line.p);
    if (w->failed) {
        *err = w->err;
        return -1;
    }
    if (!w->done)
        return crater_errorf_field(err,
                                   CRATER_EUNAVAIL,
                                   "store.etcdEndpoints",
                                   "store.etcdEndpoints: etcd watch ended "
                                   "before revision %lld: %s",
                                   (long long)w->target,
                                   curl_easy_strerror(c));
    return 0;
}

static int stale(et_t *e, int64_t after, crater_error_t *err)
{
    return crater_errorf(err,
                         CRATER_ESTALE,
                         "revision %lld is compacted (history starts "
                         "after %lld)",
                         (long long)after,
                         (long long)atomic_load(&e->compacted));
}

static int et_changes(crater_store_t *st,
                      const char *prefix,
                      int64_t after,
                      size_t limit,
                      crater_store_event_list_t *out,
                      crater_error_t *err)
{
    et_t *e = (et_t *)st;
    watch_t *w;
    int rc;

    memset(out, 0, sizeof(*out));
    if (after < atomic_load(&e->compacted))
        return stale(e, after, err);
    if (fetch_revision(e, 0, err) < 0)
        return -1;
    if (after >= atomic_load(&e->rev))
        return 0;
    if (!(w = calloc(1, sizeof(*w))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    *w = (watch_t){.e = e,
                   .target = atomic_load(&e->rev),
                   .last = after,
                   .limit = limit,
                   .out = out};
    snprintf(w->want, sizeof(w->want), "%s%s", e->prefix, prefix);
    rc = watch_run(w, err);
    if (rc == 0 && w->stale)
        rc = stale(e, after, err);
    if (rc < 0)
        crater_store_event_list_free(out);
    free(w);
    return rc;
}

/* ---- transactions ------------------------------------------------------ */

static json_t *compare_json(et_t *e, const crater__txn_op_t *c)
{
    json_t *o = json_object();

    set_b64(o, "key", e->prefix, c->key, strlen(c->key));
    json_object_set_new(o, "result", json_string("EQUAL"));
    json_object_set_new(o,
                        "target",
                        json_string(c->mod_rev ? "MOD" : "CREATE"));
    set_i64(o, c->mod_rev ? "mod_revision" : "create_revision", c->mod_rev);
    return o;
}

static json_t *op_json(et_t *e, const crater__txn_op_t *op)
{
    json_t *o = json_object(), *w = json_object();

    set_b64(o, "key", e->prefix, op->key, strlen(op->key));
    if (op->kind == CRATER__TXN_PUT) {
        set_b64(o, "value", "", op->value, op->len);
        if (op->lease)
            set_i64(o, "lease", op->lease);
    }
    json_object_set_new(w,
                        op->kind == CRATER__TXN_PUT ? "request_put"
                                                    : "request_delete_range",
                        o);
    return w;
}

/* The fence's compare and its read in the failure branch, when set. */
static void add_fence(et_t *e, json_t *cmp, json_t *fail)
{
    int64_t fr = atomic_load(&e->fence_rev);
    crater__txn_op_t f = {.kind = CRATER__TXN_EXPECT,
                          .key = e->fence_key,
                          .mod_rev = fr};
    json_t *rr, *w;

    if (fr <= 0)
        return;
    json_array_append_new(cmp, compare_json(e, &f));
    if (!fail)
        return;
    rr = json_object();
    w = json_object();
    set_b64(rr, "key", e->prefix, f.key, strlen(f.key));
    json_object_set_new(w, "request_range", rr);
    json_array_append_new(fail, w);
}

static json_t *txn_json(et_t *e, const crater_txn_t *t)
{
    size_t nc, no;
    const crater__txn_op_t *c = crater__txn_compares(t, &nc);
    const crater__txn_op_t *o = crater__txn_ops(t, &no);
    json_t *cmp = json_array(), *ok = json_array(), *fail = json_array();

    add_fence(e, cmp, fail);
    for (size_t i = 0; i < nc; i++) {
        json_t *rr = json_object(), *w = json_object();
        json_array_append_new(cmp, compare_json(e, &c[i]));
        set_b64(rr, "key", e->prefix, c[i].key, strlen(c[i].key));
        json_object_set_new(w, "request_range", rr);
        json_array_append_new(fail, w);
    }
    for (size_t i = 0; i < no; i++)
        json_array_append_new(ok, op_json(e, &o[i]));
    return json_pack("{s:o, s:o, s:o}",
                     "compare",
                     cmp,
                     "success",
                     ok,
                     "failure",
                     fail);
}

static int not_leader(et_t *e, int64_t have, crater_error_t *err)
{
    return crater_errorf_field(err,
                               CRATER_EUNAVAIL,
                               e->fence_key,
                               "not the leader: leader key '%s' is at "
                               "revision %lld, this craterd's is %lld "
                               "(lease lost or another leader)",
                               e->fence_key,
                               (long long)have,
                               (long long)atomic_load(&e->fence_rev));
}

/* The mod_revision the i-th read of the failure branch found (0: none). */
static int64_t read_rev(json_t *rs, size_t i)
{
    json_t *rr = json_object_get(json_array_get(rs, i), "response_range");
    json_t *kv = json_array_get(json_object_get(rr, "kvs"), 0);

    return kv ? jint(kv, "mod_revision") : 0;
}

/* ESTALE naming the first compare the failure branch's reads contradict;
 * EUNAVAIL when the fence (read first) is what failed. */
static int failed_compare(et_t *e,
                          const crater_txn_t *t,
                          json_t *resp,
                          crater_error_t *err)
{
    int64_t fr = atomic_load(&e->fence_rev);
    size_t nc, off = fr > 0 ? 1 : 0;
    const crater__txn_op_t *c = crater__txn_compares(t, &nc);
    json_t *rs = json_object_get(resp, "responses");

    if (fr < 0 || (off && read_rev(rs, 0) != fr))
        return not_leader(e, fr < 0 ? 0 : read_rev(rs, 0), err);
    for (size_t i = 0; i < nc; i++) {
        json_t *rr =
            json_object_get(json_array_get(rs, i + off), "response_range");
        json_t *kv = json_array_get(json_object_get(rr, "kvs"), 0);
        int64_t have = kv ? jint(kv, "mod_revision") : 0;
        if (have != c[i].mod_rev)
            return crater_errorf_field(err,
                                       CRATER_ESTALE,
                                       c[i].key,
                                       "key '%s' is at revision %lld, "
                                       "expected %lld",
                                       c[i].key,
                                       (long long)have,
                                       (long long)c[i].mod_rev);
    }
    return crater_errorf(err, CRATER_ESTALE, "a compare failed");
}

/* The first put with a lease: the key a missing lease is reported on. */
static const char *lease_key(const crater_txn_t *t)
{
    size_t n;
    const crater__txn_op_t *o = crater__txn_ops(t, &n);

    for (size_t i = 0; i < n; i++)
        if (o[i].kind == CRATER__TXN_PUT && o[i].lease)
            return o[i].key;
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* POST /v3/kv/txn (body consumed). A transaction whose outcome is
 * unknown (EUNAVAIL: a member lost or an election under way, "etcdserver:
 * request timed out", "leader changed", or the connection broke once it
 * was sent) is sent again when `again`: it has no compare of its own
 * (only the fence), so applying it twice writes the same values, and raft
 * keeps a first attempt that does commit before the second in the log,
 * and the writer thread sends nothing else meanwhile: no later write is
 * overtaken. Until the store's timeout, or the fence is revoked (a
 * deposed leader stops at once). Without this, one lost etcd member of
 * three failed clients' submissions (test_ha). */
static json_t *txn_call(et_t *e, json_t *body, bool again, crater_error_t *err)
{
    int64_t end = mono_ms() + e->timeout_ms;
    long wait = 50;
    json_t *r;

    for (;;) {
        r = call(e, e->wh, "/v3/kv/txn", json_incref(body), false, err);
        if (r || !again || err->errnum != CRATER_EUNAVAIL
            || atomic_load(&e->fence_rev) < 0 || mono_ms() + wait >= end)
            break;
        crater_log(LOG_WARNING,
                   "store: %s: sending the transaction again in %ld ms",
                   err->text,
                   wait);
        sleep_ms(wait);
        wait = wait * 2 > 1000 ? 1000 : wait * 2;
    }
    json_decref(body);
    return r;
}

static bool no_compares(const crater_txn_t *t)
{
    size_t n;

    (void)crater__txn_compares(t, &n);
    return n == 0;
}

static int run_txn(et_t *e, crater_txn_t *t, int64_t *rev, crater_error_t *err)
{
    json_t *r;
    int rc = 0;

    if (atomic_load(&e->fence_rev) < 0)
        return not_leader(e, 0, err);
    r = txn_call(e, txn_json(e, t), no_compares(t), err);
    if (!r) {
        if (err->errnum == CRATER_ENOENT && lease_key(t))
            snprintf(err->field, sizeof(err->field), "%s", lease_key(t));
        return -1;
    }
    *rev = jint(json_object_get(r, "header"), "revision");
    if (!json_is_true(json_object_get(r, "succeeded")))
        rc = failed_compare(e, t, r, err);
    json_decref(r);
    return rc;
}

/* ELIMIT before sending a transaction etcd would refuse as too large. */
static int check_size(et_t *e, const crater_txn_t *t, crater_error_t *err)
{
    size_t n, total = 0, big = 0;
    const crater__txn_op_t *o = crater__txn_ops(t, &n);

    for (size_t i = 0; i < n; i++) {
        total += e->plen + strlen(o[i].key) + o[i].len;
        if (o[i].len > o[big].len)
            big = i;
    }
    if (total + REQ_OVERHEAD <= e->max_req)
        return 0;
    return crater_errorf_field(err,
                               CRATER_ELIMIT,
                               o[big].key,
                               "transaction of %zu bytes (key '%s': %zu) is "
                               "over etcd's request limit of %zu bytes less "
                               "%d (store.etcdMaxRequestBytes, etcd "
                               "--max-request-bytes)",
                               total,
                               o[big].key,
                               o[big].len,
                               e->max_req,
                               REQ_OVERHEAD);
}

static int run_compact(et_t *e, int64_t rev, crater_error_t *err)
{
    json_t *b, *r;

    if (rev <= atomic_load(&e->compacted))
        return 0;
    if (!(b = json_object()))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    set_i64(b, "revision", rev);
    json_object_set_new(b, "physical", json_true());
    r = call(e, e->wh, "/v3/kv/compaction", b, true, err);
    if (!r && err->errnum == CRATER_ESTALE)
        return 0; /* already compacted further, by another client */
    if (!r)
        return -1;
    json_decref(r);
    note_compacted(e, rev);
    return 0;
}

/* ---- the writer ---------------------------------------------------------- */

static void run_req(et_t *e, req_t *r)
{
    crater_error_clear(&r->err);
    r->rev = 0;
    if (r->kind == REQ_TXN)
        r->rc = run_txn(e, r->txn, &r->rev, &r->err);
    else
        r->rc = run_compact(e, r->arg_rev, &r->err);
    if (r->kind == REQ_COMPACT)
        r->rev = atomic_load(&e->rev);
}

static void finish(et_t *e, req_t *r)
{
    if (r->sync) {
        pthread_mutex_lock(&e->lock);
        r->done = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->lock);
        return;
    }
    r->cb(r->rc, r->rev, &r->err, r->cb_arg);
    crater_txn_destroy(r->txn);
    free(r);
}

/* Whether r's keys can join a batch already holding the ops of b..last
 * without two writes to one key or a compare that would see the batch's
 * own writes (etcd evaluates every compare before any op). */
static bool disjoint(const req_t *b, const req_t *r)
{
    size_t nc, no, mc, mo;
    const crater__txn_op_t *c = crater__txn_compares(r->txn, &nc);
    const crater__txn_op_t *o = crater__txn_ops(r->txn, &no);

    for (; b != r; b = b->next) {
        const crater__txn_op_t *bo = crater__txn_ops(b->txn, &mo);
        (void)crater__txn_compares(b->txn, &mc);
        for (size_t i = 0; i < mo; i++) {
            for (size_t k = 0; k < nc; k++)
                if (strcmp(bo[i].key, c[k].key) == 0)
                    return false;
            for (size_t k = 0; k < no; k++)
                if (strcmp(bo[i].key, o[k].key) == 0)
                    return false;
        }
    }
    return true;
}

static size_t txn_bytes(et_t *e, const crater_txn_t *t)
{
    size_t n, total = 0;
    const crater__txn_op_t *o = crater__txn_ops(t, &n);

    for (size_t i = 0; i < n; i++)
        total += e->plen + strlen(o[i].key) + o[i].len;
    return total;
}

/* Takes the head request and the transactions after it that fit in one
 * etcd transaction with it (called with e->lock held, queue not empty). */
static req_t *take_batch(et_t *e)
{
    req_t *b = e->head, *r = b;
    size_t nc, no, ops = 0, bytes = 0;
    size_t cmps = atomic_load(&e->fence_rev) > 0 ? 1 : 0;

    while (r && r->kind == REQ_TXN) {
        (void)crater__txn_compares(r->txn, &nc);
        (void)crater__txn_ops(r->txn, &no);
        cmps += nc;
        ops += no;
        bytes += txn_bytes(e, r->txn);
        if (r != b
            && (cmps > TXN_OPS_MAX || ops > TXN_OPS_MAX
                || bytes + REQ_OVERHEAD > e->max_req || !disjoint(b, r)))
            break;
        r = r->next;
    }
    if (r == b)
        r = b->next; /* a compaction goes alone */
    e->head = r;
    if (!r)
        e->tail = NULL;
    for (req_t *x = b; x; x = x->next)
        if (x->next == r) {
            x->next = NULL;
            break;
        }
    return b;
}

/* Group commit: the batch's transactions as one etcd transaction (one
 * round trip, one etcd fsync). If it does not succeed as a whole (a
 * compare failed, a lease is missing) each is run on its own, so one
 * failure fails only its own transaction. */
static void run_batch(et_t *e, req_t *b)
{
    json_t *cmp = json_array(), *ok = json_array(), *body, *r;
    crater_error_t err;

    if (atomic_load(&e->fence_rev) < 0) { /* each fails on its own */
        for (req_t *x = b; x; x = x->next)
            run_req(e, x);
        json_decref(cmp);
        json_decref(ok);
        return;
    }
    bool again = true;

    add_fence(e, cmp, NULL);
    for (req_t *x = b; x; x = x->next) {
        json_t *j = txn_json(e, x->txn);
        json_array_extend(cmp, json_object_get(j, "compare"));
        json_array_extend(ok, json_object_get(j, "success"));
        json_decref(j);
        again = again && no_compares(x->txn);
    }
    body =
        json_pack("{s:o, s:o, s:[]}", "compare", cmp, "success", ok, "failure");
    r = txn_call(e, body, again, &err);
    if (r && json_is_true(json_object_get(r, "succeeded"))) {
        int64_t rev = jint(json_object_get(r, "header"), "revision");
        for (req_t *x = b; x; x = x->next) {
            crater_error_clear(&x->err);
            x->rc = 0;
            x->rev = rev;
        }
    } else {
        for (req_t *x = b; x; x = x->next)
            if (!r && err.errnum == CRATER_EUNAVAIL) { /* outcome unknown */
                x->err = err;
                x->rc = -1;
            } else
                run_req(e, x);
    }
    json_decref(r);
}

static void *writer_main(void *arg)
{
    et_t *e = arg;

    pthread_setname_np(pthread_self(), "store-etcd"); /* top -H, perf, gdb */

    pthread_mutex_lock(&e->lock);
    for (;;) {
        req_t *b = e->head, *next;
        if (!b && e->stop)
            break;
        if (!b) {
            pthread_cond_wait(&e->cv, &e->lock);
            continue;
        }
        b = take_batch(e);
        pthread_mutex_unlock(&e->lock);
        if (b->next)
            run_batch(e, b);
        else
            run_req(e, b);
        for (; b; b = next) {
            next = b->next;
            finish(e, b);
        }
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static int submit(et_t *e, req_t *r, crater_error_t *err)
{
    pthread_mutex_lock(&e->lock);
    if (e->stop) {
        pthread_mutex_unlock(&e->lock);
        return crater_errorf(err, CRATER_EUNAVAIL, "store is closing");
    }
    r->next = NULL;
    if (e->tail)
        e->tail->next = r;
    else
        e->head = r;
    e->tail = r;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->lock);
    return 0;
}

static int run_sync(et_t *e, req_t *r, int64_t *rev, crater_error_t *err)
{
    if (e->writer_started && pthread_equal(pthread_self(), e->writer))
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "synchronous store call on the writer thread");
    r->sync = true;
    if (submit(e, r, err) < 0)
        return -1;
    pthread_mutex_lock(&e->lock);
    while (!r->done)
        pthread_cond_wait(&e->cv, &e->lock);
    pthread_mutex_unlock(&e->lock);
    if (rev)
        *rev = r->rev;
    if (r->rc < 0 && err)
        *err = r->err;
    return r->rc;
}

static int et_commit(crater_store_t *st,
                     crater_txn_t *t,
                     int64_t *rev,
                     crater_error_t *err)
{
    et_t *e = (et_t *)st;
    req_t r = {.kind = REQ_TXN, .txn = t};

    if (check_size(e, t, err) < 0)
        return -1;
    return run_sync(e, &r, rev, err);
}

static int queue_async(et_t *e, req_t *r, crater_error_t *err)
{
    if (submit(e, r, err) == 0)
        return 0;
    crater_txn_destroy(r->txn);
    free(r);
    return -1;
}

static int et_commit_async(crater_store_t *st,
                           crater_txn_t *t,
                           crater_store_done_f cb,
                           void *arg,
                           crater_error_t *err)
{
    et_t *e = (et_t *)st;
    req_t *r;

    if (check_size(e, t, err) < 0) {
        crater_txn_destroy(t);
        return -1;
    }
    if (!(r = calloc(1, sizeof(*r)))) {
        crater_txn_destroy(t);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    *r = (req_t){.kind = REQ_TXN, .txn = t, .cb = cb, .cb_arg = arg};
    return queue_async(e, r, err);
}

static int et_compact(crater_store_t *st, int64_t rev, crater_error_t *err)
{
    req_t r = {.kind = REQ_COMPACT, .arg_rev = rev};

    return run_sync((et_t *)st, &r, NULL, err);
}

static int et_compact_async(crater_store_t *st,
                            int64_t rev,
                            crater_store_done_f cb,
                            void *arg,
                            crater_error_t *err)
{
    req_t *r = calloc(1, sizeof(*r));

    if (!r)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    *r = (req_t){.kind = REQ_COMPACT, .arg_rev = rev, .cb = cb, .cb_arg = arg};
    return queue_async((et_t *)st, r, err);
}

/* ---- leases ------------------------------------------------------------ */

static json_t *lease_call(et_t *e,
                          const char *path,
                          json_t *b,
                          crater_error_t *err)
{
    CURL *h = handle_get(e);
    json_t *r;

    if (!h) {
        json_decref(b);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    r = call(e, h, path, b, false, err);
    handle_put(e, h);
    return r;
}

static int et_lease_grant(crater_store_t *st,
                          int64_t ttl_ms,
                          int64_t now_ms,
                          int64_t *id,
                          crater_error_t *err)
{
    json_t *b = json_object(), *r;

    (void)now_ms; /* etcd keeps the time */
    set_i64(b, "TTL", (ttl_ms + 999) / 1000);
    if (!(r = lease_call((et_t *)st, "/v3/lease/grant", b, err)))
        return -1;
    *id = jint(r, "ID");
    json_decref(r);
    return 0;
}

static int et_lease_keepalive(crater_store_t *st,
                              int64_t id,
                              int64_t now_ms,
                              crater_error_t *err)
{
    json_t *b = json_object(), *r;
    int rc = 0;

    (void)now_ms;
    set_i64(b, "ID", id);
    if (!(r = lease_call((et_t *)st, "/v3/lease/keepalive", b, err)))
        return -1;
    if (jint(json_object_get(r, "result"), "TTL") <= 0)
        rc = crater_errorf_field(err,
                                 CRATER_ENOENT,
                                 "lease",
                                 "lease %lld is gone",
                                 (long long)id);
    json_decref(r);
    return rc;
}

static int et_lease_revoke(crater_store_t *st, int64_t id, crater_error_t *err)
{
    json_t *b = json_object(), *r;

    set_i64(b, "ID", id);
    if (!(r = lease_call((et_t *)st, "/v3/lease/revoke", b, err)))
        return -1;
    json_decref(r);
    return 0;
}

static int et_expire_leases(crater_store_t *st,
                            int64_t now_ms,
                            crater_error_t *err)
{
    (void)st;
    (void)now_ms;
    (void)err;
    return 0; /* etcd expires its leases itself */
}

/* ---- open / close -------------------------------------------------------- */

static void et_free(et_t *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->npool; i++)
        curl_easy_cleanup(e->pool[i]);
    curl_easy_cleanup(e->wh);
    crater_strv_free(e->eps);
    free(e->prefix);
    free(e->ca);
    free(e->cert);
    free(e->key);
    free(e->user);
    free(e->password);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cv);
    free(e);
}

static void et_close(crater_store_t *st)
{
    et_t *e = (et_t *)st;

    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->lock);
    if (e->writer_started)
        pthread_join(e->writer, NULL);
    et_free(e);
}

static int et_set_fence(crater_store_t *st,
                        const char *key,
                        int64_t mod_rev,
                        crater_error_t *err)
{
    et_t *e = (et_t *)st;

    (void)err;
    if (mod_rev < 0) {
        atomic_store(&e->fence_rev, -1);
        crater_log(LOG_WARNING, "store: fence revoked: writes refused");
        return 0;
    }
    pthread_mutex_lock(&e->lock);
    snprintf(e->fence_key, sizeof(e->fence_key), "%s", key);
    pthread_mutex_unlock(&e->lock);
    atomic_store(&e->fence_rev, mod_rev);
    return 0;
}

static const crater__store_ops_t etcd_ops = {
    .version = 3,
    .close = et_close,
    .get = et_get,
    .list = et_list,
    .revision = et_revision,
    .compacted_revision = et_compacted_revision,
    .changes = et_changes,
    .compact = et_compact,
    .compact_async = et_compact_async,
    .stats = et_stats,
    .commit = et_commit,
    .commit_async = et_commit_async,
    .lease_grant = et_lease_grant,
    .lease_keepalive = et_lease_keepalive,
    .lease_revoke = et_lease_revoke,
    .expire_leases = et_expire_leases,
    .set_fence = et_set_fence,
};

static char *dup_opt(const char *s, bool *oom)
{
    char *d = s ? strdup(s) : NULL;

    if (s && !d)
        *oom = true;
    return d;
}

static int check_opts(const crater_store_etcd_opts_t *o, crater_error_t *err)
{
    if (!o || !o->endpoints || !o->endpoints[0])
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "store.etcdEndpoints",
                                   "at least one etcd endpoint is needed");
    for (size_t i = 0; o->endpoints[i]; i++)
        if (strncmp(o->endpoints[i], "http://", 7) != 0
            && strncmp(o->endpoints[i], "https://", 8) != 0)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "store.etcdEndpoints",
                                       "'%s' is not an http:// or https:// "
                                       "URL",
                                       o->endpoints[i]);
    if (o->prefix && strlen(o->prefix) > CRATER_STORE_KEY_MAX)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "store.etcdPrefix",
                                   "longer than %d bytes",
                                   CRATER_STORE_KEY_MAX);
    if (!o->cert_file != !o->key_file)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   o->cert_file ? "store.etcdKeyFile"
                                                : "store.etcdCertFile",
                                   "a client certificate needs its key "
                                   "and a key its certificate");
    return 0;
}

static et_t *et_alloc(const crater_store_etcd_opts_t *o, crater_error_t *err)
{
    et_t *e = calloc(1, sizeof(*e));
    bool oom = !e;

    if (oom) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    e->base.ops = &etcd_ops;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->eps = crater_strv_dup(o->endpoints);
    e->nep = crater_strv_len(o->endpoints);
    e->prefix = dup_opt(o->prefix ? o->prefix : DEFAULT_PREFIX, &oom);
    e->plen = e->prefix ? strlen(e->prefix) : 0;
    e->ca = dup_opt(o->ca_file, &oom);
    e->cert = dup_opt(o->cert_file, &oom);
    e->key = dup_opt(o->key_file, &oom);
    e->user = dup_opt(o->user, &oom);
    e->password = dup_opt(o->password, &oom);
    e->max_req = o->max_request_bytes ? o->max_request_bytes : DEFAULT_MAX_REQ;
    e->timeout_ms =
        o->timeout_ms > 0 ? (long)o->timeout_ms : DEFAULT_TIMEOUT_MS;
    e->wh = curl_easy_init();
    if (oom || !e->eps || !e->wh) {
        et_free(e);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    return e;
}

crater_store_t *crater_store_open_etcd(const crater_store_etcd_opts_t *o,
                                       crater_error_t *err)
{
    et_t *e;

    if (check_opts(o, err) < 0)
        return NULL;
    pthread_once(&curl_once, curl_init_once);
    if (!(e = et_alloc(o, err)))
        return NULL;
    if ((e->user && authenticate(e, e->wh, err) < 0)
        || fetch_revision(e, 0, err) < 0 || find_compacted(e, err) < 0) {
        et_free(e);
        return NULL;
    }
    if (pthread_create(&e->writer, NULL, writer_main, e) != 0) {
        et_free(e);
        crater_errorf(err, CRATER_ENOMEM, "cannot start the writer thread");
        return NULL;
    }
    e->writer_started = true;
    crater_log(LOG_INFO,
               "store: etcd %s (%zu endpoints), prefix '%s', revision %lld",
               e->eps[0],
               e->nep,
               e->prefix,
               (long long)atomic_load(&e->rev));
    return &e->base;
}
