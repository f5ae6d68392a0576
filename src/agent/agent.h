/* agent.h - the node agent as a library: crater-agent runs one, `crater up`
 * runs one per simulated node in its own process.
 *
 * crater_agent_start() loads or discovers the node's hardware, registers
 * with craterd and returns; two threads then run: the work thread
 * long-polls craterd for start/stop orders, and the supervisor thread
 * reaps tasks, enforces grace periods, ships logs, samples the machine and
 * heartbeats. crater_agent_stop() stops both and terminates the node's
 * tasks (SIGTERM, a short grace, SIGKILL of the whole cgroup). The agent
 * copies the strings it needs from opts.
 */
#ifndef CRATER_AGENT_H
#define CRATER_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "crater/config.h"
#include "crater/error.h"

typedef struct crater_agent crater_agent_t;

typedef struct crater_agent_opts {
    const char *server;         /* "http://127.0.0.1:7480" */
    const char *token;          /* agent token for this node */
    const char *hardware;       /* hardware file instead of discovery; NULL */
    const char *node;           /* node of a multi-node hardware file; NULL =
                                   the only node / the discovered hostname */
    const char *data_dir;       /* task logs and working directories */
    const char *cgroup_root;    /* NULL = "/sys/fs/cgroup" */
    const char *cgroup_parent;  /* NULL = "crater" */
    const crater_config_t *cfg; /* agent.* keys; borrowed, outlives us */
    uint64_t stop_grace_ms;     /* grace when the agent itself stops */
} crater_agent_opts_t;

crater_agent_t *crater_agent_start(const crater_agent_opts_t *o,
                                   crater_error_t *err);
/* The node name this agent speaks for. Borrowed. */
const char *crater_agent_node(const crater_agent_t *a);
/* Ask the agent's threads to stop (returns at once); crater_agent_stop()
 * then waits for them. `crater up` asks every agent first, then stops the
 * daemon (which answers their long polls at once), then waits. */
void crater_agent_request_stop(crater_agent_t *a);
void crater_agent_stop(crater_agent_t *a);

/* Discovery as a hardware document (kind: Node), for --discover. */
int crater_agent_discover_json(const char *name,
                               char **yaml_or_json,
                               bool yaml,
                               crater_error_t *err);

#endif /* CRATER_AGENT_H */
