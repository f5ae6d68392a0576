/* auth.h - API tokens: roles, generation, hashing, stored records and the
 * Authorization header.
 *
 * A token is "crt_" followed by 43 base64url characters encoding 32
 * random bytes from getrandom(2). craterd shows a token once, when it is
 * created, and stores only its SHA-256 (crater_token_rec_t.hash), so a
 * leaked store does not leak usable tokens. A request's token is hashed
 * and the hash looked up; hashes are compared in constant time.
 *
 * Roles: admin (everything), user (bound to one tenant: sees and cancels
 * only that tenant's jobs), agent (bound to one node: speaks only for it).
 * An admin or user token may be read-only (Kubernetes' "view"): it reads
 * what its role reads (GET and HEAD) and changes nothing.
 */
#ifndef CRATER_AUTH_H
#define CRATER_AUTH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"

typedef enum crater_role {
    CRATER_ROLE_ADMIN,
    CRATER_ROLE_USER,
    CRATER_ROLE_AGENT
} crater_role_t;

/* "admin", "user", "agent"; "unknown" for other values. Static. */
const char *crater_role_name(crater_role_t r);
/* Exact (case-sensitive) role name; CRATER_EINVAL listing the valid names
 * otherwise. *out is untouched on failure. */
int crater_role_parse(const char *s, crater_role_t *out, crater_error_t *err);

#define CRATER_TOKEN_PREFIX "crt_"
#define CRATER_TOKEN_LEN 47 /* "crt_" + 43 base64url chars, no padding */

/* Write a new token and its NUL into buf (size >= CRATER_TOKEN_LEN + 1).
 * CRATER_EINVAL when buf is too small, CRATER_EIO when the kernel gives no
 * randomness. buf is untouched on failure. */
int crater_token_generate(char *buf, size_t size, crater_error_t *err);

/* SHA-256 of the token's bytes (NULL hashes as ""), 64 lowercase hex
 * digits and a NUL into hex. */
void crater_token_hash(const char *token, char hex[65]);

/* a and b hold the same text. Time depends only on the length, not on
 * where they differ. Different lengths or a NULL are false. */
bool crater_token_hash_equal(const char *a, const char *b);

/* A token as stored: never the token itself. Members are malloc'd and
 * owned by the record. */
typedef struct crater_token_rec {
    char hash[65]; /* crater_token_hash() of the token */
    crater_role_t role;
    char *tenant;         /* role user: required, a tenant name; else NULL */
    char *node;           /* role agent: required, a node name; else NULL */
    char *name;           /* optional label for humans ("alice laptop") */
    int64_t created_ms;   /* creation time, ms since the epoch */
    int64_t expires_ms;   /* it stops working then; 0: never */
    int64_t last_used_ms; /* last authenticated request (to the minute as
                             stored); 0: never used */
    bool read_only;       /* GET and HEAD only (admin and user tokens) */
} crater_token_rec_t;

/* Has r expired at now_ms? */
bool crater_token_expired(const crater_token_rec_t *r, int64_t now_ms);

/* Free the members and NULL them; r itself is the caller's. NULL is OK. */
void crater_token_rec_free(crater_token_rec_t *r);

/* {"hash", "role", "tenant"?, "node"?, "name"?, "created_ms",
 * "expires_ms"?, "last_used_ms"?, "read_only"?}: absent members (zero
 * times, read_only false) are omitted. New reference the caller owns; NULL on
 * ENOMEM. */
json_t *crater_token_rec_to_json(const crater_token_rec_t *r);

/* Strict decode of the object above: unknown fields (with a suggestion),
 * wrong types, a hash that is not 64 lowercase hex digits, an unknown role,
 * a user without tenant, an agent without node, or a tenant/node on a role
 * that has none are errors whose err->field names the field. tenant and
 * node follow the job spec's naming rules (lowercase DNS names; tenants at
 * most 63 characters). On success *out receives a record the caller frees
 * with crater_token_rec_free(); on failure *out is untouched. */
int crater_token_rec_from_json(const json_t *j,
                               crater_token_rec_t *out,
                               crater_error_t *err);

/* The token in an Authorization header value "Bearer <token>". The scheme
 * is case-insensitive; spaces or tabs may precede it and one or more must
 * separate it from the token. The token is non-empty token68 text (RFC
 * 7235: letters, digits, - . _ ~ + / then optional '=' padding) running to
 * the end of the string (trailing blanks are malformed). Returns a pointer
 * into header_value, or NULL when malformed or NULL. */
const char *crater_auth_bearer(const char *header_value);

#endif /* CRATER_AUTH_H */
