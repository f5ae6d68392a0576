/* cmd_nodes.c - the node and admin commands of crater: get nodes|node,
 * describe node, top, nodes cordon|uncordon|drain, token create|list|revoke.
 *
 * top reads GET /api/v1/nodes like get nodes but shows each node's
 * utilisation per dimension (GPU, GPU memory, CPU, memory, disk) as
 * percentages; with --watch both redraw every 2 s. The tables themselves
 * are built in src/net/cli_pure.c so the unit tests can check their text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/remote.h"

#define PATH_LEN 1024

enum {
    O_REASON = RO_FIRST_CMD,
    O_ROLE,
    O_TENANT,
    O_NAME,
    O_NODE,
    O_EXPIRES,
    O_READ_ONLY,
};

static int node_path(const char *name, const char *suffix, char *buf, size_t n)
{
    char enc[512];

    if (cli_urlencode(name, enc, sizeof(enc)) < 0
        || snprintf(buf, n, "/api/v1/nodes/%s%s", enc, suffix) >= (int)n) {
        fprintf(stderr, "crater: error: node name too long\n");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* ---- get nodes | node NAME, top ---------------------------------------- */

struct node_view {
    char path[PATH_LEN];
    bool one; /* get node NAME */
    bool top;
    cli_common_t co;
};

static int draw_nodes(cli_remote_t *r, void *arg)
{
    struct node_view *v = arg;
    json_t *res = NULL, *items = NULL;
    int rc = cli__api(r, "GET", v->path, NULL, &res);

    if (rc == CLI_EXIT_OK && v->co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(res, v->co.fmt);
    else if (rc == CLI_EXIT_OK) {
        items = v->one ? json_pack("[O]", res)
                       : json_incref(json_object_get(res, "items"));
        if (!items
            || (v->top ? cli_print_top(stdout, items)
                       : cli_print_nodes(stdout, items))
                   < 0)
            rc = CLI_EXIT_REJECTED;
    }
    json_decref(items);
    json_decref(res);
    return rc;
}

static int node_view(int argc,
                     char **argv,
                     struct node_view *v,
                     const char *usage)
{
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS,
                                         CLI_WATCH_LONGOPTS,
                                         {0}};
    cli_remote_t r = {0};
    int rc = cli__parse_opts(argc,
                             argv,
                             "o:h",
                             opts,
                             usage,
                             &v->co,
                             NULL,
                             NULL,
                             v->one ? 1 : 0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (v->one)
        rc = node_path(argv[optind], "", v->path, sizeof(v->path));
    else
        snprintf(v->path, sizeof(v->path), "/api/v1/nodes");
    if (rc == CLI_EXIT_OK && (rc = cli__remote_open(&r, &v->co)) == 0)
        rc = cli__watch(&r, &v->co, draw_nodes, v);
    cli__remote_close(&r);
    return rc;
}

int cli__get_nodes(int argc, char **argv)
{
    static const char usage[] = "usage: crater get nodes [-o json|yaml] "
                                "[--watch] [--interval D]\n"
                                "       crater get node NAME [-o json|yaml]\n"
                                "Columns: NAME STATE GPUS(alloc/total) GPU-MEM "
                                "CPU MEM JOBS; "
                                "GPU-MEM,\n"
                                "CPU and MEM are allocated/capacity.\n";
    struct node_view v = {.one = !strcmp(argv[0], "node")};

    return node_view(argc, argv, &v, usage);
}

int cli_top(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater top [--watch] [--interval D] [-o json|yaml]\n"
        "Per-node utilisation of GPU, GPU memory, CPU, memory and disk in\n"
        "percent (GPU memory: the allocated share when the node reports no\n"
        "measurement). --watch redraws every 2s (or --interval).\n";
    struct node_view v = {.top = true};

    return node_view(argc, argv, &v, usage);
}

int cli__describe_node(int argc, char **argv)
{
    static const char usage[] = "usage: crater describe node NAME "
                                "[-o json|yaml]\n";
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS, {0}};
    char path[PATH_LEN];
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *node = NULL;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &co, NULL, NULL, 1);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((rc = node_path(argv[optind], "", path, sizeof(path))) == 0
        && (rc = cli__remote_open(&r, &co)) == 0)
        rc = cli__api(&r, "GET", path, NULL, &node);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(node, co.fmt);
    else if (rc == CLI_EXIT_OK
             && cli_print_node_describe(stdout, node, cli__now_ms()) < 0)
        rc = CLI_EXIT_REJECTED;
    json_decref(node);
    cli__remote_close(&r);
    return rc;
}

/* ---- nodes cordon | uncordon | drain NAME -------------------------------- */

static int reason_opt(int c, const char *arg, void *ctx)
{
    if (c != O_REASON)
        return -1;
    *(const char **)ctx = arg;
    return 0;
}

