/* openb.c - loaders for the Alibaba openb traces (cluster-trace-gpu-v2023)
 * and the bridge from trace rows to scheduler nodes and requests.
 *
 * Why hand-rolled CSV: the files are plain comma lists without quoting,
 * and every malformed row must be reported as "file:line: column NAME:
 * reason", which a generic reader would not give. Columns are found by
 * the header, so the short pod lists (multigpu*: five columns) load too;
 * a required column missing from the header, an unknown column, a row
 * with the wrong number of fields, a bad or negative number, a share
 * above 1000 milli, a share that is inconsistent with num_gpu, or an
 * unknown QoS is an error naming the file, line and column.
 *
 * In milli mode every GPU gets 1000 "MiB" so that the core's MiB are the
 * trace's milli units and shares stay exact (the FGD protocol); the
 * driver must then give the core zero context overhead, overcommit 1 and
 * a high maxTasksPerGPU. GPU models carry the knowledge-base key when the
 * knowledge base knows the trace name, else the lowercased trace name, so
 * that crater_openb_request() resolves gpu_spec the same way.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crater/sim.h"

#define MAX_COLS 16

enum col_kind {
    C_STR,
    C_U32,
    C_U64,
    C_TIME,
    C_QOS
};

struct col {
    const char *name;
    int kind;
    int required;
    size_t off; /* offset in the row struct */
    size_t size;
};

#define NODE_COL(n, k, f)                          \
    {                                              \
        n, k, 1, offsetof(crater_trace_node_t, f), \
            sizeof(((crater_trace_node_t *)0)->f)  \
    }
#define POD_COL(n, k, r, f)                       \
    {                                             \
        n, k, r, offsetof(crater_trace_pod_t, f), \
            sizeof(((crater_trace_pod_t *)0)->f)  \
    }

static const struct col node_cols[] = {
    NODE_COL("sn", C_STR, name),
    NODE_COL("cpu_milli", C_U32, cpu_milli),
    NODE_COL("memory_mib", C_U64, memory_mib),
    NODE_COL("gpu", C_U32, gpus),
    NODE_COL("model", C_STR, model),
    {NULL, 0, 0, 0, 0},
};

static const struct col pod_cols[] = {
    POD_COL("name", C_STR, 1, name),
    POD_COL("cpu_milli", C_U32, 1, cpu_milli),
    POD_COL("memory_mib", C_U64, 1, memory_mib),
    POD_COL("num_gpu", C_U32, 1, num_gpu),
    POD_COL("gpu_milli", C_U32, 1, gpu_milli),
    POD_COL("gpu_spec", C_STR, 0, gpu_spec),
    POD_COL("qos", C_QOS, 0, qos),
    {"pod_phase", C_STR, 0, 0, 0}, /* read, not kept */
    POD_COL("creation_time", C_TIME, 0, creation),
    POD_COL("deletion_time", C_TIME, 0, deletion),
    POD_COL("scheduled_time", C_TIME, 0, scheduled),
    {NULL, 0, 0, 0, 0},
};

struct reader {
    const char *path;
    FILE *f;
    char *line;
    size_t cap;
    size_t lineno;
    const struct col *map[MAX_COLS]; /* file column -> table column */
    int ncols;
    crater_error_t *err;
};

