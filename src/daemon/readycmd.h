/* readycmd.h - readiness commands of inference replicas, run by craterd
 * (readycmd.c). Internal to src/daemon.
 *
 *     ready_cmd_spec_t s = {argv, env, nenv, cwd, port, host, ...};
 *     ready_cmd_t *c = ready_cmd_create(&s);   // under d->mu: copies s
 *     bool ok = ready_cmd_run(c);              // without the lock
 *     ready_cmd_destroy(c);
 */
#ifndef CRATER_DAEMON_READYCMD_H
#define CRATER_DAEMON_READYCMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/jobspec.h"

#define READY_CMD_TIMEOUT_MS 1000 /* inference.readiness.timeout default */
#define READY_CMD_PERIOD_MS 1000  /* inference.readiness.period default */

/* What a probe needs; every pointer is borrowed for the create call. */
typedef struct ready_cmd_spec {
    char *const *argv; /* NULL-terminated, at least the program */
    const crater_kv_t *env;
    size_t nenv;
    const char *cwd;    /* NULL: craterd's */
    uint32_t port;      /* CRATER_SERVICE_PORT */
    const char *host;   /* CRATER_SERVICE_HOST: the node's address */
    int64_t timeout_ms; /* 0: READY_CMD_TIMEOUT_MS */
} ready_cmd_spec_t;

typedef struct ready_cmd ready_cmd_t;

/* A copy of s to run later; NULL on ENOMEM. Caller destroys it. */
ready_cmd_t *ready_cmd_create(const ready_cmd_spec_t *s);
/* Run it once: true when it exited 0 within its timeout (past it, its
 * process group is killed). Blocks up to the timeout; logs a spawn
 * failure. */
bool ready_cmd_run(const ready_cmd_t *c);
void ready_cmd_destroy(ready_cmd_t *c); /* NULL is fine */

#endif /* CRATER_DAEMON_READYCMD_H */
