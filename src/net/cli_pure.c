/* cli_pure.c - connection settings, the `crater run` spec builder and job
 * helpers for the crater CLI's remote commands (see cli_pure.h).
 *
 * Why here: the unit tests link crater_srv, not the CLI's objects, and
 * these are the parts worth testing exactly (precedence rules, the JSON a
 * flag becomes, error texts). The text output is in the second half of
 * this file.
 *
 * `crater run` parses its own options instead of using getopt_long: the
 * command after "--" must be taken verbatim, every error has to name the
 * flag, and a pure function must not touch getopt's global state.
 */
#include "net/cli_pure.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crater/doc.h"
#include "crater/jobspec.h"
#include "crater/kb.h"
#include "crater/units.h"

/* ======================================================================
 * Connection settings
 * ==================================================================== */

static const char *nonempty(const char *s)
{
    return s && *s ? s : NULL;
}

int cli_config_path(const char *home, const char *xdg, char *buf, size_t size)
{
    int n;

    if (nonempty(xdg))
        n = snprintf(buf, size, "%s/crater/config", xdg);
    else if (nonempty(home))
        n = snprintf(buf, size, "%s/.config/crater/config", home);
    else
        return -1;
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int check_url(const char *url,
                     const char *from,
                     crater_error_t *err,
                     const char *field)
{
    if (strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0)
        return 0;
    return crater_errorf_field(err,
                               CRATER_EINVAL,
                               field,
                               "%s: '%s' is not an http:// or https:// URL",
                               from,
                               url);
}

static int copy_setting(char *dst,
                        const char *src,
                        const char *from,
                        crater_error_t *err)
{
    if (strlen(src) >= CLI_CONN_MAX)
        return crater_errorf(err,
                             CRATER_ELIMIT,
                             "%s: longer than %d characters",
                             from,
                             CLI_CONN_MAX - 1);
    strcpy(dst, src);
    return 0;
}

struct file_conf {
    char *server, *token;
};

static int conf_server(crater_dec_t *d, json_t *v, void *obj)
{
    struct file_conf *fc = obj;

    if (crater_dec_str(d, v, CLI_CONN_MAX - 1, &fc->server) < 0)
        return -1;
    if (strncmp(fc->server, "http://", 7) && strncmp(fc->server, "https://", 8))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not an http:// or https:// URL",
                               fc->server);
    return 0;
}

static int conf_token(crater_dec_t *d, json_t *v, void *obj)
{
    struct file_conf *fc = obj;

    return crater_dec_str(d, v, CLI_CONN_MAX - 1, &fc->token);
}

static const crater_dec_field_t conf_fields[] = {
    {"server", conf_server, 0},
    {"token", conf_token, 0},
    {NULL, NULL, 0},
};

/* Load the config file if it exists; a missing file is no error. */
static int load_conf(const char *path,
                     struct file_conf *fc,
                     crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    crater_dec_t d;
    int rc = 0;

    if (access(path, F_OK) < 0 && errno == ENOENT)
        return 0;
    if (crater_doc_load(path, &doc, err) < 0)
        return -1;
    if (crater_doc_count(doc) > 1)
        rc = crater_errorf(err,
                           CRATER_EINVAL,
                           "%s: one YAML document expected, found %zu",
                           path,
                           crater_doc_count(doc));
    else if (crater_doc_count(doc) == 1) {
        crater_dec_init(&d, doc, 0, err);
        rc = crater_dec_object(&d, crater_doc_root(doc, 0), conf_fields, fc);
    }
    crater_doc_destroy(doc);
    return rc;
}

/* The first line of the file `crater up` wrote; NULL when there is none. */
static const char *local_server(const char *path, char *buf, size_t size)
{
    FILE *f = path ? fopen(path, "r") : NULL;

    if (!f)
        return NULL;
    if (!fgets(buf, (int)size, f))
        buf[0] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    fclose(f);
    return nonempty(buf);
}

static int pick_server(const cli_conn_in_t *in,
                       const struct file_conf *fc,
                       const char *path,
                       cli_conn_t *out,
                       crater_error_t *err)
{
    const char *v = CLI_DEFAULT_SERVER, *from = "default";
    char local[CLI_CONN_MAX];
    size_t n;

    if (nonempty(in->flag_server))
        v = in->flag_server, from = "--server";
    else if (nonempty(in->env_server))
        v = in->env_server, from = "CRATER_SERVER";
    else if (fc->server)
        v = fc->server, from = path;
    else if (local_server(in->local_server_file, local, sizeof(local)))
        v = local, from = in->local_server_file;
    if (check_url(v, from, err, "server") < 0
        || copy_setting(out->server, v, from, err) < 0
        || copy_setting(out->server_from, from, "config path", err) < 0)
        return -1;
    n = strlen(out->server);
    while (n > 0 && out->server[n - 1] == '/')
        out->server[--n] = '\0';
    return 0;
}

static int pick_token(const cli_conn_in_t *in,
                      const struct file_conf *fc,
                      cli_conn_t *out,
                      crater_error_t *err)
{
    if (nonempty(in->flag_token))
        return copy_setting(out->token, in->flag_token, "--token", err);
    if (nonempty(in->env_token))
        return copy_setting(out->token, in->env_token, "CRATER_TOKEN", err);
    if (fc->token)
        return copy_setting(out->token, fc->token, "token", err);
    out->token[0] = '\0';
    return 0;
}

static bool is_loopback(const char *url)
{
    static const char *const local[] = {"http://127.0.0.1:",
                                        "http://localhost:",
                                        "http://[::1]:"};

    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
        if (strncmp(url, local[i], strlen(local[i])) == 0)
            return true;
    return false;
}

/* The token `crater up` wrote next to its data, for the single-machine
 * case: `crater up` in one shell, `crater run` in another, same directory. */
static void local_token(const char *path, cli_conn_t *c)
{
    FILE *f = path ? fopen(path, "r") : NULL;

    if (!f)
        return;
    if (!fgets(c->token, sizeof(c->token), f))
        c->token[0] = '\0';
    c->token[strcspn(c->token, "\r\n")] = '\0';
    fclose(f);
}

int cli_conn_resolve(const cli_conn_in_t *in,
                     cli_conn_t *out,
                     crater_error_t *err)
{
    struct file_conf fc = {NULL, NULL};
    char path[CLI_CONN_MAX] = "";
    cli_conn_t c;
    int rc = 0;

    if (cli_config_path(in->home, in->xdg_config_home, path, sizeof(path)) == 0)
        rc = load_conf(path, &fc, err);
    if (rc == 0)
        rc = pick_server(in, &fc, path, &c, err);
    if (rc == 0)
        rc = pick_token(in, &fc, &c, err);
    /* a server named by `crater up`'s own file is that cluster, whatever
     * address it listens on, so its admin token is the one to use */
    if (rc == 0 && !c.token[0]
        && (is_loopback(c.server)
            || (in->local_server_file
                && !strcmp(c.server_from, in->local_server_file))))
        local_token(in->local_token_file, &c);
    if (rc == 0)
        *out = c;
    free(fc.server);
    free(fc.token);
    return rc;
}

