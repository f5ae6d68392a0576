/* buildinfo.h - version of this build. */
#ifndef CRATER_DAEMON_BUILDINFO_H
#define CRATER_DAEMON_BUILDINFO_H

#define CRATER_VERSION_STRING "0.1.0"

/* The agent protocol's version (doc/agent.md). Register carries it; craterd
 * refuses an agent that speaks another. 2: task events, adoption, logs per
 * attempt. 3: the tenant's task uid/gid in the task order. 4: a replica index
 * in task orders, stops, events, held tasks and usage (multi-replica
 * jobs). 5: checkpoints (issue 14): "checkpointDir" in task orders, a
 * preemption "notice" in stops, "checkpoint" and "progress" events. */
#define CRATER_AGENT_PROTOCOL 5

/* Static string, never freed. */
const char *crater_version(void);

#endif
