/* log.h - logging for library code that must never print.
 *
 * Library code calls crater_log()/crater_debug(); nothing is written
 * anywhere until a program installs a handler with crater_log_set_handler()
 * (the CLI and daemons install one that writes to stderr or syslog).
 * Levels are syslog's (LOG_ERR ... LOG_DEBUG). Debug messages are emitted
 * only for subsystems whose flag is set with crater_log_set_debug().
 *
 * The handler and masks are process-wide; set them once at start-up, before
 * threads are started.
 */
#ifndef CRATER_LOG_H
#define CRATER_LOG_H

#include <syslog.h>

#include "crater/error.h"

typedef enum crater_subsys {
    CRATER_SUB_CORE = 1 << 0,
    CRATER_SUB_CODEC = 1 << 1,
    CRATER_SUB_SCHED = 1 << 2,
    CRATER_SUB_STORE = 1 << 3,
    CRATER_SUB_NET = 1 << 4,
    CRATER_SUB_DAEMON = 1 << 5,
    CRATER_SUB_AGENT = 1 << 6,
    CRATER_SUB_SIM = 1 << 7,
    CRATER_SUB_GPUSLICE = 1 << 8,
} crater_subsys_t;

#define CRATER_SUB_ALL 0x1ffu

/* msg is formatted and NUL-terminated; valid only during the call. */
typedef void (*crater_log_f)(int level, const char *msg, void *arg);

void crater_log_set_handler(crater_log_f fn, void *arg);
/* Messages above this level (numerically) are dropped. Default LOG_INFO. */
void crater_log_set_level(int level);
void crater_log_set_debug(unsigned mask);
unsigned crater_log_get_debug(void);

/* Parse "sched,codec" or "all" into a subsystem mask. */
int crater_log_parse_debug(const char *spec,
                           unsigned *mask,
                           crater_error_t *err);

void crater_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void crater_debug(crater_subsys_t sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* CRATER_LOG_H */