int cli_conn_from_env(const char *flag_server,
                      const char *flag_token,
                      cli_conn_t *out,
                      crater_error_t *err)
{
    cli_conn_in_t in = {
        .flag_server = flag_server,
        .flag_token = flag_token,
        .env_server = getenv("CRATER_SERVER"),
        .env_token = getenv("CRATER_TOKEN"),
        .home = getenv("HOME"),
        .xdg_config_home = getenv("XDG_CONFIG_HOME"),
        .local_server_file = CLI_LOCAL_SERVER_FILE,
        .local_token_file = CLI_LOCAL_TOKEN_FILE,
    };

    return cli_conn_resolve(&in, out, err);
}

static bool host_is(const char *host, size_t len, const char *want)
{
    return len == strlen(want) && strncmp(host, want, len) == 0;
}

int cli_local_url(const char *listen, unsigned port, char *buf, size_t size)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    size_t hlen = colon ? (size_t)(colon - listen) : 0;
    int n;

    if (!colon)
        return -1;
    if (hlen == 0 || host_is(listen, hlen, "0.0.0.0"))
        n = snprintf(buf, size, "http://127.0.0.1:%u", port);
    else if (host_is(listen, hlen, "[::]"))
        n = snprintf(buf, size, "http://[::1]:%u", port);
    else
        n = snprintf(buf, size, "http://%.*s:%u", (int)hlen, listen, port);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* ======================================================================
 * crater run: options to a job spec
 * ==================================================================== */

typedef enum opt_kind {
    K_STR,   /* string as given */
    K_UINT,  /* non-negative integer */
    K_INT,   /* integer */
    K_QTY,   /* quantity of dimension dim, sent as written */
    K_LIST,  /* comma-separated list, appended on repetition */
    K_ENV,   /* K=V into a mapping */
    K_FLAG,  /* no value: true */
    K_LOCAL, /* not part of the spec (--wait, --server ...) */
} opt_kind_t;

struct run_opt {
    const char *name;
    const char *path; /* dotted path in the spec; or local id */
    opt_kind_t kind;
    crater_dim_t dim;
};

static const struct run_opt run_opts[] = {
    {"--name", "name", K_STR, 0},
    {"--tenant", "tenant", K_STR, 0},
    {"--priority", "priority", K_INT, 0},
    {"--priority-class", "priorityClass", K_STR, 0},
    {"--workload-type", "workloadType", K_STR, 0},
    {"--preemptible", "preemptible", K_FLAG, 0},
    {"--replicas", "replicas", K_UINT, 0},
    {"--grace-period", "gracePeriod", K_QTY, CRATER_DIM_DURATION},
    {"--time", "timeLimit", K_QTY, CRATER_DIM_DURATION},
    {"--gpu", "resources.gpu.count", K_UINT, 0},
    {"--gpu-mem", "resources.gpu.memory", K_QTY, CRATER_DIM_BYTES},
    {"--gpu-model", "resources.gpu.model", K_LIST, 0},
    {"--cpu", "resources.cpu", K_QTY, CRATER_DIM_CPU},
    {"--mem", "resources.memory", K_QTY, CRATER_DIM_BYTES},
    {"--disk-iops", "resources.disk.iops", K_QTY, CRATER_DIM_IOPS},
    {"--disk-bandwidth",
     "resources.disk.bandwidth",
     K_QTY,
     CRATER_DIM_BANDWIDTH},
    {"--env", "env", K_ENV, 0},
    {"--workdir", "workdir", K_STR, 0},
    {"--image", "image", K_STR, 0},
    {"--array", "array", K_STR, 0},
    {"--wait", "wait", K_FLAG, 0},
    {"--server", "server", K_LOCAL, 0},
    {"--token", "token", K_LOCAL, 0},
    {"--output", "output", K_LOCAL, 0},
    {"-o", "output", K_LOCAL, 0},
    {NULL, NULL, 0, 0},
};

static const struct run_opt *find_opt(const char *arg, size_t len)
{
    for (const struct run_opt *o = run_opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, arg, len) == 0)
            return o;
    return NULL;
}

/* Set root.a.b.c = val (stolen), creating the objects on the way. */
static int set_path(json_t *root, const char *path, json_t *val)
{
    char key[64];
    const char *dot;
    json_t *obj = root, *next;

    while ((dot = strchr(path, '.'))) {
        snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
        next = json_object_get(obj, key);
        if (!next && json_object_set_new(obj, key, next = json_object()) < 0)
            break;
        obj = next;
        path = dot + 1;
    }
    if (!val || !obj || json_object_set_new(obj, path, val) < 0)
        return -1;
    return 0;
}

static json_t *get_path(json_t *root, const char *path)
{
    char key[64];
    const char *dot;

    while (root && (dot = strchr(path, '.'))) {
        snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
        root = json_object_get(root, key);
        path = dot + 1;
    }
    return root ? json_object_get(root, path) : NULL;
}

static int parse_int(const struct run_opt *o,
                     const char *v,
                     json_t **out,
                     crater_error_t *err)
{
    char *end;
    long long n;

    errno = 0;
    n = strtoll(v, &end, 10);
    if (!*v || *end || errno || (o->kind == K_UINT && (n < 0 || *v == '-')))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   o->path,
                                   "%s: '%s' is not %s integer",
                                   o->name,
                                   v,
                                   o->kind == K_UINT ? "a non-negative" : "an");
    *out = json_integer(n);
    return 0;
}

static int add_list(json_t *spec,
                    const struct run_opt *o,
                    const char *v,
                    crater_error_t *err)
{
    json_t *arr = get_path(spec, o->path);
    const char *p = v, *comma;

    if (!arr && set_path(spec, o->path, arr = json_array()) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    do {
        comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 0)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       o->path,
                                       "%s: empty entry in '%s'",
                                       o->name,
                                       v);
        if (json_array_append_new(arr, json_stringn(p, n)) < 0)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory");
        if (comma)
            p = comma + 1;
    } while (comma);
    return 0;
}

