/* backends.c - services and backends behind one mutex (see backends.h).
 *
 * Lists, not hash tables: a gateway fronts a handful of services with a
 * handful of replicas each, and a pick scans one service's backends. The
 * mutex is held for a scan, never across I/O.
 */
#include "backends.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gw_table {
    pthread_mutex_t mu;
    gw_service_t *services; /* in the order added */
    unsigned rr;            /* tie breaker for picks */
};

gw_table_t *gw__table_create(void)
{
    gw_table_t *t = calloc(1, sizeof(*t));

    if (t != NULL)
        pthread_mutex_init(&t->mu, NULL);
    return t;
}

static void backend_unref(gw_backend_t *b)
{
    if (--b->refs == 0)
        free(b);
}

void gw__table_destroy(gw_table_t *t)
{
    gw_service_t *s, *sn;
    gw_backend_t *b, *bn;

    if (t == NULL)
        return;
    for (s = t->services; s != NULL; s = sn) {
        sn = s->next;
        for (b = s->backends; b != NULL; b = bn) {
            bn = b->next;
            backend_unref(b);
        }
        free(s);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static bool name_ok(const char *n)
{
    size_t len = strlen(n);

    if (len == 0 || len >= GW_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z')
              || (n[i] >= '0' && n[i] <= '9') || strchr("_.-", n[i])))
            return false;
    return true;
}

static gw_service_t *find_service(gw_table_t *t, const char *name)
{
    for (gw_service_t *s = t->services; s != NULL; s = s->next)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

gw_service_t *gw__table_service(gw_table_t *t, const char *name)
{
    gw_service_t *s;

    pthread_mutex_lock(&t->mu);
    s = find_service(t, name);
    pthread_mutex_unlock(&t->mu);
    return s;
}

int gw__table_add_service(gw_table_t *t, const char *name, crater_error_t *err)
{
    gw_service_t *s, **tail;

    if (!name_ok(name))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "service",
                                   "service: bad name '%.80s' (1..63 of "
                                   "A-Z a-z 0-9 _ . -)",
                                   name);
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    snprintf(s->name, sizeof s->name, "%s", name);
    s->max_batch = 1;
    s->max_inflight = 1;
    pthread_mutex_lock(&t->mu);
    if (find_service(t, name) != NULL) {
        pthread_mutex_unlock(&t->mu);
        free(s);
        return crater_errorf_field(err,
                                   CRATER_EEXIST,
                                   "service",
                                   "service: '%s' is already defined",
                                   name);
    }
    for (tail = &t->services; *tail != NULL; tail = &(*tail)->next)
        ;
    *tail = s;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

int gw__table_set_batch(gw_table_t *t,
                        const char *name,
                        unsigned max_batch,
                        int64_t timeout_us,
                        unsigned inflight,
                        crater_error_t *err)
{
    gw_service_t *s = gw__table_service(t, name);

    if (s == NULL)
        return crater_errorf_field(err,
                                   CRATER_ENOENT,
                                   "service",
                                   "service: no service '%.80s'",
                                   name);
    if (max_batch < 1 || max_batch > 4096)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "maxBatchSize",
                                   "maxBatchSize: %u is not 1..4096",
                                   max_batch);
    if (timeout_us < 0 || timeout_us > 60000000)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "batchTimeout",
                                   "batchTimeout: must be 0..60 s");
    if (inflight < 1 || inflight > 64)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "maxInflight",
                                   "maxInflight: %u is not 1..64",
                                   inflight);
    pthread_mutex_lock(&t->mu);
    s->max_inflight = inflight;
    s->max_batch = max_batch;
    s->batch_timeout_us = timeout_us;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static gw_backend_t *find_backend(gw_service_t *s,
                                  const char *url,
                                  gw_backend_t ***link)
{
    gw_backend_t **p;

    for (p = &s->backends; *p != NULL; p = &(*p)->next)
        if (strcmp((*p)->url, url) == 0) {
            if (link != NULL)
                *link = p;
            return *p;
        }
    return NULL;
}

/* Copy url without trailing slashes into out; -1 when it is not http. */
static int norm_url(const char *url, char *out, crater_error_t *err)
{
    size_t len = strlen(url);

    while (len > 7 && url[len - 1] == '/')
        len--;
    if (strncmp(url, "http://", 7) != 0 || len <= 7 || len >= GW_URL_MAX)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "backend",
                                   "backend: '%.100s' is not "
                                   "http://host:port",
                                   url);
    memcpy(out, url, len);
    out[len] = '\0';
    return 0;
}

