/* warm.c - a standby's warm copy of the store's records (see warm.h for
 * what it is for and why it holds records rather than decoded state).
 *
 * The copy is a jansson object used as a hash table: key -> the value's
 * bytes as a string (json_stringn_nocheck keeps any bytes, NULs included,
 * and its length). A put or delete is one hash operation; the sort by key
 * that the loader wants happens once, when the copy is listed at
 * promotion (10,000 records: a few milliseconds).
 *
 * Revisions: the copy reflects revision R when it holds every put and
 * delete up to R. A load sets R to the list's revision. A follow reads
 * the store's revision S before it asks for the changes after R: the
 * feed answers every change up to at least S, so afterwards the copy
 * reflects max(S, the last event's revision). Reading S after the call
 * instead could count a commit the feed had not answered yet.
 */
#include "daemon/warm.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct crater_warm {
    json_t *map; /* key -> string holding the value's bytes */
    int64_t rev; /* -1: not loaded */
};

crater_warm_t *crater_warm_create(void)
{
    crater_warm_t *w = calloc(1, sizeof(*w));

    if (!w || !(w->map = json_object())) {
        free(w);
        return NULL;
    }
    w->rev = -1;
    return w;
}

void crater_warm_destroy(crater_warm_t *w)
{
    if (!w)
        return;
    json_decref(w->map);
    free(w);
}

void crater_warm_clear(crater_warm_t *w)
{
    json_object_clear(w->map);
    w->rev = -1;
}

int64_t crater_warm_revision(const crater_warm_t *w)
{
    return w->rev;
}

size_t crater_warm_count(const crater_warm_t *w)
{
    return json_object_size(w->map);
}

static int put(json_t *map, const char *key, const char *v, size_t len)
{
    json_t *s = json_stringn_nocheck(v ? v : "", len);

    return s ? json_object_set_new_nocheck(map, key, s) : -1;
}

int crater_warm_load(crater_warm_t *w, crater_store_t *st, crater_error_t *err)
{
    crater_skv_list_t l = {0};
    json_t *map = json_object();
    int rc = map ? 0 : -1;

    if (map && crater_store_list(st, CRATER_WARM_PREFIX, &l, err) < 0) {
        json_decref(map);
        return -1;
    }
    for (size_t i = 0; i < l.count && rc == 0; i++)
        rc = put(map, l.items[i].key, l.items[i].value, l.items[i].len);
    if (rc == 0) {
        json_decref(w->map);
        w->map = map;
        w->rev = l.revision;
    } else
        json_decref(map);
    crater_skv_list_free(&l);
    return rc == 0 ? 0 : crater_errorf(err, CRATER_ENOMEM, "out of memory");
}

int crater_warm_apply(crater_warm_t *w,
                      const crater_store_event_t *ev,
                      crater_error_t *err)
{
    if (ev->type == CRATER_STORE_DELETE)
        (void)json_object_del(w->map, ev->kv.key); /* absent: fine */
    else if (put(w->map, ev->kv.key, ev->kv.value, ev->kv.len) < 0) {
        w->rev = -1; /* a change is missing: only a load repairs it */
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (ev->revision > w->rev)
        w->rev = ev->revision;
    return 0;
}

int crater_warm_follow(crater_warm_t *w,
                       crater_store_t *st,
                       size_t *applied,
                       crater_error_t *err)
{
    crater_store_event_list_t l = {0};
    int64_t at = crater_store_revision(st);
    int rc = 0;

    if (w->rev < 0)
        return crater_errorf(err, CRATER_EINVAL, "warm copy not loaded");
    if (crater_store_changes(st, CRATER_WARM_PREFIX, w->rev, 0, &l, err) < 0)
        return -1;
    for (size_t i = 0; i < l.count && rc == 0; i++)
        rc = crater_warm_apply(w, &l.items[i], err);
    if (rc == 0 && at > w->rev)
        w->rev = at;
    if (applied)
        *applied = l.count;
    crater_store_event_list_free(&l);
    return rc;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys under prefix, sorted; borrowed from the map. NULL on ENOMEM. */
static const char **sorted_keys(const crater_warm_t *w,
                                const char *prefix,
                                size_t *n)
{
    size_t cap = json_object_size(w->map), pl = strlen(prefix);
    const char **keys = malloc((cap ? cap : 1) * sizeof(*keys));
    const char *k;
    json_t *v;

    *n = 0;
    if (!keys)
        return NULL;
    json_object_foreach(w->map, k, v)
    {
        if (strncmp(k, prefix, pl) == 0)
            keys[(*n)++] = k;
    }
    qsort(keys, *n, sizeof(*keys), by_key);
    return keys;
}

static int copy_kv(crater_skv_t *kv, const char *key, const json_t *s)
{
    size_t len = json_string_length(s);

    memset(kv, 0, sizeof(*kv));
    kv->key = strdup(key);
    kv->value = malloc(len + 1);
    if (!kv->key || !kv->value)
        return -1;
    memcpy(kv->value, json_string_value(s), len);
    kv->value[len] = '\0';
    kv->len = len;
    return 0;
}

int crater_warm_list(const crater_warm_t *w,
                     const char *prefix,
                     crater_skv_list_t *out,
                     crater_error_t *err)
{
    size_t n = 0;
    const char **keys;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    if (w->rev < 0)
        return crater_errorf(err, CRATER_EINVAL, "warm copy not loaded");
    if (!(keys = sorted_keys(w, prefix, &n))
        || !(out->items = calloc(n ? n : 1, sizeof(*out->items))))
        rc = -1;
    for (size_t i = 0; i < n && rc == 0; i++, out->count++)
        rc = copy_kv(&out->items[i], keys[i], json_object_get(w->map, keys[i]));
    free(keys);
    out->revision = w->rev;
    if (rc < 0) { /* the failed item was counted: its halves are freed */
        crater_skv_list_free(out);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    return 0;
}
