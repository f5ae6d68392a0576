/* ckpt.h - libcrater-ckpt: crash-safe, incremental training checkpoints.
 *
 * A checkpoint directory (the job's CRATER_CHECKPOINT_DIR) holds:
 *
 *   chunks/<sha256>     content-addressed chunks, shared by checkpoints
 *   step-<N>/MANIFEST   one committed checkpoint: names, sizes, chunk hashes
 *   LATEST              "step-<N>\n", the last checkpoint this writer made
 *   .lock               flock()ed: one writer at a time, readers wait
 *
 * The format is the one python/crater_ckpt writes (doc/checkpoint.md); a
 * checkpoint saved by either is loaded by the other.
 *
 * A save writes every chunk not already in chunks/ (so a save after a
 * small change writes little), fsyncs each one, writes and fsyncs the
 * manifest in step-<N>.tmp-<pid>/, fsyncs that directory, renames it to
 * step-<N>/ (the commit point), fsyncs the parent and then swaps LATEST by
 * rename. A crash at any instant leaves the previous checkpoint or the new
 * one loadable. crater_ckpt_load_latest() verifies the manifest checksum
 * and every chunk hash and falls back to older checkpoints when the newest
 * is damaged.
 *
 * The library depends on libc only (it carries its own SHA-256), never
 * prints and never exits. A crater_ckpt_t is used by one thread at a time;
 * one process at a time saves into a directory (enforced by the lock).
 */
#ifndef CRATER_CKPT_H
#define CRATER_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

#define CRATER_CKPT_FORMAT 1
#define CRATER_CKPT_CHUNK_DEFAULT (4u << 20) /* 4 MiB */
#define CRATER_CKPT_HASH_HEX 65              /* 64 hex digits + NUL */
#define CRATER_CKPT_NAME_MAX 1024            /* bytes in an entry name */

typedef struct crater_ckpt crater_ckpt_t;
typedef struct crater_ckpt_state crater_ckpt_state_t;

typedef struct crater_ckpt_opts {
    int version;         /* 1 */
    uint32_t chunk_size; /* bytes per chunk; 0: CRATER_CKPT_CHUNK_DEFAULT */
    unsigned keep_last;  /* after each save keep this many checkpoints
                            and collect unreferenced chunks; 0 keeps all */
    int no_fsync;        /* tests only: skip fsync (not crash safe) */
} crater_ckpt_opts_t;

/* One named blob: a file's contents or one part of a model state. The
 * name is any non-empty byte string without NUL, at most
 * CRATER_CKPT_NAME_MAX bytes; names in one checkpoint are unique. */
typedef struct crater_ckpt_entry {
    const char *name;
    const void *data;
    size_t size;
} crater_ckpt_entry_t;

/* What a save did; all sizes in bytes. */
typedef struct crater_ckpt_stats {
    uint64_t step;
    int64_t parent;          /* step of the previous checkpoint, -1 none */
    uint64_t bytes_total;    /* sum of entry sizes */
    uint64_t bytes_written;  /* chunk bytes written (new chunks only) */
    uint64_t manifest_bytes; /* size of the manifest written */
    uint64_t chunks_total;
    uint64_t chunks_written;
    double seconds;
    char digest[CRATER_CKPT_HASH_HEX]; /* the manifest's checksum */
} crater_ckpt_stats_t;

/* Open (creating dir and dir/chunks when missing) a checkpoint directory.
 * opts may be NULL for the defaults. Caller must crater_ckpt_close(). */
crater_ckpt_t *crater_ckpt_open(const char *dir,
                                const crater_ckpt_opts_t *opts,
                                crater_error_t *err);
void crater_ckpt_close(crater_ckpt_t *ck); /* NULL is a no-op */

/* Save n entries as checkpoint `step`. Saving a step that exists replaces
 * it (the old one stays loadable until the new one is committed). stats
 * may be NULL. On failure nothing committed changes (a half-written
 * step-N.tmp-<pid>/ or chunk may be left for the next save to sweep). */
int crater_ckpt_save(crater_ckpt_t *ck,
                     uint64_t step,
                     const crater_ckpt_entry_t *entries,
                     size_t n,
                     crater_ckpt_stats_t *stats,
                     crater_error_t *err);

/* As crater_ckpt_save, the entries being the contents of the files at
 * paths, named by their base names (which must differ). */
int crater_ckpt_save_files(crater_ckpt_t *ck,
                           uint64_t step,
                           const char *const *paths,
                           size_t n,
                           crater_ckpt_stats_t *stats,
                           crater_error_t *err);

/* The newest checkpoint whose manifest and chunks verify, older ones
 * being tried when newer ones are damaged. NULL with CRATER_ENOENT when
 * the directory has no checkpoint, CRATER_EIO when none verifies.
 * Caller must crater_ckpt_state_destroy() the result. */
crater_ckpt_state_t *crater_ckpt_load_latest(crater_ckpt_t *ck,
                                             crater_error_t *err);
/* Checkpoint `step` exactly (verified); NULL with CRATER_ENOENT/EIO. */
crater_ckpt_state_t *crater_ckpt_load(crater_ckpt_t *ck,
                                      uint64_t step,
                                      crater_error_t *err);