int cli_nodes(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater nodes cordon|uncordon|drain NAME [--reason TEXT]\n"
        "cordon: no new placements; drain: cordon, then stop and requeue "
        "the\n"
        "node's jobs (preemptible first); uncordon: accept placements "
        "again.\n"
        "Needs an admin token.\n";
    static const struct option opts[] =
        {CLI_REMOTE_LONGOPTS,
         {"reason", required_argument, NULL, O_REASON},
         {0}};
    static const char *const verbs[][2] = {{"cordon", "cordoned"},
                                           {"uncordon", "uncordoned"},
                                           {"drain", "draining"}};
    const char *reason = NULL, *done = NULL;
    char path[PATH_LEN], suffix[32];
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *body = NULL;
    int rc;

    for (size_t i = 0; argc > 1 && i < 3; i++)
        if (!strcmp(argv[1], verbs[i][0]))
            done = verbs[i][1];
    if (!done)
        return cli__usage(usage,
                          argc > 1
                              && (!strcmp(argv[1], "-h")
                                  || !strcmp(argv[1], "--help")));
    rc = cli__parse_opts(argc - 1,
                         argv + 1,
                         "o:h",
                         opts,
                         usage,
                         &co,
                         reason_opt,
                         &reason,
                         1);
    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    snprintf(suffix, sizeof(suffix), "/%s", argv[1]);
    if ((rc = node_path(argv[1 + optind], suffix, path, sizeof(path))) == 0
        && !(body =
                 reason ? json_pack("{ss}", "reason", reason) : json_object()))
        rc = CLI_EXIT_REJECTED;
    if (rc == CLI_EXIT_OK && (rc = cli__remote_open(&r, &co)) == 0)
        rc = cli__api(&r, "POST", path, body, NULL);
    if (rc == CLI_EXIT_OK)
        printf("node %s %s\n", argv[1 + optind], done);
    json_decref(body);
    cli__remote_close(&r);
    return rc;
}

/* ---- token create -----------------------------------------------------------
 */

struct token_req {
    const char *role, *tenant, *name, *node, *expires;
    bool read_only;
};

static int token_opt(int c, const char *arg, void *ctx)
{
    struct token_req *t = ctx;

    if (c == O_ROLE)
        t->role = arg;
    else if (c == O_TENANT)
        t->tenant = arg;
    else if (c == O_NAME)
        t->name = arg;
    else if (c == O_NODE)
        t->node = arg;
    else if (c == O_EXPIRES)
        t->expires = arg;
    else if (c == O_READ_ONLY)
        t->read_only = true;
    else
        return -1;
    return 0;
}

static json_t *token_body(const struct token_req *t)
{
    json_t *b = json_pack("{ss}", "role", t->role);

    if (b && t->tenant)
        json_object_set_new(b, "tenant", json_string(t->tenant));
    if (b && t->name)
        json_object_set_new(b, "name", json_string(t->name));
    if (b && t->node)
        json_object_set_new(b, "node", json_string(t->node));
    if (b && t->expires)
        json_object_set_new(b, "expires", json_string(t->expires));
    if (b && t->read_only)
        json_object_set_new(b, "readOnly", json_true());
    return b;
}

/* "5m ago", "in 3d", "-" (0) into buf. */
static const char *when(int64_t ms, int64_t now, char *buf, size_t size)
{
    char age[32];

    if (!ms)
        return "-";
    cli_format_age(ms <= now ? now - ms : ms - now, age, sizeof(age));
    snprintf(buf, size, ms <= now ? "%s ago" : "in %s", age);
    return buf;
}

static void token_row(const json_t *t, int64_t now)
{
    const char *scope = json_string_value(json_object_get(t, "tenant"));
    const char *name = json_string_value(json_object_get(t, "name"));
    int64_t exp = json_integer_value(json_object_get(t, "expires_ms"));
    char used[48], until[48], role[32];

    if (!scope)
        scope = json_string_value(json_object_get(t, "node"));
    snprintf(role,
             sizeof(role),
             "%s%s",
             json_string_value(json_object_get(t, "role")),
             json_is_true(json_object_get(t, "read_only")) ? "/ro" : "");
    printf("%-14.12s %-8s %-16s %-10s %-10s %s\n",
           json_string_value(json_object_get(t, "hash")),
           role,
           scope ? scope : "-",
           when(json_integer_value(json_object_get(t, "last_used_ms")),
                now,
                used,
                sizeof(used)),
           json_is_true(json_object_get(t, "expired"))
               ? "expired"
               : when(exp, now, until, sizeof(until)),
           name ? name : "");
}

