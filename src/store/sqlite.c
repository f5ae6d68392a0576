/* sqlite.c - the embedded store backend: SQLite in WAL mode with one
 * group-commit writer thread.
 *
 * Writes. Every write (transaction, compaction, lease operation) becomes a
 * request on one FIFO queue. The writer thread takes every queued request
 * (up to max_batch) and runs them inside ONE SQLite transaction
 * (BEGIN IMMEDIATE ... COMMIT), each request in its own SAVEPOINT, so a
 * request that fails (a stale compare, a missing lease) is rolled back alone
 * while the others commit. With synchronous=FULL the COMMIT is one fsync of
 * the WAL for the whole batch: under load, N concurrent submitters share
 * one fsync instead of paying N. Only after COMMIT returns are the waiters
 * woken and the callbacks run, so an acknowledgement means durable. If the
 * batch as a whole fails (COMMIT error, or SQLite rolled the transaction
 * back itself after an I/O error or SQLITE_FULL), every request in it fails
 * with EIO and the writer's in-memory counters are put back.
 *
 * The writer owns its connection and its prepared statements (created once,
 * reused for every request) and the working counters (revision, compacted
 * revision, last lease id); the revision and compacted revision are
 * published through atomics after each COMMIT. The counters are also kept
 * in the meta table, written once per batch.
 *
 * Reads. A small pool of read-only connections (at most RCONN_MAX, opened
 * on demand, each with its own prepared statements) lets readers on many
 * threads run at once: WAL readers never block the writer or each other. A
 * pool rather than one connection per thread because the daemon's HTTP
 * threads come and go; rather than one connection behind a mutex because a
 * long list() would stall every other reader. list() and changes() read in
 * one read transaction, so the revision they report matches the rows.
 *
 * Waits: a synchronous commit waits for the writer, which always completes
 * every request it has accepted (close drains the queue first). A reader
 * waits for a free connection for at most RCONN_WAIT_S seconds (EUNAVAIL).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crater/log.h"
#include "store/store.h"

#define RCONN_MAX 8
#define RCONN_WAIT_S 10
#define BUSY_TIMEOUT_MS 5000
#define DEFAULT_BATCH 1024
#define PURGE_ROWS 1000 /* history rows deleted per commit (etcd: 1000) */

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS kv(key TEXT PRIMARY KEY, value BLOB NOT NULL,"
    " create_rev INTEGER NOT NULL, mod_rev INTEGER NOT NULL,"
    " version INTEGER NOT NULL, lease INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS kv_lease ON kv(lease);"
    "CREATE TABLE IF NOT EXISTS changes(rev INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, type INTEGER NOT NULL, key TEXT NOT NULL,"
    " value BLOB, create_rev INTEGER NOT NULL, version INTEGER NOT NULL,"
    " lease INTEGER NOT NULL, PRIMARY KEY(rev, seq));"
    "CREATE TABLE IF NOT EXISTS leases(id INTEGER PRIMARY KEY,"
    " ttl_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta VALUES('schema', 1), ('revision', 0),"
    " ('compact_rev', 0), ('lease_seq', 0);";

enum wstmt {
    W_BEGIN,
    W_COMMIT,
    W_ROLLBACK,
    W_SAVE,
    W_RELEASE,
    W_ROLLBACK_TO,
    W_SETMETA,
    W_KVGET,
    W_KVPUT,
    W_KVDEL,
    W_CHANGE,
    W_LEASE_GET,
    W_LEASE_INS,
    W_LEASE_UPD,
    W_LEASE_DEL,
    W_LEASE_KEYS,
    W_LEASE_DUE,
    W_PURGE,
    W_COUNT
};

static const char *const wsql[W_COUNT] = {
    [W_BEGIN] = "BEGIN IMMEDIATE",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_SAVE] = "SAVEPOINT req",
    [W_RELEASE] = "RELEASE req",
    [W_ROLLBACK_TO] = "ROLLBACK TO req",
    [W_SETMETA] = "UPDATE meta SET v = ?2 WHERE k = ?1",
    [W_KVGET] = "SELECT create_rev, mod_rev, version FROM kv WHERE key = ?",
    [W_KVPUT] = "INSERT OR REPLACE INTO kv(key, value, create_rev, mod_rev,"
                " version, lease) VALUES(?, ?, ?, ?, ?, ?)",
    [W_KVDEL] = "DELETE FROM kv WHERE key = ?",
    [W_CHANGE] = "INSERT INTO changes(rev, seq, type, key, value, create_rev,"
                 " version, lease) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
    [W_LEASE_GET] = "SELECT ttl_ms FROM leases WHERE id = ?",
    [W_LEASE_INS] = "INSERT INTO leases(id, ttl_ms, expires_ms)"
                    " VALUES(?1, ?2, ?3)",
    [W_LEASE_UPD] = "UPDATE leases SET expires_ms = ?2 + ttl_ms WHERE id = ?1",
    [W_LEASE_DEL] = "DELETE FROM leases WHERE id = ?",
    [W_LEASE_KEYS] = "SELECT key FROM kv WHERE lease = ? ORDER BY key",
    [W_LEASE_DUE] = "SELECT id FROM leases WHERE expires_ms <= ? ORDER BY id",
    [W_PURGE] = "DELETE FROM changes WHERE rowid IN (SELECT rowid FROM"
                " changes WHERE rev <= ?1 ORDER BY rev, seq LIMIT ?2)",
};

enum rstmt {
    R_BEGIN,
    R_END,
    R_META,
    R_GET,
    R_LIST,
    R_CHANGES,
    R_COUNT
};

static const char *const rsql[R_COUNT] = {
    [R_BEGIN] = "BEGIN",
    [R_END] = "COMMIT",
    [R_META] = "SELECT v FROM meta WHERE k = ?",
    [R_GET] = "SELECT key, value, create_rev, mod_rev, version, lease"
              " FROM kv WHERE key = ?",
    [R_LIST] = "SELECT key, value, create_rev, mod_rev, version, lease"
               " FROM kv WHERE key >= ?1 AND key < ?2 ORDER BY key",
    [R_CHANGES] = "SELECT rev, type, key, value, create_rev, version, lease"
                  " FROM changes WHERE rev > ?1 AND key >= ?2 AND key < ?3"
                  " ORDER BY rev, seq LIMIT ?4",
};

