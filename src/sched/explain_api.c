/* explain_api.c - crater_sched_explain(): the structured form of the
 * explanation crater_sched_place() gives as text, for the API and the CLI
 * ("why is my job pending?").
 *
 * It runs the same aggregation (sched__explain_run over node classes, the
 * fast path's view) and turns struct sched_explain into JSON field by
 * field, so the JSON and the text can never disagree: "message" is the
 * very text the error carries. Reasons with no quantity (a taint, a
 * cordon) carry no need/have/unit.
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