static int rfail(struct reader *r, const char *col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int rfail(struct reader *r, const char *col, const char *fmt, ...)
{
    char msg[CRATER_ERROR_TEXT];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (col)
        return crater_errorf_field(r->err,
                                   CRATER_EPARSE,
                                   col,
                                   "%s:%zu: column %s: %s",
                                   r->path,
                                   r->lineno,
                                   col,
                                   msg);
    return crater_errorf(r->err,
                         CRATER_EPARSE,
                         "%s:%zu: %s",
                         r->path,
                         r->lineno,
                         msg);
}

/* Next line without its end of line; 0 at end of file. */
static int next_line(struct reader *r)
{
    ssize_t len = getline(&r->line, &r->cap, r->f);

    if (len < 0)
        return 0;
    while (len > 0 && (r->line[len - 1] == '\n' || r->line[len - 1] == '\r'))
        r->line[--len] = '\0';
    r->lineno++;
    return 1;
}

/* Split line in place at commas; returns the field count (max+1 if more). */
static int split(char *line, char **fields, int max)
{
    int n = 0;

    fields[n++] = line;
    for (char *p = line; *p; p++)
        if (*p == ',') {
            *p = '\0';
            if (n == max)
                return max + 1;
            fields[n++] = p + 1;
        }
    return n;
}

static int read_header(struct reader *r, const struct col *table)
{
    char *fields[MAX_COLS];
    int n;

    if (!next_line(r))
        return crater_errorf(r->err,
                             CRATER_EPARSE,
                             "%s: empty file, expected a header",
                             r->path);
    n = split(r->line, fields, MAX_COLS);
    if (n > MAX_COLS)
        return rfail(r, NULL, "too many columns in header");
    for (int i = 0; i < n; i++) {
        const struct col *c = table;
        while (c->name && strcmp(c->name, fields[i]) != 0)
            c++;
        if (!c->name)
            return rfail(r, fields[i], "unknown column");
        for (int j = 0; j < i; j++)
            if (r->map[j] == c)
                return rfail(r, fields[i], "duplicate column");
        r->map[i] = c;
    }
    r->ncols = n;
    for (const struct col *c = table; c->name; c++) {
        int found = 0;
        for (int i = 0; i < n; i++)
            found |= r->map[i] == c;
        if (c->required && !found)
            return rfail(r, c->name, "missing from the header");
    }
    return 0;
}

static int parse_u64(struct reader *r,
                     const char *col,
                     const char *s,
                     uint64_t max,
                     uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (*s == '-' && isdigit((unsigned char)s[1]))
        return rfail(r, col, "negative value '%s'", s);
    if (!isdigit((unsigned char)*s))
        return rfail(r, col, "bad number '%s'", s);
    errno = 0;
    v = strtoull(s, &end, 10);
    if (*end)
        return rfail(r, col, "bad number '%s'", s);
    if (errno == ERANGE || v > max)
        return rfail(r, col, "number '%s' out of range", s);
    *out = v;
    return 0;
}

static int parse_qos(struct reader *r, const char *s, crater_qos_t *q)
{
    static const char *const names[] = {"LS", "Guaranteed", "Burstable", "BE"};

    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *q = (crater_qos_t)i;
            return 0;
        }
    return rfail(r,
                 "qos",
                 "unknown qos '%s' (LS, Guaranteed, Burstable, BE)",
                 s);
}

static int set_field(struct reader *r,
                     const struct col *c,
                     const char *s,
                     void *row)
{
    char *dst = (char *)row + c->off;
    uint64_t v;

    if (c->size == 0)
        return 0;
    switch (c->kind) {
    case C_STR:
        if (strlen(s) >= c->size)
            return rfail(r, c->name, "longer than %zu characters", c->size - 1);
        memcpy(dst, s, strlen(s) + 1);
        return 0;
    case C_QOS:
        return parse_qos(r, s, (crater_qos_t *)(void *)dst);
    case C_TIME:
        if (!*s) {
            *(int64_t *)(void *)dst = -1;
            return 0;
        }
        if (parse_u64(r, c->name, s, INT64_MAX, &v) < 0)
            return -1;
        *(int64_t *)(void *)dst = (int64_t)v;
        return 0;
    case C_U32:
        if (parse_u64(r, c->name, s, UINT32_MAX, &v) < 0)
            return -1;
        *(uint32_t *)(void *)dst = (uint32_t)v;
        return 0;
    default:
        if (parse_u64(r, c->name, s, UINT64_MAX, &v) < 0)
            return -1;
        *(uint64_t *)(void *)dst = v;
        return 0;
    }
}

