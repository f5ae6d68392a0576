/* k8s.c - craterd as a kube-scheduler extender (doc/kubernetes.md).
 *
 * kube-scheduler POSTs ExtenderArgs {Pod, Nodes | NodeNames} to
 * /k8s/extender/filter and /k8s/extender/prioritize, and
 * ExtenderBindingArgs {PodName, PodNamespace, PodUID, Node} to
 * /k8s/extender/bind (the field names of k8s.io/kube-scheduler/extender/
 * v1, which has no JSON tags: the keys are the Go field names). Kubernetes
 * node names are Crater node names.
 *
 * Filter and prioritize read the pod's request (k8s_pod.c), compile it
 * as any Crater job and evaluate it on each named node with the core's
 * filters and score (crater_sched_place_on): Crater's joint placement on
 * craterd's view of those nodes, which includes every Crater job and every
 * pod bound here. A name craterd does not know is "unresolvable"
 * (preempting pods cannot make it a Crater node); a node that is full is
 * "failed" (preemption might help). Prioritize maps the fitting nodes'
 * scores to kube-scheduler's 0..10, best node 10.
 *
 * Bind has only the pod's identity, so filter remembers each pod's
 * request by UID (the last K8S_SEEN_MAX pods). Bind places it again on
 * the chosen node, charges the placement to the core under a task id of
 * its own (K8S_TASK_BASE + n, not preemptible: Crater does not own the
 * pod) and answers {"Error": ""} with the placement and the slice
 * environment besides (Go's decoder ignores the extra keys). craterd does
 * not talk to an API server: creating the Binding object and passing the
 * environment to the pod is left to whoever forwards bind (documented).
 * A binding is stored (KEY_K8S + uid: the pod's identity, its compiled
 * request as a normalised spec, the placement) and bind answers once it
 * is on disk, so a craterd restart charges the pod again exactly where it
 * was (k8s_load_binding) instead of handing its GPUs to another job;
 * DELETE /k8s/pods/{uid} returns one and deletes its record.
 *
 * Auth: an admin token in Authorization, as everywhere under /api/v1.
 * Everything runs under d->mu.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "crater/log.h"
#include "daemon/internal.h"
#include "net/k8s_env.h"

#define K8S_TASK_BASE (1ull << 61) /* no job, gang or what-if task id */
#define K8S_SEEN_MAX 1024
#define K8S_UID_MAX 128
#define K8S_SCORE_MAX 10 /* extender/v1 MaxExtenderPriority */

typedef struct k8s_seen {
    char uid[K8S_UID_MAX];
    crater_jobspec_t *spec; /* owned */
} k8s_seen_t;

typedef struct k8s_bound {
    char uid[K8S_UID_MAX];
    char *ns, *name;
    uint64_t task;
    crater_placement_t pl;
} k8s_bound_t;

struct k8s_state {
    k8s_seen_t seen[K8S_SEEN_MAX];
    size_t next_seen; /* the ring's next slot */
    k8s_bound_t *bound;
    size_t nbound, cap;
    uint64_t seq; /* task ids handed out */
};

int k8s_init(crater_daemon_t *d, crater_error_t *err)
{
    if (!(d->k8s = calloc(1, sizeof(*d->k8s))))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return 0;
}

void k8s_free(crater_daemon_t *d)
{
    struct k8s_state *k = d->k8s;

    if (!k)
        return;
    for (size_t i = 0; i < K8S_SEEN_MAX; i++)
        crater_jobspec_destroy(k->seen[i].spec);
    for (size_t i = 0; i < k->nbound; i++) {
        free(k->bound[i].ns);
        free(k->bound[i].name);
    }
    free(k->bound);
    free(k);
    d->k8s = NULL;
}

/* ---- the pods filter has seen ------------------------------------------ */

static k8s_seen_t *seen_find(struct k8s_state *k, const char *uid)
{
    for (size_t i = 0; uid && *uid && i < K8S_SEEN_MAX; i++)
        if (k->seen[i].spec && strcmp(k->seen[i].uid, uid) == 0)
            return &k->seen[i];
    return NULL;
}