static int add_env(json_t *spec,
                   const struct run_opt *o,
                   const char *v,
                   crater_error_t *err)
{
    const char *eq = strchr(v, '=');
    json_t *env = json_object_get(spec, "env");
    char name[256];

    if (!eq || eq == v || (size_t)(eq - v) >= sizeof(name))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "env",
                                   "%s: '%s' is not NAME=VALUE",
                                   o->name,
                                   v);
    snprintf(name, sizeof(name), "%.*s", (int)(eq - v), v);
    if (!env && json_object_set_new(spec, "env", env = json_object()) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (json_object_get(env, name))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "env",
                                   "%s: %s given twice",
                                   o->name,
                                   name);
    if (json_object_set_new(env, name, json_string(eq + 1)) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

/* A spec value from one option; K_LIST and K_ENV add in place. */
static int spec_value(json_t *spec,
                      const struct run_opt *o,
                      const char *v,
                      crater_error_t *err)
{
    json_t *val = NULL;
    uint64_t q;

    if (o->kind == K_LIST)
        return add_list(spec, o, v, err);
    if (o->kind == K_ENV)
        return add_env(spec, o, v, err);
    if (get_path(spec, o->path))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   o->path,
                                   "%s given twice",
                                   o->name);
    if (o->kind == K_UINT || o->kind == K_INT) {
        if (parse_int(o, v, &val, err) < 0)
            return -1;
    } else if (o->kind == K_QTY) {
        if ((o->dim == CRATER_DIM_BYTES
                 ? crater_parse_size(v, &q, err)
                 : crater_parse_quantity(v, o->dim, &q, err))
            < 0)
            return crater_errorf_field(err,
                                       CRATER_EUNIT,
                                       o->path,
                                       "%s: %s",
                                       o->name,
                                       err->text);
        val = json_string(v);
    } else {
        val = o->kind == K_FLAG ? json_true() : json_string(v);
    }
    if (set_path(spec, o->path, val) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

static int local_value(cli_run_t *r,
                       const struct run_opt *o,
                       const char *v,
                       crater_error_t *err)
{
    const char **slot = !strcmp(o->path, "server")  ? &r->server
                        : !strcmp(o->path, "token") ? &r->token
                                                    : &r->output;

    if (*slot)
        return crater_errorf(err, CRATER_EINVAL, "%s given twice", o->name);
    *slot = v;
    return 0;
}

/* One option at argv[*i]; advances *i past its value. */
static int run_option(
    int argc, char **argv, int *i, cli_run_t *r, crater_error_t *err)
{
    const char *arg = argv[*i], *eq = strchr(arg, '=');
    size_t len = eq && arg[1] == '-' ? (size_t)(eq - arg) : strlen(arg);
    const struct run_opt *o = find_opt(arg, len);
    const char *v = NULL;

    if (!o && !strncmp(arg, "--disk", len) && len == 6)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "--disk: a job spec has no disk size; use "
                             "--disk-iops and --disk-bandwidth");
    if (!o)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "unknown option '%.*s'",
                             (int)len,
                             arg);
    if (o->kind == K_FLAG) {
        if (eq && arg[1] == '-')
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "%s takes no value",
                                 o->name);
        if (!strcmp(o->path, "wait"))
            return r->wait = true, 0;
        return spec_value(r->spec, o, NULL, err);
    }
    if (eq && arg[1] == '-')
        v = eq + 1;
    else if (*i + 1 < argc && strcmp(argv[*i + 1], "--") != 0)
        v = argv[++*i];
    else
        return crater_errorf(err, CRATER_EINVAL, "%s needs a value", o->name);
    if (o->kind == K_LOCAL)
        return local_value(r, o, v, err);
    return spec_value(r->spec, o, v, err);
}

static int set_command(json_t *spec, int argc, char **argv, crater_error_t *err)
{
    json_t *cmd = json_array();

    if (argc == 0) {
        json_decref(cmd);
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "no command: write crater run [OPTIONS] -- "
                             "COMMAND [ARGS...]");
    }
    for (int i = 0; cmd && i < argc; i++)
        if (json_array_append_new(cmd, json_string(argv[i])) < 0) {
            json_decref(cmd);
            cmd = NULL;
        }
    if (!cmd || json_object_set_new(spec, "command", cmd) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

/* The flag a spec field path came from, for decoder messages; *exact
 * tells whether the field is the flag's own path (not a part of it). */
static const char *flag_of(const char *field, bool *exact)
{
    const struct run_opt *best = NULL;

    for (const struct run_opt *o = run_opts; o->name; o++) {
        size_t n = strlen(o->path);
        if (o->kind != K_LOCAL && !strncmp(field, o->path, n)
            && (field[n] == '\0' || field[n] == '.' || field[n] == '[')
            && (!best || n > strlen(best->path)))
            best = o;
    }
    *exact = best && !strcmp(field, best->path);
    if (best)
        return best->name;
    return !strncmp(field, "command", 7) ? "the command after --" : NULL;
}

/* "resources.gpu.memory: msg" becomes "--gpu-mem: msg"; a message about a
 * part of a flag's field keeps its path: "--env: env.X: msg". */
static void name_flag(crater_error_t *err)
{
    bool exact;
    const char *flag = flag_of(err->field, &exact);
    size_t n = strlen(err->field);
    char text[CRATER_ERROR_TEXT];

    if (!flag || strncmp(err->text, err->field, n) || err->text[n] != ':')
        return;
    int w;

    if (exact)
        w = snprintf(text, sizeof(text), "%s%s", flag, err->text + n);
    else
        w = snprintf(text, sizeof(text), "%s: %s", flag, err->text);
    if (w < 0)
        return; /* truncation is fine: the text stays NUL-terminated */
    memcpy(err->text, text, sizeof(text));
}

static int check_spec(json_t *spec, crater_error_t *err)
{
    crater_kb_t *kb = crater_kb_create();
    crater_jobspec_t *js = NULL;
    crater_dec_t d;
    int rc;

    if (!kb)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    crater_dec_init(&d, NULL, 0, err);
    rc = crater_jobspec_decode(&d, spec, &js);
    if (rc == 0)
        rc = crater_jobspec_validate(js, kb, err);
    if (rc < 0)
        name_flag(err);
    crater_jobspec_destroy(js);
    crater_kb_destroy(kb);
    return rc;
}

static json_t *new_spec(void)
{
    json_t *spec = json_object();

    if (spec
        && (json_object_set_new(spec, "apiVersion", json_string("crater/v1"))
            || json_object_set_new(spec, "kind", json_string("Job")))) {
        json_decref(spec);
        spec = NULL;
    }
    return spec;
}

static int run_args(int argc, char **argv, cli_run_t *r, crater_error_t *err)
{
    int i;

    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return r->help = true, 0;
        if (argv[i][0] != '-')
            return crater_errorf(err,
                                 CRATER_EINVAL,
                                 "unexpected argument '%s': put the command "
                                 "after --",
                                 argv[i]);
        if (run_option(argc, argv, &i, r, err) < 0)
            return -1;
    }
    if (i >= argc)
        return crater_errorf(err,
                             CRATER_EINVAL,
                             "missing '--' before the command: write crater "
                             "run [OPTIONS] -- COMMAND [ARGS...]");
    if (set_command(r->spec, argc - i - 1, argv + i + 1, err) < 0)
        return -1;
    return check_spec(r->spec, err);
}

int cli_run_parse(int argc, char **argv, cli_run_t *out, crater_error_t *err)
{
    cli_run_t r = {.spec = new_spec()};

    if (!r.spec)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (run_args(argc, argv, &r, err) < 0) {
        json_decref(r.spec);
        out->spec = NULL;
        return -1;
    }
    if (r.help) {
        json_decref(r.spec);
        r = (cli_run_t){.help = true};
    }
    *out = r;
    return 0;
}

/* ======================================================================
 * Job helpers
 * ==================================================================== */

int cli_urlencode(const char *s, char *buf, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;

    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                   || (c >= '0' && c <= '9') || strchr("-._~", c);
        if (n + (keep ? 1 : 3) >= size)
            return -1;
        if (keep) {
            buf[n++] = (char)c;
        } else {
            buf[n++] = '%';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 15];
        }
    }
    if (n >= size)
        return -1;
    buf[n] = '\0';
    return 0;
}

static int add_param(
    char *buf, size_t size, size_t *n, const char *key, const char *val)
{
    char enc[1024];
    int w;

    if (!val || !*val)
        return 0;
    if (cli_urlencode(val, enc, sizeof(enc)) < 0)
        return -1;
    w = snprintf(buf + *n,
                 size - *n,
                 "%c%s=%s",
                 strchr(buf, '?') ? '&' : '?',
                 key,
                 enc);
    if (w < 0 || (size_t)w >= size - *n)
        return -1;
    *n += (size_t)w;
    return 0;
}