static int read_row(struct reader *r, void *row)
{
    char *fields[MAX_COLS];
    int n = split(r->line, fields, MAX_COLS);

    if (n < r->ncols)
        return rfail(r,
                     r->map[n]->name,
                     "missing (%d of %d fields)",
                     n,
                     r->ncols);
    if (n > r->ncols)
        return rfail(r, NULL, "more than %d fields", r->ncols);
    for (int i = 0; i < n; i++)
        if (set_field(r, r->map[i], fields[i], row) < 0)
            return -1;
    return 0;
}

static int check_node(struct reader *r, const crater_trace_node_t *t)
{
    if (!t->name[0])
        return rfail(r, "sn", "empty name");
    if (t->cpu_milli % 1000)
        return rfail(r,
                     "cpu_milli",
                     "%u is not a whole number of CPUs",
                     t->cpu_milli);
    if (t->gpus > CRATER_MAX_GPUS_PER_NODE)
        return rfail(r,
                     "gpu",
                     "%u GPUs, at most %d per node",
                     t->gpus,
                     CRATER_MAX_GPUS_PER_NODE);
    if (t->gpus && !t->model[0])
        return rfail(r, "model", "empty for a node with %u GPUs", t->gpus);
    return 0;
}

static int check_pod(struct reader *r, const crater_trace_pod_t *p)
{
    if (!p->name[0])
        return rfail(r, "name", "empty name");
    if (p->gpu_milli > 1000)
        return rfail(r,
                     "gpu_milli",
                     "%u is more than one GPU (1000)",
                     p->gpu_milli);
    if (p->num_gpu == 0 && p->gpu_milli)
        return rfail(r, "gpu_milli", "%u with num_gpu 0", p->gpu_milli);
    if (p->num_gpu && !p->gpu_milli)
        return rfail(r, "gpu_milli", "0 with num_gpu %u", p->num_gpu);
    if (p->num_gpu > 1 && p->gpu_milli != 1000)
        return rfail(r,
                     "gpu_milli",
                     "%u with num_gpu %u: a multi-GPU pod takes whole GPUs "
                     "(1000)",
                     p->gpu_milli,
                     p->num_gpu);
    if (p->num_gpu > CRATER_MAX_GPUS_PER_NODE)
        return rfail(r,
                     "num_gpu",
                     "%u GPUs, at most %d",
                     p->num_gpu,
                     CRATER_MAX_GPUS_PER_NODE);
    return 0;
}

typedef int (*check_fn)(struct reader *r, const void *row);

static int chk_node(struct reader *r, const void *row)
{
    return check_node(r, row);
}
static int chk_pod(struct reader *r, const void *row)
{
    return check_pod(r, row);
}

static void init_row(void *row, size_t size, int pod)
{
    memset(row, 0, size);
    if (pod) {
        crater_trace_pod_t *p = row;
        p->creation = p->deletion = p->scheduled = -1;
        p->qos = CRATER_QOS_BE;
    }
}

/* Read every row of path into a growing array of rows of size bytes. */
static int load(const char *path,
                const struct col *table,
                size_t size,
                check_fn check,
                int pod,
                void **out,
                size_t *n,
                crater_error_t *err)
{
    struct reader r = {.path = path, .err = err};
    char *rows = NULL;
    size_t cnt = 0, cap = 0;
    int rc = -1;

    if (!(r.f = fopen(path, "r")))
        return crater_errorf(err, CRATER_EIO, "%s: %s", path, strerror(errno));
    if (read_header(&r, table) < 0)
        goto out;
    while (next_line(&r)) {
        if (!r.line[0])
            continue;
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 256;
            char *nr = realloc(rows, nc * size);
            if (!nr) {
                crater_errorf(err, CRATER_ENOMEM, "%s: out of memory", path);
                goto out;
            }
            rows = nr;
            cap = nc;
        }
        init_row(rows + cnt * size, size, pod);
        if (read_row(&r, rows + cnt * size) < 0
            || check(&r, rows + cnt * size) < 0)
            goto out;
        cnt++;
    }
    rc = 0;
out:
    free(r.line);
    fclose(r.f);
    if (rc < 0) {
        free(rows);
        return -1;
    }
    *out = rows;
    *n = cnt;
    return 0;
}