typedef enum req_kind {
    REQ_TXN,
    REQ_COMPACT,
    REQ_GRANT,
    REQ_KEEPALIVE,
    REQ_REVOKE,
    REQ_EXPIRE
} req_kind_t;

typedef struct req req_t;
struct req {
    req_kind_t kind;
    crater_txn_t *txn;
    int64_t a, b; /* compact: rev; grant: ttl, now; keepalive: id, now;
                     revoke: id; expire: now */
    int64_t out;  /* grant: the new lease id */
    int rc;
    int64_t rev;
    crater_error_t err;
    void (*done)(req_t *r); /* on the writer; r may be gone afterwards */
    crater_store_done_f cb; /* async */
    void *arg;
    pthread_mutex_t mu; /* sync */
    pthread_cond_t cv;
    bool finished;
    req_t *next;
};

typedef struct rconn rconn_t;
struct rconn {
    sqlite3 *db;
    sqlite3_stmt *q[R_COUNT];
    rconn_t *next;
};

/* The writer's working counters, put back as they were when a request or
 * a batch fails. rows counts the rows of changes (compacted ones not yet
 * purged included). */
typedef struct counters {
    int64_t rev, compact, lease_seq, rows;
} counters_t;

typedef struct sq {
    crater_store_t base;
    char *path;
    uint32_t max_batch;
    sqlite3 *wdb;
    sqlite3_stmt *w[W_COUNT];
    pthread_t writer;
    counters_t c;   /* writer's working counters */
    bool purge_due; /* writer: rows at or below c.compact may remain */
    _Atomic int64_t rev, compact_rev, rows; /* published after COMMIT */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    req_t *head, *tail;
    bool closing;
    pthread_mutex_t pmu;
    pthread_cond_t pcv;
    rconn_t *idle;
    int nconn;
} sq_t;

static const crater__store_ops_t sqlite_ops;

/* ---- helpers ----------------------------------------------------------- */

