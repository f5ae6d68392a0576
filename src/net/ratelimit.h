/* ratelimit.h - per-client token buckets for the HTTP server (internal).
 *
 *     crater__rl_t *rl = crater__rl_create(200, 400); // 200/s, burst 400
 *     crater__rl_key_t k;
 *     crater__rl_key(sa, salen, &k);
 *     if (!crater__rl_take(rl, &k, now_ms, &retry_s)) answer 429;
 *     crater__rl_destroy(rl);
 *
 * The table has a fixed number of slots (CRATER__RL_SLOTS), so no client
 * population can grow it: a new client takes an empty slot, else one whose
 * bucket has refilled (forgetting it loses nothing), else the least
 * recently seen in its probe window (that client starts again with a full
 * burst). Thread-safe: one mutex, held for a few instructions per call.
 * Time is passed in (milliseconds, any monotonic origin) so tests drive it.
 */
#ifndef CRATER_NET_RATELIMIT_H
#define CRATER_NET_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define CRATER__RL_SLOTS 8192 /* power of two */

/* A client's address: IPv4 as ::ffff:a.b.c.d, IPv6 as is. */
typedef struct crater__rl_key {
    uint8_t b[16];
} crater__rl_key_t;

typedef struct crater__rl crater__rl_t;

/* rate: tokens per second (> 0); burst: bucket size (>= 1). NULL on ENOMEM
 * or a bad argument. Caller frees with crater__rl_destroy (NULL accepted). */
crater__rl_t *crater__rl_create(double rate, unsigned burst);
void crater__rl_destroy(crater__rl_t *rl);

/* Fill *k from a socket address; -1 for a family that is not IP. */
int crater__rl_key(const struct sockaddr *sa,
                   socklen_t len,
                   crater__rl_key_t *k);

/* Take one token from k's bucket at now_ms. true: allowed. false: the
 * bucket is empty, and *retry_s (if not NULL) is the whole number of
 * seconds (>= 1) after which one token will be there. */
bool crater__rl_take(crater__rl_t *rl,
                     const crater__rl_key_t *k,
                     int64_t now_ms,
                     unsigned *retry_s);

#endif /* CRATER_NET_RATELIMIT_H */