/* Keep spec under uid (steals spec; the oldest entry goes). */
static const crater_jobspec_t *seen_put(struct k8s_state *k,
                                        const char *uid,
                                        crater_jobspec_t *spec)
{
    k8s_seen_t *s = seen_find(k, uid);

    if (!s) {
        s = &k->seen[k->next_seen];
        k->next_seen = (k->next_seen + 1) % K8S_SEEN_MAX;
    }
    crater_jobspec_destroy(s->spec);
    snprintf(s->uid, sizeof(s->uid), "%s", uid);
    s->spec = spec;
    return spec;
}

/* ---- decoding ExtenderArgs ---------------------------------------------- */

typedef struct ext_args {
    json_t *names;      /* [name...] (new reference) */
    json_t *node_items; /* Nodes.items when sent (borrowed), else NULL */
    k8s_pod_t pod;
} ext_args_t;

/* Only the extender/v1 keys; anything else is a misconfigured caller. */
static int keys_only(json_t *o, const char *const *keys, crater_error_t *err)
{
    char want[128] = "";
    size_t off = 0;
    const char *k;
    json_t *v;

    for (size_t i = 0; keys[i] && off < sizeof(want); i++)
        off += (size_t)snprintf(want + off,
                                sizeof(want) - off,
                                "%s%s",
                                i ? ", " : "",
                                keys[i]);
    json_object_foreach(o, k, v)
    {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], k) != 0)
            i++;
        if (!keys[i])
            return crater_errorf_field(err,
                                       CRATER_EFIELD,
                                       k,
                                       "%s: unknown field (expected %s)",
                                       k,
                                       want);
    }
    return 0;
}

/* NodeNames: ["n1", ...] (node-cache mode). */
static int args_names(json_t *nn, ext_args_t *a, crater_error_t *err)
{
    size_t i;
    json_t *v;

    if (!json_is_array(nn))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   "NodeNames",
                                   "NodeNames: expected an array of names");
    json_array_foreach(nn, i, v) if (
        !json_is_string(v)) return crater_errorf_field(err,
                                                       CRATER_ETYPE,
                                                       "NodeNames",
                                                       "NodeNames[%zu]: "
                                                       "expected a string",
                                                       i);
    a->names = json_incref(nn);
    return 0;
}

/* Nodes: a v1.NodeList; each item's metadata.name. */
static int args_nodes(json_t *nl, ext_args_t *a, crater_error_t *err)
{
    json_t *items = json_object_get(nl, "items"), *v;
    size_t i;

    if (!json_is_object(nl) || !json_is_array(items))
        return crater_errorf_field(err,
                                   CRATER_ETYPE,
                                   "Nodes.items",
                                   "Nodes: expected a v1.NodeList with "
                                   "items");
    a->names = json_array();
    json_array_foreach(items, i, v)
    {
        json_t *n = json_object_get(json_object_get(v, "metadata"), "name");
        if (!json_is_string(n))
            return crater_errorf_field(err,
                                       CRATER_ETYPE,
                                       "Nodes.items",
                                       "Nodes.items[%zu].metadata.name: "
                                       "expected a string",
                                       i);
        json_array_append(a->names, n);
    }
    a->node_items = items;
    return 0;
}

static int ext_args_read(json_t *body, ext_args_t *a, crater_error_t *err)
{
    static const char *const keys[] = {"Pod", "Nodes", "NodeNames", NULL};
    json_t *nn = json_object_get(body, "NodeNames");
    json_t *nl = json_object_get(body, "Nodes");

    memset(a, 0, sizeof(*a));
    if (keys_only(body, keys, err) < 0
        || k8s_pod_read(json_object_get(body, "Pod"), &a->pod, err) < 0)
        return -1;
    if (nn && !json_is_null(nn))
        return args_names(nn, a, err);
    if (nl && !json_is_null(nl))
        return args_nodes(nl, a, err);
    return crater_errorf_field(err,
                               CRATER_EMISSING,
                               "NodeNames",
                               "ExtenderArgs: neither Nodes nor NodeNames "
                               "is set");
}

