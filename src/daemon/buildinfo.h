/* buildinfo.h - version of this build and of the agent protocol: one
 * definition so the server, the agent and the CLI never disagree. */
#ifndef CRATER_DAEMON_BUILDINFO_H
#define CRATER_DAEMON_BUILDINFO_H

#define CRATER_VERSION_STRING "0.1.0"

/* The agent protocol's version (doc/agent.md). Register carries it; craterd
 * refuses an agent that speaks another. 2: task events, adoption, logs per
 * attempt. 3: the tenant's task uid/gid in the task order. 4: a replica index
 * in task orders, stops, events, held tasks and usage (multi-replica
 * jobs). 5: checkpoints (issue 14): "checkpointDir" in task orders, a
 * preemption "notice" in stops, "checkpoint" and "progress" events. 6: a
 * service replica's "readiness" command in its task order, run by the
 * agent as the task, and "ready" events. 7: the node's listening TCP
 * ports in heartbeats ("listening"). */
#define CRATER_AGENT_PROTOCOL 7

/* Static string, never freed. Inline: the agent and the CLI use it too,
 * and a floor's library calls only down (scripts/check-links.sh). */
static inline const char *crater_version(void)
{
    return CRATER_VERSION_STRING;
}

#endif
