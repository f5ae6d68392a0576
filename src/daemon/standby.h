/* standby.h - the API port of a craterd that does not lead: every API
 * request is answered 503 naming the leader (standby.c explains why).
 *
 * Ownership: the leader handle is borrowed and must outlive the standby;
 * self_url is copied. */
#ifndef CRATER_DAEMON_STANDBY_H
#define CRATER_DAEMON_STANDBY_H

#include <stdint.h>

#include "crater/error.h"
#include "crater/http.h"
#include "daemon/leader.h"

typedef struct crater_standby crater_standby_t;

/* Listens on listen ("HOST:PORT", port 0 = any free one) with two
 * threads. NULL with err (EIO: cannot bind). */
crater_standby_t *crater_standby_start(const char *listen,
                                       crater_leader_t *l,
                                       const char *self_url,
                                       crater_error_t *err);
uint16_t crater_standby_port(const crater_standby_t *s);
/* Stops serving and frees; the port is free again afterwards. NULL ok. */
void crater_standby_stop(crater_standby_t *s);

#endif /* CRATER_DAEMON_STANDBY_H */