int cli_jobs_path(const cli_jobs_filter_t *f,
                  const char *after,
                  char *buf,
                  size_t size,
                  crater_error_t *err)
{
    char limit[32] = "";
    size_t n = 0;
    int w = snprintf(buf, size, "/api/v1/jobs");

    if (w < 0 || (size_t)w >= size)
        return crater_errorf(err, CRATER_EINVAL, "query too long");
    n = (size_t)w;
    if (f->limit > 0)
        snprintf(limit, sizeof(limit), "%ld", f->limit);
    if (add_param(buf, size, &n, "state", f->state) < 0
        || add_param(buf, size, &n, "tenant", f->tenant) < 0
        || add_param(buf, size, &n, "workloadType", f->workload_type) < 0
        || add_param(buf, size, &n, "limit", limit) < 0
        || add_param(buf, size, &n, "after", after) < 0)
        return crater_errorf(err, CRATER_EINVAL, "query too long");
    return 0;
}

static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s ? s : NULL;
}

bool cli_job_finished(const json_t *job)
{
    const char *st = str_of(job, "state");

    return st
           && (!strcmp(st, "succeeded") || !strcmp(st, "failed")
               || !strcmp(st, "cancelled"));
}

int cli_job_exit_status(const json_t *job)
{
    const json_t *ex = json_object_get(job, "exit");
    const char *st = str_of(job, "state");
    json_int_t code = json_integer_value(json_object_get(ex, "code"));
    json_int_t sig = json_integer_value(json_object_get(ex, "signal"));

    if (json_is_object(ex) && sig > 0)
        return sig > 127 ? 255 : (int)(128 + sig);
    if (json_is_object(ex) && json_is_integer(json_object_get(ex, "code")))
        return code < 0 || code > 255 ? 255 : (int)code;
    return st && !strcmp(st, "succeeded") ? 0 : 1;
}

/* ======================================================================
 * Splitting a YAML stream for submit
 * ==================================================================== */

static bool is_marker(const char *l, size_t n, const char *m)
{
    return n >= 3 && !strncmp(l, m, 3)
           && (n == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
}

/* Does line l (n bytes, no newline) hold document content? */
static bool has_content(const char *l, size_t n)
{
    size_t i = 0;

    if (n && l[0] == '%')
        return false; /* directive */
    if (is_marker(l, n, "---") || is_marker(l, n, "..."))
        i = 3;
    while (i < n && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r'))
        i++;
    return i < n && l[i] != '#';
}

long cli_yaml_split(const char *buf, size_t len, cli_span_t *spans, size_t max)
{
    size_t start = 0, pos = 0, n = 0;
    bool content = false;

    while (pos <= len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        if (is_marker(buf + pos, end - pos, "---") && pos > start) {
            if (content && n == max)
                return -1;
            if (content)
                spans[n++] = (cli_span_t){start, pos - start};
            start = pos;
            content = false;
        }
        content = content || has_content(buf + pos, end - pos);
        pos = end + 1;
    }
    if (content && n == max)
        return -1;
    if (content)
        spans[n++] = (cli_span_t){start, len - start};
    return (long)n;
}

/* ======================================================================
 * Text output
 * ==================================================================== */

char *cli_format_age(int64_t ms, char *buf, size_t size)
{
    int64_t s = ms < 0 ? 0 : ms / 1000;

    if (s < 120)
        snprintf(buf, size, "%llds", (long long)s);
    else if (s < 120 * 60)
        snprintf(buf, size, "%lldm", (long long)(s / 60));
    else if (s < 48 * 3600)
        snprintf(buf, size, "%lldh", (long long)(s / 3600));
    else
        snprintf(buf, size, "%lldd", (long long)(s / 86400));
    return buf;
}

char *cli_format_bytes(uint64_t b, char *buf, size_t size)
{
    static const char *const units[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    uint64_t unit = 1024;
    int i = 0;

    if (b < 1024) {
        snprintf(buf, size, "%llu", (unsigned long long)b);
        return buf;
    }
    while (i < 5 && b / unit >= 1024) {
        unit *= 1024;
        i++;
    }
    if (b % unit == 0)
        snprintf(buf, size, "%llu%s", (unsigned long long)(b / unit), units[i]);
    else
        snprintf(buf, size, "%.1f%s", (double)b / (double)unit, units[i]);
    return buf;
}

char *cli_format_cores(uint64_t millis, char *buf, size_t size)
{
    char frac[8];
    size_t n;

    if (millis % 1000 == 0) {
        snprintf(buf, size, "%llu", (unsigned long long)(millis / 1000));
        return buf;
    }
    snprintf(frac, sizeof(frac), "%03u", (unsigned)(millis % 1000));
    n = strlen(frac);
    while (n > 0 && frac[n - 1] == '0')
        frac[--n] = '\0';
    snprintf(buf, size, "%llu.%s", (unsigned long long)(millis / 1000), frac);
    return buf;
}

char *cli_format_time(int64_t ms, char *buf, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    if (ms <= 0 || !gmtime_r(&t, &tm)
        || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, size, "-");
    return buf;
}

/* A table of string cells, rendered with columns padded to their widest
 * cell. Cells are copied; the table owns them. */
#define TABLE_MAX_COLS 10

typedef struct table {
    size_t ncols, nrows, cap;
    char **cells; /* nrows x ncols */
    int failed;
} table_t;

static void table_row(table_t *t, const char *const *cells)
{
    if (t->failed)
        return;
    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **nc = realloc(t->cells, cap * t->ncols * sizeof(*nc));
        if (!nc) {
            t->failed = 1;
            return;
        }
        t->cells = nc;
        t->cap = cap;
    }
    for (size_t c = 0; c < t->ncols; c++) {
        char *s = strdup(cells[c] ? cells[c] : "-");
        t->cells[t->nrows * t->ncols + c] = s;
        if (!s)
            t->failed = 1;
    }
    t->nrows++;
}

static int table_print(table_t *t, FILE *fp, const char *indent)
{
    size_t w[TABLE_MAX_COLS] = {0};

    for (size_t i = 0; !t->failed && i < t->nrows * t->ncols; i++)
        if (strlen(t->cells[i]) > w[i % t->ncols])
            w[i % t->ncols] = strlen(t->cells[i]);
    for (size_t r = 0; !t->failed && r < t->nrows; r++) {
        fputs(indent, fp);
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 < t->ncols)
                fprintf(fp, "%-*s   ", (int)w[c], s);
            else
                fprintf(fp, "%s\n", s);
        }
    }
    return t->failed || ferror(fp) ? -1 : 0;
}

static void table_free(table_t *t)
{
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
}

static int table_done(table_t *t, FILE *fp, const char *indent)
{
    int rc = table_print(t, fp, indent);

    table_free(t);
    return rc;
}

static uint64_t u64_of(const json_t *o, const char *key, bool *ok)
{
    const json_t *v = json_object_get(o, key);

    if (json_is_integer(v) && json_integer_value(v) >= 0)
        return (uint64_t)json_integer_value(v);
    if (json_is_real(v) && json_real_value(v) >= 0)
        return (uint64_t)json_real_value(v);
    *ok = false;
    return 0;
}

static const char *int_text(const json_t *v, char *buf, size_t size)
{
    if (!json_is_integer(v))
        return NULL;
    snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    return buf;
}

/* Placed GPUs, else the requested count (the object's "resources"
 * summary or its spec), else "-". */
static const char *job_gpus(const json_t *job, char *buf, size_t size)
{
    const json_t *g =
        json_object_get(json_object_get(job, "placement"), "gpus");
    const json_t *spec = json_object_get(job, "spec");
    const json_t *req =
        json_object_get(json_object_get(spec, "resources"), "gpu");
    const json_t *sum =
        json_object_get(json_object_get(job, "resources"), "gpus");

    if (json_is_array(g)) {
        snprintf(buf, size, "%zu", json_array_size(g));
        return buf;
    }
    if (json_is_integer(sum)) /* the request summary craterd adds */
        return int_text(sum, buf, size);
    if (json_is_object(req))
        return int_text(json_object_get(req, "count"), buf, size);
    return int_text(req, buf, size);
}

