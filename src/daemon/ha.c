/* ha.c - craterd with leader election (store.backend etcd, ha.election
 * auto): the life of one craterd among several on one etcd.
 *
 *   standby (standby.c answers the API port, leader.c campaigns)
 *     -> LEADING: stop the standby server, start the daemon on the same
 *        port with the store fenced by the leader key's revision (the
 *        daemon reads the whole state at the current revision before it
 *        schedules, as at a restart)
 *     -> LOST (renewal failed past ha.renewDeadline, lease or key gone):
 *        revoke the fence (every write fails at once), stop the daemon
 *        (scheduler, HTTP, queued commits), rejoin as a standby.
 *   SIGINT/SIGTERM at any point: stop what runs; a leader revokes its
 *   lease last, so a standby takes over at once.
 *
 * Why stop and restart the daemon instead of keeping a warm standby: the
 * daemon's restart path (persist.c) is the one every test exercises, and
 * a promotion that loads the state at the revision it reads cannot act on
 * a stale copy. The cost is the load time, measured in bench/RESULTS.md
 * B10 (failover within leaseDuration + retryPeriod + the load).
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

typedef struct ha {
    const crater_config_t *cfg;
    crater_daemon_opts_t o; /* listen fixed to the bound port */
    char listen[300], url[512];
    crater_store_t *st; /* the election's connection */
    crater_leader_t *l;
    crater_standby_t *sb;
    crater_daemon_t *d;
} ha_t;

static const char *opt_str(const char *s)
{
    return s && strcmp(s, "none") != 0 ? s : NULL;
}

/* The election's own etcd connection: its requests are bounded so that a
 * renewal that hangs cannot outlast ha.renewDeadline by much. */
static crater_store_t *open_store(const crater_config_t *c, crater_error_t *err)
{
    int64_t t = (int64_t)c->ha.renew_deadline_ms / 2;
    crater_store_etcd_opts_t o = {
        .endpoints = c->store.etcd_endpoints,
        .prefix = c->store.etcd_prefix,
        .ca_file = opt_str(c->store.etcd_ca_file),
        .cert_file = opt_str(c->store.etcd_cert_file),
        .key_file = opt_str(c->store.etcd_key_file),
        .user = opt_str(c->store.etcd_user),
        .password = opt_str(c->store.etcd_password),
        .timeout_ms = t > (int64_t)c->ha.retry_ms ? t : (int64_t)c->ha.retry_ms,
    };

    return crater_store_open_etcd(&o, err);
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

/* LEADING: the daemon on our port, fenced. -1: back to standby. */
static int promote(ha_t *h)
{
    crater_error_t err;
    int64_t t0;

    crater_standby_stop(h->sb);
    h->sb = NULL;
    h->o.fence_rev = crater_leader_revision(h->l);
    h->o.advertise_url = h->url;
    t0 = mono_ms();
    if (h->o.fence_rev > 0
        && (h->d = crater_daemon_start(h->cfg, &h->o, &err))) {
        crater_log(LOG_INFO,
                   "leader: state loaded and serving in %lld ms",
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

/* Waits for a stop signal or a state other than seen; 1 on a signal. */
static int wait_change(ha_t *h, crater_leader_state_t seen)
{
    for (;;) {
        if (crater_proc_wait_stop_ms(100) > 0)
            return 1;
        if (crater_leader_wait(h->l, seen, 0) != seen)
            return 0;
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
            if (wait_change(h, CRATER_LEADER_LEADING))
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
    return rc < 0 ? -1 : 0;
}
