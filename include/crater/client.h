/* client.h - HTTP client for the CLI and the agent (a libcurl wrapper).
 *
 * One client holds one libcurl handle and so one keep-alive connection to
 * the server. It is NOT thread-safe: use one client per thread.
 *
 * Errors. A transport failure (nothing listening, timeout, connection
 * reset) is CRATER_EUNAVAIL with a message naming the server:
 * "cannot reach http://127.0.0.1:7480: Connection refused". An HTTP error
 * status is not a failure of crater_client_request (it returns 0 and the
 * status); crater_client_json turns it into an error (see there).
 */
#ifndef CRATER_CLIENT_H
#define CRATER_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "crater/error.h"

typedef struct crater_client crater_client_t;

/* base: "http://127.0.0.1:7480" (a trailing slash is tolerated), or a
 * comma-separated list of up to 16 such URLs: the craterds of one cluster
 * with leader election; requests follow the leader (http_client.c says
 * when a request is sent again to another server). token may
 * be NULL (no Authorization header); otherwise every request carries
 * "Authorization: Bearer <token>". Both strings are copied.
 * NULL on error (EINVAL: base is not http:// or https://; ENOMEM). */
crater_client_t *crater_client_create(const char *base,
                                      const char *token,
                                      crater_error_t *err);
void crater_client_destroy(crater_client_t *c); /* NULL accepted */

/* Total time allowed for one request, connecting included; default 30000.
 * ms <= 0 restores the default. */
void crater_client_set_timeout_ms(crater_client_t *c, long ms);

/* With several servers: how long one request keeps trying other servers
 * (after a connection refused, a standby's 503 naming the leader, a failed
 * GET) before it returns the last failure; default 15000, ms < 0 restores
 * it, 0 tries each server once. */
void crater_client_set_failover_ms(crater_client_t *c, long ms);

/* How many times the client moved to another server (the agent registers
 * again after a move: the new leader has its own work channel). */
unsigned crater_client_switches(const crater_client_t *c);

/* The current server's URL without a trailing slash (owned by c). */
const char *crater_client_base(const crater_client_t *c);

/* One request. method "GET"/"POST"/"DELETE"/"PUT"/"HEAD"; path
 * "/api/v1/jobs?state=pending" (appended to base as is: the caller escapes
 * it); body may be NULL (then len is ignored); content_type may be NULL
 * (no Content-Type header).
 * Returns 0 with *status and *resp (malloc'd, NUL-terminated, caller
 * frees; "" when the response has no body) and *resp_len (resp_len may be
 * NULL). Returns -1 with EUNAVAIL on a transport error, ENOMEM, EINVAL;
 * then *resp is NULL. */
int crater_client_request(crater_client_t *c,
                          const char *method,
                          const char *path,
                          const char *content_type,
                          const char *body,
                          size_t len,
                          long *status,
                          char **resp,
                          size_t *resp_len,
                          crater_error_t *err);

/* Request with a JSON body (body may be NULL: none) and parse the JSON
 * answer. Success (status < 400): 0 and *out = the parsed value (caller
 * decrefs; JSON null when the response body is empty).
 * Status >= 400: -1 with err filled from the body {"error", "field",
 * "code"}: errnum is "code" when it names a Crater error, otherwise from
 * the status: 400 EINVAL, 401 EAUTH, 403 EPERM, 404 ENOENT, 409 EEXIST,
 * 413 ELIMIT, 422 EIMPOSSIBLE, 503 EUNAVAIL, other 5xx EINTERNAL, other 4xx
 * EINVAL; text is "error" (or "HTTP <status> from <base>" when the body has
 * none) and field is "field" (or ""). A response that is not JSON is
 * EPARSE. *out is NULL on any failure. */
int crater_client_json(crater_client_t *c,
                       const char *method,
                       const char *path,
                       const json_t *body,
                       json_t **out,
                       crater_error_t *err);

/* The errnum crater_client_json uses for an HTTP status without "code". */
crater_errno_t crater_client_status_errno(long status);

#endif /* CRATER_CLIENT_H */
