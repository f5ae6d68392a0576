/* audit.h - craterd's audit log: who changed what, from where.
 *
 * Every state-changing API request (POST, PUT, PATCH, DELETE) of a user
 * or an admin is written after its handler ran, as one JSON line in
 * DATA/audit.log: {time_ms, actor, role, token, from, method, path,
 * action, status}. Agents' own traffic (/api/v1/agents/...) is not
 * audited: it is the system talking to itself. The log rotates at 16 MiB
 * to audit-<ms>.log and rotated files older than server.auditLogRetention
 * are removed, as the decision log does. GET /api/v1/audit (admins only)
 * reads it back. Not a public header.
 */
#ifndef CRATER_DAEMON_AUDIT_H
#define CRATER_DAEMON_AUDIT_H

#include "crater/error.h"
#include "crater/http.h"

struct crater_daemon;

/* Open nothing yet; note the path. -1 on ENOMEM. */
int audit_init(struct crater_daemon *d, crater_error_t *err);
void audit_free(struct crater_daemon *d);

/* The handler for method and path, wrapped: timed into
 * crater_http_request_duration_seconds{method,route}, and audited when
 * method changes state. *fn_out and *arg_out go to crater_router_add().
 * -1 on ENOMEM (too many routes). */
int audit_wrap(struct crater_daemon *d,
               const char *method,
               const char *path,
               crater_http_handler_f fn,
               crater_http_handler_f *fn_out,
               void **arg_out);

/* Register GET /api/v1/audit. */
int api_audit_routes(struct crater_daemon *d, crater_error_t *err);

#endif /* CRATER_DAEMON_AUDIT_H */