int crater_openb_load_nodes(const char *path,
                            crater_trace_node_t **nodes,
                            size_t *n,
                            crater_error_t *err)
{
    void *rows = NULL;

    if (load(path, node_cols, sizeof(**nodes), chk_node, 0, &rows, n, err) < 0)
        return -1;
    *nodes = rows;
    return 0;
}

int crater_openb_load_pods(const char *path,
                           crater_trace_pod_t **pods,
                           size_t *n,
                           crater_error_t *err)
{
    void *rows = NULL;

    if (load(path, pod_cols, sizeof(**pods), chk_pod, 1, &rows, n, err) < 0)
        return -1;
    *pods = rows;
    return 0;
}

void crater_trace_nodes_free(crater_trace_node_t *nodes)
{
    free(nodes);
}

void crater_trace_free(crater_trace_pod_t *pods)
{
    free(pods);
}

/* ---- nodes and requests -------------------------------------------------- */

/* The model key the core sees: the kb key when known, else lowercased. */
static const crater_kb_gpu_t *model_key(const crater_kb_t *kb,
                                        const char *name,
                                        char *buf,
                                        size_t size)
{
    const crater_kb_gpu_t *g = kb ? crater_kb_gpu(kb, name) : NULL;
    size_t i;

    if (g) {
        snprintf(buf, size, "%s", g->key);
        return g;
    }
    for (i = 0; name[i] && i + 1 < size; i++)
        buf[i] = (char)tolower((unsigned char)name[i]);
    buf[i] = '\0';
    return NULL;
}

static int fill_gpus(crater_node_t *node,
                     const crater_trace_node_t *t,
                     const crater_kb_t *kb,
                     int milli)
{
    char key[48];
    const crater_kb_gpu_t *g = model_key(kb, t->model, key, sizeof(key));

    node->ngpus = t->gpus;
    if (!t->gpus)
        return 0;
    if (!(node->gpus = calloc(t->gpus, sizeof(*node->gpus))))
        return -1;
    for (uint32_t i = 0; i < t->gpus; i++) {
        crater_gpu_t *gp = &node->gpus[i];
        if (!(gp->model = strdup(key)) || !(gp->vendor = strdup("nvidia")))
            return -1;
        gp->memory_bytes = (!milli && g ? g->memory_bytes : 1000ull << 20);
        if (g) {
            gp->sm_count = g->sm_count;
            gp->compute_cap = g->compute_cap;
            gp->hbm_bandwidth = g->mem_bandwidth;
        }
        gp->numa_node = 0;
    }
    return 0;
}

static int fill_node(crater_node_t *node,
                     const crater_trace_node_t *t,
                     const crater_kb_t *kb,
                     int milli)
{
    memset(node, 0, sizeof(*node));
    if (!(node->name = strdup(t->name)))
        return -1;
    if (!(node->cpus = calloc(1, sizeof(*node->cpus)))
        || !(node->mems = calloc(1, sizeof(*node->mems))))
        return -1;
    node->ncpus = node->nmems = 1;
    node->cpus[0].cores = node->cpus[0].threads = t->cpu_milli / 1000;
    node->mems[0].capacity = t->memory_mib << 20;
    return fill_gpus(node, t, kb, milli);
}

int crater_openb_cluster(const crater_trace_node_t *nodes,
                         size_t n,
                         const crater_kb_t *kb,
                         int milli,
                         crater_cluster_t **out,
                         crater_error_t *err)
{
    crater_cluster_t *c = calloc(1, sizeof(*c));

    if (!c || (n && !(c->nodes = calloc(n, sizeof(*c->nodes))))) {
        free(c);
        return crater_errorf(err,
                             CRATER_ENOMEM,
                             "out of memory building %zu nodes",
                             n);
    }
    for (size_t i = 0; i < n; i++) {
        c->nnodes = i + 1;
        if (fill_node(&c->nodes[i], &nodes[i], kb, milli) < 0) {
            crater_cluster_destroy(c);
            return crater_errorf(err,
                                 CRATER_ENOMEM,
                                 "out of memory building node %s",
                                 nodes[i].name);
        }
    }
    *out = c;
    return 0;
}

