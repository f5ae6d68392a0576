/* leader.c - leader election on the store's leases and transactions (see
 * leader.h for the protocol; doc/operations.md for operating it).
 *
 * Why this way: etcd's own election API (v3election) is a gRPC service the
 * JSON gateway of etcd 3.4 does not serve under /v3/; a lease-bound key
 * created by a create-if-absent transaction is the same mechanism, and the
 * store already has both. The key's value is the winner's URL, which is
 * how standbys, agents and clients learn where the leader is.
 *
 * Timing: the leader renews every retryPeriod (sooner again after a
 * renewal that failed). After renewDeadline without a successful renewal,
 * which is shorter than the lease's TTL, it is UNSURE: it has stopped
 * answering as the leader before a standby can win (the clocks count from
 * the last successful renewal's send, and whoever reads the state sees
 * them, even while this thread waits on a renewal that hangs: a member
 * stopped, up to the election connection's request timeout). A renewal
 * that succeeds, with the key still the one it wrote, makes it LEADING
 * again without a restart: etcd elected itself a new leader meanwhile
 * (about a second after a member is lost, longer under load) and extended
 * every lease from then. Past twice leaseDuration it has LOST: its lease
 * has expired by then unless etcd's own election took longer than a
 * lease (safety does not hang on this bound: the fence and UNSURE do; it
 * only says when to drop the state and stand by). A standby tries every
 * retryPeriod, so
 * after kill -9 of the leader a standby leads within leaseDuration +
 * retryPeriod.
 *
 * The thread holds l->mu only to publish state; every store call runs
 * without it.
 */
#include "daemon/leader.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crater/log.h"

struct crater_leader {
    crater_store_t *st;
    char key[CRATER_STORE_KEY_MAX + 1];
    char *url;
    int64_t lease_ms, deadline_ms, retry_ms;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    crater_leader_state_t state;
    bool stop, rejoin;
    int64_t lease, rev;
    int64_t last_ok; /* when the last successful renewal was sent (mu) */
    char current[512];
};

/* After a renewal that got no answer, the next one goes this soon. */
#define RETRY_FAILED_MS 100
/* crater_leader_wait() looks at the clock at least this often. */
#define CLOCK_SLICE_MS 20

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int crater_leader_deadline_passed(int64_t last_ok_ms,
                                  int64_t now_ms,
                                  int64_t renew_deadline_ms)
{
    return now_ms - last_ok_ms >= renew_deadline_ms;
}

crater_leader_state_t crater_leader_clock(int64_t last_ok_ms,
                                          int64_t now_ms,
                                          int64_t renew_deadline_ms,
                                          int64_t lease_ms)
{
    if (now_ms - last_ok_ms >= 2 * lease_ms)
        return CRATER_LEADER_LOST;
    if (crater_leader_deadline_passed(last_ok_ms, now_ms, renew_deadline_ms))
        return CRATER_LEADER_UNSURE;
    return CRATER_LEADER_LEADING;
}

/* The state as it stands now (caller holds l->mu): LEADING and UNSURE
   follow the clock since the last renewal; LOST, once reached, stays
   until the thread resigns. */
static crater_leader_state_t state_now(crater_leader_t *l)
{
    if (l->state == CRATER_LEADER_LEADING || l->state == CRATER_LEADER_UNSURE)
        l->state = crater_leader_clock(l->last_ok,
                                       mono_ms(),
                                       l->deadline_ms,
                                       l->lease_ms);
    return l->state;
}

