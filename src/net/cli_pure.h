/* cli_pure.h - the pure parts of the crater CLI's remote commands: where
 * the server and token come from, the job spec `crater run` builds, and the
 * text the CLI prints for API objects (tables, describe, explain).
 *
 * They live in crater_srv (src/net) rather than src/cli so that the unit
 * tests, which link crater_srv and not the CLI's objects, can call them.
 * Nothing here talks to the network. Functions that print take a FILE *;
 * the CLI passes stdout and the tests an open_memstream(). Every text
 * function reads the API objects of doc/api.md and treats a missing or
 * mistyped field as unknown ("-"), never as an error: a newer server may
 * add or drop fields.
 */
#ifndef CRATER_NET_CLI_PURE_H
#define CRATER_NET_CLI_PURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "crater/error.h"

#define CLI_DEFAULT_SERVER "http://127.0.0.1:7480"
#define CLI_CONN_MAX 512

/* ---- connection settings ---------------------------------------------- */

/* Inputs of the resolution; any may be NULL. Empty strings count as unset. */
typedef struct cli_conn_in {
    const char *flag_server, *flag_token; /* --server, --token */
    const char *env_server, *env_token;   /* CRATER_SERVER, CRATER_TOKEN */
    const char *home, *xdg_config_home;   /* $HOME, $XDG_CONFIG_HOME */
    /* after the config file, before the default: the URL `crater up`
     * wrote ("var/server"), so a cluster on a non-default --listen is
     * found too; a missing file is no error; may be NULL */
    const char *local_server_file;
    /* last resort for the token when the server is on loopback or came
     * from local_server_file: the admin token `crater up` wrote
     * ("var/admin.token"); may be NULL */
    const char *local_token_file;
} cli_conn_in_t;

typedef struct cli_conn {
    char server[CLI_CONN_MAX]; /* no trailing '/' */
    char token[CLI_CONN_MAX];  /* "" when none was configured */
    /* where server came from: "--server", "CRATER_SERVER", the config
     * file's path, or "default"; for error messages */
    char server_from[CLI_CONN_MAX];
} cli_conn_t;

/* The config file: $XDG_CONFIG_HOME/crater/config when that variable is
 * set and not empty, else $HOME/.config/crater/config. -1 when neither
 * variable is usable or the path does not fit in size. */
int cli_config_path(const char *home, const char *xdg, char *buf, size_t size);

/* Each setting independently: flag, else environment, else the config
 * file (a YAML mapping with the keys `server` and `token`, loaded with
 * crater_doc; other keys are errors naming the key and file:line:col),
 * else for the server the URL in local_server_file, else the default
 * (server CLI_DEFAULT_SERVER, no token). The file is read
 * whenever it exists, so an error in it is reported even when flags
 * override it. A server must be an http:// or https:// URL; the error
 * names where the bad value came from. */
int cli_conn_resolve(const cli_conn_in_t *in,
                     cli_conn_t *out,
                     crater_error_t *err);

/* The files `crater up` writes in its data directory and the CLI reads
 * (relative to the current directory) when nothing else names a server. */
#define CLI_LOCAL_DATA_DIR "var"
#define CLI_LOCAL_SERVER_FILE "var/server"
#define CLI_LOCAL_TOKEN_FILE "var/admin.token"

/* The URL a client on this machine reaches a server listening on listen
 * ("host:port" or "[v6]:port", as craterd's --listen) at its bound port:
 * a wildcard or empty host becomes loopback ("0.0.0.0:0" and port 41234
 * give "http://127.0.0.1:41234", "[::]:7480" gives "http://[::1]:7480"),
 * any other host is kept. -1 when listen has no ':' or buf is too small. */
int cli_local_url(const char *listen, unsigned port, char *buf, size_t size);

/* cli_conn_resolve with the environment read by getenv(). */
int cli_conn_from_env(const char *flag_server,
                      const char *flag_token,
                      cli_conn_t *out,
                      crater_error_t *err);

/* ---- crater run -------------------------------------------------------- */

typedef struct cli_run {
    json_t *spec; /* the Job document (apiVersion, kind, ...); caller owns */
    bool wait;    /* --wait */
    bool help;    /* -h/--help given: nothing else is filled */
    /* borrowed from argv; NULL when not given */
    const char *server, *token, *output;
} cli_run_t;

