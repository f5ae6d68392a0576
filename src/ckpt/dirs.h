/* dirs.h - the names in a checkpoint directory and listing them.
 *
 *   step-<N>            a committed checkpoint
 *   step-<N>.old-<pid>  a committed checkpoint being replaced by a new
 *                       save of the same step (still a checkpoint)
 *   step-<N>.tmp-<pid>  a save in progress, or one that died
 *
 * N is a canonical decimal. Listings are sorted newest first: by step
 * descending, a plain step-<N> before its .old- siblings.
 */
#ifndef CRATER_CKPT_DIRS_H
#define CRATER_CKPT_DIRS_H

#include <stddef.h>
#include <stdint.h>

typedef enum crater__ckpt_kind {
    CRATER__CKPT_PLAIN,
    CRATER__CKPT_OLD,
    CRATER__CKPT_TMP,
} crater__ckpt_kind_t;

typedef struct crater__ckpt_dirent {
    char name[256];
    uint64_t step;
    crater__ckpt_kind_t kind;
} crater__ckpt_dirent_t;

/* Classify a name; -1 when it is not a step directory name. */
int crater__ckpt_dirname(const char *name,
                         uint64_t *step,
                         crater__ckpt_kind_t *kind);

/* The step directories under dfd (of every kind), sorted newest first, in
 * a malloc()ed array (caller frees) of *n items; -1 with errno. */
int crater__ckpt_list_dirs(int dfd, crater__ckpt_dirent_t **out, size_t *n);

#endif /* CRATER_CKPT_DIRS_H */
