/* ratelimit.c - per-client token buckets (see ratelimit.h).
 *
 * Why a fixed open-addressed table and not a growing hash map: the keys
 * are chosen by whoever connects, so a growing map is memory an attacker
 * controls. 8,192 slots of 40 bytes are 320 KiB whatever happens; a
 * client lives in one of PROBE slots after its hash. Losing a slot to a
 * newcomer costs the evicted client nothing it is owed (a full bucket) or,
 * when every slot in the window is busy, hands the least recently seen
 * client a fresh burst: a flood from many addresses degrades the limit for
 * a few of them, it never refuses a client it should serve.
 *
 * Buckets hold tokens in millitokens (an integer) so refill is exact
 * across any number of small steps.
 */
#include "net/ratelimit.h"

#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROBE 8

typedef struct slot {
    crater__rl_key_t key;
    bool used;
    int64_t tokens_m; /* millitokens, <= burst_m */
    int64_t seen_ms;  /* time of the last refill */
} slot_t;

struct crater__rl {
    pthread_mutex_t mu;
    int64_t rate_m;  /* millitokens per second */
    int64_t burst_m; /* millitokens */
    slot_t slots[CRATER__RL_SLOTS];
};

crater__rl_t *crater__rl_create(double rate, unsigned burst)
{
    crater__rl_t *rl;

    if (!(rate > 0) || rate > 1e6 || burst == 0)
        return NULL;
    rl = calloc(1, sizeof(*rl));
    if (rl == NULL)
        return NULL;
    pthread_mutex_init(&rl->mu, NULL);
    rl->rate_m = (int64_t)ceil(rate * 1000);
    rl->burst_m = (int64_t)burst * 1000;
    return rl;
}

void crater__rl_destroy(crater__rl_t *rl)
{
    if (rl == NULL)
        return;
    pthread_mutex_destroy(&rl->mu);
    free(rl);
}

int crater__rl_key(const struct sockaddr *sa,
                   socklen_t len,
                   crater__rl_key_t *k)
{
    memset(k, 0, sizeof(*k));
    if (sa == NULL)
        return -1;
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        k->b[10] = k->b[11] = 0xff;
        memcpy(k->b + 12, &in->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        memcpy(k->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    return -1;
}

/* FNV-1a over the 16 bytes. */
static uint32_t key_hash(const crater__rl_key_t *k)
{
    uint32_t h = 2166136261u;

    for (int i = 0; i < 16; i++)
        h = (h ^ k->b[i]) * 16777619u;
    return h;
}

static void refill(const crater__rl_t *rl, slot_t *s, int64_t now_ms)
{
    int64_t dt = now_ms - s->seen_ms;

    if (dt <= 0)
        return;
    /* a bucket idle for over a day is full whatever the rate */
    if (dt > 86400000 || s->tokens_m + dt * rl->rate_m / 1000 >= rl->burst_m)
        s->tokens_m = rl->burst_m;
    else
        s->tokens_m += dt * rl->rate_m / 1000;
    s->seen_ms = now_ms;
}

static bool is_full(const crater__rl_t *rl, const slot_t *s, int64_t now_ms)
{
    int64_t dt = now_ms - s->seen_ms;

    return dt > 86400000 || s->tokens_m + dt * rl->rate_m / 1000 >= rl->burst_m;
}

/* The slot for k: its own, or one given to it (see the file comment). */
static slot_t *find_slot(crater__rl_t *rl,
                         const crater__rl_key_t *k,
                         int64_t now_ms)
{
    uint32_t h = key_hash(k);
    slot_t *spare = NULL, *oldest = NULL, *s;

    for (unsigned i = 0; i < PROBE; i++) {
        s = &rl->slots[(h + i) & (CRATER__RL_SLOTS - 1)];
        if (s->used && memcmp(&s->key, k, sizeof(*k)) == 0)
            return s;
        if (spare == NULL && (!s->used || is_full(rl, s, now_ms)))
            spare = s;
        if (oldest == NULL || s->seen_ms < oldest->seen_ms)
            oldest = s;
    }
    s = spare != NULL ? spare : oldest;
    s->used = true;
    s->key = *k;
    s->tokens_m = rl->burst_m;
    s->seen_ms = now_ms;
    return s;
}

bool crater__rl_take(crater__rl_t *rl,
                     const crater__rl_key_t *k,
                     int64_t now_ms,
                     unsigned *retry_s)
{
    slot_t *s;
    bool ok;
    int64_t need_m = 0;

    pthread_mutex_lock(&rl->mu);
    s = find_slot(rl, k, now_ms);
    refill(rl, s, now_ms);
    ok = s->tokens_m >= 1000;
    if (ok)
        s->tokens_m -= 1000;
    else
        need_m = 1000 - s->tokens_m;
    pthread_mutex_unlock(&rl->mu);
    if (!ok && retry_s != NULL) {
        /* whole seconds, rounded up: Retry-After has no fractions */
        int64_t ms = (need_m * 1000 + rl->rate_m - 1) / rl->rate_m;
        *retry_s = (unsigned)((ms + 999) / 1000);
        if (*retry_s == 0)
            *retry_s = 1;
    }
    return ok;
}
