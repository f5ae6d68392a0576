/* ha.c - craterd with leader election (store.backend etcd, ha.election
 * auto): the life of one craterd among several on one etcd.
 *
 *   standby (standby.c answers the API port, leader.c campaigns, and the
 *   warm copy of the store's records follows the change feed: warm.h)
 *     -> LEADING: stop the standby server, catch the warm copy up to the
 *        store's revision (only the changes since it last followed), start
 *        the daemon on the same port with the store fenced by the leader
 *        key's revision, loading the state from the warm copy (as a
 *        restart loads it from the store, before it schedules); without a
 *        copy that could catch up (the history was compacted past it,
 *        etcd did not answer, ha.warmStandby false) the daemon reads the
 *        whole store instead, and the log says why
 *     -> UNSURE (no renewal for ha.renewDeadline): pause the daemon (the
 *        API answers 503, nothing is scheduled) until a renewal brings
 *        LEADING back (resume) or it gives up:
 *     -> LOST (no renewal for twice ha.leaseDuration, lease or key gone):
 *        revoke the fence (every write fails at once), stop the daemon
 *        (scheduler, HTTP, queued commits), rejoin as a standby.
 *   SIGINT/SIGTERM at any point: stop what runs; a leader revokes its
 *   lease last, so a standby takes over at once.
 *
 * Why warm records and a daemon started at promotion rather than a warm
 * daemon: the daemon's restart path (persist.c) is the one every test
 * exercises, and it does at promotion what a restart does (nodes NotReady
 * until their agents register, jobs adopted from their agents' reports);
 * the copy only spares it the read of the whole store, which was most of
 * the failover time with many jobs kept (bench/RESULTS.md B10: failover
 * within leaseDuration + retryPeriod + the load). Following runs on this
 * loop, between two looks at the election: one thread owns the copy.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crater/log.h"
#include "daemon/buildinfo.h"
#include "daemon/daemon.h"
#include "daemon/leader.h"
#include "daemon/process.h"
#include "daemon/standby.h"
#include "daemon/warm.h"

/* How often a standby follows the change feed: two requests to etcd each
 * time (its revision, then a watch of the changes: up to about 100 ms on
 * loopback here); the promotion catches up what came since. */
#define FOLLOW_MS 250
#define FOLLOW_MAX_MS 30000

typedef struct ha {
    const crater_config_t *cfg;
    crater_daemon_opts_t o; /* listen fixed to the bound port */
    char listen[300], url[512];
    crater_store_t *st;  /* the election's connection */
    crater_store_t *fst; /* the warm copy's (NULL: ha.warmStandby false) */
    crater_warm_t *warm;
    int warm_fails;  /* follows failed in a row (the first logged) */
    int64_t warm_ms; /* when it last followed (monotonic) */
    crater_leader_t *l;
    crater_standby_t *sb;
    crater_daemon_t *d;
} ha_t;

static const char *opt_str(const char *s)
{
    return s && strcmp(s, "none") != 0 ? s : NULL;
}

/* An etcd connection with timeout_ms per request (0: the store's 10 s). */
static crater_store_t *open_etcd(const crater_config_t *c,
                                 int64_t timeout_ms,
                                 crater_error_t *err)
{
    crater_store_etcd_opts_t o = {
        .endpoints = c->store.etcd_endpoints,
        .prefix = c->store.etcd_prefix,
        .ca_file = opt_str(c->store.etcd_ca_file),
        .cert_file = opt_str(c->store.etcd_cert_file),
        .key_file = opt_str(c->store.etcd_key_file),
        .user = opt_str(c->store.etcd_user),
        .password = opt_str(c->store.etcd_password),
        .max_request_bytes = (size_t)c->store.etcd_max_request_bytes,
        .timeout_ms = timeout_ms,
    };

    return crater_store_open_etcd(&o, err);
}

/* The election's own etcd connection: its requests are bounded so that a
 * renewal that hangs cannot outlast ha.renewDeadline by much. */
static crater_store_t *open_store(const crater_config_t *c, crater_error_t *err)
{
    int64_t t = (int64_t)c->ha.renew_deadline_ms / 2;

    return open_etcd(c,
                     t > (int64_t)c->ha.retry_ms ? t : (int64_t)c->ha.retry_ms,
                     err);
}

/* HOST of "HOST:PORT" into host; the URL others reach us at into h->url. */
static void derive_url(ha_t *h, const char *listen, uint16_t port)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : strlen(listen);

    snprintf(host, sizeof(host), "%.*s", (int)n, listen);
    snprintf(h->listen, sizeof(h->listen), "%s:%u", host, (unsigned)port);
    h->o.listen = h->listen;
    if (opt_str(h->cfg->ha.advertise_url)) {
        snprintf(h->url, sizeof(h->url), "%s", h->cfg->ha.advertise_url);
        return;
    }
    if (n == 0 || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "[::]") == 0)
        if (gethostname(host, sizeof(host)) < 0)
            snprintf(host, sizeof(host), "localhost");
    snprintf(h->url, sizeof(h->url), "http://%s:%u", host, (unsigned)port);
}

