/* store.h - craterd's durable key-value store.
 *
 * One interface, etcd-shaped (keys, one global revision, per-key
 * create_rev/mod_rev/version, compare-and-swap transactions, leases and a
 * change feed), so that an etcd backend can sit behind it later. The embedded
 * default is SQLite in WAL mode (crater_store_open_sqlite); doc/store.md
 * describes the schema, the group commit and the durability guarantee.
 *
 * Keys are non-empty printable ASCII (0x20..0x7e), at most
 * CRATER_STORE_KEY_MAX bytes; values at most CRATER_STORE_VALUE_MAX bytes.
 * Every write (commit, compaction, lease operations) goes through one writer
 * thread that batches them into group commits; reads run concurrently on
 * their own connections. All functions are thread-safe.
 *
 * Ownership: crater_skv_t, crater_skv_list_t and crater_store_event_list_t
 * filled by the store belong to the caller, who frees them with the
 * matching *_free function (which frees the members, not the struct).
 */
#ifndef CRATER_STORE_H
#define CRATER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

#define CRATER_STORE_KEY_MAX 512
#define CRATER_STORE_VALUE_MAX (8u << 20)

typedef struct crater_store crater_store_t;

typedef struct crater_skv {
    char *key;          /* NUL-terminated, owned */
    char *value;        /* owned; value bytes followed by an extra NUL */
    size_t len;         /* bytes of value, without that NUL */
    int64_t create_rev; /* revision that created the key */
    int64_t mod_rev;    /* revision of the last put */
    int64_t version;    /* number of puts since creation, 1 on create */
    int64_t lease;      /* 0 = none */
} crater_skv_t;

typedef struct crater_skv_list {
    crater_skv_t *items;
    size_t count;
    int64_t revision; /* store revision at read time */
} crater_skv_list_t;

void crater_skv_free(crater_skv_t *kv);          /* frees members; NULL ok */
void crater_skv_list_free(crater_skv_list_t *l); /* frees items; NULL ok */

typedef struct crater_store_opts {
    bool no_sync;       /* false (default): fsync at each group commit (WAL,
                           synchronous=FULL). true: synchronous=NORMAL, a
                           power loss may lose the last commits (tests and
                           benchmarks only; a process crash loses nothing) */
    uint32_t max_batch; /* most transactions per group commit; 0 = 1024 */
} crater_store_opts_t;

/* Opens or creates the database at path (WAL mode) and starts the writer
 * thread. opts may be NULL (defaults). Returns NULL and fills err (EIO with
 * SQLite's message, ENOMEM) on failure. */
crater_store_t *crater_store_open_sqlite(const char *path,
                                         const crater_store_opts_t *opts,
                                         crater_error_t *err);

/* The etcd backend (src/store/etcd.c): etcd 3.4+ through its v3 JSON
 * gateway. Every key is stored as prefix + key. Strings are copied. */
typedef struct crater_store_etcd_opts {
    char *const *endpoints; /* NULL-terminated client URLs, tried in order;
                               the next one on a connection error */
    const char *prefix;     /* key prefix, "" allowed; NULL = "/crater/" */
    const char *ca_file;    /* TLS: CA bundle; NULL = system default */
    const char *cert_file;  /* TLS client certificate; NULL = none */
    const char *key_file;   /* its private key */
    const char *user;       /* etcd auth; NULL = auth off */
    const char *password;
    size_t max_request_bytes; /* etcd's --max-request-bytes; 0 = 1.5 MiB */
    int64_t timeout_ms;       /* per request; 0 = 10 s */
} crater_store_etcd_opts_t;

/* Connects (reading the revision and the compacted revision) and starts
 * the writer thread. NULL with EUNAVAIL when no endpoint answers, EAUTH on
 * bad credentials, EINVAL naming the option for bad options. */
crater_store_t *crater_store_open_etcd(const crater_store_etcd_opts_t *opts,
                                       crater_error_t *err);

/* Finishes every queued write (their callbacks run), stops the writer and
 * closes the database. No other thread may use st once close has started.
 * NULL ok. */
void crater_store_close(crater_store_t *st);

/* Reads key into *out (caller frees with crater_skv_free). -1 with
 * CRATER_ENOENT when absent, EINVAL for a bad key, EIO. */
int crater_store_get(crater_store_t *st,
                     const char *key,
                     crater_skv_t *out,
                     crater_error_t *err);

/* Every key starting with prefix ("" = all), sorted by key, read from one
 * consistent snapshot whose revision is out->revision. */
int crater_store_list(crater_store_t *st,
                      const char *prefix,
                      crater_skv_list_t *out,
                      crater_error_t *err);

/* Revision of the last durable write (0 for an empty store). */
int64_t crater_store_revision(crater_store_t *st);

typedef enum crater_store_ev_type {
    CRATER_STORE_PUT,
    CRATER_STORE_DELETE
} crater_store_ev_type_t;