/* The array id of a listed job, or NULL. */
static const char *array_of(const json_t *j)
{
    return str_of(json_object_get(j, "array"), "id");
}

/* Items [i, *end) are the consecutive jobs of one array: the ID column
 * ("17_[0-999]") and the STATE column with counts ("3 running,997
 * pending") of the row that stands for them. */
static void array_row(const json_t *items,
                      size_t i,
                      size_t *end,
                      char *id,
                      size_t idn,
                      char *st,
                      size_t stn)
{
    const char *aid = array_of(json_array_get(items, i));
    struct {
        const char *name;
        long n;
    } by[16] = {{0}};
    size_t nby = 0, k = i, off = 0;
    json_int_t lo = -1, hi = -1;

    for (; k < json_array_size(items); k++) {
        const json_t *j = json_array_get(items, k);
        const char *s = str_of(j, "state"), *a = array_of(j);
        json_int_t x = json_integer_value(
            json_object_get(json_object_get(j, "array"), "index"));
        size_t b = 0;
        if (!a || strcmp(a, aid) != 0)
            break;
        lo = lo < 0 || x < lo ? x : lo;
        hi = x > hi ? x : hi;
        while (b < nby && strcmp(by[b].name, s ? s : "?") != 0)
            b++;
        if (b == nby && nby < 16)
            by[nby++].name = s ? s : "?";
        if (b < nby)
            by[b].n++;
    }
    *end = k;
    snprintf(id, idn, "%s_[%lld-%lld]", aid, (long long)lo, (long long)hi);
    st[0] = '\0';
    for (size_t b = 0; b < nby && off < stn; b++)
        off += (size_t)snprintf(st + off,
                                stn - off,
                                "%s%ld %s",
                                b ? "," : "",
                                by[b].n,
                                by[b].name);
}

/* One replica as "state" or "state:code" when it exited non-zero. */
static size_t replica_text(const json_t *r, char *buf, size_t n)
{
    const json_t *ex = json_object_get(r, "exit");
    json_int_t code = json_integer_value(json_object_get(ex, "code"));

    if (code)
        return (size_t)
            snprintf(buf, n, "%s:%lld", str_of(r, "state"), (long long)code);
    return (size_t)snprintf(buf, n, "%s", str_of(r, "state"));
}

/* A multi-replica job's STATE and NODE cells: "running (running,
 * failed:3)" and its replicas' nodes, comma-separated; false for a
 * single-replica job. */
static bool replica_cells(
    const json_t *j, char *st, size_t stn, char *nodes, size_t nn)
{
    const json_t *reps = json_object_get(j, "replicas"), *r;
    size_t so, no = 0, i;

    if (!json_is_array(reps) || json_array_size(reps) == 0)
        return false;
    so = (size_t)snprintf(st, stn, "%s (", str_of(j, "state"));
    nodes[0] = '\0';
    json_array_foreach(reps, i, r)
    {
        if (so < stn)
            so += (size_t)snprintf(st + so, stn - so, "%s", i ? "," : "");
        if (so < stn)
            so += replica_text(r, st + so, stn - so);
        if (no < nn && str_of(r, "node"))
            no += (size_t)snprintf(nodes + no,
                                   nn - no,
                                   "%s%s",
                                   no ? "," : "",
                                   str_of(r, "node"));
    }
    if (so < stn)
        snprintf(st + so, stn - so, ")");
    return true;
}

int cli_print_jobs(FILE *fp, const json_t *items, int64_t now_ms)
{
    static const char *const head[] =
        {"ID", "NAME", "TENANT", "STATE", "PRIORITY", "GPUS", "NODE", "AGE"};
    table_t t = {.ncols = 8};
    size_t i = 0, next;

    table_row(&t, head);
    for (; i < json_array_size(items); i = next) {
        const json_t *j = json_array_get(items, i);
        char prio[32], gpus[32], age[32], aid[64], ast[256], rnodes[256];
        const json_t *sub = json_object_get(j, "submitted_ms");
        bool arr = array_of(j) && json_array_size(items) > 1, gang = false;
        const char *row[8];
        next = i + 1;
        if (arr)
            array_row(items, i, &next, aid, sizeof(aid), ast, sizeof(ast));
        else
            gang = replica_cells(j, ast, sizeof(ast), rnodes, sizeof(rnodes));
        row[0] = arr ? aid : str_of(j, "id");
        row[1] = str_of(j, "name");
        row[2] = str_of(j, "tenant");
        row[3] = arr || gang ? ast : str_of(j, "state");
        row[4] = int_text(json_object_get(j, "priority"), prio, sizeof(prio));
        row[5] = job_gpus(j, gpus, sizeof(gpus));
        row[6] = arr && next > i + 1 ? "-"
                 : gang              ? rnodes
                        : str_of(json_object_get(j, "placement"), "node");
        row[7] = json_is_integer(sub)
                     ? cli_format_age(now_ms - json_integer_value(sub),
                                      age,
                                      sizeof(age))
                     : NULL;
        table_row(&t, row);
    }
    return table_done(&t, fp, "");
}

/* "alloc/total" of one capacity key, formatted by fmt. */
static const char *pair(const json_t *node,
                        const char *key,
                        char *(*fmt)(uint64_t, char *, size_t),
                        char *buf,
                        size_t size)
{
    bool ok = true;
    char a[32], b[32];
    uint64_t al = u64_of(json_object_get(node, "allocated"), key, &ok);
    uint64_t cap = u64_of(json_object_get(node, "capacity"), key, &ok);

    if (!ok)
        return NULL;
    snprintf(buf, size, "%s/%s", fmt(al, a, sizeof(a)), fmt(cap, b, sizeof(b)));
    return buf;
}

static char *fmt_count(uint64_t v, char *buf, size_t size)
{
    snprintf(buf, size, "%llu", (unsigned long long)v);
    return buf;
}

static const char *node_state(const json_t *n, char *buf, size_t size)
{
    const char *st = str_of(n, "state");

    snprintf(buf,
             size,
             "%s%s%s",
             st ? st : "-",
             json_is_true(json_object_get(n, "cordoned")) ? ",Cordoned" : "",
             json_is_true(json_object_get(n, "draining")) ? ",Draining" : "");
    return buf;
}

int cli_print_nodes(FILE *fp, const json_t *items)
{
    static const char *const head[] =
        {"NAME", "STATE", "GPUS", "GPU-MEM", "CPU", "MEM", "JOBS"};
    table_t t = {.ncols = 7};
    size_t i;
    json_t *n;

    table_row(&t, head);
    json_array_foreach(items, i, n)
    {
        char st[64], g[80], gm[80], c[80], m[80], jobs[32];
        const json_t *jl = json_object_get(n, "jobs");
        const char *row[] = {
            str_of(n, "name"),
            node_state(n, st, sizeof(st)),
            pair(n, "gpus", fmt_count, g, sizeof(g)),
            pair(n, "gpu_memory_bytes", cli_format_bytes, gm, sizeof(gm)),
            pair(n, "cpu_millis", cli_format_cores, c, sizeof(c)),
            pair(n, "memory_bytes", cli_format_bytes, m, sizeof(m)),
            json_is_array(jl)
                ? fmt_count(json_array_size(jl), jobs, sizeof(jobs))
                : NULL,
        };
        table_row(&t, row);
    }
    return table_done(&t, fp, "");
}