uint64_t crater_ckpt_state_step(const crater_ckpt_state_t *st);
int64_t crater_ckpt_state_parent(const crater_ckpt_state_t *st); /* -1 */
const char *crater_ckpt_state_digest(const crater_ckpt_state_t *st);
size_t crater_ckpt_state_count(const crater_ckpt_state_t *st);
/* Entries in saved order; name and data are owned by st. */
const crater_ckpt_entry_t *crater_ckpt_state_entry(
    const crater_ckpt_state_t *st, size_t i);
/* NULL when no entry has that name. */
const crater_ckpt_entry_t *crater_ckpt_state_find(const crater_ckpt_state_t *st,
                                                  const char *name);
/* Write each entry as dir/<name> (fsynced); names with '/' or equal to
 * "." or ".." are refused. */
int crater_ckpt_state_write_files(const crater_ckpt_state_t *st,
                                  const char *dir,
                                  crater_error_t *err);
void crater_ckpt_state_destroy(crater_ckpt_state_t *st); /* NULL: no-op */

/* Keep the keep_last newest valid checkpoints (0: all), remove the rest
 * and every step directory without a valid manifest, then delete the
 * chunks no remaining manifest references. Never deletes a chunk a kept
 * checkpoint references; a crash leaves at most garbage. */
int crater_ckpt_gc(crater_ckpt_t *ck, unsigned keep_last, crater_error_t *err);

/* Steps of the committed checkpoints (valid manifest or not), newest
 * first, into steps (up to max); returns how many there are, or -1. */
int crater_ckpt_list(crater_ckpt_t *ck,
                     uint64_t *steps,
                     size_t max,
                     crater_error_t *err);

/* SHA-256 of buf as 64 lowercase hex digits into hex. */
void crater_ckpt_sha256_hex(const void *buf,
                            size_t len,
                            char hex[CRATER_CKPT_HASH_HEX]);

/* ---- the agent socket (doc/checkpoint.md "Runtime") ----------------------
 *
 * Under Crater a task's $CRATER_AGENT_SOCKET names its agent socket:
 * "@name" is an abstract Unix socket (Linux; the '@' stands for the
 * leading NUL), anything else a filesystem path. On it the task
 * long-polls for a preemption notice, acknowledges it, and reports
 * finished checkpoints and its progress (craterd records them per job and
 * sizes the next grace period from the measured save time).
 *
 * Every function takes sock, the socket's name, or NULL for
 * $CRATER_AGENT_SOCKET, and opens a connection of its own for one request
 * and its answer: calls may run in several threads at once (one waiting
 * for the notice while another reports), and a call after an agent
 * restart finds the new agent. All return 0, or -1 with err (may be
 * NULL) filled:
 *   CRATER_ENOENT    no socket: sock NULL and $CRATER_AGENT_SOCKET unset
 *                    or empty (not under Crater; treat it as "no agent")
 *   CRATER_EUNAVAIL  the agent cannot be reached, closed the connection
 *                    or did not answer in time (err->text says which)
 *   CRATER_EINVAL    the agent refused the request: err->text is its
 *                    error, err->field the field it names
 *   CRATER_EPARSE    the answer was not understood
 *   CRATER_ERANGE / CRATER_ELIMIT  bad argument / request too long
 * Nothing is allocated; nothing is kept between calls.
 */
#define CRATER_CKPT_AGENT_WAIT_MAX_MS 3600000
#define CRATER_CKPT_AGENT_SLACK_MS 2000 /* beyond a wait's timeout_ms */

typedef struct crater_ckpt_notice {
    int preempt;         /* 1: a preemption notice; 0: the wait timed out */
    char reason[32];     /* "priority", "idle", "drain", "time-limit"; "" */
    int64_t deadline_ms; /* ms left before SIGKILL when it was sent; -1 */
} crater_ckpt_notice_t;

/* 1 when sock (NULL: $CRATER_AGENT_SOCKET) is set and, for a path,
 * exists; it may still not answer. */
int crater_ckpt_agent_available(const char *sock);

/* Long poll: returns when a notice comes (notice->preempt 1, at once if
 * one was already sent) or after timeout_ms (0 to
 * CRATER_CKPT_AGENT_WAIT_MAX_MS; notice->preempt 0). Fails with
 * CRATER_EUNAVAIL when no answer came within timeout_ms +
 * CRATER_CKPT_AGENT_SLACK_MS. *notice is written only on success. */
int crater_ckpt_agent_wait_notice(const char *sock,
                                  int timeout_ms,
                                  crater_ckpt_notice_t *notice,
                                  crater_error_t *err);
/* Tell the agent the notice was seen. */
int crater_ckpt_agent_ack(const char *sock, crater_error_t *err);
/* Report a finished checkpoint: st (from crater_ckpt_save: its step,
 * digest, bytes_written and seconds) and path, its step directory (may be
 * NULL). */
int crater_ckpt_agent_report(const char *sock,
                             const crater_ckpt_stats_t *st,
                             const char *path,
                             crater_error_t *err);
/* Report how far the task is. */
int crater_ckpt_agent_progress(const char *sock,
                               uint64_t step,
                               crater_error_t *err);

#endif /* CRATER_CKPT_H */
