/* leader.c - leader election on the store's leases and transactions (see
 * leader.h for the protocol; doc/operations.md for operating it).
 *
 * Why this way: etcd's own election API (v3election) is a gRPC service the
 * JSON gateway of etcd 3.4 does not serve under /v3/; a lease-bound key
 * created by a create-if-absent transaction is the same mechanism, and the
 * store already has both. The key's value is the winner's URL, which is
 * how standbys, agents and clients learn where the leader is.
 *
 * Timing: the leader renews every retryPeriod and gives up after
 * renewDeadline without a successful renewal, which is shorter than the
 * lease's TTL: it has stopped (and its writes are fenced anyway) before a
 * standby can win. A standby tries every retryPeriod, so after kill -9 of
 * the leader a standby leads within leaseDuration + retryPeriod.
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
    int64_t lease, rev, last_ok;
    char current[512];
};

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
    int rc = -1;

    if (t && crater_store_lease_grant(l->st, l->lease_ms, 0, &lease, &err) == 0
        && crater_txn_expect(t, l->key, 0, &err) == 0
        && crater_txn_put(t, l->key, l->url, strlen(l->url), lease, &err) == 0)
        rc = crater_store_commit(l->st, t, &rev, &err);
    crater_txn_destroy(t);
    if (rc == 0) {
        pthread_mutex_lock(&l->mu); /* read by crater_leader_revision */
        l->rev = rev;
        pthread_mutex_unlock(&l->mu);
        l->lease = lease;
        l->last_ok = mono_ms();
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

/* One renewal; false when the leadership is lost. */
static bool renew(crater_leader_t *l)
{
    crater_error_t err;

    if (crater_store_lease_keepalive(l->st, l->lease, 0, &err) == 0) {
        if (!key_is_mine(l, &err)) {
            crater_log(LOG_WARNING, "leader: the leader key is not ours");
            return false;
        }
        l->last_ok = mono_ms();
        return true;
    }
    if (err.errnum == CRATER_ENOENT) {
        crater_log(LOG_WARNING, "leader: lease lost: %s", err.text);
        return false;
    }
    if (crater_leader_deadline_passed(l->last_ok, mono_ms(), l->deadline_ms)) {
        crater_log(LOG_WARNING,
                   "leader: no renewal for %lld ms (ha.renewDeadline): %s",
                   (long long)l->deadline_ms,
                   err.text);
        return false;
    }
    return true;
}

static void lead(crater_leader_t *l)
{
    publish(l, CRATER_LEADER_LEADING, l->url);
    while (!nap(l, l->retry_ms))
        if (!renew(l)) {
            publish(l, CRATER_LEADER_LOST, "");
            while (!nap(l, l->retry_ms))
                ; /* until the program has stepped down */
            return;
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
    while (l->state == seen && real_ms() < until)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) != 0)
            break;
    s = l->state;
    pthread_mutex_unlock(&l->mu);
    return s;
}

int64_t crater_leader_revision(crater_leader_t *l)
{
    int64_t r;

    pthread_mutex_lock(&l->mu);
    r = l->state == CRATER_LEADER_LEADING ? l->rev : 0;
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