typedef struct crater_store_event {
    crater_store_ev_type_t type;
    int64_t revision;
    crater_skv_t kv; /* PUT: the key as written. DELETE: key, value NULL,
                       len 0, mod_rev = revision, other fields 0 */
} crater_store_event_t;

typedef struct crater_store_event_list {
    crater_store_event_t *items;
    size_t count;
} crater_store_event_list_t;

void crater_store_event_list_free(crater_store_event_list_t *l); /* NULL ok */

/* Change feed: events with revision > after_rev under prefix, oldest first
 * (by revision, then in the order the transaction wrote them), at most limit
 * (0 = no limit). A caller that wants everything repeats from the last
 * event's revision. -1 with CRATER_ESTALE when after_rev is older than the
 * compacted revision (history was dropped: relist, then follow from the
 * list's revision). */
int crater_store_changes(crater_store_t *st,
                         const char *prefix,
                         int64_t after_rev,
                         size_t limit,
                         crater_store_event_list_t *out,
                         crater_error_t *err);

/* Drops change history at or below rev (current keys are kept). ERANGE when
 * rev is beyond the current revision; compacting at or below the already
 * compacted revision is a no-op. The history is gone for readers once this
 * returns (changes() answers ESTALE); the backend may free its space
 * later, in bounded steps (SQLite: 1,000 rows per commit). Blocks until the
 * compacted revision is durable, like crater_store_commit(). */
int crater_store_compact(crater_store_t *st, int64_t rev, crater_error_t *err);

/* What the store holds, for metrics. Cheap (no query, no wait for the
 * writer): safe under any lock. */
typedef struct crater_store_stats {
    int64_t revision;   /* last durable revision */
    int64_t compacted;  /* compacted revision */
    int64_t events;     /* history events held, compacted ones not yet
                           freed included; -1 unknown */
    uint64_t db_bytes;  /* database file on disk; 0 when not local */
    uint64_t wal_bytes; /* its write-ahead log */
} crater_store_stats_t;
int crater_store_stats(crater_store_t *st,
                       crater_store_stats_t *out,
                       crater_error_t *err);

/* Revision at or below which history is gone (0 = never compacted). */
int64_t crater_store_compacted_revision(crater_store_t *st);

/* Transactions: etcd-style compares + ops, applied atomically at one new
 * revision. A key may appear at most once among a transaction's ops. A
 * transaction that changes nothing (only compares, or deletes of absent keys)
 * succeeds without a new revision and reports the current one. */
typedef struct crater_txn crater_txn_t;

crater_txn_t *crater_txn_create(void);    /* NULL on ENOMEM */
void crater_txn_destroy(crater_txn_t *t); /* NULL ok */

/* Compare: key's mod_rev must equal mod_rev; mod_rev 0 means "key must not
 * exist". */
int crater_txn_expect(crater_txn_t *t,
                      const char *key,
                      int64_t mod_rev,
                      crater_error_t *err);
/* The value is copied. lease 0 = none; otherwise the lease must exist at
 * commit time (ENOENT naming the key otherwise). */
int crater_txn_put(crater_txn_t *t,
                   const char *key,
                   const void *value,
                   size_t len,
                   int64_t lease,
                   crater_error_t *err);
/* Deleting an absent key is not an error (and writes no event). */
int crater_txn_delete(crater_txn_t *t, const char *key, crater_error_t *err);

/* Blocks until the transaction is durable (or failed). *rev (may be NULL)
 * gets the revision it was applied at. A failed compare: -1 CRATER_ESTALE
 * with err->field = the key. EIO for database errors, EUNAVAIL when the
 * store is closing, EINVAL when called on the writer thread (from a
 * callback). Does not take ownership of t. */
int crater_store_commit(crater_store_t *st,
                        crater_txn_t *t,
                        int64_t *rev,
                        crater_error_t *err);

/* Asynchronous form: takes ownership of t, even when it fails. On success,
 * cb runs exactly once ON THE WRITER THREAD after the group commit
 * containing t is durable (or failed): rc 0/-1, rev, err (valid only during
 * the call). cb must not call back into the store synchronously (commit) -
 * it may queue another async commit. When this function returns -1 (store
 * closing: EUNAVAIL), cb is never called. */
typedef void (*crater_store_done_f)(int rc,
                                    int64_t rev,
                                    const crater_error_t *err,
                                    void *arg);
int crater_store_commit_async(crater_store_t *st,
                              crater_txn_t *t,
                              crater_store_done_f cb,
                              void *arg,
                              crater_error_t *err);

/* crater_store_compact() for a thread that must not block (craterd's
 * scheduler under its lock): cb runs exactly once ON THE WRITER THREAD once
 * the compaction is durable or failed (rc, the store's revision, err valid
 * during the call), with crater_store_commit_async()'s rules. When this
 * returns -1 (EUNAVAIL: closing, or a backend without it; ENOMEM), cb is
 * never called. */
int crater_store_compact_async(crater_store_t *st,
                               int64_t rev,
                               crater_store_done_f cb,
                               void *arg,
                               crater_error_t *err);