/* Parse `run [OPTIONS] -- COMMAND ARGS...` (argv[0] is "run") into a job
 * spec using the field names of doc/jobspec.md: --name, --tenant,
 * --priority, --priority-class, --workload-type, --preemptible, --replicas,
 * --grace-period, --gpu (resources.gpu.count), --gpu-mem
 * (resources.gpu.memory), --gpu-model a,b (resources.gpu.model), --cpu,
 * --mem, --disk-iops, --disk-bandwidth, --env K=V (repeatable), --workdir,
 * --image, --array (array: "0-999%10"); plus --wait, --server, --token,
 * -o/--output. Options take
 * "--opt VALUE" or "--opt=VALUE". Quantities are checked with the unit
 * parser and sent as written. The built spec is then decoded and
 * validated with the same jobspec decoder the server uses. Every error
 * names the flag ("--gpu-mem: ..."); a missing "--" or command is an
 * error too. Returns 0, or -1 with err set and out->spec NULL. */
int cli_run_parse(int argc, char **argv, cli_run_t *out, crater_error_t *err);

/* ---- job helpers -------------------------------------------------------- */

typedef struct cli_jobs_filter {
    const char *state, *tenant, *workload_type; /* NULL: no filter */
    long limit;                                 /* 0: server default */
} cli_jobs_filter_t;

/* "/api/v1/jobs?state=...&limit=..&after=..", values percent-encoded;
 * after may be NULL. -1 (EINVAL) when buf is too small. */
int cli_jobs_path(const cli_jobs_filter_t *f,
                  const char *after,
                  char *buf,
                  size_t size,
                  crater_error_t *err);

/* Percent-encode s (RFC 3986 unreserved characters kept) into buf.
 * -1 when it does not fit. */
int cli_urlencode(const char *s, char *buf, size_t size);

/* succeeded, failed or cancelled. */
bool cli_job_finished(const json_t *job);

/* The exit status `crater run --wait` returns for a finished job: its
 * exit code, 128+signal when killed by a signal, 0 for succeeded without
 * an exit object, 1 for failed/cancelled without one. Clamped to 0..255. */
int cli_job_exit_status(const json_t *job);

/* ---- submit ------------------------------------------------------------ */

typedef struct cli_span {
    size_t off, len;
} cli_span_t;

/* Split a YAML stream into the texts of its documents, so that `crater
 * submit` can send each document exactly as written (numbers such as
 * 0.00002 in a command keep their spelling; a JSON round trip would not).
 * A document starts at a "---" line (column 0, then end of line, blank or
 * content) and runs to the next one; pieces holding nothing but blanks,
 * comments, directives and "..." are dropped, as the YAML loader drops
 * them. Returns the number of documents, or -1 when there are more than
 * max. The caller compares it with crater_doc_count() before trusting it. */
long cli_yaml_split(const char *buf, size_t len, cli_span_t *spans, size_t max);

/* ---- text output --------------------------------------------------------- */

/* Age like kubectl: "45s", "12m", "5h", "3d"; negative ages (clock skew)
 * are "0s". Returns buf (at least 16 bytes). */
char *cli_format_age(int64_t ms, char *buf, size_t size);
/* Binary units, one decimal when not whole: "0", "512", "20Gi", "1.5Ti". */
char *cli_format_bytes(uint64_t b, char *buf, size_t size);
/* Millicores as cores: "8", "0.5", "1.25". */
char *cli_format_cores(uint64_t millis, char *buf, size_t size);
/* Milliseconds since the epoch as UTC "2025-11-29T21:20:00Z". */
char *cli_format_time(int64_t ms, char *buf, size_t size);

/* Tables: a header row and one row per item, columns separated by at
 * least three spaces, no trailing blanks. items is the API's "items"
 * array. Return 0, or -1 on a write or allocation failure. In a list of
 * jobs, consecutive jobs of one array are one row: ID "17_[0-999]", STATE
 * counted ("3 running,997 pending"). */
int cli_print_jobs(FILE *fp, const json_t *items, int64_t now_ms);
int cli_print_nodes(FILE *fp, const json_t *items);
int cli_print_top(FILE *fp, const json_t *items);
int cli_print_profiles(FILE *fp, const json_t *items);

/* `crater explain`: the reason line and the per-filter counts. */
int cli_print_explain(FILE *fp, const json_t *explain, const char *indent);
/* `crater describe job`: explain may be NULL (not pending or not fetched). */
int cli_print_job_describe(FILE *fp,
                           const json_t *job,
                           const json_t *explain,
                           int64_t now_ms);
int cli_print_node_describe(FILE *fp, const json_t *node, int64_t now_ms);

#endif /* CRATER_NET_CLI_PURE_H */