static void publish(crater_leader_t *l,
                    crater_leader_state_t s,
                    const char *current)
{
    pthread_mutex_lock(&l->mu);
    if (l->state != CRATER_LEADER_STOPPED)
        l->state = s;
    if (current)
        snprintf(l->current, sizeof(l->current), "%s", current);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

/* Sleeps up to ms; true when stopping or asked to rejoin meanwhile. */
static bool nap(crater_leader_t *l, int64_t ms)
{
    struct timespec ts;
    bool out;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    if (!l->stop && !l->rejoin)
        pthread_cond_timedwait(&l->cv, &l->mu, &ts);
    out = l->stop || l->rejoin;
    pthread_mutex_unlock(&l->mu);
    return out;
}

/* Who leads now, as far as the store says (standby's view). */
static void read_current(crater_leader_t *l)
{
    crater_skv_t kv;
    crater_error_t err;

    if (crater_store_get(l->st, l->key, &kv, &err) < 0) {
        publish(l, CRATER_LEADER_STANDBY, "");
        return;
    }
    publish(l, CRATER_LEADER_STANDBY, kv.value);
    crater_skv_free(&kv);
}

/* One campaign: true when this craterd now leads. */
static bool campaign(crater_leader_t *l)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err;
    int64_t lease = 0, rev = 0;
    int64_t sent = mono_ms(); /* the lease's TTL starts after this */
    int rc = -1;

    if (t && crater_store_lease_grant(l->st, l->lease_ms, 0, &lease, &err) == 0
        && crater_txn_expect(t, l->key, 0, &err) == 0
        && crater_txn_put(t, l->key, l->url, strlen(l->url), lease, &err) == 0)
        rc = crater_store_commit(l->st, t, &rev, &err);
    crater_txn_destroy(t);
    if (rc == 0) {
        pthread_mutex_lock(&l->mu); /* read by crater_leader_revision */
        l->rev = rev;
        l->last_ok = sent;
        pthread_mutex_unlock(&l->mu);
        l->lease = lease;
        crater_log(LOG_INFO,
                   "leader: %s leads (key %s revision %lld)",
                   l->url,
                   l->key,
                   (long long)rev);
        return true;
    }
    if (lease)
        (void)crater_store_lease_revoke(l->st, lease, &err);
    return false;
}

/* The key is still the one this craterd wrote. */
static bool key_is_mine(crater_leader_t *l, crater_error_t *err)
{
    crater_skv_t kv;
    bool mine;

    if (crater_store_get(l->st, l->key, &kv, err) < 0)
        return err->errnum != CRATER_ENOENT; /* unknown: keep renewing */
    mine = kv.mod_rev == l->rev;
    crater_skv_free(&kv);
    return mine;
}

/* A renewal sent at sent_ms succeeded: LEADING again unless the clock
   had reached LOST first. False when it had. */
static bool renewed(crater_leader_t *l, int64_t sent_ms)
{
    crater_leader_state_t was;
    bool ok;

    pthread_mutex_lock(&l->mu);
    was = state_now(l);
    if ((ok = was != CRATER_LEADER_LOST)) {
        l->last_ok = sent_ms;
        l->state = CRATER_LEADER_LEADING;
    }
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (was == CRATER_LEADER_UNSURE)
        crater_log(LOG_INFO, "leader: renewed: %s leads again", l->url);
    return ok;
}

/* One renewal: 1 renewed, 0 no answer (the clock decides), -1 lost for
 * sure (the lease or the key gone, or renewed too late). */
static int renew(crater_leader_t *l, crater_error_t *err)
{
    int64_t sent = mono_ms();

    if (crater_store_lease_keepalive(l->st, l->lease, 0, err) == 0) {
        if (!key_is_mine(l, err)) {
            crater_log(LOG_WARNING, "leader: the leader key is not ours");
            return -1;
        }
        return renewed(l, sent) ? 1 : -1;
    }
    if (err->errnum == CRATER_ENOENT) {
        crater_log(LOG_WARNING, "leader: lease lost: %s", err->text);
        return -1;
    }
    return 0;
}

static crater_leader_state_t state_locked(crater_leader_t *l)
{
    crater_leader_state_t s;

    pthread_mutex_lock(&l->mu);
    s = state_now(l);
    pthread_mutex_unlock(&l->mu);
    return s;
}

/* Logs what the clock did since the last look (was: the state then). */
static void log_clock(crater_leader_t *l,
                      crater_leader_state_t was,
                      crater_leader_state_t s,
                      const crater_error_t *err)
{
    if (s == was || s == CRATER_LEADER_LEADING)
        return;
    crater_log(LOG_WARNING,
               s == CRATER_LEADER_UNSURE ? "leader: no renewal for %lld ms "
                                           "(ha.renewDeadline): not "
                                           "serving as the leader until one "
                                           "succeeds: %s"
                                         : "leader: no renewal for %lld ms "
                                           "(twice ha.leaseDuration): "
                                           "stepping down: %s",
               (long long)(s == CRATER_LEADER_UNSURE ? l->deadline_ms
                                                     : 2 * l->lease_ms),
               err->text[0] ? err->text : "no answer");
}

