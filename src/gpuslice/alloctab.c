/*
 * alloctab.c - pointer/handle -> reserved bytes, see alloctab.h.
 * Grows at half load so probes stay short; never shrinks (a process's
 * allocation count peaks early and stays).
 */
#include "alloctab.h"

#include <stdlib.h>
#include <string.h>

static size_t hash(uint64_t k, size_t mask)
{
    k ^= k >> 33; /* murmur3 finaliser: device pointers share low bits */
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k & mask;
}

static void place(crater__gs_entry_t *slot,
                  size_t cap,
                  const crater__gs_entry_t *e)
{
    size_t i = hash(e->key, cap - 1);
    while (slot[i].key != 0 && slot[i].key != e->key)
        i = (i + 1) & (cap - 1);
    slot[i] = *e;
}

static int grow(crater__gs_tab_t *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    crater__gs_entry_t *s = calloc(cap, sizeof(*s));
    if (!s)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slot[i].key)
            place(s, cap, &t->slot[i]);
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return 0;
}

static size_t find(const crater__gs_tab_t *t, uint64_t key)
{
    if (t->cap == 0)
        return SIZE_MAX;
    for (size_t i = hash(key, t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (t->slot[i].key == key)
            return i;
        if (t->slot[i].key == 0)
            return SIZE_MAX;
    }
}

int crater__gs_tab_put(crater__gs_tab_t *t,
                       uint64_t key,
                       uint64_t bytes,
                       int gpu)
{
    crater__gs_entry_t e = {key, bytes, gpu};
    int rc = 0;
    pthread_mutex_lock(&t->lock);
    size_t i = find(t, key);
    if (i != SIZE_MAX) {
        t->slot[i] = e;
    } else if ((t->len + 1) * 2 > t->cap && grow(t) < 0) {
        rc = -1;
    } else {
        place(t->slot, t->cap, &e);
        t->len++;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* Backward-shift deletion keeps every probe chain unbroken. */
static void erase(crater__gs_tab_t *t, size_t i)
{
    size_t mask = t->cap - 1;
    for (size_t j = (i + 1) & mask; t->slot[j].key; j = (j + 1) & mask) {
        size_t home = hash(t->slot[j].key, mask);
        /* move j back to i unless its home lies cyclically in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slot[i] = t->slot[j];
            i = j;
        }
    }
    t->slot[i].key = 0;
    t->len--;
}

int crater__gs_tab_take(crater__gs_tab_t *t,
                        uint64_t key,
                        crater__gs_entry_t *out)
{
    pthread_mutex_lock(&t->lock);
    size_t i = find(t, key);
    if (i != SIZE_MAX) {
        *out = t->slot[i];
        erase(t, i);
    }
    pthread_mutex_unlock(&t->lock);
    return i == SIZE_MAX ? -1 : 0;
}

void crater__gs_tab_reset(crater__gs_tab_t *t)
{
    pthread_mutex_init(&t->lock, NULL);
    if (t->cap)
        memset(t->slot, 0, t->cap * sizeof(*t->slot));
    t->len = 0;
}