static int standby(ha_t *h, crater_error_t *err)
{
    h->sb = crater_standby_start(h->listen, h->l, h->url, err);
    return h->sb ? 0 : -1;
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* While standing by: the warm copy follows the change feed every
 * FOLLOW_MS (listed first, and again when the history was compacted past
 * it). A failure is logged once and tried again after a backoff that
 * doubles up to FOLLOW_MAX_MS (a list that times out is a large request:
 * not one every FOLLOW_MS). */
static void keep_warm(ha_t *h)
{
    int64_t wait = FOLLOW_MS << (h->warm_fails < 7 ? h->warm_fails : 7);
    crater_error_t err;
    int rc;

    if (!h->fst
        || mono_ms() - h->warm_ms
               < (wait < FOLLOW_MAX_MS ? wait : FOLLOW_MAX_MS))
        return;
    h->warm_ms = mono_ms();
    if (crater_warm_revision(h->warm) < 0) {
        if ((rc = crater_warm_load(h->warm, h->fst, &err)) == 0)
            crater_log(LOG_INFO,
                       "warm: %zu records at revision %lld in %lld ms; "
                       "following",
                       crater_warm_count(h->warm),
                       (long long)crater_warm_revision(h->warm),
                       (long long)(mono_ms() - h->warm_ms));
    } else if ((rc = crater_warm_follow(h->warm, h->fst, NULL, &err)) < 0
               && err.errnum == CRATER_ESTALE) {
        crater_log(LOG_WARNING, "warm: %s: listing again", err.text);
        crater_warm_clear(h->warm);
        rc = 0;
    }
    if (rc < 0 && h->warm_fails == 0)
        crater_log(LOG_WARNING, "warm: cannot follow the store: %s", err.text);
    h->warm_fails = rc < 0 ? h->warm_fails + 1 : 0;
}

/* At promotion: the warm copy caught up to the store's revision, or NULL
 * (the log says why) and the daemon reads the whole store. */
static const crater_warm_t *caught_up(ha_t *h)
{
    crater_error_t err;
    int64_t from = h->fst ? crater_warm_revision(h->warm) : -1;
    int64_t t0 = mono_ms();
    size_t n = 0;

    if (!h->fst)
        return NULL; /* ha.warmStandby false */
    if (from < 0) {
        crater_log(LOG_WARNING, "warm: no copy loaded yet: full load");
        return NULL;
    }
    if (crater_warm_follow(h->warm, h->fst, &n, &err) < 0) {
        crater_log(LOG_WARNING,
                   "warm: cannot catch up from revision %lld (%s): full load",
                   (long long)from,
                   err.text);
        return NULL;
    }
    crater_log(LOG_INFO,
               "warm: caught up from revision %lld to %lld in %lld ms (%zu "
               "changes, %zu records)",
               (long long)from,
               (long long)crater_warm_revision(h->warm),
               (long long)(mono_ms() - t0),
               n,
               crater_warm_count(h->warm));
    return h->warm;
}

/* LEADING: the daemon on our port, fenced. -1: back to standby. The warm
 * copy is spent either way (a leader's own writes are not followed). */
static int promote(ha_t *h)
{
    crater_error_t err;
    int64_t t0 = mono_ms();
    bool warm;

    crater_standby_stop(h->sb);
    h->sb = NULL;
    h->o.fence_rev = crater_leader_revision(h->l);
    h->o.advertise_url = h->url;
    h->o.warm = h->o.fence_rev > 0 ? caught_up(h) : NULL;
    if (h->o.fence_rev > 0)
        h->d = crater_daemon_start(h->cfg, &h->o, &err);
    warm = h->o.warm != NULL;
    h->o.warm = NULL;
    if (h->warm)
        crater_warm_clear(h->warm);
    if (h->d) {
        crater_log(LOG_INFO,
                   "leader: state loaded (%s) and serving in %lld ms",
                   warm ? "warm copy" : "full load",
                   (long long)(mono_ms() - t0));
        return 0;
    }
    crater_log(LOG_ERR,
               "leader: could not take over: %s",
               h->o.fence_rev > 0 ? err.text : "leadership lost");
    return -1;
}

static void announce(ha_t *h)
{
    const char *tok = crater_daemon_admin_token(h->d);

    crater_log(LOG_INFO, "leading: %s serves the cluster", h->url);
    if (tok)
        printf("admin token (also in %s/admin.token): %s\n",
               h->o.data_dir ? h->o.data_dir : h->cfg->server.data_dir,
               tok);
    fflush(stdout);
}

/* Waits for a stop signal or a state other than seen; 1 on a signal. A
 * standby keeps its copy warm meanwhile. */
static int wait_change(ha_t *h, crater_leader_state_t seen)
{
    for (;;) {
        if (crater_proc_wait_stop_ms(100) > 0)
            return 1;
        if (crater_leader_wait(h->l, seen, 0) != seen)
            return 0;
        if (seen == CRATER_LEADER_STANDBY)
            keep_warm(h);
    }
}

static void demote(ha_t *h)
{
    int64_t t0 = mono_ms();

    crater_daemon_step_down(h->d);
    crater_daemon_stop(h->d);
    h->d = NULL;
    crater_log(LOG_WARNING,
               "leader: stepped down in %lld ms: %s stands by",
               (long long)(mono_ms() - t0),
               h->url);
}

/* Leading until LOST (0), pausing the daemon while UNSURE; 1 on a stop
 * signal. */
static int lead(ha_t *h)
{
    crater_leader_state_t seen = CRATER_LEADER_LEADING;

    for (;;) {
        if (wait_change(h, seen))
            return 1;
        seen = crater_leader_wait(h->l, seen, 0);
        if (seen != CRATER_LEADER_LEADING && seen != CRATER_LEADER_UNSURE)
            return 0;
        crater_daemon_pause(h->d, seen == CRATER_LEADER_UNSURE);
    }
}

/* One round: standing by until we lead, leading until we lose. 1 when a
 * stop signal came, -1 on an error that ends craterd. */
static int one_round(ha_t *h, crater_error_t *err)
{
    if (wait_change(h, CRATER_LEADER_STANDBY))
        return 1;
    if (crater_leader_wait(h->l, CRATER_LEADER_STANDBY, 0)
        == CRATER_LEADER_LEADING) {
        if (promote(h) == 0) {
            announce(h);
            if (lead(h))
                return 1;
            demote(h);
        }
    }
    crater_leader_rejoin(h->l);
    return standby(h, err) < 0 ? -1 : 0;
}

static int setup(ha_t *h, crater_error_t *err)
{
    const char *listen = h->o.listen ? h->o.listen : h->cfg->server.listen;
    crater_leader_opts_t lo = {.lease_ms = (int64_t)h->cfg->ha.lease_ms,
                               .renew_deadline_ms =
                                   (int64_t)h->cfg->ha.renew_deadline_ms,
                               .retry_ms = (int64_t)h->cfg->ha.retry_ms};

    if (!(h->st = open_store(h->cfg, err)))
        return -1;
    /* the copy's requests have the daemon's own timeouts (the store's
     * 10 s): its list is as large as the daemon's full load. A member
     * that accepts connections but never answers delays a promotion by
     * up to that much, as it delays the full load's read. */
    if (h->cfg->ha.warm_standby
        && (!(h->warm = crater_warm_create())
            || !(h->fst = open_etcd(h->cfg, 0, err))))
        return h->warm ? -1
                       : crater_errorf(err, CRATER_ENOMEM, "out of memory");
    /* bind first: port 0 becomes a fixed port the daemon reuses */
    snprintf(h->listen, sizeof(h->listen), "%s", listen);
    h->sb = crater_standby_start(h->listen, NULL, "", err);
    if (!h->sb)
        return -1;
    derive_url(h, listen, crater_standby_port(h->sb));
    crater_standby_stop(h->sb);
    h->sb = NULL;
    lo.store = h->st;
    lo.url = h->url;
    if (!(h->l = crater_leader_start(&lo, err)))
        return -1;
    return standby(h, err);
}

int crater_ha_run(const crater_config_t *cfg,
                  const crater_daemon_opts_t *o,
                  crater_error_t *err)
{
    ha_t h = {.cfg = cfg, .o = *o};
    int rc;

    if (setup(&h, err) == 0) {
        printf("craterd %s listening on http://127.0.0.1:%s (%s; leader "
               "election on etcd)\n",
               crater_version(),
               strrchr(h.listen, ':') + 1,
               h.url);
        fflush(stdout);
        while ((rc = one_round(&h, err)) == 0)
            ;
    } else
        rc = -1;
    if (h.d) /* a clean stop while leading: the fence stays, commits end */
        crater_daemon_stop(h.d);
    crater_standby_stop(h.sb);
    crater_leader_destroy(h.l); /* revokes the lease: handover at once */
    crater_store_close(h.st);
    crater_store_close(h.fst);
    crater_warm_destroy(h.warm);
    return rc < 0 ? -1 : 0;
}
