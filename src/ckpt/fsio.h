/* fsio.h - durable file operations for libcrater-ckpt, with a fault hook.
 *
 * Every operation that changes the checkpoint directory goes through one
 * of these wrappers, which first call crater__ckpt_fault (when set): the
 * crash tests use it to kill the process, or to fail the operation with
 * an errno, before the k-th operation of a save, so that every point of a
 * save is tried rather than only the ones a timer happens to hit. The
 * hook is process-wide and meant for tests only; it is NULL otherwise.
 *
 * All functions return 0 or -1 with errno set. Paths are relative to the
 * directory descriptor dfd (openat family), so a save never builds long
 * path strings and the directory cannot be swapped under it.
 */
#ifndef CRATER_CKPT_FSIO_H
#define CRATER_CKPT_FSIO_H

#include <stddef.h>

/* Called before each operation with its name ("write", "fsync", "rename",
 * "unlink", "mkdir", "rmdir", "open") and target; return 0 to go on, or
 * -1 with errno set to fail the operation. */
typedef int (*crater__ckpt_fault_f)(const char *op,
                                    const char *path,
                                    void *arg);
extern crater__ckpt_fault_f crater__ckpt_fault;
extern void *crater__ckpt_fault_arg;

/* Write len bytes of data to dfd/name.tmp-<pid>, fsync it (unless
 * no_fsync), then rename it to dfd/name. The directory is not fsynced. */
int crater__ckpt_write_file(
    int dfd, const char *name, const void *data, size_t len, int no_fsync);
int crater__ckpt_fsync_dir(int dfd, const char *name, int no_fsync);
int crater__ckpt_rename(int dfd, const char *from, const char *to);
int crater__ckpt_mkdir(int dfd, const char *name);
/* Remove dfd/name: a file, or a directory and the files in it (one level:
 * checkpoint directories hold no subdirectories). ENOENT is success. */
int crater__ckpt_remove(int dfd, const char *name);
/* Read all of dfd/name into a malloc()ed buffer (caller frees) of at most
 * max bytes; *len gets its size. */
int crater__ckpt_read_file(
    int dfd, const char *name, size_t max, char **out, size_t *len);

#endif /* CRATER_CKPT_FSIO_H */
