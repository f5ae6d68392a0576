/* explain_api.c - crater_sched_explain(): the structured form of the
 * explanation crater_sched_place() gives as text, for the API and the CLI
 * ("why is my job pending?").
 *
 * It runs the same aggregation (sched__explain_run over node classes, the
 * fast path's view) and turns struct sched_explain into JSON field by
 * field, so the JSON and the text can never disagree: "message" is the
 * very text the error carries. Reasons with no quantity (a taint, a
 * cordon) carry no need/have/unit.
 *
 * For a task that is placed, crater_sched_explain_placed() answers "why
 * there": it takes the task's own charges off its node for the duration of
 * the call (sched__apply is exact, so the node is bit for bit as before
 * afterwards, as in the preemption planner), evaluates every node the way
 * the brute-force path does, and shows the chosen node's score, plugin by
 * plugin, against the best other node. It is the cluster as it is now,
 * not as it was at the decision: nodes may have filled or emptied since.
 */
#include "sched/explain.h"

static const char *unit_name(int unit)
{
    switch (unit) {
    case U_MIB:
        return "MiB";
    case U_MILLI:
        return "millicores";
    case U_BYTES:
        return "bytes";
    case U_PERCENT:
        return "percent";
    case U_COUNT:
        return "count";
    default:
        return NULL;
    }
}

/* Add key = v to o, taking the reference; -1 when v is NULL or on ENOMEM */
static int put(json_t *o, const char *key, json_t *v)
{
    return json_object_set_new(o, key, v);
}

static json_t *reason_json(const crater_sched_t *s,
                           const struct sched_reason *r)
{
    json_t *o = json_object();
    const char *unit = unit_name(r->unit);
    int bad = !o;

    if (bad)
        return NULL;
    bad |= put(o, "reason", json_string(r->why));
    bad |= put(o, "nodes", json_integer(r->count));
    if (unit) {
        bad |= put(o, "need", json_integer((json_int_t)r->need));
        bad |= put(o, "have", json_integer((json_int_t)r->have));
        bad |= put(o, "unit", json_string(unit));
    }
    bad |= put(o, "closest_node", json_string(s->nodes[r->best].name));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *reasons_json(const crater_sched_t *s,
                            const struct sched_explain *ex)
{
    json_t *a = json_array();

    for (uint32_t i = 0; a && i < ex->nreasons; i++) {
        if (json_array_append_new(a, reason_json(s, &ex->r[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *crater_sched_explain(crater_sched_t *s, const crater_request_t *req)
{
    struct sched_explain ex;
    json_t *o = json_object();
    int bad = !o;

    if (bad)
        return NULL;
    sched__explain_run(s, req, 1, &ex);
    bad |= put(o, "nodes", json_integer(ex.nodes));
    bad |= put(o, "fit", json_integer(ex.fit));
    bad |= put(o, "reasons", reasons_json(s, &ex));
    bad |= put(o, "message", json_string(ex.text));
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- a placed task: its node's score against the runner-up ------------- */

/* One node's evaluation of r, score by score. */
static json_t *node_score_json(crater_sched_t *s,
                               uint32_t node,
                               const crater_request_t *r)
{
    struct sched_ctx c;
    json_t *o = json_object(), *plug = json_array();
    int bad = !o || !plug;

    if (!bad && sched__eval(s, node, r, &c) < 0) {
        json_decref(plug);
        bad |= put(o, "node", json_string(s->nodes[node].name));
        bad |= put(o, "fits", json_false());
        bad |= put(o, "reason", json_string(c.why ? c.why : ""));
        return bad ? (json_decref(o), NULL) : o;
    }
    for (const sched_score_ops_t *const *sc = sched__scores; !bad && *sc;
         sc++) {
        double w = (*sc)->weight(s, r);
        if (w != 0)
            bad |= json_array_append_new(plug,
                                         json_pack("{s:s, s:f, s:f}",
                                                   "name",
                                                   (*sc)->name,
                                                   "weight",
                                                   w,
                                                   "score",
                                                   (*sc)->score(&c)));
    }
    bad |= put(o, "node", json_string(s->nodes[node].name));
    bad |= put(o, "fits", json_true());
    bad |= put(o, "score", json_real(c.p.score));
    bad |= put(o, "policy_score", json_real(c.raw));
    bad |= put(o, "order_bias", json_real(c.raw - c.p.score));
    bad |= put(o,
               "overcommit",
               json_boolean(sched__placement_overcommits(s, &c.p)));
    bad |= put(o, "plugins", plug);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The best node other than skip for r (score, then lowest id); NO_NODE
 * when no other node fits. *nfit counts the nodes that fit. */
static uint32_t runner_up(crater_sched_t *s,
                          const crater_request_t *r,
                          uint32_t skip,
                          uint32_t *nfit)
{
    uint32_t best = CRATER_SCHED_NO_NODE;
    double bscore = 0;
    struct sched_ctx c;

    *nfit = 0;
    for (uint32_t n = 0; n < s->n; n++) {
        if (sched__eval(s, n, r, &c) < 0)
            continue;
        (*nfit)++;
        if (n != skip && (best == CRATER_SCHED_NO_NODE || c.p.score > bscore)) {
            best = n;
            bscore = c.p.score;
        }
    }
    return best;
}

static json_t *placed_json(crater_sched_t *s,
                           const struct task *t,
                           const crater_request_t *r)
{
    uint32_t nfit, ru = runner_up(s, r, t->p.node, &nfit);
    json_t *o = json_object(), *chosen = node_score_json(s, t->p.node, r);
    json_t *second =
        ru == CRATER_SCHED_NO_NODE ? json_null() : node_score_json(s, ru, r);
    int bad = !o || !chosen || !second;

    if (!bad && ru != CRATER_SCHED_NO_NODE
        && json_is_true(json_object_get(chosen, "fits")))
        bad |=
            put(o,
                "margin",
                json_real(json_real_value(json_object_get(chosen, "score"))
                          - json_real_value(json_object_get(second, "score"))));
    bad |= put(o, "policy", json_string(crater_sched_policy(s)));
    bad |= put(o, "nodes", json_integer(s->n));
    bad |= put(o, "fit", json_integer(nfit));
    bad |= put(o, "chosen", json_incref(chosen));
    bad |= put(o, "runner_up", json_incref(second));
    json_decref(chosen);
    json_decref(second);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *crater_sched_explain_placed(crater_sched_t *s,
                                    uint64_t task,
                                    const crater_request_t *req)
{
    struct task *t = sched__task_find(s, task);
    json_t *o;

    if (!t)
        return NULL;
    sched__apply(s, &t->p, -1); /* exact; restored below */
    o = placed_json(s, t, req);
    sched__apply(s, &t->p, +1);
    return o;
}