/* Leases: keys put with a lease are deleted (with DELETE events, at one new
 * revision) when it is revoked or expires. Time is passed in: the store has
 * no clock. Lease ids start at 1 and are never reused. ttl_ms must be > 0. */
int crater_store_lease_grant(crater_store_t *st,
                             int64_t ttl_ms,
                             int64_t now_ms,
                             int64_t *id,
                             crater_error_t *err);
/* Extends the lease to now_ms + its ttl. ENOENT if gone. */
int crater_store_lease_keepalive(crater_store_t *st,
                                 int64_t id,
                                 int64_t now_ms,
                                 crater_error_t *err);
/* ENOENT if gone. */
int crater_store_lease_revoke(crater_store_t *st,
                              int64_t id,
                              crater_error_t *err);
/* Revokes every lease whose deadline is <= now_ms. */
int crater_store_expire_leases(crater_store_t *st,
                               int64_t now_ms,
                               crater_error_t *err);

/* Fencing, for leader election (src/daemon/leader.c). Once a fence is set,
 * every commit of this store also requires key's mod_rev to equal mod_rev
 * (the leader key this process created with its lease): a process whose
 * lease expired, or whose key another leader replaced, cannot write even
 * if it still believes it leads. A commit refused by the fence fails with
 * CRATER_EUNAVAIL, err->field = key, "not the leader". mod_rev -1 revokes:
 * every later commit (queued ones included) fails so at once, without a
 * request, and a commit in flight is abandoned within about a second
 * (EUNAVAIL: it may or may not have been applied). Set it before the first
 * commit; revoking is safe from any thread. key is copied. -1 EINVAL for a bad
 * key or a backend without it (SQLite: one process per store, nothing to
 * fence). */
int crater_store_set_fence(crater_store_t *st,
                           const char *key,
                           int64_t mod_rev,
                           crater_error_t *err);

/* ---- For store backends only (src/store/) ---------------------------- */

typedef enum crater__txn_op_kind {
    CRATER__TXN_EXPECT,
    CRATER__TXN_PUT,
    CRATER__TXN_DELETE
} crater__txn_op_kind_t;

typedef struct crater__txn_op {
    crater__txn_op_kind_t kind;
    char *key;
    char *value; /* PUT: len bytes plus a NUL */
    size_t len;
    int64_t lease;   /* PUT */
    int64_t mod_rev; /* EXPECT */
} crater__txn_op_t;

/* The compares (kind EXPECT) and the ops (PUT/DELETE), in call order. */
const crater__txn_op_t *crater__txn_compares(const crater_txn_t *t, size_t *n);
const crater__txn_op_t *crater__txn_ops(const crater_txn_t *t, size_t *n);

/* EINVAL naming the key unless it is a valid key (or, when prefix is true,
 * a valid prefix, which may be empty). */
int crater__store_check_key(const char *key, bool prefix, crater_error_t *err);

/* Backend operations; crater_store_* are thin wrappers. A backend's store
 * struct starts with a crater_store_t. */
typedef struct crater__store_ops {
    int version; /* 2: compact_async and stats; 3: set_fence */
    void (*close)(crater_store_t *st);
    int (*get)(crater_store_t *,
               const char *,
               crater_skv_t *,
               crater_error_t *);
    int (*list)(crater_store_t *,
                const char *,
                crater_skv_list_t *,
                crater_error_t *);
    int64_t (*revision)(crater_store_t *st);
    int64_t (*compacted_revision)(crater_store_t *st);
    int (*changes)(crater_store_t *,
                   const char *,
                   int64_t,
                   size_t,
                   crater_store_event_list_t *,
                   crater_error_t *);
    int (*compact)(crater_store_t *, int64_t, crater_error_t *);
    int (*compact_async)(crater_store_t *,
                         int64_t,
                         crater_store_done_f,
                         void *,
                         crater_error_t *);
    int (*stats)(crater_store_t *, crater_store_stats_t *, crater_error_t *);
    int (*commit)(crater_store_t *,
                  crater_txn_t *,
                  int64_t *,
                  crater_error_t *);
    int (*commit_async)(crater_store_t *,
                        crater_txn_t *,
                        crater_store_done_f,
                        void *,
                        crater_error_t *);
    int (*lease_grant)(
        crater_store_t *, int64_t, int64_t, int64_t *, crater_error_t *);
    int (*lease_keepalive)(crater_store_t *,
                           int64_t,
                           int64_t,
                           crater_error_t *);
    int (*lease_revoke)(crater_store_t *, int64_t, crater_error_t *);
    int (*expire_leases)(crater_store_t *, int64_t, crater_error_t *);
    int (*set_fence)(crater_store_t *,
                     const char *,
                     int64_t,
                     crater_error_t *); /* version 3; NULL: none */
} crater__store_ops_t;

struct crater_store {
    const crater__store_ops_t *ops;
};

#endif /* CRATER_STORE_H */
