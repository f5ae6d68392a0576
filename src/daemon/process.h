/* process.h - what the long-running programs (craterd, crater-agent,
 * `crater up`) share: how they print log lines and how they wait for a
 * stop signal. No state; nothing to free. */
#ifndef CRATER_DAEMON_PROCESS_H
#define CRATER_DAEMON_PROCESS_H

/* A crater_log handler: "PROG: error: msg" on stderr. arg is the program
 * name, a string that outlives the handler (a literal). The level filter is
 * crater_log_set_level()'s. */
void crater_proc_log_stderr(int level, const char *msg, void *arg);

/* Block SIGINT and SIGTERM (threads created afterwards inherit the mask, so
 * only crater_proc_wait_stop() takes them) and ignore SIGPIPE (a peer that
 * closed its socket is an error value, not a reason to die). Call before
 * starting any thread. */
void crater_proc_block_stop_signals(void);

/* Wait for SIGINT or SIGTERM; returns the signal. */
int crater_proc_wait_stop(void);

/* The same for at most ms milliseconds: the signal, or 0 when none came. */
int crater_proc_wait_stop_ms(int ms);

#endif /* CRATER_DAEMON_PROCESS_H */