/* crater token list: hash prefix, role, scope, last use, expiry, name. */
static int token_list(int argc, char **argv, const char *usage)
{
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS, {0}};
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *res = NULL, *t;
    size_t i;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &co, NULL, NULL, 0);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if ((rc = cli__remote_open(&r, &co)) == CLI_EXIT_OK)
        rc = cli__api(&r, "GET", "/api/v1/tokens", NULL, &res);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(res, co.fmt);
    else if (rc == CLI_EXIT_OK) {
        printf("%-14s %-8s %-16s %-10s %-10s %s\n",
               "HASH",
               "ROLE",
               "SCOPE",
               "LAST-USED",
               "EXPIRES",
               "NAME");
        json_array_foreach(json_object_get(res, "items"), i, t)
            token_row(t, cli__now_ms());
    }
    json_decref(res);
    cli__remote_close(&r);
    return rc;
}

/* crater token revoke HASH */
static int token_revoke(int argc, char **argv, const char *usage)
{
    static const struct option opts[] = {CLI_REMOTE_LONGOPTS, {0}};
    char path[512];
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *res = NULL;
    int rc =
        cli__parse_opts(argc, argv, "o:h", opts, usage, &co, NULL, NULL, 1);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (strlen(argv[optind]) != 64
        || strspn(argv[optind], "0123456789abcdef") != 64) {
        fprintf(stderr,
                "crater: error: '%s' is not a token hash (64 hex digits, "
                "as `crater token create -o json` and GET /api/v1/tokens "
                "show)\n",
                argv[optind]);
        return CLI_EXIT_USAGE;
    }
    snprintf(path, sizeof(path), "/api/v1/tokens/%s", argv[optind]);
    if ((rc = cli__remote_open(&r, &co)) == CLI_EXIT_OK)
        rc = cli__api(&r, "DELETE", path, NULL, &res);
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(res, co.fmt);
    else if (rc == CLI_EXIT_OK)
        printf("token %.12s... revoked\n", argv[optind]);
    json_decref(res);
    cli__remote_close(&r);
    return rc;
}

int cli_token(int argc, char **argv)
{
    static const char usage[] =
        "usage: crater token create --role admin|user|agent [--tenant T]\n"
        "                           [--name N] [--node NODE] [--expires 30d]\n"
        "                           [--read-only] [-o json|yaml]\n"
        "       crater token list [-o json|yaml]\n"
        "       crater token revoke HASH\n"
        "Create an API token (admin only). user tokens need --tenant, agent\n"
        "tokens --node; --expires makes it stop working after that long;\n"
        "--read-only: it may only read (an admin's: the whole cluster, a\n"
        "user's: its tenant), e.g. for the dashboard.\n"
        "The token is printed once; the server keeps only its hash.\n"
        "list: every token's hash, role, scope, last use and expiry.\n"
        "revoke: the token with that hash stops working at once.\n";
    static const struct option opts[] =
        {CLI_REMOTE_LONGOPTS,
         {"role", required_argument, NULL, O_ROLE},
         {"tenant", required_argument, NULL, O_TENANT},
         {"name", required_argument, NULL, O_NAME},
         {"node", required_argument, NULL, O_NODE},
         {"expires", required_argument, NULL, O_EXPIRES},
         {"read-only", no_argument, NULL, O_READ_ONLY},
         {0}};
    struct token_req t = {0};
    cli_common_t co = {0};
    cli_remote_t r = {0};
    json_t *body = NULL, *res = NULL;
    const char *tok;
    int rc;

    if (argc >= 2 && strcmp(argv[1], "revoke") == 0)
        return token_revoke(argc - 1, argv + 1, usage);
    if (argc >= 2 && strcmp(argv[1], "list") == 0)
        return token_list(argc - 1, argv + 1, usage);
    if (argc < 2 || strcmp(argv[1], "create") != 0)
        return cli__usage(usage,
                          argc > 1
                              && (!strcmp(argv[1], "-h")
                                  || !strcmp(argv[1], "--help")));
    rc = cli__parse_opts(argc - 1,
                         argv + 1,
                         "o:h",
                         opts,
                         usage,
                         &co,
                         token_opt,
                         &t,
                         0);
    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!t.role) {
        fprintf(stderr, "crater: error: --role is required\n");
        return cli__usage(usage, false);
    }
    if (!(body = token_body(&t)))
        rc = CLI_EXIT_REJECTED;
    if (rc == CLI_EXIT_OK && (rc = cli__remote_open(&r, &co)) == 0)
        rc = cli__api(&r, "POST", "/api/v1/tokens", body, &res);
    tok = json_string_value(json_object_get(res, "token"));
    if (rc == CLI_EXIT_OK && co.fmt != CLI_FMT_TEXT)
        rc = cli__print_raw(res, co.fmt);
    else if (rc == CLI_EXIT_OK) {
        printf("%s\n", tok ? tok : "?");
        fprintf(stderr,
                "crater: the token is shown only once: store it "
                "now\n");
    }
    json_decref(body);
    json_decref(res);
    cli__remote_close(&r);
    return rc;
}