int gw__table_add(gw_table_t *t,
                  const char *service,
                  const char *url,
                  crater_error_t *err)
{
    gw_service_t *s;
    gw_backend_t *b = calloc(1, sizeof(*b));

    if (b == NULL)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (norm_url(url, b->url, err) < 0) {
        free(b);
        return -1;
    }
    b->refs = 1;
    pthread_mutex_lock(&t->mu);
    s = find_service(t, service);
    if (s == NULL || find_backend(s, b->url, NULL) != NULL) {
        pthread_mutex_unlock(&t->mu);
        free(b);
        if (s == NULL)
            return crater_errorf_field(err,
                                       CRATER_ENOENT,
                                       "service",
                                       "service: no service '%.80s'",
                                       service);
        return crater_errorf_field(err,
                                   CRATER_EEXIST,
                                   "backend",
                                   "backend: %s is already in %s",
                                   url,
                                   service);
    }
    b->next = s->backends;
    s->backends = b;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* Lock, find service and backend; on failure unlock and fill err. */
static gw_backend_t *lock_find(gw_table_t *t,
                               const char *service,
                               const char *url,
                               gw_backend_t ***link,
                               crater_error_t *err)
{
    char u[GW_URL_MAX];
    gw_service_t *s;
    gw_backend_t *b = NULL;

    if (norm_url(url, u, err) < 0)
        return NULL;
    pthread_mutex_lock(&t->mu);
    s = find_service(t, service);
    if (s != NULL)
        b = find_backend(s, u, link);
    if (b == NULL) {
        pthread_mutex_unlock(&t->mu);
        crater_errorf_field(err,
                            CRATER_ENOENT,
                            "backend",
                            "backend: no %s in service '%.80s'",
                            u,
                            service);
    }
    return b;
}

int gw__table_remove(gw_table_t *t,
                     const char *service,
                     const char *url,
                     crater_error_t *err)
{
    gw_backend_t **link = NULL, *b = lock_find(t, service, url, &link, err);

    if (b == NULL)
        return -1;
    *link = b->next;
    b->removed = true;
    b->ready = false;
    backend_unref(b);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

gw_backend_t *gw__table_drain(gw_table_t *t,
                              const char *service,
                              const char *url,
                              crater_error_t *err)
{
    gw_backend_t **link = NULL, *b = lock_find(t, service, url, &link, err);

    if (b == NULL)
        return NULL;
    *link = b->next;
    b->removed = true;
    b->ready = false; /* the table's reference becomes the caller's */
    pthread_mutex_unlock(&t->mu);
    return b;
}

unsigned gw__table_outstanding(gw_table_t *t, gw_backend_t *b)
{
    unsigned n;

    pthread_mutex_lock(&t->mu);
    n = b->outstanding;
    pthread_mutex_unlock(&t->mu);
    return n;
}

int gw__table_set_hold(gw_table_t *t,
                       const char *name,
                       int64_t hold_us,
                       crater_error_t *err)
{
    gw_service_t *s = gw__table_service(t, name);

    if (s == NULL)
        return crater_errorf_field(err,
                                   CRATER_ENOENT,
                                   "service",
                                   "service: no '%.80s'",
                                   name);
    atomic_store(&s->hold_us, hold_us > 0 ? hold_us : 0);
    return 0;
}

int gw__table_set_ready(gw_table_t *t,
                        const char *service,
                        const char *url,
                        bool ready,
                        crater_error_t *err)
{
    gw_backend_t *b = lock_find(t, service, url, NULL, err);

    if (b == NULL)
        return -1;
    b->ready = ready;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

gw_backend_t *gw__table_pick(gw_table_t *t, gw_service_t *s, unsigned limit)
{
    gw_backend_t *best = NULL;
    unsigned n = 0, i = 0, start, best_order = 0;

    pthread_mutex_lock(&t->mu);
    for (gw_backend_t *b = s->backends; b != NULL; b = b->next)
        n++;
    start = n ? t->rr++ % n : 0;
    for (gw_backend_t *b = s->backends; b != NULL; b = b->next, i++) {
        /* ties go to the first at or after a rotating start */
        unsigned order = (i + n - start) % n;
        if (!b->ready || (limit > 0 && b->outstanding >= limit))
            continue;
        if (best == NULL || b->outstanding < best->outstanding
            || (b->outstanding == best->outstanding && order < best_order)) {
            best = b;
            best_order = order;
        }
    }
    if (best != NULL) {
        best->outstanding++;
        best->refs++;
    }
    pthread_mutex_unlock(&t->mu);
    return best;
}

bool gw__table_can_pick(gw_table_t *t, gw_service_t *s, unsigned limit)
{
    bool yes = false;

    pthread_mutex_lock(&t->mu);
    for (gw_backend_t *b = s->backends; b != NULL && !yes; b = b->next)
        yes = b->ready && (limit == 0 || b->outstanding < limit);
    pthread_mutex_unlock(&t->mu);
    return yes;
}

void gw__table_done(gw_table_t *t, gw_backend_t *b)
{
    pthread_mutex_lock(&t->mu);
    b->outstanding--;
    backend_unref(b);
    pthread_mutex_unlock(&t->mu);
}

void gw__table_mark(gw_table_t *t, gw_backend_t *b, bool ready)
{
    pthread_mutex_lock(&t->mu);
    b->ready = ready && !b->removed;
    pthread_mutex_unlock(&t->mu);
}

void gw__table_counts(gw_table_t *t,
                      gw_service_t *s,
                      unsigned *ready,
                      unsigned *total)
{
    *ready = *total = 0;
    pthread_mutex_lock(&t->mu);
    for (gw_backend_t *b = s->backends; b != NULL; b = b->next) {
        (*total)++;
        *ready += b->ready;
    }
    pthread_mutex_unlock(&t->mu);
}

void gw__table_each(gw_table_t *t, gw_each_f fn, void *arg)
{
    pthread_mutex_lock(&t->mu);
    for (gw_service_t *s = t->services; s != NULL; s = s->next)
        for (gw_backend_t *b = s->backends; b != NULL; b = b->next) {
            bool take = false;
            fn(s, b, &take, arg);
            if (take)
                b->refs++;
        }
    pthread_mutex_unlock(&t->mu);
}

void gw__table_release(gw_table_t *t, gw_backend_t *b)
{
    pthread_mutex_lock(&t->mu);
    backend_unref(b);
    pthread_mutex_unlock(&t->mu);
}

void gw__table_services(gw_table_t *t, gw_svc_f fn, void *arg)
{
    pthread_mutex_lock(&t->mu);
    for (gw_service_t *s = t->services; s != NULL; s = s->next)
        fn(s, arg);
    pthread_mutex_unlock(&t->mu);
}
