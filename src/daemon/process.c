/* process.c - log printing and stop signals for craterd, crater-agent and
 * `crater up` (see process.h). Signals are taken synchronously with
 * sigwait() on the main thread: no handler runs inside a worker thread and
 * nothing async-signal-unsafe can happen at a signal. */
#include "daemon/process.h"

#include <signal.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

void crater_proc_log_stderr(int level, const char *msg, void *arg)
{
    fprintf(stderr,
            "%s: %s%s\n",
            (const char *)arg,
            level <= LOG_ERR       ? "error: "
            : level == LOG_WARNING ? "warning: "
                                   : "",
            msg);
}

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

void crater_proc_block_stop_signals(void)
{
    sigset_t set;

    stop_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int crater_proc_wait_stop(void)
{
    sigset_t set;
    int sig = 0;

    stop_set(&set);
    sigwait(&set, &sig);
    return sig;
}

int crater_proc_wait_stop_ms(int ms)
{
    sigset_t set;
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (long)(ms % 1000) * 1000000L};
    int sig;

    stop_set(&set);
    sig = sigtimedwait(&set, NULL, &ts);
    return sig > 0 ? sig : 0;
}