static const char *pct(double v, char *buf, size_t size)
{
    snprintf(buf, size, "%.0f%%", v * 100.0);
    return buf;
}

/* utilization.key as a percentage; GPU memory falls back to the allocated
 * share, which is what a slice scheduler fills. */
static const char *util_of(const json_t *n,
                           const char *key,
                           char *buf,
                           size_t size)
{
    const json_t *v = json_object_get(json_object_get(n, "utilization"), key);
    bool ok = true;
    uint64_t al, cap;

    if (json_is_number(v))
        return pct(json_number_value(v), buf, size);
    if (strcmp(key, "gpu_memory") != 0)
        return NULL;
    al = u64_of(json_object_get(n, "allocated"), "gpu_memory_bytes", &ok);
    cap = u64_of(json_object_get(n, "capacity"), "gpu_memory_bytes", &ok);
    if (!ok || cap == 0)
        return NULL;
    return pct((double)al / (double)cap, buf, size);
}

int cli_print_top(FILE *fp, const json_t *items)
{
    static const char *const head[] =
        {"NAME", "STATE", "GPU", "GPU-MEM", "CPU", "MEM", "DISK"};
    static const char *const keys[] = {"gpu",
                                       "gpu_memory",
                                       "cpu",
                                       "memory",
                                       "disk"};
    table_t t = {.ncols = 7};
    size_t i;
    json_t *n;

    table_row(&t, head);
    json_array_foreach(items, i, n)
    {
        char st[64], b[5][16];
        const char *row[7] = {str_of(n, "name"), node_state(n, st, sizeof(st))};
        for (int k = 0; k < 5; k++)
            row[2 + k] = util_of(n, keys[k], b[k], sizeof(b[k]));
        table_row(&t, row);
    }
    return table_done(&t, fp, "");
}

int cli_print_profiles(FILE *fp, const json_t *items)
{
    static const char *const head[] = {"NAME",
                                       "VERSION",
                                       "OWNER",
                                       "DESCRIPTION"};
    table_t t = {.ncols = 4};
    size_t i;
    json_t *p;

    table_row(&t, head);
    json_array_foreach(items, i, p)
    {
        const char *owner = json_string_value(json_object_get(p, "tenant"));
        const char *row[] = {str_of(p, "name"),
                             str_of(p, "version"),
                             owner ? owner : "shared",
                             str_of(p, "description")};
        table_row(&t, row);
    }
    return table_done(&t, fp, "");
}

/* One node's evaluation in a score table: its total, then its plugins. */
static void score_rows(table_t *t, const json_t *e, const char *role)
{
    char v[48];
    size_t i;
    json_t *p;

    if (!json_is_object(e))
        return;
    if (!json_is_true(json_object_get(e, "fits"))) {
        const char *row[] = {role, str_of(e, "node"), "-", str_of(e, "reason")};
        table_row(t, row);
        return;
    }
    snprintf(v,
             sizeof(v),
             "%.4f",
             json_real_value(json_object_get(e, "score")));
    table_row(t, (const char *const[]){role, str_of(e, "node"), "total", v});
    json_array_foreach(json_object_get(e, "plugins"), i, p)
    {
        char w[96];
        snprintf(w,
                 sizeof(w),
                 "%.4f x %.4f",
                 json_real_value(json_object_get(p, "weight")),
                 json_real_value(json_object_get(p, "score")));
        table_row(t, (const char *const[]){"", "", str_of(p, "name"), w});
    }
}

/* A placed job: the chosen node's score against the runner-up's. */
static int print_scores(FILE *fp, const json_t *sc, const char *indent)
{
    const json_t *second = json_object_get(sc, "runner_up");
    table_t t = {.ncols = 4};

    fprintf(fp,
            "%splaced; %lld of %lld nodes would take it now (policy %s)\n",
            indent,
            (long long)json_integer_value(json_object_get(sc, "fit")),
            (long long)json_integer_value(json_object_get(sc, "nodes")),
            str_of(sc, "policy"));
    table_row(&t, (const char *const[]){"", "NODE", "SCORE", "VALUE"});
    score_rows(&t, json_object_get(sc, "chosen"), "chosen");
    if (json_is_object(second))
        score_rows(&t, second, "runner-up");
    else
        table_row(&t, (const char *const[]){"runner-up", "-", "-", "none"});
    if (json_is_number(json_object_get(sc, "margin")))
        fprintf(fp,
                "%smargin over the runner-up: %.4f\n",
                indent,
                json_real_value(json_object_get(sc, "margin")));
    return table_done(&t, fp, indent);
}

int cli_print_explain(FILE *fp, const json_t *ex, const char *indent)
{
    const json_t *filters = json_object_get(ex, "filters");
    const char *reason = str_of(ex, "reason");
    table_t t = {.ncols = 2};
    size_t i;
    json_t *f;

    if (reason)
        fprintf(fp, "%s%s\n", indent, reason);
    if (json_is_object(json_object_get(ex, "scores")))
        return print_scores(fp, json_object_get(ex, "scores"), indent);
    if (!json_is_array(filters) || json_array_size(filters) == 0)
        return ferror(fp) ? -1 : 0;
    table_row(&t, (const char *const[]){"FILTER", "REJECTED"});
    json_array_foreach(filters, i, f)
    {
        char n[32];
        const char *row[] = {str_of(f, "filter"),
                             int_text(json_object_get(f, "rejected"),
                                      n,
                                      sizeof(n))};
        table_row(&t, row);
    }
    return table_done(&t, fp, indent);
}

static void field(FILE *fp, const char *name, const char *value)
{
    fprintf(fp, "%-13s %s\n", name, value && *value ? value : "-");
}

static void time_field(FILE *fp,
                       const char *name,
                       const json_t *v,
                       int64_t now_ms)
{
    char t[40], age[32], line[96];

    if (!json_is_integer(v) || json_integer_value(v) <= 0) {
        field(fp, name, NULL);
        return;
    }
    snprintf(line,
             sizeof(line),
             "%s (%s ago)",
             cli_format_time(json_integer_value(v), t, sizeof(t)),
             cli_format_age(now_ms - json_integer_value(v), age, sizeof(age)));
    field(fp, name, line);
}

static void command_field(FILE *fp, const json_t *spec)
{
    const json_t *cmd = json_object_get(spec, "command");
    size_t i;
    json_t *a;

    fprintf(fp, "%-13s", "Command:");
    if (!json_is_array(cmd) || json_array_size(cmd) == 0)
        fputs(" -", fp);
    json_array_foreach(cmd, i, a)
    {
        /* the normalised spec has strings; a raw one may hold numbers */
        char *lit = json_is_string(a) ? NULL : json_dumps(a, JSON_ENCODE_ANY);
        const char *s = lit ? lit : json_string_value(a);
        int quote = !s || !*s || strpbrk(s, " \t\"'\\$") != NULL;
        fprintf(fp, quote ? " '%s'" : " %s", s ? s : "");
        free(lit);
    }
    fputc('\n', fp);
}

/* A spec quantity: a number in the dimension's bare unit (bytes; cores
 * for CPU) or a string with units. 0 when absent or unreadable. */