/* ---- evaluating the pod on the named nodes ------------------------------ */

typedef struct k8s_eval {
    const char *name;
    int state; /* 0 fits, 1 failed, 2 unresolvable */
    const char *why;
    double score;
} k8s_eval_t;

/* The pod's request; the spec is kept for bind under its UID. */
static int pod_request(crater_daemon_t *d,
                       const k8s_pod_t *pod,
                       crater_request_t *req,
                       crater_error_t *err)
{
    crater_jobspec_t *spec;
    const crater_jobspec_t *kept;

    if (k8s_pod_spec(d, pod, &spec, err) < 0)
        return -1;
    if (!*pod->uid) { /* nothing to bind by: evaluate, then forget */
        crater_jobspec_destroy(spec);
        return crater_errorf_field(err,
                                   CRATER_EMISSING,
                                   "Pod.metadata.uid",
                                   "Pod.metadata.uid: missing (bind finds "
                                   "the pod by it)");
    }
    kept = seen_put(d->k8s, pod->uid, spec);
    return crater_request_from_spec(d->sched, kept, req, err);
}

static void eval_nodes(crater_daemon_t *d,
                       const crater_request_t *req,
                       json_t *names,
                       k8s_eval_t *ev)
{
    size_t i;
    json_t *v;

    json_array_foreach(names, i, v)
    {
        crater_placement_t pl;
        uint32_t id = crater_sched_find_node(d->sched, json_string_value(v));
        ev[i].name = json_string_value(v);
        if (id == CRATER_SCHED_NO_NODE) {
            ev[i].state = 2;
            ev[i].why = "not a Crater node (craterd has no node of this name)";
        } else if (crater_sched_place_on(d->sched, req, id, &pl, &ev[i].why)
                   < 0) {
            ev[i].state = 1;
        } else {
            ev[i].score = pl.score;
        }
    }
}

/* Parse, compile and evaluate: *ev (one per name, caller frees). */
static int ext_eval(crater_daemon_t *d,
                    json_t *body,
                    ext_args_t *a,
                    k8s_eval_t **ev,
                    crater_error_t *err)
{
    crater_request_t req;

    *ev = NULL;
    if (ext_args_read(body, a, err) < 0
        || pod_request(d, &a->pod, &req, err) < 0)
        return -1;
    *ev = calloc(json_array_size(a->names) + 1, sizeof(**ev));
    if (!*ev)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    eval_nodes(d, &req, a->names, *ev);
    return 0;
}

/* ---- handlers ------------------------------------------------------------ */

/* An error answer kube-scheduler can log: Crater's error object with the
 * extender's Error key besides. */
static void ext_error(crater_http_resp_t *resp, const crater_error_t *err)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}",
                          "error",
                          err->text,
                          "field",
                          err->field,
                          "code",
                          crater_errno_name(err->errnum),
                          "Error",
                          err->text);

    crater_http_json(resp, crater_errno_http_status(err->errnum), o);
}

/* Lock, authenticate (admin) and read the JSON body; 0 with d->mu held
 * and *body set, -1 with the answer filled (mutex released). */
static int ext_begin(crater_daemon_t *d,
                     crater_http_req_t *r,
                     crater_http_resp_t *resp,
                     json_t **body)
{
    principal_t p;

    pthread_mutex_lock(&d->mu);
    if (api_auth(d, r, resp, &p) < 0 || api_require_admin(&p, resp) < 0
        || api_body_json(r, body, resp) < 0) {
        pthread_mutex_unlock(&d->mu);
        return -1;
    }
    return 0;
}

