/* ports.h - the TCP ports something listens on at this node, for the
 * heartbeat's "listening" (agent protocol 7): craterd picks a gang's
 * MASTER_PORT and a service replica's CRATER_SERVICE_PORT among the ports
 * nothing holds there (doc/agent.md "Ports").
 *
 * Read from PROC/net/tcp and PROC/net/tcp6: the sockets of the agent's
 * network namespace, the host's, where tasks listen (a container task
 * shares it: podman runs with the host network). A socket in LISTEN state
 * bound to any address holds its port.
 *
 * Ownership: crater_ports_listening() returns a malloc'd array the caller
 * frees. Pure functions apart from the reads; thread-safe.
 */
#ifndef CRATER_AGENT_PORTS_H
#define CRATER_AGENT_PORTS_H

#include <stddef.h>
#include <stdint.h>

/* One line of /proc/net/tcp or tcp6: 1 and *port when it is a socket in
 * LISTEN state, 0 otherwise (the header, another state, a line that does
 * not parse). */
int crater_ports_parse_line(const char *line, uint16_t *port);

/* The listening ports under proc_root (NULL = "/proc"), ascending and
 * unique, at most max: 0 with *out (NULL when none) and *n; -1 when
 * neither file could be read (then nothing is reported). */
int crater_ports_listening(const char *proc_root,
                           size_t max,
                           uint16_t **out,
                           size_t *n);

#endif /* CRATER_AGENT_PORTS_H */