static int sql_fail(sqlite3 *db, int rc, crater_error_t *err, const char *what)
{
    if (rc == SQLITE_NOMEM)
        return crater_errorf(err, CRATER_ENOMEM, "%s: out of memory", what);
    return crater_errorf(err,
                         CRATER_EIO,
                         "%s: %s",
                         what,
                         db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

/* Steps a statement that returns no rows, then resets it. */
static int step_done(sqlite3 *db, sqlite3_stmt *q, crater_error_t *err)
{
    int rc = sqlite3_step(q);

    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        sql_fail(db, rc, err, "store");
        sqlite3_reset(q);
        return -1;
    }
    sqlite3_reset(q);
    return 0;
}

/* The step after bindings: 1 row, 0 done, -1 error (statement reset). */
static int step_row(sqlite3 *db, sqlite3_stmt *q, crater_error_t *err)
{
    int rc = sqlite3_step(q);

    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    sql_fail(db, rc, err, "store");
    sqlite3_reset(q);
    return -1;
}

static int prepare_all(sqlite3 *db,
                       const char *const *sql,
                       int n,
                       sqlite3_stmt **out,
                       crater_error_t *err)
{
    for (int i = 0; i < n; i++) {
        int rc = sqlite3_prepare_v3(db,
                                    sql[i],
                                    -1,
                                    SQLITE_PREPARE_PERSISTENT,
                                    &out[i],
                                    NULL);
        if (rc != SQLITE_OK)
            return sql_fail(db, rc, err, "prepare");
    }
    return 0;
}

static void finalize_all(sqlite3_stmt **q, int n)
{
    for (int i = 0; i < n; i++) {
        sqlite3_finalize(q[i]);
        q[i] = NULL;
    }
}

static int open_db(const char *path,
                   int flags,
                   sqlite3 **db,
                   crater_error_t *err)
{
    int rc = sqlite3_open_v2(path, db, flags | SQLITE_OPEN_NOMUTEX, NULL);

    if (rc != SQLITE_OK) {
        crater_errorf_field(err,
                            rc == SQLITE_NOMEM ? CRATER_ENOMEM : CRATER_EIO,
                            "store",
                            "open %s: %s",
                            path,
                            *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
        sqlite3_close(*db);
        *db = NULL;
        return -1;
    }
    sqlite3_busy_timeout(*db, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(*db, 0);
    return 0;
}

/* The database and its WAL files are the cluster's specs and token
 * hashes: 0600 whatever the umask, or an earlier version, left (SQLite
 * gives the -wal and -shm files it creates the database file's mode). */
static int tighten_modes(const char *path, crater_error_t *err)
{
    static const char *const suffix[] = {"-wal", "-shm"};
    char side[4200];
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    if (fd < 0 || fchmod(fd, 0600) < 0) {
        crater_errorf_field(err,
                            CRATER_EIO,
                            "store",
                            "%s: %s",
                            path,
                            strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    for (size_t i = 0; i < 2; i++) {
        snprintf(side, sizeof(side), "%s%s", path, suffix[i]);
        if (chmod(side, 0600) < 0 && errno != ENOENT)
            return crater_errorf_field(err,
                                       CRATER_EIO,
                                       "store",
                                       "%s: %s",
                                       side,
                                       strerror(errno));
    }
    return 0;
}

/* Fills kv from a key, a blob and its length (copies). */
static int fill_kv(crater_skv_t *kv,
                   const unsigned char *key,
                   const void *blob,
                   int n,
                   crater_error_t *err)
{
    kv->key = strdup((const char *)key);
    kv->value = malloc((size_t)n + 1);
    if (!kv->key || !kv->value) {
        crater_skv_free(kv);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (n > 0)
        memcpy(kv->value, blob, (size_t)n);
    kv->value[n] = '\0';
    kv->len = (size_t)n;
    return 0;
}

/* Row (key, value, create_rev, mod_rev, version, lease) into kv. */
static int row_kv(sqlite3_stmt *q, crater_skv_t *kv, crater_error_t *err)
{
    memset(kv, 0, sizeof(*kv));
    if (fill_kv(kv,
                sqlite3_column_text(q, 0),
                sqlite3_column_blob(q, 1),
                sqlite3_column_bytes(q, 1),
                err)
        < 0)
        return -1;
    kv->create_rev = sqlite3_column_int64(q, 2);
    kv->mod_rev = sqlite3_column_int64(q, 3);
    kv->version = sqlite3_column_int64(q, 4);
    kv->lease = sqlite3_column_int64(q, 5);
    return 0;
}

/* The exclusive upper bound of keys under prefix: the prefix with its last
 * byte incremented, or "\x7f" for "" (keys are printable ASCII). */
static void prefix_end(const char *prefix, char *end)
{
    size_t n = strlen(prefix);

    if (n == 0) {
        strcpy(end, "\x7f");
        return;
    }
    memcpy(end, prefix, n + 1);
    end[n - 1]++;
}

/* ---- reader pool ------------------------------------------------------- */

static void rconn_free(rconn_t *c)
{
    if (!c)
        return;
    finalize_all(c->q, R_COUNT);
    sqlite3_close(c->db);
    free(c);
}

static rconn_t *rconn_open(sq_t *s, crater_error_t *err)
{
    rconn_t *c = calloc(1, sizeof(*c));

    if (!c) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    if (open_db(s->path, SQLITE_OPEN_READWRITE, &c->db, err) < 0
        || sqlite3_exec(c->db, "PRAGMA query_only=1", NULL, NULL, NULL)
               != SQLITE_OK
        || prepare_all(c->db, rsql, R_COUNT, c->q, err) < 0) {
        if (c->db && err && err->errnum == CRATER_OK)
            sql_fail(c->db, SQLITE_ERROR, err, "reader");
        rconn_free(c);
        return NULL;
    }
    return c;
}

static rconn_t *rconn_get(sq_t *s, crater_error_t *err)
{
    struct timespec dl;
    rconn_t *c = NULL;
    int rc = 0;

    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += RCONN_WAIT_S;
    pthread_mutex_lock(&s->pmu);
    while (!s->idle && s->nconn >= RCONN_MAX && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->pcv, &s->pmu, &dl);
    if (s->idle) {
        c = s->idle;
        s->idle = c->next;
    } else if (s->nconn < RCONN_MAX) {
        s->nconn++;
        pthread_mutex_unlock(&s->pmu);
        if (err)
            crater_error_clear(err);
        if ((c = rconn_open(s, err)))
            return c;
        pthread_mutex_lock(&s->pmu);
        s->nconn--;
    } else {
        crater_errorf(err,
                      CRATER_EUNAVAIL,
                      "no store reader free after %d s",
                      RCONN_WAIT_S);
    }
    pthread_mutex_unlock(&s->pmu);
    return c;
}

static void rconn_put(sq_t *s, rconn_t *c)
{
    pthread_mutex_lock(&s->pmu);
    c->next = s->idle;
    s->idle = c;
    pthread_cond_signal(&s->pcv);
    pthread_mutex_unlock(&s->pmu);
}

/* ---- reads ------------------------------------------------------------- */

static int sq_get(crater_store_t *st,
                  const char *key,
                  crater_skv_t *out,
                  crater_error_t *err)
{
    sq_t *s = (sq_t *)st;
    rconn_t *c = rconn_get(s, err);
    sqlite3_stmt *q;
    int rc;

    if (!c)
        return -1;
    q = c->q[R_GET];
    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    rc = step_row(c->db, q, err);
    if (rc == 0)
        rc = crater_errorf_field(err,
                                 CRATER_ENOENT,
                                 key,
                                 "key '%s' not found",
                                 key);
    else if (rc == 1)
        rc = row_kv(q, out, err);
    sqlite3_reset(q);
    rconn_put(s, c);
    return rc;
}

static int read_meta(rconn_t *c, const char *k, int64_t *v, crater_error_t *err)
{
    sqlite3_stmt *q = c->q[R_META];
    int rc;

    sqlite3_bind_text(q, 1, k, -1, SQLITE_STATIC);
    rc = step_row(c->db, q, err);
    if (rc == 0)
        rc = crater_errorf(err, CRATER_EIO, "store meta '%s' missing", k);
    else if (rc == 1) {
        *v = sqlite3_column_int64(q, 0);
        rc = 0;
    }
    sqlite3_reset(q);
    return rc;
}

static int list_rows(rconn_t *c,
                     const char *prefix,
                     crater_skv_list_t *out,
                     crater_error_t *err)
{
    char end[CRATER_STORE_KEY_MAX + 2];
    sqlite3_stmt *q = c->q[R_LIST];
    size_t cap = 0;
    int rc;

    prefix_end(prefix, end);
    sqlite3_bind_text(q, 1, prefix, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, end, -1, SQLITE_STATIC);
    while ((rc = step_row(c->db, q, err)) == 1) {
        if (out->count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            crater_skv_t *p = realloc(out->items, ncap * sizeof(*p));
            if (!p) {
                rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
                break;
            }
            out->items = p;
            cap = ncap;
        }
        if ((rc = row_kv(q, &out->items[out->count], err)) < 0)
            break;
        out->count++;
    }
    sqlite3_reset(q);
    return rc < 0 ? -1 : 0;
}

/* Runs fn inside one read transaction on a pooled connection. */
static int in_read_txn(sq_t *s,
                       int (*fn)(rconn_t *, void *, crater_error_t *),
                       void *arg,
                       crater_error_t *err)
{
    rconn_t *c = rconn_get(s, err);
    int rc;

    if (!c)
        return -1;
    if (step_done(c->db, c->q[R_BEGIN], err) < 0) {
        rconn_put(s, c);
        return -1;
    }
    rc = fn(c, arg, err);
    if (step_done(c->db, c->q[R_END], rc < 0 ? NULL : err) < 0)
        rc = -1;
    rconn_put(s, c);
    return rc;
}

struct list_arg {
    const char *prefix;
    crater_skv_list_t *out;
};

static int list_fn(rconn_t *c, void *arg, crater_error_t *err)
{
    struct list_arg *a = arg;

    if (read_meta(c, "revision", &a->out->revision, err) < 0)
        return -1;
    return list_rows(c, a->prefix, a->out, err);
}

static int sq_list(crater_store_t *st,
                   const char *prefix,
                   crater_skv_list_t *out,
                   crater_error_t *err)
{
    struct list_arg a = {prefix, out};

    memset(out, 0, sizeof(*out));
    if (in_read_txn((sq_t *)st, list_fn, &a, err) < 0) {
        crater_skv_list_free(out);
        return -1;
    }
    return 0;
}

struct changes_arg {
    const char *prefix;
    int64_t after;
    size_t limit;
    crater_store_event_list_t *out;
};

static int event_row(sqlite3_stmt *q,
                     crater_store_event_t *ev,
                     crater_error_t *err)
{
    memset(ev, 0, sizeof(*ev));
    ev->revision = sqlite3_column_int64(q, 0);
    ev->type =
        sqlite3_column_int(q, 1) ? CRATER_STORE_DELETE : CRATER_STORE_PUT;
    ev->kv.mod_rev = ev->revision;
    if (ev->type == CRATER_STORE_DELETE) {
        ev->kv.key = strdup((const char *)sqlite3_column_text(q, 2));
        return ev->kv.key ? 0
                          : crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    if (fill_kv(&ev->kv,
                sqlite3_column_text(q, 2),
                sqlite3_column_blob(q, 3),
                sqlite3_column_bytes(q, 3),
                err)
        < 0)
        return -1;
    ev->kv.create_rev = sqlite3_column_int64(q, 4);
    ev->kv.version = sqlite3_column_int64(q, 5);
    ev->kv.lease = sqlite3_column_int64(q, 6);
    return 0;
}

static int changes_rows(rconn_t *c, struct changes_arg *a, crater_error_t *err)
{
    char end[CRATER_STORE_KEY_MAX + 2];
    sqlite3_stmt *q = c->q[R_CHANGES];
    crater_store_event_list_t *out = a->out;
    size_t cap = 0;
    int rc;

    prefix_end(a->prefix, end);
    sqlite3_bind_int64(q, 1, a->after);
    sqlite3_bind_text(q, 2, a->prefix, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, end, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 4, a->limit ? (int64_t)a->limit : -1);
    while ((rc = step_row(c->db, q, err)) == 1) {
        if (out->count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            crater_store_event_t *p = realloc(out->items, ncap * sizeof(*p));
            if (!p) {
                rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
                break;
            }
            out->items = p;
            cap = ncap;
        }
        if ((rc = event_row(q, &out->items[out->count], err)) < 0)
            break;
        out->count++;
    }
    sqlite3_reset(q);
    return rc < 0 ? -1 : 0;
}

static int changes_fn(rconn_t *c, void *arg, crater_error_t *err)
{
    struct changes_arg *a = arg;
    int64_t compacted;

    if (read_meta(c, "compact_rev", &compacted, err) < 0)
        return -1;
    if (a->after < compacted)
        return crater_errorf(err,
                             CRATER_ESTALE,
                             "revision %lld is compacted (history starts "
                             "after %lld)",
                             (long long)a->after,
                             (long long)compacted);
    return changes_rows(c, a, err);
}

static int sq_changes(crater_store_t *st,
                      const char *prefix,
                      int64_t after_rev,
                      size_t limit,
                      crater_store_event_list_t *out,
                      crater_error_t *err)
{
    struct changes_arg a = {prefix, after_rev, limit, out};

    memset(out, 0, sizeof(*out));
    if (in_read_txn((sq_t *)st, changes_fn, &a, err) < 0) {
        crater_store_event_list_free(out);
        return -1;
    }
    return 0;
}

static int64_t sq_revision(crater_store_t *st)
{
    return atomic_load(&((sq_t *)st)->rev);
}

static int64_t sq_compacted_revision(crater_store_t *st)
{
    return atomic_load(&((sq_t *)st)->compact_rev);
}

/* Size of path + suffix on disk; 0 when it does not exist. */
static uint64_t file_bytes(const char *path, const char *suffix)
{
    char name[4200];
    struct stat sb;

    snprintf(name, sizeof(name), "%s%s", path, suffix);
    return stat(name, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int sq_stats(crater_store_t *st,
                    crater_store_stats_t *out,
                    crater_error_t *err)
{
    sq_t *s = (sq_t *)st;

    (void)err;
    out->revision = atomic_load(&s->rev);
    out->compacted = atomic_load(&s->compact_rev);
    out->events = atomic_load(&s->rows);
    out->db_bytes = file_bytes(s->path, "");
    out->wal_bytes = file_bytes(s->path, "-wal");
    return 0;
}

/* ---- writer: applying one request -------------------------------------- */

static int wstep(sq_t *s, enum wstmt i, crater_error_t *err)
{
    return step_done(s->wdb, s->w[i], err);
}

/* 1 found (fills the counters), 0 absent, -1 error. */
static int kv_lookup(sq_t *s,
                     const char *key,
                     int64_t *create,
                     int64_t *mod,
                     int64_t *version,
                     crater_error_t *err)
{
    sqlite3_stmt *q = s->w[W_KVGET];
    int rc;

    sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
    rc = step_row(s->wdb, q, err);
    if (rc == 1) {
        *create = sqlite3_column_int64(q, 0);
        *mod = sqlite3_column_int64(q, 1);
        *version = sqlite3_column_int64(q, 2);
    }
    sqlite3_reset(q);
    return rc;
}

static int check_compare(sq_t *s,
                         const crater__txn_op_t *c,
                         crater_error_t *err)
{
    int64_t create = 0, mod = 0, version = 0;
    int found = kv_lookup(s, c->key, &create, &mod, &version, err);

    if (found < 0)
        return -1;
    if (c->mod_rev == 0 && found)
        return crater_errorf_field(err,
                                   CRATER_ESTALE,
                                   c->key,
                                   "key '%s' exists (mod_rev %lld), expected "
                                   "absent",
                                   c->key,
                                   (long long)mod);
    if (c->mod_rev != 0 && !found)
        return crater_errorf_field(err,
                                   CRATER_ESTALE,
                                   c->key,
                                   "key '%s' does not exist, expected mod_rev "
                                   "%lld",
                                   c->key,
                                   (long long)c->mod_rev);
    if (found && mod != c->mod_rev)
        return crater_errorf_field(err,
                                   CRATER_ESTALE,
                                   c->key,
                                   "key '%s' has mod_rev %lld, expected %lld",
                                   c->key,
                                   (long long)mod,
                                   (long long)c->mod_rev);
    return 0;
}

static int add_change(sq_t *s,
                      int64_t rev,
                      int *seq,
                      bool del,
                      const crater__txn_op_t *op,
                      int64_t create,
                      int64_t version,
                      crater_error_t *err)
{
    sqlite3_stmt *q = s->w[W_CHANGE];

    sqlite3_bind_int64(q, 1, rev);
    sqlite3_bind_int(q, 2, (*seq)++);
    sqlite3_bind_int(q, 3, del ? 1 : 0);
    sqlite3_bind_text(q, 4, op->key, -1, SQLITE_STATIC);
    if (del)
        sqlite3_bind_null(q, 5);
    else
        sqlite3_bind_blob(q, 5, op->value, (int)op->len, SQLITE_STATIC);
    sqlite3_bind_int64(q, 6, create);
    sqlite3_bind_int64(q, 7, version);
    sqlite3_bind_int64(q, 8, del ? 0 : op->lease);
    if (step_done(s->wdb, q, err) < 0)
        return -1;
    s->c.rows++;
    return 0;
}

/* 1 exists, 0 not, -1 error. */
static int lease_exists(sq_t *s, int64_t id, crater_error_t *err)
{
    sqlite3_stmt *q = s->w[W_LEASE_GET];
    int rc;

    sqlite3_bind_int64(q, 1, id);
    rc = step_row(s->wdb, q, err);
    sqlite3_reset(q);
    return rc;
}

static int apply_put(sq_t *s,
                     const crater__txn_op_t *op,
                     int64_t rev,
                     int *seq,
                     crater_error_t *err)
{
    int64_t create = rev, mod = 0, version = 0;
    sqlite3_stmt *q = s->w[W_KVPUT];
    int found, rc;

    if (op->lease && (rc = lease_exists(s, op->lease, err)) <= 0)
        return rc < 0 ? -1
                      : crater_errorf_field(err,
                                            CRATER_ENOENT,
                                            op->key,
                                            "lease %lld for key '%s' not "
                                            "found",
                                            (long long)op->lease,
                                            op->key);
    if ((found = kv_lookup(s, op->key, &create, &mod, &version, err)) < 0)
        return -1;
    version = found ? version + 1 : 1;
    sqlite3_bind_text(q, 1, op->key, -1, SQLITE_STATIC);
    sqlite3_bind_blob(q, 2, op->value, (int)op->len, SQLITE_STATIC);
    sqlite3_bind_int64(q, 3, create);
    sqlite3_bind_int64(q, 4, rev);
    sqlite3_bind_int64(q, 5, version);
    sqlite3_bind_int64(q, 6, op->lease);
    if (step_done(s->wdb, q, err) < 0)
        return -1;
    return add_change(s, rev, seq, false, op, create, version, err);
}

static int apply_delete(sq_t *s,
                        const crater__txn_op_t *op,
                        int64_t rev,
                        int *seq,
                        crater_error_t *err)
{
    int64_t create, mod, version;
    int found = kv_lookup(s, op->key, &create, &mod, &version, err);
    sqlite3_stmt *q = s->w[W_KVDEL];

    if (found <= 0)
        return found;
    sqlite3_bind_text(q, 1, op->key, -1, SQLITE_STATIC);
    if (step_done(s->wdb, q, err) < 0)
        return -1;
    return add_change(s, rev, seq, true, op, 0, 0, err);
}

static int apply_txn(sq_t *s, req_t *r)
{
    size_t nc, no;
    const crater__txn_op_t *cmp = crater__txn_compares(r->txn, &nc);
    const crater__txn_op_t *ops = crater__txn_ops(r->txn, &no);
    int64_t rev = s->c.rev + 1;
    int seq = 0;

    for (size_t i = 0; i < nc; i++)
        if (check_compare(s, &cmp[i], &r->err) < 0)
            return -1;
    for (size_t i = 0; i < no; i++) {
        int rc = ops[i].kind == CRATER__TXN_PUT
                     ? apply_put(s, &ops[i], rev, &seq, &r->err)
                     : apply_delete(s, &ops[i], rev, &seq, &r->err);
        if (rc < 0)
            return -1;
    }
    if (seq > 0)
        s->c.rev = rev;
    return 0;
}

/* Reads the single integer column of every row of q into a new array. */
static int collect_i64(
    sq_t *s, sqlite3_stmt *q, int64_t **out, size_t *n, crater_error_t *err)
{
    size_t cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    while ((rc = step_row(s->wdb, q, err)) == 1) {
        if (*n == cap) {
            int64_t *p = realloc(*out, (cap = cap ? cap * 2 : 8) * sizeof(*p));
            if (!p) {
                rc = crater_errorf(err, CRATER_ENOMEM, "out of memory");
                break;
            }
            *out = p;
        }
        (*out)[(*n)++] = sqlite3_column_int64(q, 0);
    }
    sqlite3_reset(q);
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    return rc < 0 ? -1 : 0;
}

/* Deletes the keys attached to lease id (one at a time: keys are read into
 * memory first so the delete does not run under an open SELECT). */
static int lease_delete_keys(
    sq_t *s, int64_t id, int64_t rev, int *seq, crater_error_t *err)
{
    sqlite3_stmt *q = s->w[W_LEASE_KEYS];
    int rc;

    sqlite3_bind_int64(q, 1, id);
    while ((rc = step_row(s->wdb, q, err)) == 1) {
        crater__txn_op_t op = {.kind = CRATER__TXN_DELETE};
        op.key = strdup((const char *)sqlite3_column_text(q, 0));
        sqlite3_reset(q); /* the deleted row is gone from the next step */
        if (!op.key)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        sqlite3_bind_int64(q, 1, id);
        rc = apply_delete(s, &op, rev, seq, err);
        free(op.key);
        if (rc < 0)
            break;
    }
    sqlite3_reset(q);
    if (rc < 0)
        return -1;
    sqlite3_bind_int64(s->w[W_LEASE_DEL], 1, id);
    return wstep(s, W_LEASE_DEL, err);
}

static int apply_revoke(sq_t *s, req_t *r)
{
    int64_t rev = s->c.rev + 1;
    int seq = 0, rc = lease_exists(s, r->a, &r->err);

    if (rc <= 0)
        return rc < 0 ? -1
                      : crater_errorf_field(&r->err,
                                            CRATER_ENOENT,
                                            "lease",
                                            "lease %lld not found",
                                            (long long)r->a);
    if (lease_delete_keys(s, r->a, rev, &seq, &r->err) < 0)
        return -1;
    if (seq > 0)
        s->c.rev = rev;
    return 0;
}

static int apply_expire(sq_t *s, req_t *r)
{
    int64_t rev = s->c.rev + 1, *ids;
    size_t n;
    int seq = 0, rc = 0;

    sqlite3_bind_int64(s->w[W_LEASE_DUE], 1, r->a);
    if (collect_i64(s, s->w[W_LEASE_DUE], &ids, &n, &r->err) < 0)
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = lease_delete_keys(s, ids[i], rev, &seq, &r->err);
    if (n)
        crater_debug(CRATER_SUB_STORE, "store: %zu lease(s) expired", n);
    free(ids);
    if (rc == 0 && seq > 0)
        s->c.rev = rev;
    return rc;
}

static int apply_grant(sq_t *s, req_t *r)
{
    sqlite3_stmt *q = s->w[W_LEASE_INS];
    int64_t id = s->c.lease_seq + 1;

    sqlite3_bind_int64(q, 1, id);
    sqlite3_bind_int64(q, 2, r->a);
    sqlite3_bind_int64(q, 3, r->b + r->a);
    if (step_done(s->wdb, q, &r->err) < 0)
        return -1;
    s->c.lease_seq = id;
    r->out = id;
    return 0;
}

static int apply_keepalive(sq_t *s, req_t *r)
{
    sqlite3_stmt *q = s->w[W_LEASE_UPD];

    sqlite3_bind_int64(q, 1, r->a);
    sqlite3_bind_int64(q, 2, r->b);
    if (step_done(s->wdb, q, &r->err) < 0)
        return -1;
    if (sqlite3_changes(s->wdb) == 0)
        return crater_errorf_field(&r->err,
                                   CRATER_ENOENT,
                                   "lease",
                                   "lease %lld not found",
                                   (long long)r->a);
    return 0;
}

static int apply_compact(sq_t *s, req_t *r)
{
    if (r->a > s->c.rev)
        return crater_errorf_field(&r->err,
                                   CRATER_ERANGE,
                                   "revision",
                                   "cannot compact at %lld: the store is at "
                                   "revision %lld",
                                   (long long)r->a,
                                   (long long)s->c.rev);
    if (r->a <= s->c.compact)
        return 0;
    s->c.compact = r->a; /* the rows go in purge steps (purge_step) */
    s->purge_due = true;
    return 0;
}

static int apply(sq_t *s, req_t *r)
{
    switch (r->kind) {
    case REQ_TXN:
        return apply_txn(s, r);
    case REQ_COMPACT:
        return apply_compact(s, r);
    case REQ_GRANT:
        return apply_grant(s, r);
    case REQ_KEEPALIVE:
        return apply_keepalive(s, r);
    case REQ_REVOKE:
        return apply_revoke(s, r);
    case REQ_EXPIRE:
        return apply_expire(s, r);
    }
    return crater_errorf(&r->err, CRATER_EINTERNAL, "bad request kind");
}

/* Runs r in its own savepoint; on failure only r's changes are undone. */
static void apply_in_savepoint(sq_t *s, req_t *r)
{
    counters_t saved = s->c;

    crater_error_clear(&r->err);
    r->rc = wstep(s, W_SAVE, &r->err);
    if (r->rc == 0 && (r->rc = apply(s, r)) == 0)
        r->rc = wstep(s, W_RELEASE, &r->err);
    if (r->rc < 0) {
        s->c = saved;
        if (!sqlite3_get_autocommit(s->wdb)) {
            wstep(s, W_ROLLBACK_TO, NULL);
            wstep(s, W_RELEASE, NULL);
        }
    }
    r->rev = s->c.rev;
}

/* ---- writer: the group commit ------------------------------------------ */

static int set_meta(sq_t *s, const char *k, int64_t v, crater_error_t *err)
{
    sqlite3_bind_text(s->w[W_SETMETA], 1, k, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s->w[W_SETMETA], 2, v);
    return wstep(s, W_SETMETA, err);
}

static int write_counters(sq_t *s, crater_error_t *err)
{
    if (set_meta(s, "revision", s->c.rev, err) < 0
        || set_meta(s, "compact_rev", s->c.compact, err) < 0
        || set_meta(s, "lease_seq", s->c.lease_seq, err) < 0)
        return -1;
    return 0;
}

/* Every request that had succeeded fails with berr (the batch is lost). */
static void fail_batch(req_t *batch, const crater_error_t *berr)
{
    for (req_t *r = batch; r; r = r->next) {
        if (r->rc == 0) {
            r->rc = -1;
            r->err = *berr;
        }
    }
}

/* One bounded step of the purge of compacted history: at most PURGE_ROWS
 * rows at or below the compacted revision, in the batch's transaction and
 * its own savepoint. Compaction itself only moves the compacted revision
 * (readers stop seeing the rows at once); deleting 300,000 rows in one
 * statement would hold every commit behind it for seconds, a step per
 * batch holds one for a few milliseconds. A failure is logged and the rest
 * waits for the next compaction (no retry loop on a broken disk). */
static void purge_step(sq_t *s)
{
    crater_error_t err;
    int64_t n;

    if (!s->purge_due || sqlite3_get_autocommit(s->wdb))
        return;
    sqlite3_bind_int64(s->w[W_PURGE], 1, s->c.compact);
    sqlite3_bind_int64(s->w[W_PURGE], 2, PURGE_ROWS);
    if (wstep(s, W_SAVE, &err) == 0 && wstep(s, W_PURGE, &err) == 0) {
        n = sqlite3_changes(s->wdb);
        s->c.rows -= n;
        s->purge_due = n == PURGE_ROWS;
        wstep(s, W_RELEASE, NULL);
        return;
    }
    crater_log(LOG_ERR, "store: purging compacted history: %s", err.text);
    s->purge_due = false;
    if (!sqlite3_get_autocommit(s->wdb)) {
        wstep(s, W_ROLLBACK_TO, NULL);
        wstep(s, W_RELEASE, NULL);
    }
}

/* Runs batch (NULL: only a purge step) in one transaction. */
static void run_batch(sq_t *s, req_t *batch)
{
    counters_t saved = s->c;
    crater_error_t berr;
    int rc = wstep(s, W_BEGIN, &berr);

    for (req_t *r = batch; r; r = r->next) {
        r->rc = 0;
        if (rc == 0 && !sqlite3_get_autocommit(s->wdb))
            apply_in_savepoint(s, r);
    }
    if (rc == 0)
        purge_step(s);
    if (rc == 0 && sqlite3_get_autocommit(s->wdb))
        rc = crater_errorf(&berr,
                           CRATER_EIO,
                           "store: the group commit was rolled back: %s",
                           sqlite3_errmsg(s->wdb));
    if (rc == 0
        && (write_counters(s, &berr) < 0 || wstep(s, W_COMMIT, &berr) < 0))
        rc = -1;
    if (rc < 0) {
        if (!sqlite3_get_autocommit(s->wdb))
            wstep(s, W_ROLLBACK, NULL);
        crater_log(LOG_ERR, "%s", berr.text);
        fail_batch(batch, &berr);
        s->c = saved;
        s->purge_due = false;
    }
    atomic_store(&s->rev, s->c.rev);
    atomic_store(&s->compact_rev, s->c.compact);
    atomic_store(&s->rows, s->c.rows);
}

/* The next requests, up to max_batch. NULL when none is queued: then
 * *stop tells the writer to end (closing) rather than run a purge step
 * (compacted history is left: the writer purges while idle). */
static req_t *take_batch(sq_t *s, bool *stop)
{
    req_t *batch, *last;
    uint32_t n = 1;

    pthread_mutex_lock(&s->qmu);
    while (!s->head && !s->closing && !s->purge_due)
        pthread_cond_wait(&s->qcv, &s->qmu);
    batch = last = s->head;
    if (batch) {
        while (last->next && n < s->max_batch) {
            last = last->next;
            n++;
        }
        s->head = last->next;
        if (!s->head)
            s->tail = NULL;
        last->next = NULL;
    }
    *stop = !batch && s->closing;
    pthread_mutex_unlock(&s->qmu);
    return batch;
}

static void *writer_main(void *arg)
{
    sq_t *s = arg;
    req_t *batch;
    bool stop = false;

    pthread_setname_np(pthread_self(), "store-sqlite"); /* top -H, perf, gdb */

    while ((batch = take_batch(s, &stop)) || !stop) {
        run_batch(s, batch);
        while (batch) {
            req_t *next = batch->next;
            batch->done(batch); /* may free batch */
            batch = next;
        }
    }
    return NULL;
}

/* ---- submitting -------------------------------------------------------- */

static int submit(sq_t *s, req_t *r, crater_error_t *err)
{
    bool on_writer = pthread_equal(pthread_self(), s->writer);

    r->next = NULL;
    pthread_mutex_lock(&s->qmu);
    if (s->closing && !on_writer) {
        pthread_mutex_unlock(&s->qmu);
        return crater_errorf(err, CRATER_EUNAVAIL, "store is closing");
    }
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return 0;
}

static void sync_done(req_t *r)
{
    pthread_mutex_lock(&r->mu);
    r->finished = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Queues r and waits for the writer to finish it. The writer completes
 * every request it accepted (close drains the queue), so the wait ends. */
static int run_sync(sq_t *s, req_t *r, crater_error_t *err)
{
    int rc;

    if (pthread_equal(pthread_self(), s->writer))
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "synchronous store call from a store callback");
    r->done = sync_done;
    r->finished = false;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    rc = submit(s, r, err);
    if (rc == 0) {
        pthread_mutex_lock(&r->mu);
        while (!r->finished)
            pthread_cond_wait(&r->cv, &r->mu);
        pthread_mutex_unlock(&r->mu);
        rc = r->rc;
        if (rc < 0 && err)
            *err = r->err;
    }
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    return rc;
}

static int sq_commit(crater_store_t *st,
                     crater_txn_t *t,
                     int64_t *rev,
                     crater_error_t *err)
{
    req_t r = {.kind = REQ_TXN, .txn = t};

    if (run_sync((sq_t *)st, &r, err) < 0)
        return -1;
    if (rev)
        *rev = r.rev;
    return 0;
}

static void async_done(req_t *r)
{
    r->cb(r->rc, r->rev, &r->err, r->arg);
    crater_txn_destroy(r->txn);
    free(r);
}

static int sq_commit_async(crater_store_t *st,
                           crater_txn_t *t,
                           crater_store_done_f cb,
                           void *arg,
                           crater_error_t *err)
{
    req_t *r = calloc(1, sizeof(*r));

    if (!r) {
        crater_txn_destroy(t);
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    }
    r->kind = REQ_TXN;
    r->txn = t;
    r->cb = cb;
    r->arg = arg;
    r->done = async_done;
    if (submit((sq_t *)st, r, err) < 0) {
        crater_txn_destroy(t);
        free(r);
        return -1;
    }
    return 0;
}

static int sq_compact(crater_store_t *st, int64_t rev, crater_error_t *err)
{
    req_t r = {.kind = REQ_COMPACT, .a = rev};

    return run_sync((sq_t *)st, &r, err);
}

static int sq_compact_async(crater_store_t *st,
                            int64_t rev,
                            crater_store_done_f cb,
                            void *arg,
                            crater_error_t *err)
{
    req_t *r = calloc(1, sizeof(*r));

    if (!r)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    r->kind = REQ_COMPACT;
    r->a = rev;
    r->cb = cb;
    r->arg = arg;
    r->done = async_done;
    if (submit((sq_t *)st, r, err) < 0) {
        free(r);
        return -1;
    }
    return 0;
}

static int sq_lease_grant(crater_store_t *st,
                          int64_t ttl_ms,
                          int64_t now_ms,
                          int64_t *id,
                          crater_error_t *err)
{
    req_t r = {.kind = REQ_GRANT, .a = ttl_ms, .b = now_ms};

    if (run_sync((sq_t *)st, &r, err) < 0)
        return -1;
    if (id)
        *id = r.out;
    return 0;
}

static int sq_lease_keepalive(crater_store_t *st,
                              int64_t id,
                              int64_t now_ms,
                              crater_error_t *err)
{
    req_t r = {.kind = REQ_KEEPALIVE, .a = id, .b = now_ms};

    return run_sync((sq_t *)st, &r, err);
}

static int sq_lease_revoke(crater_store_t *st, int64_t id, crater_error_t *err)
{
    req_t r = {.kind = REQ_REVOKE, .a = id};

    return run_sync((sq_t *)st, &r, err);
}

static int sq_expire_leases(crater_store_t *st,
                            int64_t now_ms,
                            crater_error_t *err)
{
    req_t r = {.kind = REQ_EXPIRE, .a = now_ms};

    return run_sync((sq_t *)st, &r, err);
}

/* ---- open and close ---------------------------------------------------- */

static int load_counter(sq_t *s, const char *k, int64_t *v, crater_error_t *err)
{
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(s->wdb,
                                "SELECT v FROM meta WHERE k = ?",
                                -1,
                                &q,
                                NULL);

    if (rc != SQLITE_OK)
        return sql_fail(s->wdb, rc, err, "open");
    sqlite3_bind_text(q, 1, k, -1, SQLITE_STATIC);
    rc = step_row(s->wdb, q, err);
    if (rc == 1)
        *v = sqlite3_column_int64(q, 0);
    else if (rc == 0)
        crater_errorf(err, CRATER_EIO, "store meta '%s' missing", k);
    sqlite3_finalize(q);
    return rc == 1 ? 0 : -1;
}

/* One scan at open (about 10 ms per 300,000 rows); the writer keeps the
 * count from then on. */
static int count_rows(sq_t *s, int64_t *n, crater_error_t *err)
{
    sqlite3_stmt *q;
    int rc = sqlite3_prepare_v2(s->wdb,
                                "SELECT count(*) FROM changes",
                                -1,
                                &q,
                                NULL);

    if (rc != SQLITE_OK)
        return sql_fail(s->wdb, rc, err, "open");
    rc = step_row(s->wdb, q, err);
    if (rc == 1)
        *n = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    return rc == 1 ? 0 : -1;
}

/* SQLite checkpoints the WAL into the database every 1000 pages (4 MiB)
 * and then writes the WAL again from its start, but never shrinks the
 * file: after a burst (a long reader holding a checkpoint back) it would
 * stay at its largest. journal_size_limit cuts it back when it restarts. */
static const char wal_limit_sql[] = "PRAGMA journal_size_limit=67108864";

static int setup_writer(sq_t *s, bool no_sync, crater_error_t *err)
{
    int64_t schema = 0;
    int rc;

    if (tighten_modes(s->path, err) < 0)
        return -1;
    if (open_db(s->path,
                SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                &s->wdb,
                err)
        < 0)
        return -1;
    rc = sqlite3_exec(s->wdb, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb,
                          no_sync ? "PRAGMA synchronous=NORMAL"
                                  : "PRAGMA synchronous=FULL",
                          NULL,
                          NULL,
                          NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, wal_limit_sql, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(s->wdb, schema_sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return sql_fail(s->wdb, rc, err, s->path);
    if (load_counter(s, "schema", &schema, err) < 0
        || load_counter(s, "revision", &s->c.rev, err) < 0
        || load_counter(s, "compact_rev", &s->c.compact, err) < 0
        || load_counter(s, "lease_seq", &s->c.lease_seq, err) < 0
        || count_rows(s, &s->c.rows, err) < 0)
        return -1;
    if (schema != 1)
        return crater_errorf(err,
                             CRATER_EIO,
                             "%s: unsupported store schema %lld",
                             s->path,
                             (long long)schema);
    atomic_store(&s->rev, s->c.rev);
    atomic_store(&s->compact_rev, s->c.compact);
    atomic_store(&s->rows, s->c.rows);
    s->purge_due = true; /* rows a compaction left before a restart */
    return prepare_all(s->wdb, wsql, W_COUNT, s->w, err);
}

static void sq_free(sq_t *s)
{
    while (s->idle) {
        rconn_t *c = s->idle;
        s->idle = c->next;
        rconn_free(c);
    }
    finalize_all(s->w, W_COUNT);
    sqlite3_close(s->wdb);
    pthread_cond_destroy(&s->pcv);
    pthread_mutex_destroy(&s->pmu);
    pthread_cond_destroy(&s->qcv);
    pthread_mutex_destroy(&s->qmu);
    free(s->path);
    free(s);
}

crater_store_t *crater_store_open_sqlite(const char *path,
                                         const crater_store_opts_t *opts,
                                         crater_error_t *err)
{
    sq_t *s = calloc(1, sizeof(*s));

    if (!s || !(s->path = strdup(path))) {
        free(s);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    s->base.ops = &sqlite_ops;
    s->max_batch = opts && opts->max_batch ? opts->max_batch : DEFAULT_BATCH;
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    pthread_mutex_init(&s->pmu, NULL);
    pthread_cond_init(&s->pcv, NULL);
    if (setup_writer(s, opts && opts->no_sync, err) < 0) {
        sq_free(s);
        return NULL;
    }
    if (pthread_create(&s->writer, NULL, writer_main, s) != 0) {
        crater_errorf(err, CRATER_EIO, "store: cannot start the writer");
        sq_free(s);
        return NULL;
    }
    return &s->base;
}

static void sq_close(crater_store_t *st)
{
    sq_t *s = (sq_t *)st;

    pthread_mutex_lock(&s->qmu);
    s->closing = true;
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    pthread_join(s->writer, NULL);
    sq_free(s);
}

static const crater__store_ops_t sqlite_ops = {
    .version = 2,
    .close = sq_close,
    .get = sq_get,
    .list = sq_list,
    .revision = sq_revision,
    .compacted_revision = sq_compacted_revision,
    .changes = sq_changes,
    .compact = sq_compact,
    .compact_async = sq_compact_async,
    .stats = sq_stats,
    .commit = sq_commit,
    .commit_async = sq_commit_async,
    .lease_grant = sq_lease_grant,
    .lease_keepalive = sq_lease_keepalive,
    .lease_revoke = sq_lease_revoke,
    .expire_leases = sq_expire_leases,
};