static json_t *filter_result(const ext_args_t *a, const k8s_eval_t *ev)
{
    json_t *ok = json_array(), *failed = json_object(), *unres = json_object(),
           *items = json_array();

    for (size_t i = 0; i < json_array_size(a->names); i++) {
        if (ev[i].state == 0) {
            json_array_append_new(ok, json_string(ev[i].name));
            if (a->node_items)
                json_array_append(items, json_array_get(a->node_items, i));
        } else {
            json_object_set_new(ev[i].state == 1 ? failed : unres,
                                ev[i].name,
                                json_string(ev[i].why));
        }
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:s}",
                     "Nodes",
                     a->node_items ? json_pack("{s:o}", "items", items)
                                   : (json_decref(items), json_null()),
                     "NodeNames",
                     a->node_items ? (json_decref(ok), json_null()) : ok,
                     "FailedNodes",
                     failed,
                     "FailedAndUnresolvableNodes",
                     unres,
                     "Error",
                     "");
}

static void h_filter(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    json_t *body;
    ext_args_t a;
    k8s_eval_t *ev;

    if (ext_begin(d, r, resp, &body) < 0)
        return;
    if (ext_eval(d, body, &a, &ev, &err) < 0)
        ext_error(resp, &err);
    else
        crater_http_json(resp, 200, filter_result(&a, ev));
    free(ev);
    json_decref(a.names);
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* Fitting nodes: 1..10 by score (all equal: 10); others 0. */
static json_t *priorities(const ext_args_t *a, const k8s_eval_t *ev)
{
    size_t n = json_array_size(a->names);
    double lo = 0, hi = 0;
    int any = 0;
    json_t *out = json_array();

    for (size_t i = 0; i < n; i++)
        if (ev[i].state == 0) {
            lo = any && lo < ev[i].score ? lo : ev[i].score;
            hi = any && hi > ev[i].score ? hi : ev[i].score;
            any = 1;
        }
    for (size_t i = 0; i < n; i++) {
        int64_t s = 0;
        if (ev[i].state == 0)
            s = hi - lo > 1e-9
                    ? 1
                          + (int64_t)((K8S_SCORE_MAX - 1) * (ev[i].score - lo)
                                          / (hi - lo)
                                      + 0.5)
                    : K8S_SCORE_MAX;
        json_array_append_new(out,
                              json_pack("{s:s, s:I}",
                                        "Host",
                                        ev[i].name,
                                        "Score",
                                        (json_int_t)s));
    }
    return out;
}

static void h_prioritize(crater_http_req_t *r,
                         crater_http_resp_t *resp,
                         void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    json_t *body;
    ext_args_t a;
    k8s_eval_t *ev;

    if (ext_begin(d, r, resp, &body) < 0)
        return;
    if (ext_eval(d, body, &a, &ev, &err) < 0)
        ext_error(resp, &err);
    else
        crater_http_json(resp, 200, priorities(&a, ev));
    free(ev);
    json_decref(a.names);
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- bind ---------------------------------------------------------------- */

typedef struct bind_args {
    const char *name, *ns, *uid, *node;
} bind_args_t;

/* A UID that fits the table and a store key: a Kubernetes UID is a UUID. */
static bool uid_ok(const char *uid)
{
    size_t n = strlen(uid);

    return n > 0 && n < K8S_UID_MAX
           && strspn(uid,
                     "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789._-")
                  == n;
}

static int bind_args_read(json_t *b, bind_args_t *a, crater_error_t *err)
{
    static const char *const keys[] = {"PodName",
                                       "PodNamespace",
                                       "PodUID",
                                       "Node",
                                       NULL};
    const char **out[] = {&a->name, &a->ns, &a->uid, &a->node};

    if (keys_only(b, keys, err) < 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        json_t *v = json_object_get(b, keys[i]);
        if (!json_is_string(v))
            return crater_errorf_field(err,
                                       v ? CRATER_ETYPE : CRATER_EMISSING,
                                       keys[i],
                                       "%s: expected a string",
                                       keys[i]);
        *out[i] = json_string_value(v);
    }
    if (!*a->uid || !*a->node)
        return crater_errorf_field(err,
                                   CRATER_EMISSING,
                                   *a->uid ? "Node" : "PodUID",
                                   "%s: must not be empty",
                                   *a->uid ? "Node" : "PodUID");
    if (!uid_ok(a->uid))
        return crater_errorf_field(err,
                                   CRATER_EINVAL,
                                   "PodUID",
                                   "PodUID: expected 1-%d of A-Z a-z 0-9 . _ "
                                   "- (a Kubernetes UID)",
                                   K8S_UID_MAX - 1);
    return 0;
}

static k8s_bound_t *bound_find(struct k8s_state *k, const char *uid)
{
    for (size_t i = 0; i < k->nbound; i++)
        if (strcmp(k->bound[i].uid, uid) == 0)
            return &k->bound[i];
    return NULL;
}

/* The binding as the API shows it (placement and environment). */
static json_t *bound_json(crater_daemon_t *d, const k8s_bound_t *b)
{
    json_t *pl = placement_json(d, &b->pl);
    json_t *env = crater__k8s_slice_env(pl,
                                        d->cfg.scheduler.gpu_context_overhead,
                                        b->uid);

    return json_pack("{s:s, s:s, s:s, s:o, s:o}",
                     "uid",
                     b->uid,
                     "namespace",
                     b->ns,
                     "name",
                     b->name,
                     "placement",
                     pl,
                     "env",
                     env);
}

/* The next free entry of the bound table (zeroed, not yet counted in
 * nbound: the caller does once it is charged); NULL on ENOMEM. */
static k8s_bound_t *bound_slot(struct k8s_state *k, crater_error_t *err)
{
    if (k->nbound == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 16;
        k8s_bound_t *nb = realloc(k->bound, cap * sizeof(*nb));
        if (!nb)
            return crater_errorf(err, CRATER_ENOMEM, "out of memory"), NULL;
        k->bound = nb;
        k->cap = cap;
    }
    memset(&k->bound[k->nbound], 0, sizeof(k->bound[0]));
    return &k->bound[k->nbound];
}

/* Place the seen pod on node and charge it; the new binding or NULL. */
static k8s_bound_t *bind_place(crater_daemon_t *d,
                               const bind_args_t *a,
                               crater_error_t *err)
{
    struct k8s_state *k = d->k8s;
    k8s_seen_t *s = seen_find(k, a->uid);
    uint32_t id = crater_sched_find_node(d->sched, a->node);
    crater_request_t req;
    crater_placement_t pl;
    const char *why = NULL;

    if (!s)
        return crater_errorf_field(err,
                                   CRATER_ENOENT,
                                   "PodUID",
                                   "pod %s/%s (%s) was not filtered by this "
                                   "craterd",
                                   a->ns,
                                   a->name,
                                   a->uid),
               NULL;
    if (id == CRATER_SCHED_NO_NODE)
        return crater_errorf_field(err,
                                   CRATER_ENOENT,
                                   "Node",
                                   "%s is not a Crater node",
                                   a->node),
               NULL;
    if (crater_request_from_spec(d->sched, s->spec, &req, err) < 0)
        return NULL;
    req.preemptible = false;
    if (crater_sched_place_on(d->sched, &req, id, &pl, &why) < 0)
        return crater_errorf_field(err,
                                   CRATER_EUNSCHED,
                                   "Node",
                                   "pod %s/%s no longer fits %s: %s",
                                   a->ns,
                                   a->name,
                                   a->node,
                                   why ? why : "?"),
               NULL;
    k8s_bound_t *b = bound_slot(k, err);
    if (!b)
        return NULL;
    b->task = K8S_TASK_BASE + k->seq;
    b->pl = pl;
    if (crater_sched_commit(d->sched, b->task, &req, &pl, err) < 0)
        return NULL;
    snprintf(b->uid, sizeof(b->uid), "%s", a->uid);
    b->ns = strdup(a->ns);
    b->name = strdup(a->name);
    k->seq++;
    k->nbound++;
    return b;
}

/* The binding's record: what k8s_load_binding needs to charge it again. */
static void bound_store(crater_daemon_t *d,
                        const k8s_bound_t *b,
                        const crater_jobspec_t *spec)
{
    char key[256];

    snprintf(key, sizeof(key), KEY_K8S "%s", b->uid);
    persist_put_json(d,
                     key,
                     json_pack("{s:s, s:s, s:s, s:I, s:o, s:o}",
                               "uid",
                               b->uid,
                               "namespace",
                               b->ns,
                               "name",
                               b->name,
                               "seq",
                               (json_int_t)(b->task - K8S_TASK_BASE),
                               "spec",
                               crater_jobspec_encode(spec),
                               "placement",
                               placement_store(d, &b->pl)),
                     NULL,
                     NULL);
}

static void unstored(int rc, int64_t rev, const crater_error_t *err, void *arg)
{
    (void)rev;
    (void)arg;
    if (rc < 0)
        crater_log(LOG_ERR,
                   "k8s: deleting a binding: %s",
                   err ? err->text : "");
}

static void bound_unstore(crater_daemon_t *d, const char *uid)
{
    crater_txn_t *t = crater_txn_create();
    crater_error_t err = {0};
    char key[256];

    snprintf(key, sizeof(key), KEY_K8S "%s", uid);
    if (!t || crater_txn_delete(t, key, &err) < 0) {
        crater_txn_destroy(t);
        crater_log(LOG_ERR, "k8s: cannot delete %s: %s", key, err.text);
        return;
    }
    if (crater_store_commit_async(d->store, t, unstored, NULL, &err) < 0)
        crater_log(LOG_ERR, "k8s: cannot delete %s: %s", key, err.text);
}

static void bind_answer(crater_daemon_t *d,
                        const k8s_bound_t *b,
                        crater_http_resp_t *resp)
{
    json_t *o = bound_json(d, b);
    char *env = json_dumps(json_object_get(o, "env"), JSON_COMPACT);

    crater_log(LOG_INFO,
               "k8s: bound pod %s/%s (%s) to %s as task %" PRIu64 ": env %s",
               b->ns,
               b->name,
               b->uid,
               json_string_value(
                   json_object_get(json_object_get(o, "placement"), "node")),
               b->task,
               env ? env : "?");
    free(env);
    json_object_set_new(o, "Error", json_string(""));
    crater_http_json(resp, 200, o);
}

static void h_bind(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    crater_error_t err = {0};
    json_t *body;
    bind_args_t a;
    k8s_bound_t *b;

    if (ext_begin(d, r, resp, &body) < 0)
        return;
    if (bind_args_read(body, &a, &err) < 0)
        ext_error(resp, &err);
    else if ((b = bound_find(d->k8s, a.uid)))
        bind_answer(d, b, resp); /* a retried bind: the same answer */
    else if (!(b = bind_place(d, &a, &err)))
        crater_http_json(resp,
                         200,
                         json_pack("{s:s, s:s}",
                                   "Error",
                                   err.text,
                                   "field",
                                   err.field));
    else {
        bound_store(d, b, seen_find(d->k8s, a.uid)->spec);
        bind_answer(d, b, resp);
        api_answer_when_stored(d, r, resp); /* bound once it is stored */
    }
    json_decref(body);
    pthread_mutex_unlock(&d->mu);
}

/* ---- the bound pods --------------------------------------------------------
 */

static void h_pods(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    json_t *items, *body;

    if (ext_begin(d, r, resp, &body) < 0)
        return;
    json_decref(body);
    items = json_array();
    for (size_t i = 0; i < d->k8s->nbound; i++)
        json_array_append_new(items, bound_json(d, &d->k8s->bound[i]));
    crater_http_json(resp, 200, json_pack("{s:o}", "items", items));
    pthread_mutex_unlock(&d->mu);
}

static void h_unbind(crater_http_req_t *r, crater_http_resp_t *resp, void *arg)
{
    crater_daemon_t *d = arg;
    struct k8s_state *k;
    const char *uid = crater_http_param(r, "uid");
    k8s_bound_t *b;
    json_t *body;

    if (ext_begin(d, r, resp, &body) < 0)
        return;
    json_decref(body);
    k = d->k8s;
    if (!(b = bound_find(k, uid ? uid : ""))) {
        api_errorf(resp,
                   CRATER_ENOENT,
                   "uid",
                   "no pod %s is bound here",
                   uid ? uid : "");
    } else {
        crater_sched_release(d->sched, b->task, NULL);
        bound_unstore(d, b->uid);
        free(b->ns);
        free(b->name);
        *b = k->bound[--k->nbound];
        loop_capacity_changed(d); /* pending jobs may fit now */
        crater_http_json(resp, 200, json_pack("{s:s}", "released", uid));
        api_answer_when_stored(d, r, resp);
    }
    pthread_mutex_unlock(&d->mu);
}

/* A stored binding back in the table and charged where it was. A node
 * that is gone or a placement that no longer fits is logged and the
 * record dropped (the pod's resources are no longer Crater's to hold). */
int k8s_load_binding(crater_daemon_t *d,
                     json_t *v,
                     const char *key,
                     crater_error_t *err)
{
    struct k8s_state *k = d->k8s;
    const char *uid = NULL, *ns = NULL, *name = NULL;
    json_t *spec_json = NULL, *plj = NULL;
    crater_jobspec_t *spec = NULL;
    json_int_t seq = 0;
    crater_request_t req;
    crater_placement_t pl;
    k8s_bound_t *b;
    int rc = -1;

    if (json_unpack(v,
                    "{s:s, s:s, s:s, s:I, s:o, s:o}",
                    "uid",
                    &uid,
                    "namespace",
                    &ns,
                    "name",
                    &name,
                    "seq",
                    &seq,
                    "spec",
                    &spec_json,
                    "placement",
                    &plj)
            < 0
        || !uid_ok(uid) || seq < 0)
        return crater_errorf(err,
                             CRATER_EPARSE,
                             "store: %s: malformed binding",
                             key);
    if (job_spec_from_norm(d, spec_json, &spec, err) < 0
        || crater_request_from_spec(d->sched, spec, &req, err) < 0)
        goto out;
    if (placement_load(d, plj, &pl) < 0) {
        crater_errorf(err, CRATER_EPARSE, "malformed placement");
        goto out;
    }
    req.preemptible = false;
    if (!(b = bound_slot(k, err)))
        goto out;
    b->task = K8S_TASK_BASE + (uint64_t)seq;
    b->pl = pl;
    if (crater_sched_commit(d->sched, b->task, &req, &pl, err) < 0) {
        crater_log(LOG_WARNING,
                   "k8s: pod %s/%s (%s) no longer fits where it was bound "
                   "(%s): forgotten",
                   ns,
                   name,
                   uid,
                   err->text);
        bound_unstore(d, uid);
        rc = 0;
        goto out;
    }
    snprintf(b->uid, sizeof(b->uid), "%s", uid);
    b->ns = strdup(ns);
    b->name = strdup(name);
    k->nbound++;
    if ((uint64_t)seq >= k->seq)
        k->seq = (uint64_t)seq + 1;
    rc = 0;
out:
    crater_jobspec_destroy(spec);
    return rc;
}

int api_k8s_routes(crater_daemon_t *d, crater_error_t *err)
{
    static const api_route_t routes[] = {
        {"POST", "/k8s/extender/filter", h_filter},
        {"POST", "/k8s/extender/prioritize", h_prioritize},
        {"POST", "/k8s/extender/bind", h_bind},
        {"GET", "/k8s/pods", h_pods},
        {"DELETE", "/k8s/pods/{uid}", h_unbind},
    };

    return api_register(d, routes, sizeof(routes) / sizeof(routes[0]), err);
}
