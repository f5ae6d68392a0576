/* etcd_fixture.h - a real etcd for unit tests (Debian's etcd-server),
 * started on free loopback ports with a temporary data directory and
 * stopped at exit: start_etcd() (-1 when etcd is not installed: the test
 * exits 77, ctest "skipped"), then wait_etcd(). client_url is its
 * endpoint, dead_url a port nothing listens on: bound by this process
 * and never listened on (connections are refused), held until it exits,
 * so that no other test's server can take it (an open store on the "dead"
 * endpoint succeeded once in CI). The three ports are picked while each
 * other's sockets are held, so they differ. Include once per test program
 * (static state). */
#ifndef CRATER_TEST_ETCD_FIXTURE_H
#define CRATER_TEST_ETCD_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"

static pid_t etcd_pid, parent_pid;
static char datadir[64];
static char client_url[64];
static char dead_url[64];

/* A free loopback port, bound (not listening) by *fd until closed. */
static int hold_port(int *fd)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t l = sizeof(a);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof(a)) < 0
        || getsockname(*fd, (struct sockaddr *)&a, &l) < 0)
        return -1;
    return ntohs(a.sin_port);
}

static void stop_etcd(void)
{
    char cmd[128];

    if (getpid() != parent_pid || etcd_pid <= 0)
        return;
    kill(etcd_pid, SIGTERM);
    waitpid(etcd_pid, NULL, 0);
    etcd_pid = 0;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", datadir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", datadir);
}

/* Starts etcd; 0 when it answers, -1 when it is not installed. */
static int start_etcd(void)
{
    static int dead_fd = -1; /* held until exit */
    char peer[64], log[96], cluster[80];
    int cfd, pfd;
    int cp = hold_port(&cfd), pp = hold_port(&pfd);

    snprintf(dead_url,
             sizeof(dead_url),
             "http://127.0.0.1:%d",
             hold_port(&dead_fd));
    close(cfd); /* etcd binds these two */
    close(pfd);
    if (system("command -v etcd >/dev/null 2>&1") != 0)
        return -1;
    strcpy(datadir, "/tmp/crater-etcd-XXXXXX");
    if (!mkdtemp(datadir))
        return -1;
    snprintf(client_url, sizeof(client_url), "http://127.0.0.1:%d", cp);
    snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", pp);
    snprintf(log, sizeof(log), "%s/etcd.log", datadir);
    snprintf(cluster, sizeof(cluster), "t=%s", peer);
    parent_pid = getpid();
    if ((etcd_pid = fork()) == 0) {
        if (!freopen(log, "w", stderr))
            _exit(126);
        execlp("etcd",
               "etcd",
               "--data-dir",
               datadir,
               "--name",
               "t",
               "--listen-client-urls",
               client_url,
               "--advertise-client-urls",
               client_url,
               "--listen-peer-urls",
               peer,
               "--initial-advertise-peer-urls",
               peer,
               "--initial-cluster",
               cluster,
               (char *)NULL);
        _exit(127);
    }
    atexit(stop_etcd);
    return 0;
}

/* Waits (at most 20 s) until a store can be opened on etcd. */
static int wait_etcd(void)
{
    char *eps[] = {client_url, NULL};
    crater_store_etcd_opts_t o = {.endpoints = eps, .timeout_ms = 1000};
    crater_error_t err;

    for (int i = 0; i < 200; i++) {
        crater_store_t *st = crater_store_open_etcd(&o, &err);
        if (st) {
            crater_store_close(st);
            return 0;
        }
        usleep(100 * 1000);
    }
    fprintf(stderr, "etcd did not answer: %s\n", err.text);
    return -1;
}

#endif /* CRATER_TEST_ETCD_FIXTURE_H */
