/* store.c - the backend-independent half of the store: transaction
 * building, key validation, freeing of results, and the thin public
 * wrappers that dispatch to a backend's crater__store_ops_t.
 *
 * A transaction is two growable arrays (compares, ops) of owned copies, so a
 * caller may free its buffers as soon as crater_txn_put returns and the same
 * transaction may be committed on another thread. Duplicate keys among the
 * ops are refused when added (as etcd does) so that one revision never holds
 * two events for one key; the scan is linear because transactions are small
 * (a job, its index entries).
 */
#include "store/store.h"

#include <stdlib.h>
#include <string.h>

struct crater_txn {
    crater__txn_op_t *cmp;
    size_t ncmp, capcmp;
    crater__txn_op_t *ops;
    size_t nops, capops;
};

void crater_skv_free(crater_skv_t *kv)
{
    if (!kv)
        return;
    free(kv->key);
    free(kv->value);
    kv->key = NULL;
    kv->value = NULL;
    kv->len = 0;
}

void crater_skv_list_free(crater_skv_list_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        crater_skv_free(&l->items[i]);
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

void crater_store_event_list_free(crater_store_event_list_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        crater_skv_free(&l->items[i].kv);
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

int crater__store_check_key(const char *key, bool prefix, crater_error_t *err)
{
    const char *what = prefix ? "prefix" : "key";
    size_t n;

    if (!key)
        return crater_errorf(err, CRATER_EINVAL, "%s is NULL", what);
    n = strnlen(key, CRATER_STORE_KEY_MAX + 1);
    if (n == 0 && !prefix)
        return crater_errorf_field(err, CRATER_EINVAL, "", "empty key");
    if (n > CRATER_STORE_KEY_MAX)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   key,
                                   "%s longer than %d bytes",
                                   what,
                                   CRATER_STORE_KEY_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c < 0x20 || c > 0x7e)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       key,
                                       "%s has a non-printable byte 0x%02x "
                                       "at offset %zu",
                                       what,
                                       c,
                                       i);
    }
    return 0;
}

crater_txn_t *crater_txn_create(void)
{
    return calloc(1, sizeof(crater_txn_t));
}

static void op_free(crater__txn_op_t *op)
{
    free(op->key);
    free(op->value);
}

void crater_txn_destroy(crater_txn_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncmp; i++)
        op_free(&t->cmp[i]);
    for (size_t i = 0; i < t->nops; i++)
        op_free(&t->ops[i]);
    free(t->cmp);
    free(t->ops);
    free(t);
}

/* Appends a zeroed slot to *arr; NULL on ENOMEM (array unchanged). */
static crater__txn_op_t *grow(crater__txn_op_t **arr, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        crater__txn_op_t *p = realloc(*arr, ncap * sizeof(*p));
        if (!p)
            return NULL;
        *arr = p;
        *cap = ncap;
    }
    memset(&(*arr)[*n], 0, sizeof(**arr));
    return &(*arr)[(*n)++];
}

static int check_dup(const crater_txn_t *t,
                     const char *key,
                     crater_error_t *err)
{
    for (size_t i = 0; i < t->nops; i++)
        if (strcmp(t->ops[i].key, key) == 0)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       key,
                                       "key '%s' appears twice in the "
                                       "transaction",
                                       key);
    return 0;
}