/* gpu_spec "A|B" -> NULL-terminated list of names in buf. */
static int spec_models(
    const char *spec, char *buf, size_t size, char **names, int max)
{
    int n = 0;

    snprintf(buf, size, "%s", spec);
    for (char *tok = strtok(buf, "|"); tok && n < max; tok = strtok(NULL, "|"))
        names[n++] = tok;
    names[n] = NULL;
    return n;
}

/* Outside milli mode a share is share x the memory of the smallest
 * allowed GPU in the cluster (so it fits every allowed model); at least
 * 1 MiB. */
static uint32_t share_mib(const crater_sched_t *s,
                          uint64_t mask,
                          uint32_t milli)
{
    uint64_t least = UINT64_MAX;
    uint32_t n = crater_sched_node_count(s);

    for (uint32_t i = 0; i < n; i++) {
        const crater_node_t *node = crater_sched_node(s, i);
        for (size_t g = 0; g < node->ngpus; g++) {
            int m = crater_sched_model_id(s, node->gpus[g].model);
            if ((!mask || (m >= 0 && (mask >> m) & 1))
                && node->gpus[g].memory_bytes < least)
                least = node->gpus[g].memory_bytes;
        }
    }
    if (least == UINT64_MAX)
        least = 1000ull << 20;
    uint64_t mib = (least >> 20) * milli / 1000;
    return mib ? (uint32_t)mib : 1;
}

int crater_openb_request(const crater_sched_t *s,
                         const crater_trace_pod_t *p,
                         int milli,
                         crater_request_t *r,
                         crater_error_t *err)
{
    char buf[64], *names[17];

    memset(r, 0, sizeof(*r));
    r->cpu_milli = p->cpu_milli;
    r->mem_bytes = p->memory_mib << 20;
    r->numa = CRATER_NUMA_NONE;
    r->priority =
        p->qos == CRATER_QOS_BE || p->qos == CRATER_QOS_BURSTABLE ? 0 : 1000;
    r->preemptible = p->qos == CRATER_QOS_BE;
    r->gpus = p->num_gpu;
    names[0] = NULL;
    if (p->gpu_spec[0]) {
        spec_models(p->gpu_spec, buf, sizeof(buf), names, 16);
        if (crater_sched_model_mask(s, names, &r->model_mask) < 0)
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "gpu_spec",
                                       "pod %s: bad gpu_spec",
                                       p->name);
    }
    if (p->num_gpu == 1 && p->gpu_milli < 1000)
        r->slice_mib =
            milli ? p->gpu_milli : share_mib(s, r->model_mask, p->gpu_milli);
    return 0;
}

/* The directory holding the openb data, if dir has the node list. */
static const char *try_dir(char *buf, size_t size, const char *dir)
{
    snprintf(buf, size, "%s/openb_node_list_gpu_node.csv", dir);
    if (access(buf, R_OK) != 0)
        return NULL;
    snprintf(buf, size, "%s", dir);
    return buf;
}

const char *crater_openb_dir(void)
{
    static char buf[1024];
    char src[900];
    const char *env = getenv("CRATER_OPENB_DIR");
    const char *tail = "src/sim/openb.c";
    size_t len = strlen(__FILE__), tl = strlen(tail);

    if (env && *env)
        return try_dir(buf, sizeof(buf), env);
    if (try_dir(buf, sizeof(buf), "../shared/data/openb"))
        return buf;
    /* the source tree: __FILE__ is absolute in CMake builds */
    if (len > tl && len - tl < 800 && strcmp(&__FILE__[len - tl], tail) == 0) {
        snprintf(src,
                 sizeof(src),
                 "%.*s../shared/data/openb",
                 (int)(len - tl),
                 __FILE__);
        return try_dir(buf, sizeof(buf), src);
    }
    return NULL;
}