static uint64_t spec_qty(const json_t *v, crater_dim_t dim)
{
    uint64_t q = 0;
    char buf[64];

    if (json_is_string(v))
        crater_parse_quantity(json_string_value(v), dim, &q, NULL);
    else if (json_is_number(v)) {
        snprintf(buf, sizeof(buf), "%.17g", json_number_value(v));
        crater_parse_quantity(buf, dim, &q, NULL);
    }
    return q;
}

/* "gpu 1 x 20Gi slice, cpu 8, memory 64Gi" from the job's spec (the
 * normalised form, or as submitted: `gpu: 2` and unit strings work). */
static void resources_field(FILE *fp, const json_t *spec)
{
    const json_t *res = json_object_get(spec, "resources");
    const json_t *gpu = json_object_get(res, "gpu");
    const json_t *cnt =
        json_is_object(gpu) ? json_object_get(gpu, "count") : gpu;
    uint64_t gm = spec_qty(json_object_get(gpu, "memory"), CRATER_DIM_BYTES);
    char a[40] = "", b[32], c[32];

    if (!json_is_object(res)) {
        field(fp, "Resources:", NULL);
        return;
    }
    if (gm) {
        strcpy(a, " x ");
        cli_format_bytes(gm, a + 3, sizeof(a) - 3);
        strcat(a, " slice");
    }
    fprintf(fp,
            "%-13s gpu %lld%s, cpu %s, memory %s\n",
            "Resources:",
            json_is_integer(cnt)  ? (long long)json_integer_value(cnt)
            : json_is_object(gpu) ? 1LL
                                  : 0LL,
            a,
            cli_format_cores(spec_qty(json_object_get(res, "cpu"),
                                      CRATER_DIM_CPU),
                             b,
                             sizeof(b)),
            cli_format_bytes(spec_qty(json_object_get(res, "memory"),
                                      CRATER_DIM_BYTES),
                             c,
                             sizeof(c)));
}

static int gpus_block(FILE *fp, const json_t *gpus)
{
    table_t t = {.ncols = 3};
    size_t i;
    json_t *g;

    if (!json_is_array(gpus) || json_array_size(gpus) == 0)
        return 0;
    fprintf(fp, "  GPUs:\n");
    table_row(&t, (const char *const[]){"INDEX", "UUID", "MEMORY"});
    json_array_foreach(gpus, i, g)
    {
        char idx[32], mem[32];
        bool ok = true;
        uint64_t m = u64_of(g, "memory_bytes", &ok);
        const char *row[] = {int_text(json_object_get(g, "index"),
                                      idx,
                                      sizeof(idx)),
                             str_of(g, "uuid"),
                             ok ? cli_format_bytes(m, mem, sizeof(mem)) : NULL};
        table_row(&t, row);
    }
    return table_done(&t, fp, "    ");
}

/* A base-unit quantity of pl as text, or NULL when absent. */
static const char *qty(const json_t *pl,
                       const char *key,
                       char *(*fmt)(uint64_t, char *, size_t),
                       char *buf,
                       size_t size)
{
    bool ok = true;
    uint64_t v = u64_of(pl, key, &ok);

    return ok ? fmt(v, buf, size) : NULL;
}

static int placement_block(FILE *fp, const json_t *pl)
{
    char buf[64];

    if (!json_is_object(pl)) {
        field(fp, "Placement:", NULL);
        return 0;
    }
    fprintf(fp, "Placement:\n");
    field(fp, "  Node:", str_of(pl, "node"));
    field(fp,
          "  NUMA:",
          int_text(json_object_get(pl, "numa"), buf, sizeof(buf)));
    field(fp,
          "  CPU:",
          qty(pl, "cpu_millis", cli_format_cores, buf, sizeof(buf)));
    field(fp,
          "  Memory:",
          qty(pl, "memory_bytes", cli_format_bytes, buf, sizeof(buf)));
    field(fp, "  Disk:", str_of(pl, "disk"));
    return gpus_block(fp, json_object_get(pl, "gpus"));
}

static int history_block(FILE *fp, const json_t *hist)
{
    table_t t = {.ncols = 3};
    size_t i;
    json_t *h;

    if (!json_is_array(hist) || json_array_size(hist) == 0)
        return 0;
    fprintf(fp, "History:\n");
    table_row(&t, (const char *const[]){"TIME", "STATE", "REASON"});
    json_array_foreach(hist, i, h)
    {
        char tb[40];
        const json_t *tm = json_object_get(h, "time_ms");
        const char *row[] = {json_is_integer(tm)
                                 ? cli_format_time(json_integer_value(tm),
                                                   tb,
                                                   sizeof(tb))
                                 : NULL,
                             str_of(h, "state"),
                             str_of(h, "reason")};
        table_row(&t, row);
    }
    return table_done(&t, fp, "  ");
}

/* A multi-replica job's replicas: index, node, state, exit. */
static int replicas_block(FILE *fp, const json_t *reps)
{
    table_t t = {.ncols = 4};
    const json_t *r;
    size_t i;

    if (!json_is_array(reps) || json_array_size(reps) == 0)
        return 0;
    fprintf(fp, "Replicas:\n");
    table_row(&t, (const char *const[]){"REPLICA", "NODE", "STATE", "EXIT"});
    json_array_foreach(reps, i, r)
    {
        char idx[24], ex[64] = "";
        const json_t *e = json_object_get(r, "exit");
        snprintf(idx, sizeof(idx), "%zu", i);
        if (json_is_object(e))
            snprintf(ex,
                     sizeof(ex),
                     "%lld%s",
                     (long long)json_integer_value(json_object_get(e, "code")),
                     json_integer_value(json_object_get(e, "signal")) ? " ("
                                                                        "signal"
                                                                        ")"
                                                                      : "");
        table_row(&t,
                  (const char *const[]){idx,
                                        str_of(r, "node"),
                                        str_of(r, "state"),
                                        *ex ? ex : NULL});
    }
    return table_done(&t, fp, "  ");
}

static void exit_field(FILE *fp, const json_t *ex)
{
    char buf[96];

    if (!json_is_object(ex)) {
        field(fp, "Exit:", NULL);
        return;
    }
    snprintf(buf,
             sizeof(buf),
             "code %lld, signal %lld%s",
             (long long)json_integer_value(json_object_get(ex, "code")),
             (long long)json_integer_value(json_object_get(ex, "signal")),
             json_is_true(json_object_get(ex, "oom")) ? ", killed: out of "
                                                        "memory"
                                                      : "");
    field(fp, "Exit:", buf);
}

/* The spec's timeLimit ("7200000ms") as "2h". */
static const char *time_limit_text(const json_t *spec, char *buf, size_t n)
{
    const char *t = json_string_value(json_object_get(spec, "timeLimit"));
    uint64_t ns;

    if (crater_parse_duration_ns(t, &ns, NULL) < 0)
        return t;
    return crater_format_quantity(ns, CRATER_DIM_DURATION, buf, n);
}

