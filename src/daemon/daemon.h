/* daemon.h - craterd as a library: start it, ask its port, stop it. The
 * craterd program and `crater up` both run it this way.
 *
 * crater_daemon_start() opens the store under the data directory, rebuilds
 * the in-memory state from it (pending jobs stay pending, bound and
 * running jobs keep their placement until their agents report), starts the
 * scheduler thread and the HTTP server, and returns. crater_daemon_stop()
 * stops accepting requests, finishes every queued store commit, and frees
 * everything. The daemon copies what it needs from cfg and opts.
 */
#ifndef CRATER_DAEMON_H
#define CRATER_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "crater/config.h"
#include "crater/error.h"

typedef struct crater_daemon crater_daemon_t;

typedef struct crater_daemon_opts {
    const char *listen;   /* overrides server.listen when not NULL */
    const char *data_dir; /* overrides server.dataDir when not NULL */
    bool no_sync;         /* store without fsync (benchmarks, tests) */
    unsigned threads;     /* HTTP worker threads; 0 = number of CPUs */
    const char *hardware; /* hardware file: nodes known before agents */
    /* Leader election (main_craterd.c, leader.h): the leader key's
     * mod_revision this craterd won with, set as the store's fence (every
     * write compares it); 0 = no election. advertise_url: this craterd's
     * URL, answered by GET /api/v1/leader (NULL: none). */
    int64_t fence_rev;
    const char *advertise_url;
    /* A promoted standby's warm copy of the store's records (warm.h),
     * caught up to the store's revision: the state is loaded from it
     * instead of listing the store. Borrowed during crater_daemon_start()
     * only; NULL = list the store. */
    const struct crater_warm *warm;
} crater_daemon_opts_t;

crater_daemon_t *crater_daemon_start(const crater_config_t *cfg,
                                     const crater_daemon_opts_t *opts,
                                     crater_error_t *err);
uint16_t crater_daemon_port(const crater_daemon_t *d);
/* The inference gateway's port (inference.gateway), 0 when none. */
uint16_t crater_daemon_gateway_port(const crater_daemon_t *d);
/* The admin token created at this start (first start of a data directory),
 * or NULL. Borrowed. It is also written to DATA_DIR/admin.token (0600). */
const char *crater_daemon_admin_token(const crater_daemon_t *d);
/* Create a token (role "agent" for node, "user" for tenant, "admin").
 * Writes the token text into buf (>= 48 bytes). */
int crater_daemon_create_token(crater_daemon_t *d,
                               const char *role,
                               const char *tenant_or_node,
                               char *buf,
                               size_t size,
                               crater_error_t *err);
/* The same with a name kept in the token's record (NULL = none), an
 * expiry time in ms since the epoch (0 = never), and read_only (GET and
 * HEAD only; refused for agent tokens, err->field "readOnly"). */
int crater_daemon_create_token_named(crater_daemon_t *d,
                                     const char *role,
                                     const char *tenant_or_node,
                                     const char *name,
                                     int64_t expires_ms,
                                     bool read_only,
                                     char *buf,
                                     size_t size,
                                     crater_error_t *err);
/* A leader that lost its election: every later store write fails at
 * once ("not the leader"), queued ones included, so that the stop that
 * follows writes nothing. Safe from any thread; no-op without a fence. */
void crater_daemon_step_down(crater_daemon_t *d);
/* A leader that is not sure it still leads (leader.h, UNSURE) pauses:
 * every API route but /healthz, /readyz, /metrics, /api/v1/leader and the
 * dashboard's pages answers 503 with "X-Crater-Leader: none" (it applied
 * nothing: clients try again, elsewhere), /readyz and /api/v1/leader say
 * so, and the scheduler thread does nothing. Resumed (on false), the
 * nodes' heartbeat clocks skip the pause. Safe from any thread. */
void crater_daemon_pause(crater_daemon_t *d, bool on);
void crater_daemon_stop(crater_daemon_t *d);

/* craterd with leader election (ha.c; store.backend etcd and ha.election
 * auto): stands by, leads when elected, steps down when it loses, until
 * SIGINT/SIGTERM (the caller blocked them: crater_proc_block_stop_signals).
 * 0 after a clean stop, -1 with err when it could not start. */
int crater_ha_run(const crater_config_t *cfg,
                  const crater_daemon_opts_t *opts,
                  crater_error_t *err);

#endif /* CRATER_DAEMON_H */
