/* remote.c - what every crater command that talks to craterd shares:
 * common options, opening the connection, API calls that turn failures
 * into one clear message and an exit code, Ctrl-C and the --watch loop.
 *
 * Errors read "crater: error: <the server's text>" (the server's text
 * names the field already). When no server answers, the message says which
 * server was tried and where that address came from, and suggests
 * `crater up`: the most common cause is that nothing is running yet.
 * A 503 (server starting, not ready) counts as "cannot reach" too, so a
 * script can retry on exit code 3 alone.
 */
#include "cli/remote.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crater/units.h"

#define CLI_TIMEOUT_MS 30000

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    got_sigint = 1;
}

void cli__catch_sigint(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

bool cli__interrupted(void)
{
    return got_sigint != 0;
}

void cli__sleep_ms(long ms)
{
    while (ms > 0 && !got_sigint) {
        long step = ms < 100 ? ms : 100;
        struct timespec ts = {0, step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
}

int64_t cli__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cli__usage(const char *text, bool help)
{
    fputs(text, help ? stdout : stderr);
    if (help)
        fputs("Connection: --server URL, --token TOKEN; else CRATER_SERVER, "
              "CRATER_TOKEN,\n"
              "the file ~/.config/crater/config (server:, token:), or "
              "http://127.0.0.1:7480.\n"
              "Exit: 0 ok, 1 rejected or not found, 2 usage, 3 server not "
              "reachable.\n",
              stdout);
    return help ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static int parse_interval(const char *arg, long *out)
{
    crater_error_t err;
    uint64_t ns;

    if (crater_parse_duration_ns(arg, &ns, &err) < 0) {
        fprintf(stderr, "crater: error: --interval: %s\n", err.text);
        return -1;
    }
    if (ns < 100000000ull || ns > 3600000000000ull) {
        fprintf(stderr,
                "crater: error: --interval: '%s' is outside 100ms..1h\n",
                arg);
        return -1;
    }
    *out = (long)(ns / 1000000ull);
    return 0;
}

int cli__common_opt(int c, const char *arg, cli_common_t *co)
{
    int f;

    switch (c) {
    case RO_SERVER:
        co->server = arg;
        return 1;
    case RO_TOKEN:
        co->token = arg;
        return 1;
    case RO_WATCH:
        co->watch = true;
        return 1;
    case RO_INTERVAL:
        return parse_interval(arg, &co->interval_ms) < 0 ? -1 : 1;
    case 'o':
        if ((f = !strcmp(arg, "table") ? CLI_FMT_TEXT : cli_parse_format(arg))
            < 0) {
            fprintf(stderr,
                    "crater: error: -o: unknown format '%s' (table, json, "
                    "yaml)\n",
                    arg);
            return -1;
        }
        co->fmt = (cli_format_t)f;
        return 1;
    default:
        return 0;
    }
}

int cli__remote_open(cli_remote_t *r, const cli_common_t *co)
{
    crater_error_t err;

    memset(r, 0, sizeof(*r));
    if (cli_conn_from_env(co->server, co->token, &r->conn, &err) < 0) {
        fprintf(stderr, "crater: error: %s\n", err.text);
        return CLI_EXIT_USAGE;
    }
    r->client = crater_client_create(r->conn.server,
                                     r->conn.token[0] ? r->conn.token : NULL,
                                     &err);
    if (!r->client) {
        fprintf(stderr, "crater: error: %s: %s\n", r->conn.server, err.text);
        return CLI_EXIT_USAGE;
    }
    crater_client_set_timeout_ms(r->client, CLI_TIMEOUT_MS);
    return CLI_EXIT_OK;
}

void cli__remote_close(cli_remote_t *r)
{
    crater_client_destroy(r->client);
    r->client = NULL;
}

static int unreachable(const cli_remote_t *r, const crater_error_t *err)
{
    /* the client's message names the server already */
    if (strstr(err->text, r->conn.server))
        fprintf(stderr,
                "crater: error: %s (server from %s)\n",
                err->text,
                r->conn.server_from);
    else
        fprintf(stderr,
                "crater: error: cannot reach %s (server from %s): %s\n",
                r->conn.server,
                r->conn.server_from,
                err->text);
    fprintf(stderr,
            "crater: is craterd running? Start one with 'crater up', or name "
            "another with --server, CRATER_SERVER or "
            "~/.config/crater/config\n");
    return CLI_EXIT_UNAVAIL;
}

/* Print the server's {"error": ...} (or what it sent instead). */
static int rejected(const cli_remote_t *r,
                    long status,
                    const char *resp,
                    size_t len,
                    const crater_error_t *err)
{
    json_t *v = resp ? json_loadb(resp, len, 0, NULL) : NULL;
    const char *text = json_string_value(json_object_get(v, "error"));

    if (text)
        fprintf(stderr, "crater: error: %s\n", text);
    else if (resp && len)
        fprintf(stderr,
                "crater: error: HTTP %ld: %.*s\n",
                status,
                (int)(len > 200 ? 200 : len),
                resp);
    else
        fprintf(stderr, "crater: error: HTTP %ld: %s\n", status, err->text);
    if (status == 401 && !r->conn.token[0])
        fprintf(stderr,
                "crater: no token configured: use --token, "
                "CRATER_TOKEN or 'token:' in "
                "~/.config/crater/config\n");
    json_decref(v);
    return status == 503 ? CLI_EXIT_UNAVAIL : CLI_EXIT_REJECTED;
}

static int request(cli_remote_t *r,
                   const char *method,
                   const char *path,
                   const struct cli_body *body,
                   char **resp,
                   size_t *len)
{
    crater_error_t err;
    long status = 0;
    int rc;

    crater_error_clear(&err);
    *resp = NULL;
    *len = 0;
    rc = crater_client_request(r->client,
                               method,
                               path,
                               body ? body->ctype : NULL,
                               body ? body->data : NULL,
                               body ? body->len : 0,
                               &status,
                               resp,
                               len,
                               &err);
    if (rc < 0 && err.errnum == CRATER_EUNAVAIL)
        rc = unreachable(r, &err);
    else if (rc < 0) {
        fprintf(stderr, "crater: error: %s\n", err.text);
        rc = CLI_EXIT_REJECTED;
    } else if (status >= 400)
        rc = rejected(r, status, *resp, *len, &err);
    else
        return CLI_EXIT_OK;
    free(*resp);
    *resp = NULL;
    return rc;
}

int cli__api_body(cli_remote_t *r,
                  const char *method,
                  const char *path,
                  const struct cli_body *body,
                  json_t **out)
{
    json_error_t jerr;
    size_t len;
    char *resp;
    int rc = request(r, method, path, body, &resp, &len);

    if (rc != CLI_EXIT_OK || !out) {
        free(resp);
        return rc;
    }
    *out = len ? json_loadb(resp, len, 0, &jerr) : json_object();
    free(resp);
    if (!*out) {
        fprintf(stderr,
                "crater: error: %s %s: the server's answer is not JSON: %s\n",
                method,
                path,
                jerr.text);
        return CLI_EXIT_REJECTED;
    }
    return CLI_EXIT_OK;
}

int cli__api(cli_remote_t *r,
             const char *method,
             const char *path,
             const json_t *body,
             json_t **out)
{
    char *req = body ? json_dumps(body, JSON_COMPACT) : NULL;
    struct cli_body b = {"application/json", req, req ? strlen(req) : 0};
    int rc;

    if (body && !req) {
        fprintf(stderr, "crater: error: out of memory\n");
        return CLI_EXIT_REJECTED;
    }
    rc = cli__api_body(r, method, path, body ? &b : NULL, out);
    free(req);
    return rc;
}

int cli__api_raw(cli_remote_t *r, const char *path, char **resp, size_t *len)
{
    return request(r, "GET", path, NULL, resp, len);
}

int cli__print_raw(const json_t *v, cli_format_t fmt)
{
    return cli_print(v, fmt) < 0 ? CLI_EXIT_REJECTED : CLI_EXIT_OK;
}

int cli__watch(cli_remote_t *r,
               const cli_common_t *co,
               cli_draw_f draw,
               void *arg)
{
    int tty = isatty(STDOUT_FILENO), rc;

    long interval = co->interval_ms > 0 ? co->interval_ms : 2000;

    if (!co->watch)
        return draw(r, arg);
    cli__catch_sigint();
    for (;;) {
        if (tty)
            fputs("\033[H\033[2J", stdout);
        rc = draw(r, arg);
        fflush(stdout);
        if (rc == CLI_EXIT_USAGE)
            return rc;
        cli__sleep_ms(interval);
        if (cli__interrupted())
            return rc;
        if (!tty)
            fputc('\n', stdout);
    }
}

int cli__parse_opts(int argc,
                    char **argv,
                    const char *shortopts,
                    const struct option *opts,
                    const char *usage,
                    cli_common_t *co,
                    cli_extra_opt_f extra,
                    void *ctx,
                    int npos)
{
    int c, r;

    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        if ((r = cli__common_opt(c, optarg, co)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if (c == 'h')
            return cli__usage(usage, true) - 1;
        if (c != '?' && c != ':' && extra && extra(c, optarg, ctx) >= 0)
            continue;
        if (c == '?' || c == ':')
            fprintf(stderr,
                    "crater: error: bad option '%s'\n",
                    argv[optind - 1]);
        return cli__usage(usage, false);
    }
    if (npos >= 0 && argc - optind != npos) {
        fprintf(stderr,
                "crater: error: %s\n",
                argc - optind < npos ? "missing argument"
                                     : "too many arguments");
        return cli__usage(usage, false);
    }
    return CLI_EXIT_OK;
}