/* "step 40 of attempt 1 (4194304 bytes in 0.25 s): /ck/step-40" */
static void checkpoint_field(FILE *fp, const json_t *job, int64_t now_ms)
{
    const json_t *c = json_object_get(job, "checkpoint");
    const json_t *p = json_object_get(job, "progress");
    const json_t *spec = json_object_get(job, "spec");
    char buf[4400];

    if (c) {
        snprintf(buf,
                 sizeof(buf),
                 "step %" JSON_INTEGER_FORMAT " of attempt "
                 "%" JSON_INTEGER_FORMAT " (%" JSON_INTEGER_FORMAT " bytes in "
                 "%.2f "
                 "s)%s%s",
                 json_integer_value(json_object_get(c, "step")),
                 json_integer_value(json_object_get(c, "attempt")),
                 json_integer_value(json_object_get(c, "bytes")),
                 json_number_value(json_object_get(c, "seconds")),
                 str_of(c, "path") ? ": " : "",
                 str_of(c, "path") ? str_of(c, "path") : "");
        field(fp, "Checkpoint:", buf);
        time_field(fp, "Saved:", json_object_get(c, "time_ms"), now_ms);
    }
    if (p) {
        snprintf(buf,
                 sizeof(buf),
                 "step %" JSON_INTEGER_FORMAT,
                 json_integer_value(json_object_get(p, "step")));
        field(fp, "Progress:", buf);
    }
    if (json_is_string(json_object_get(spec, "restartPolicy"))) {
        snprintf(buf,
                 sizeof(buf),
                 "%s, %" JSON_INTEGER_FORMAT " failed attempt(s), backoffLimit "
                 "%" JSON_INTEGER_FORMAT,
                 json_string_value(json_object_get(spec, "restartPolicy")),
                 json_integer_value(json_object_get(job, "failures")),
                 json_integer_value(json_object_get(spec, "backoffLimit")));
        field(fp, "Restart:", buf);
    }
}

/* "Idle GPUs:" while craterd measures the job's GPUs idle (job "idle",
 * idle-GPU reclaim): since when, and when it is reclaimed once warned. */
static void idle_field(FILE *fp, const json_t *job, int64_t now_ms)
{
    const json_t *i = json_object_get(job, "idle");
    const json_t *at = json_object_get(i, "reclaim_at_ms");
    char t[40], left[32], line[120];

    if (!json_is_object(i))
        return;
    time_field(fp, "Idle GPUs:", json_object_get(i, "since_ms"), now_ms);
    if (!json_is_integer(at))
        return;
    snprintf(line,
             sizeof(line),
             "warned; reclaimed %s (in %s) unless busy again",
             cli_format_time(json_integer_value(at), t, sizeof(t)),
             cli_format_age(json_integer_value(at) - now_ms,
                            left,
                            sizeof(left)));
    field(fp, "Idle reclaim:", line);
}

/* "Cost:" from the job's "cost" (daemon/cost.h): its total in the basis,
 * both bases, and the cap when it has one. */
static void cost_field(FILE *fp, const json_t *job)
{
    const json_t *c = json_object_get(job, "cost");
    char line[192];
    int n;

    if (!json_is_object(c))
        return;
    n = snprintf(line,
                 sizeof(line),
                 "%.6f %s (%s; allocation %.6f, usage %.6f)",
                 json_number_value(json_object_get(c, "total")),
                 json_string_value(json_object_get(c, "currency")),
                 json_string_value(json_object_get(c, "basis")),
                 json_number_value(json_object_get(c, "allocation")),
                 json_number_value(json_object_get(c, "usage")));
    if (json_is_number(json_object_get(c, "cap")) && n > 0
        && (size_t)n < sizeof(line))
        snprintf(line + n,
                 sizeof(line) - (size_t)n,
                 ", cap %.6f%s",
                 json_number_value(json_object_get(c, "cap")),
                 json_is_true(json_object_get(c, "capped")) ? " (reached)"
                                                            : "");
    field(fp, "Cost:", line);
}

int cli_print_job_describe(FILE *fp,
                           const json_t *job,
                           const json_t *explain,
                           int64_t now_ms)
{
    const json_t *spec = json_object_get(job, "spec");
    char buf[32];
    int rc;

    field(fp, "ID:", str_of(job, "id"));
    field(fp, "Name:", str_of(job, "name"));
    field(fp, "Tenant:", str_of(job, "tenant"));
    field(fp, "State:", str_of(job, "state"));
    field(fp, "Reason:", str_of(job, "reason"));
    field(fp,
          "Priority:",
          int_text(json_object_get(job, "priority"), buf, sizeof(buf)));
    field(fp, "Workload:", str_of(job, "workloadType"));
    field(fp,
          "Attempts:",
          int_text(json_object_get(job, "attempts"), buf, sizeof(buf)));
    time_field(fp, "Submitted:", json_object_get(job, "submitted_ms"), now_ms);
    time_field(fp, "Started:", json_object_get(job, "started_ms"), now_ms);
    time_field(fp, "Finished:", json_object_get(job, "finished_ms"), now_ms);
    command_field(fp, spec);
    resources_field(fp, spec);
    if (json_is_string(json_object_get(spec, "timeLimit")))
        field(fp, "Time limit:", time_limit_text(spec, buf, sizeof(buf)));
    checkpoint_field(fp, job, now_ms);
    idle_field(fp, job, now_ms);
    cost_field(fp, job);
    rc = placement_block(fp, json_object_get(job, "placement"));
    if (rc == 0)
        rc = replicas_block(fp, json_object_get(job, "replicas"));
    exit_field(fp, json_object_get(job, "exit"));
    if (rc == 0)
        rc = history_block(fp, json_object_get(job, "history"));
    if (rc == 0 && explain) {
        fprintf(fp, "Explanation:\n");
        rc = cli_print_explain(fp, explain, "  ");
    }
    return rc < 0 || ferror(fp) ? -1 : 0;
}

int cli_print_node_describe(FILE *fp, const json_t *node, int64_t now_ms)
{
    static const char *const dims[][3] = {
        {"gpus", "gpus", "gpu"},
        {"gpu-memory", "gpu_memory_bytes", "gpu_memory"},
        {"cpu", "cpu_millis", "cpu"},
        {"memory", "memory_bytes", "memory"},
    };
    table_t t = {.ncols = 3};
    char st[64], ub[16];

    field(fp, "Name:", str_of(node, "name"));
    field(fp, "State:", node_state(node, st, sizeof(st)));
    field(fp, "Reason:", str_of(node, "reason"));
    time_field(fp,
               "Heartbeat:",
               json_object_get(node, "last_heartbeat_ms"),
               now_ms);
    fprintf(fp, "Resources:\n");
    table_row(&t,
              (const char *const[]){"RESOURCE",
                                    "ALLOCATED/CAPACITY",
                                    "UTILIZATION"});
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        char pb[80];
        char *(*fmt)(uint64_t, char *, size_t) = i == 0   ? fmt_count
                                                 : i == 2 ? cli_format_cores
                                                          : cli_format_bytes;
        const char *row[] = {dims[i][0],
                             pair(node, dims[i][1], fmt, pb, sizeof(pb)),
                             util_of(node, dims[i][2], ub, sizeof(ub))};
        table_row(&t, row);
    }
    table_row(&t,
              (const char *const[]){"disk",
                                    NULL,
                                    util_of(node, "disk", ub, sizeof(ub))});
    if (table_done(&t, fp, "  ") < 0)
        return -1;
    fprintf(fp, "%-13s", "Jobs:");
    const json_t *jobs = json_object_get(node, "jobs");
    if (!json_is_array(jobs) || json_array_size(jobs) == 0)
        fputs(" -", fp);
    for (size_t i = 0; i < json_array_size(jobs); i++)
        fprintf(fp,
                "%s%s",
                i ? ", " : " ",
                json_string_value(json_array_get(jobs, i))
                    ? json_string_value(json_array_get(jobs, i))
                    : "?");
    fputc('\n', fp);
    return ferror(fp) ? -1 : 0;
}