int crater_txn_expect(crater_txn_t *t,
                      const char *key,
                      int64_t mod_rev,
                      crater_error_t *err)
{
    crater__txn_op_t *op;
    char *k;

    if (crater__store_check_key(key, false, err) < 0)
        return -1;
    if (mod_rev < 0)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   key,
                                   "negative mod_rev %lld",
                                   (long long)mod_rev);
    if (!(k = strdup(key)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (!(op = grow(&t->cmp, &t->ncmp, &t->capcmp))) {
        free(k);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    op->kind = CRATER__TXN_EXPECT;
    op->key = k;
    op->mod_rev = mod_rev;
    return 0;
}

int crater_txn_put(crater_txn_t *t,
                   const char *key,
                   const void *value,
                   size_t len,
                   int64_t lease,
                   crater_error_t *err)
{
    crater__txn_op_t *op;
    char *k, *v;

    if (crater__store_check_key(key, false, err) < 0
        || check_dup(t, key, err) < 0)
        return -1;
    if (len > CRATER_STORE_VALUE_MAX)
        return crater_errorf_field(err,
                                   CRATER_ELIMIT,
                                   key,
                                   "value of %zu bytes is over the %u byte "
                                   "limit",
                                   len,
                                   CRATER_STORE_VALUE_MAX);
    if (lease < 0 || (len && !value))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   key,
                                   lease < 0 ? "negative lease" : "NULL value");
    k = strdup(key);
    v = malloc(len + 1);
    if (!k || !v || !(op = grow(&t->ops, &t->nops, &t->capops))) {
        free(k);
        free(v);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (len)
        memcpy(v, value, len);
    v[len] = '\0';
    *op = (crater__txn_op_t){.kind = CRATER__TXN_PUT,
                             .key = k,
                             .value = v,
                             .len = len,
                             .lease = lease};
    return 0;
}

int crater_txn_delete(crater_txn_t *t, const char *key, crater_error_t *err)
{
    crater__txn_op_t *op;
    char *k;

    if (crater__store_check_key(key, false, err) < 0
        || check_dup(t, key, err) < 0)
        return -1;
    if (!(k = strdup(key)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (!(op = grow(&t->ops, &t->nops, &t->capops))) {
        free(k);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    op->kind = CRATER__TXN_DELETE;
    op->key = k;
    return 0;
}

const crater__txn_op_t *crater__txn_compares(const crater_txn_t *t, size_t *n)
{
    *n = t->ncmp;
    return t->cmp;
}

const crater__txn_op_t *crater__txn_ops(const crater_txn_t *t, size_t *n)
{
    *n = t->nops;
    return t->ops;
}

/* ---- public wrappers --------------------------------------------------- */

void crater_store_close(crater_store_t *st)
{
    if (st)
        st->ops->close(st);
}

int crater_store_get(crater_store_t *st,
                     const char *key,
                     crater_skv_t *out,
                     crater_error_t *err)
{
    if (crater__store_check_key(key, false, err) < 0)
        return -1;
    return st->ops->get(st, key, out, err);
}

int crater_store_list(crater_store_t *st,
                      const char *prefix,
                      crater_skv_list_t *out,
                      crater_error_t *err)
{
    if (crater__store_check_key(prefix, true, err) < 0)
        return -1;
    return st->ops->list(st, prefix, out, err);
}

int64_t crater_store_revision(crater_store_t *st)
{
    return st->ops->revision(st);
}

int64_t crater_store_compacted_revision(crater_store_t *st)
{
    return st->ops->compacted_revision(st);
}

int crater_store_changes(crater_store_t *st,
                         const char *prefix,
                         int64_t after_rev,
                         size_t limit,
                         crater_store_event_list_t *out,
                         crater_error_t *err)
{
    if (crater__store_check_key(prefix, true, err) < 0)
        return -1;
    if (after_rev < 0)
        return crater_errorf(err,
                             CRATER_ERANGE,
                             "negative revision %lld",
                             (long long)after_rev);
    return st->ops->changes(st, prefix, after_rev, limit, out, err);
}

int crater_store_compact(crater_store_t *st, int64_t rev, crater_error_t *err)
{
    return st->ops->compact(st, rev, err);
}

int crater_store_compact_async(crater_store_t *st,
                               int64_t rev,
                               crater_store_done_f cb,
                               void *arg,
                               crater_error_t *err)
{
    if (st->ops->version < 2)
        return crater_errorf(err,
                             CRATER_EUNAVAIL,
                             "this store cannot compact asynchronously");
    return st->ops->compact_async(st, rev, cb, arg, err);
}

int crater_store_stats(crater_store_t *st,
                       crater_store_stats_t *out,
                       crater_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (st->ops->version < 2) {
        out->revision = st->ops->revision(st);
        out->compacted = st->ops->compacted_revision(st);
        out->events = -1;
        return 0;
    }
    return st->ops->stats(st, out, err);
}

int crater_store_commit(crater_store_t *st,
                        crater_txn_t *t,
                        int64_t *rev,
                        crater_error_t *err)
{
    if (!t)
        return crater_errorf(err, CRATER_EINVAL, "NULL transaction");
    return st->ops->commit(st, t, rev, err);
}

int crater_store_commit_async(crater_store_t *st,
                              crater_txn_t *t,
                              crater_store_done_f cb,
                              void *arg,
                              crater_error_t *err)
{
    if (!t || !cb) {
        crater_txn_destroy(t);
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "NULL transaction or callback");
    }
    return st->ops->commit_async(st, t, cb, arg, err);
}

int crater_store_lease_grant(crater_store_t *st,
                             int64_t ttl_ms,
                             int64_t now_ms,
                             int64_t *id,
                             crater_error_t *err)
{
    if (ttl_ms <= 0)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "ttl",
                                   "lease ttl must be positive, got %lld ms",
                                   (long long)ttl_ms);
    if (now_ms > INT64_MAX - ttl_ms)
        return crater_errorf_field(err,
                                   CRATER_ERANGE,
                                   "ttl",
                                   "lease deadline overflows");
    return st->ops->lease_grant(st, ttl_ms, now_ms, id, err);
}

int crater_store_lease_keepalive(crater_store_t *st,
                                 int64_t id,
                                 int64_t now_ms,
                                 crater_error_t *err)
{
    return st->ops->lease_keepalive(st, id, now_ms, err);
}

int crater_store_lease_revoke(crater_store_t *st,
                              int64_t id,
                              crater_error_t *err)
{
    return st->ops->lease_revoke(st, id, err);
}

int crater_store_expire_leases(crater_store_t *st,
                               int64_t now_ms,
                               crater_error_t *err)
{
    return st->ops->expire_leases(st, now_ms, err);
}

int crater_store_set_fence(crater_store_t *st,
                           const char *key,
                           int64_t mod_rev,
                           crater_error_t *err)
{
    if (crater__store_check_key(key, false, err) < 0)
        return -1;
    if (st->ops->version < 3 || !st->ops->set_fence)
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "store.backend",
                                   "this store backend has no fencing "
                                   "(leader election needs etcd)");
    return st->ops->set_fence(st, key, mod_rev, err);
}