static void lead(crater_leader_t *l)
{
    crater_leader_state_t was = CRATER_LEADER_LEADING, s;
    crater_error_t err = {0};
    int rc = 1;

    publish(l, CRATER_LEADER_LEADING, l->url);
    while (!nap(l, rc > 0 ? l->retry_ms : RETRY_FAILED_MS)) {
        err.text[0] = '\0';
        rc = renew(l, &err);
        s = rc < 0 ? CRATER_LEADER_LOST : state_locked(l);
        if (rc == 0)
            log_clock(l, was, s, &err);
        if (s == CRATER_LEADER_LOST) {
            publish(l, CRATER_LEADER_LOST, "");
            while (!nap(l, l->retry_ms))
                ; /* until the program has stepped down */
            return;
        }
        was = s;
    }
}

/* Gives the lease back (best effort): the next leader need not wait. */
static void resign(crater_leader_t *l)
{
    crater_error_t err;

    if (l->lease)
        (void)crater_store_lease_revoke(l->st, l->lease, &err);
    l->lease = 0;
}

static void *leader_main(void *arg)
{
    crater_leader_t *l = arg;

    pthread_setname_np(pthread_self(), "leader"); /* top -H, perf, gdb */

    for (;;) {
        pthread_mutex_lock(&l->mu);
        bool stop = l->stop;
        l->rejoin = false; /* crater_leader_rejoin() returns */
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
        if (stop)
            break;
        if (campaign(l))
            lead(l);
        else
            read_current(l);
        pthread_mutex_lock(&l->mu);
        bool again = l->rejoin;
        pthread_mutex_unlock(&l->mu);
        if (again || l->lease) {
            resign(l);
            publish(l, CRATER_LEADER_STANDBY, "");
            continue;
        }
        (void)nap(l, l->retry_ms);
    }
    resign(l);
    return NULL;
}

crater_leader_t *crater_leader_start(const crater_leader_opts_t *o,
                                     crater_error_t *err)
{
    crater_leader_t *l = calloc(1, sizeof(*l));

    if (!l || !(l->url = strdup(o->url))) {
        free(l);
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        return NULL;
    }
    l->st = o->store;
    snprintf(l->key, sizeof(l->key), "%s", o->key ? o->key : CRATER_LEADER_KEY);
    l->lease_ms = o->lease_ms;
    l->deadline_ms = o->renew_deadline_ms;
    l->retry_ms = o->retry_ms;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, leader_main, l) != 0) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv);
        free(l->url);
        free(l);
        crater_errorf(err, CRATER_ENOMEM, "cannot start the election thread");
        return NULL;
    }
    return l;
}

static int64_t real_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

crater_leader_state_t crater_leader_wait(crater_leader_t *l,
                                         crater_leader_state_t seen,
                                         int64_t ms)
{
    int64_t until = real_ms() + ms;
    crater_leader_state_t s;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000),
                          .tv_nsec = (long)(until % 1000) * 1000000L};

    pthread_mutex_lock(&l->mu);
    while (state_now(l) == seen && real_ms() < until) {
        /* the clock moves LEADING and UNSURE on without a signal */
        int64_t now = real_ms(), w = until - now;
        struct timespec slice = ts;
        if ((seen == CRATER_LEADER_LEADING || seen == CRATER_LEADER_UNSURE)
            && w > CLOCK_SLICE_MS) {
            slice.tv_sec = (time_t)((now + CLOCK_SLICE_MS) / 1000);
            slice.tv_nsec = (long)((now + CLOCK_SLICE_MS) % 1000) * 1000000L;
        }
        if (pthread_cond_timedwait(&l->cv, &l->mu, &slice) != 0
            && real_ms() >= until)
            break;
    }
    s = state_now(l);
    pthread_mutex_unlock(&l->mu);
    return s;
}

int64_t crater_leader_revision(crater_leader_t *l)
{
    crater_leader_state_t s;
    int64_t r;

    pthread_mutex_lock(&l->mu);
    s = state_now(l);
    r = s == CRATER_LEADER_LEADING || s == CRATER_LEADER_UNSURE ? l->rev : 0;
    pthread_mutex_unlock(&l->mu);
    return r;
}

void crater_leader_current(crater_leader_t *l, char *buf, size_t n)
{
    pthread_mutex_lock(&l->mu);
    snprintf(buf, n, "%s", l->current);
    pthread_mutex_unlock(&l->mu);
}

void crater_leader_rejoin(crater_leader_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->rejoin = true;
    pthread_cond_broadcast(&l->cv);
    while (l->rejoin && !l->stop) /* the thread clears it once it resigned */
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

void crater_leader_destroy(crater_leader_t *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l->url);
    free(l);
}
