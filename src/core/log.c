/* log.c - handler-based logging; silent until a program installs a handler.
 *
 * Formatting happens only when a message will be delivered, so disabled
 * debug calls cost one branch on a hot path.
 */
#include "crater/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static crater_log_f log_fn;
static void *log_arg;
static int log_level = LOG_INFO;
static unsigned debug_mask;

static const struct {
    const char *name;
    crater_subsys_t bit;
} subsys_names[] = {
    {"core", CRATER_SUB_CORE},
    {"codec", CRATER_SUB_CODEC},
    {"sched", CRATER_SUB_SCHED},
    {"store", CRATER_SUB_STORE},
    {"net", CRATER_SUB_NET},
    {"daemon", CRATER_SUB_DAEMON},
    {"agent", CRATER_SUB_AGENT},
    {"sim", CRATER_SUB_SIM},
    {"gpuslice", CRATER_SUB_GPUSLICE},
};

void crater_log_set_handler(crater_log_f fn, void *arg)
{
    log_fn = fn;
    log_arg = arg;
}

void crater_log_set_level(int level)
{
    log_level = level;
}

void crater_log_set_debug(unsigned mask)
{
    debug_mask = mask & CRATER_SUB_ALL;
}

unsigned crater_log_get_debug(void)
{
    return debug_mask;
}

static int lookup_subsys(const char *name, size_t len, unsigned *bit)
{
    if (len == 3 && strncasecmp(name, "all", 3) == 0) {
        *bit = CRATER_SUB_ALL;
        return 0;
    }
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]);
         i++) {
        if (strlen(subsys_names[i].name) == len
            && strncasecmp(subsys_names[i].name, name, len) == 0) {
            *bit = subsys_names[i].bit;
            return 0;
        }
    }
    return -1;
}

int crater_log_parse_debug(const char *spec,
                           unsigned *mask,
                           crater_error_t *err)
{
    unsigned m = 0;
    const char *p = spec;

    while (*p) {
        size_t len = strcspn(p, ",");
        unsigned bit;

        if (len > 0 && lookup_subsys(p, len, &bit) < 0)
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "unknown debug subsystem '%.*s' (known: core, "
                                 "codec, sched, store, net, daemon, agent, "
                                 "sim, gpuslice, all)",
                                 (int)len,
                                 p);
        if (len > 0)
            m |= bit;
        p += len;
        if (*p == ',')
            p++;
    }
    *mask = m;
    return 0;
}

static void vdeliver(int level, const char *fmt, va_list ap)
{
    char buf[2048];

    vsnprintf(buf, sizeof(buf), fmt, ap);
    log_fn(level, buf, log_arg);
}

void crater_log(int level, const char *fmt, ...)
{
    va_list ap;

    if (!log_fn || level > log_level)
        return;
    va_start(ap, fmt);
    vdeliver(level, fmt, ap);
    va_end(ap);
}

void crater_debug(crater_subsys_t sub, const char *fmt, ...)
{
    va_list ap;

    if (!log_fn || !(debug_mask & (unsigned)sub))
        return;
    va_start(ap, fmt);
    vdeliver(LOG_DEBUG, fmt, ap);
    va_end(ap);
}
