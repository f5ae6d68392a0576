/*
 * alloctab.h - the interposer's map from device pointer (or VMM handle) to
 * the bytes reserved for it and the slice GPU they count against, so a free
 * gives back exactly what its allocation took. A process-private open-
 * addressing hash (linear probing, backward-shift deletion, no tombstones)
 * under one mutex: a free and an allocation touch it once each, a short
 * critical section next to a driver call that costs microseconds.
 */
#ifndef CRATER_GPUSLICE_ALLOCTAB_H
#define CRATER_GPUSLICE_ALLOCTAB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct crater__gs_entry {
    uint64_t key; /* 0: empty (no allocation has address or handle 0) */
    uint64_t bytes;
    int gpu; /* slice GPU index */
} crater__gs_entry_t;

typedef struct crater__gs_tab {
    pthread_mutex_t lock;
    crater__gs_entry_t *slot; /* malloc'd, cap entries */
    size_t cap;               /* 0 or a power of two */
    size_t len;
} crater__gs_tab_t;

#define CRATER__GS_TAB_INIT                   \
    {                                         \
        PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0 \
    }

/* Insert key (replacing an entry with the same key). -1 when out of
 * memory (nothing inserted). */
int crater__gs_tab_put(crater__gs_tab_t *t,
                       uint64_t key,
                       uint64_t bytes,
                       int gpu);

/* Remove key, copying its entry to *out. 0, or -1 when absent. */
int crater__gs_tab_take(crater__gs_tab_t *t,
                        uint64_t key,
                        crater__gs_entry_t *out);

/* Forget everything (after fork: the child owns no allocation). Not
 * thread-safe; the caller is the only thread. */
void crater__gs_tab_reset(crater__gs_tab_t *t);

#endif
