/* test_queue.c - the pending-job queue: priority classes, every ordering
 * key alone and combined (table-driven, pushed forwards and backwards so
 * the order cannot depend on storage), EDF and expired hard deadlines,
 * weighted fair share with exact shares, progressive filling checked
 * against an O(n^2) reference on random queues, the EASY backfill rule at
 * its boundaries, and the error paths of push/remove/weights. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/queue.h"

#define N_MAX 16

static crater_queue_entry_t ent(
    uint64_t id, const char *tenant, int32_t prio, int64_t dl, uint64_t sub)
{
    return (crater_queue_entry_t){
        .id = id,
        .tenant = (char *)tenant,
        .priority = prio,
        .deadline_ms = dl,
        .submit_ms = sub,
    };
}

static void push_ok(crater_queue_t *q, crater_queue_entry_t e)
{
    crater_error_t err;

    ck_assert_msg(crater_queue_push(q, &e, &err) == 0,
                  "push %llu: %s",
                  (unsigned long long)e.id,
                  err.text);
}

/* Order q and compare with want[0..n). */
static void expect_order(const crater_queue_t *q,
                         uint64_t now,
                         const crater_share_input_t *share,
                         const uint64_t *want,
                         size_t n)
{
    uint64_t got[N_MAX];
    crater_error_t err;

    ck_assert_uint_eq(crater_queue_count(q), n);
    ck_assert_msg(crater_queue_order(q, now, share, got, &err) == 0,
                  "order: %s",
                  err.text);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i],
                      "position %zu: got id %llu, want %llu",
                      i,
                      (unsigned long long)got[i],
                      (unsigned long long)want[i]);
}

/* ---- priority classes ------------------------------------------------ */

START_TEST(priority_class_lookup)
{
    static const struct {
        const char *name;
        int32_t value;
    } want[] = {
        {"critical", 1000000},
        {"high", 1000},
        {"normal", 0},
        {"low", -1000},
        {"best-effort", -1000000},
    };
    int32_t v;

    for (size_t i = 0; i < 5; i++) {
        v = 42;
        ck_assert_int_eq(crater_priority_class_value(want[i].name, &v), 0);
        ck_assert_int_eq(v, want[i].value);
        ck_assert_str_eq(crater_priority_class_name(i), want[i].name);
    }
    ck_assert_ptr_null(crater_priority_class_name(5));
    v = 42;
    ck_assert_int_eq(crater_priority_class_value("High", &v), -1);
    ck_assert_int_eq(crater_priority_class_value("urgent", &v), -1);
    ck_assert_int_eq(crater_priority_class_value("", &v), -1);
    ck_assert_int_eq(crater_priority_class_value(NULL, &v), -1);
    ck_assert_int_eq(v, 42);
    ck_assert_str_eq(crater_priority_class_list(),
                     "critical, high, normal, low, best-effort");
}
END_TEST

START_TEST(effective_priority)
{
    crater_error_t err;
    int32_t v = 7;

    ck_assert_int_eq(crater_effective_priority(NULL, -5, &v, &err), 0);
    ck_assert_int_eq(v, -5);
    ck_assert_int_eq(crater_effective_priority("high", -5, &v, &err), 0);
    ck_assert_int_eq(v, 1000); /* the class wins over the number */
    ck_assert_int_eq(crater_effective_priority("best-effort", 9, &v, &err), 0);
    ck_assert_int_eq(v, -1000000);
    v = 7;
    ck_assert_int_eq(crater_effective_priority("urgent", 3, &v, &err), -1);
    ck_assert_int_eq(v, 7);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "priorityClass");
    ck_assert_str_eq(err.text,
                     "unknown priority class 'urgent' (known: critical, "
                     "high, normal, low, best-effort)");
}
END_TEST

/* ---- ordering, one key at a time and combined ---------------------------
 * Every case is pushed in table order and in reverse: same result. */

typedef struct order_case {
    const char *name;
    size_t n;
    crater_queue_entry_t e[N_MAX];
    uint64_t want[N_MAX];
} order_case_t;

/* ent() as a constant initializer, for the static table */
#define E(i, t, p, dl, sub)                                             \
    {                                                                   \
        .id = (i), .tenant = (t), .priority = (p), .deadline_ms = (dl), \
        .submit_ms = (sub)                                              \
    }

static const order_case_t order_cases[] = {
    {"priority only",
     5,
     {E(1, "a", 0, 0, 0),
      E(2, "a", 1000000, 0, 0),
      E(3, "a", -1000, 0, 0),
      E(4, "a", 1, 0, 0),
      E(5, "a", -1000000, 0, 0)},
     {2, 4, 1, 3, 5}},
    {"deadline only: EDF, deadline before none",
     4,
     {E(1, "a", 0, 0, 0),
      E(2, "a", 0, 300, 0),
      E(3, "a", 0, 100, 0),
      E(4, "a", 0, 200, 0)},
     {3, 4, 2, 1}},
    {"age only",
     3,
     {E(1, "a", 0, 0, 30), E(2, "a", 0, 0, 10), E(3, "a", 0, 0, 20)},
     {2, 3, 1}},
    {"id only",
     3,
     {E(30, "a", 0, 0, 5), E(10, "a", 0, 0, 5), E(20, "a", 0, 0, 5)},
     {10, 20, 30}},
    {"priority beats deadline and age",
     3,
     {E(1, "a", 0, 10, 1), E(2, "a", 5, 0, 9), E(3, "a", 5, 900, 50)},
     {3, 2, 1}},
    {"deadline beats age, equal deadline falls to age then id",
     5,
     {E(1, "a", 0, 0, 1),
      E(2, "a", 0, 500, 40),
      E(3, "a", 0, 500, 20),
      E(4, "a", 0, 400, 99),
      E(5, "a", 0, 500, 20)},
     {4, 3, 5, 2, 1}},
    {"all keys: priority, deadline, age, id",
     8,
     {E(8, "a", 0, 0, 1),
      E(7, "a", 0, 0, 1),
      E(6, "a", 0, 0, 0),
      E(5, "a", 0, 50, 9),
      E(4, "a", 0, 20, 9),
      E(3, "a", 1, 0, 9),
      E(2, "a", 1, 99, 9),
      E(1, "a", -1, 1, 0)},
     {2, 3, 4, 5, 6, 7, 8, 1}},
    {"tenants at equal share: head age then id decide",
     4,
     {E(1, "b", 0, 0, 5),
      E(2, "a", 0, 0, 5),
      E(3, "c", 0, 0, 3),
      E(4, "a", 0, 0, 9)},
     {3, 1, 2, 4}},
};

static void run_order_case(const order_case_t *c, bool reverse)
{
    crater_queue_t *q = crater_queue_create();

    for (size_t i = 0; i < c->n; i++)
        push_ok(q, c->e[reverse ? c->n - 1 - i : i]);
    expect_order(q, 0, NULL, c->want, c->n);
    crater_queue_destroy(q);
}

START_TEST(order_table)
{
    const order_case_t *c = &order_cases[_i];

    ck_assert_msg(c->n <= N_MAX, "%s", c->name);
    run_order_case(c, false);
    run_order_case(c, true);
}
END_TEST

START_TEST(edf_soft_and_hard_deadlines_share_one_order)
{
    crater_queue_t *q = crater_queue_create();
    crater_queue_entry_t e;
    uint64_t want[] = {2, 1, 3, 4};

    e = ent(1, "a", 0, 200, 0);
    e.hard_deadline = true;
    push_ok(q, e);
    push_ok(q, ent(2, "a", 0, 100, 0)); /* soft, earlier: first */
    e = ent(3, "a", 0, 300, 0);
    e.hard_deadline = true;
    push_ok(q, e);
    push_ok(q, ent(4, "a", 0, 0, 0));
    expect_order(q, 0, NULL, want, 4);
    crater_queue_destroy(q);
}
END_TEST

START_TEST(expired_hard_deadlines_reported_not_dropped)
{
    static const struct {
        uint64_t id;
        int64_t dl;
        bool hard;
        uint64_t est;
    } jobs[] = {
        {1, 2000, true, 1000},       /* now + est == dl: still meetable */
        {2, 2000, true, 1001},       /* one ms too late: expired */
        {3, 1500, false, 5000},      /* soft: never expires */
        {4, 999, true, 0},           /* unknown runtime, deadline passed */
        {5, 1000, true, 0},          /* unknown runtime, deadline now */
        {6, 5000, true, 0},          /* unknown runtime, in the future */
        {7, 0, false, 9999},         /* no deadline */
        {8, 2000, true, UINT64_MAX}, /* no overflow in now + est */
    };
    crater_queue_t *q = crater_queue_create();
    uint64_t ids[8] = {0};

    for (size_t i = 0; i < 8; i++) {
        crater_queue_entry_t e = ent(jobs[i].id, "a", 0, jobs[i].dl, 0);
        e.hard_deadline = jobs[i].hard;
        e.est_runtime_ms = jobs[i].est;
        push_ok(q, e);
    }
    ck_assert_uint_eq(crater_queue_expired(q, 1000, NULL), 3);
    ck_assert_uint_eq(crater_queue_expired(q, 1000, ids), 3);
    ck_assert_uint_eq(ids[0], 2);
    ck_assert_uint_eq(ids[1], 4);
    ck_assert_uint_eq(ids[2], 8);
    /* reported, not removed: still queued and still ordered */
    ck_assert_uint_eq(crater_queue_count(q), 8);
    ck_assert_ptr_nonnull(crater_queue_get(q, 2));
    /* earlier, fewer have expired; later, more */
    ck_assert_uint_eq(crater_queue_expired(q, 0, ids), 1); /* only 8 */
    ck_assert_uint_eq(ids[0], 8);
    /* at 1001 job 1 (1000 ms left to run) and job 5 are out of time too */
    ck_assert_uint_eq(crater_queue_expired(q, 1001, ids), 5);
    ck_assert_uint_eq(ids[0], 1);
    ck_assert_uint_eq(ids[3], 5);
    ck_assert_uint_eq(ids[4], 8);
    crater_queue_destroy(q);
}
END_TEST

/* ---- fair share -------------------------------------------------------- */

START_TEST(dominant_share_formula)
{
    double cap[4] = {8, 64, 256, 0};
    double a[4] = {1, 48, 64, 1e9}; /* disk ignored: capacity 0 */

    ck_assert(crater_weighted_dominant_share(a, cap, 1.0) == 0.75);
    ck_assert(crater_weighted_dominant_share(a, cap, 2.0) == 0.375);
    ck_assert(crater_weighted_dominant_share(a, cap, 0.5) == 1.5);
    double z[4] = {0};
    ck_assert(crater_weighted_dominant_share(z, cap, 1.0) == 0.0);
}
END_TEST

/* Equal usage ratio (4 of 8 GPUs each): weight 2 halves a's share to 0.25
 * against b's 0.5, so a goes first although b's job is older. */
START_TEST(fair_share_weight_two_goes_first)
{
    crater_queue_t *q = crater_queue_create();
    crater_tenant_usage_t use[] = {{"a", {4, 0, 0, 0}}, {"b", {4, 0, 0, 0}}};
    crater_share_input_t in = {{8, 0, 0, 0}, use, 2};
    crater_error_t err;
    uint64_t by_age[] = {1, 2}, by_weight[] = {2, 1};

    push_ok(q, ent(1, "b", 0, 0, 10));
    push_ok(q, ent(2, "a", 0, 0, 20));
    expect_order(q, 0, &in, by_age, 2); /* equal weights: age decides */
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "a", 2.0, &err), 0);
    ck_assert(crater_queue_tenant_weight(q, "a") == 2.0);
    ck_assert(crater_queue_tenant_weight(q, "b") == 1.0);
    expect_order(q, 0, &in, by_weight, 2);
    /* b with weight 4 is at 0.125 < 0.25: back to b first */
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "b", 4.0, &err), 0);
    expect_order(q, 0, &in, by_age, 2);
    crater_queue_destroy(q);
}
END_TEST

/* Dominant share takes the max over dimensions: a holds 1/8 GPUs but
 * 48/64 CPUs (0.75); b holds 4/8 GPUs (0.5). b goes first. */
START_TEST(fair_share_uses_dominant_dimension)
{
    crater_queue_t *q = crater_queue_create();
    crater_tenant_usage_t use[] = {{"a", {1, 48, 0, 0}},
                                   {"b", {4, 0, 0, 0}},
                                   {"idle", {8, 64, 256, 100}}};
    crater_share_input_t in = {{8, 64, 256, 100}, use, 3};
    uint64_t want[] = {2, 1};

    push_ok(q, ent(1, "a", 0, 0, 1));
    push_ok(q, ent(2, "b", 0, 0, 2));
    expect_order(q, 0, &in, want, 2); /* "idle" has no job: ignored */
    crater_queue_destroy(q);
}
END_TEST

/* Progressive filling: each emitted job charges its demand (1 of 4 GPUs,
 * 0.25) to its tenant. Equal weights alternate; with weight 2, a's jobs
 * cost it 0.125 each, so it gets two for b's one. */
START_TEST(fair_share_progressive_filling)
{
    crater_queue_t *q = crater_queue_create();
    crater_share_input_t in = {{4, 0, 0, 0}, NULL, 0};
    crater_error_t err;
    uint64_t alternate[] = {1, 4, 2, 5, 3, 6};
    uint64_t weighted[] = {1, 4, 2, 3, 5, 6};

    for (uint64_t i = 1; i <= 6; i++) {
        crater_queue_entry_t e = ent(i, i <= 3 ? "a" : "b", 0, 0, i);
        e.demand[CRATER_QDIM_GPU] = 1;
        push_ok(q, e);
    }
    expect_order(q, 0, &in, alternate, 6);
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "a", 2.0, &err), 0);
    expect_order(q, 0, &in, weighted, 6);
    crater_queue_destroy(q);
}
END_TEST

/* Charges carry across tie groups: a's priority-10 job takes all 4 GPUs,
 * so in the priority-0 group b's newer job goes before a's older one. */
START_TEST(fair_share_charges_carry_over_groups)
{
    crater_queue_t *q = crater_queue_create();
    crater_share_input_t in = {{4, 0, 0, 0}, NULL, 0};
    crater_queue_entry_t e = ent(1, "a", 10, 0, 50);
    uint64_t want[] = {1, 3, 2};

    e.demand[CRATER_QDIM_GPU] = 4;
    push_ok(q, e);
    push_ok(q, ent(2, "a", 0, 0, 1));
    push_ok(q, ent(3, "b", 0, 0, 2));
    expect_order(q, 0, &in, want, 3);
    crater_queue_destroy(q);
}
END_TEST

/* Fair share is key 3: it never overrides priority or deadline. */
START_TEST(fair_share_below_priority_and_deadline)
{
    crater_queue_t *q = crater_queue_create();
    crater_tenant_usage_t use[] = {{"hog", {8, 0, 0, 0}}};
    crater_share_input_t in = {{8, 0, 0, 0}, use, 1};
    uint64_t want[] = {1, 2, 3, 4};

    push_ok(q, ent(1, "hog", 5, 0, 9));
    push_ok(q, ent(2, "hog", 0, 100, 9));
    push_ok(q, ent(3, "new", 0, 0, 9));
    push_ok(q, ent(4, "hog", 0, 0, 1));
    expect_order(q, 0, &in, want, 4);
    crater_queue_destroy(q);
}
END_TEST

START_TEST(share_input_errors)
{
    crater_queue_t *q = crater_queue_create();
    crater_tenant_usage_t dup[] = {{"a", {0}},
                                   {"b", {0}},
                                   {"c", {0}},
                                   {"b", {0}}};
    crater_tenant_usage_t nan[] = {{"a", {0, NAN, 0, 0}}};
    crater_tenant_usage_t neg[] = {{"a", {0, 0, -1, 0}}};
    crater_tenant_usage_t null[] = {{"a", {0}}, {NULL, {0}}};
    crater_share_input_t in = {{1, 1, 1, 1}, dup, 4};
    crater_error_t err;
    uint64_t ids[1];

    push_ok(q, ent(1, "a", 0, 0, 0));
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_str_eq(err.field, "usage.tenant");
    ck_assert_str_eq(err.text, "usage[3]: tenant 'b' is listed twice");
    in.usage = nan;
    in.nusage = 1;
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_str_eq(err.text, "usage.alloc[0][1] must be finite and >= 0");
    in.usage = neg;
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), -1);
    ck_assert_str_eq(err.text, "usage.alloc[0][2] must be finite and >= 0");
    in.usage = null;
    in.nusage = 2;
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), -1);
    ck_assert_str_eq(err.text, "usage[1]: no tenant");
    in.nusage = 1;
    in.capacity[3] = -1;
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_str_eq(err.text, "capacity[3] must be finite and >= 0");
    in.capacity[3] = INFINITY;
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), -1);
    in.capacity[3] = 0;
    ck_assert_int_eq(crater_queue_order(q, 0, &in, ids, &err), 0);
    ck_assert_uint_eq(ids[0], 1);
    crater_queue_destroy(q);
}
END_TEST

START_TEST(tenant_weight_errors)
{
    crater_queue_t *q = crater_queue_create();
    crater_error_t err;
    const double bad[] = {0.0, -1.0, NAN, INFINITY};

    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(crater_queue_set_tenant_weight(q, "a", bad[i], &err),
                         -1);
        ck_assert_int_eq(err.errnum, CRATER_ERANGE);
        ck_assert_str_eq(err.field, "weight");
    }
    ck_assert_str_eq(err.text, "tenant 'a': weight inf must be > 0");
    ck_assert(crater_queue_tenant_weight(q, "a") == 1.0);
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "", 2, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EINVAL);
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, NULL, 2, &err), -1);
    /* set before the tenant has jobs; kept after its last job leaves */
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "a", 3, &err), 0);
    push_ok(q, ent(1, "a", 0, 0, 0));
    ck_assert_int_eq(crater_queue_remove(q, 1, &err), 0);
    ck_assert(crater_queue_tenant_weight(q, "a") == 3.0);
    ck_assert(crater_queue_tenant_weight(q, NULL) == 1.0);
    crater_queue_destroy(q);
}
END_TEST

/* ---- aging ------------------------------------------------------------- */

START_TEST(age_boost)
{
    crater_queue_t *q = crater_queue_create();
    crater_error_t err;
    uint64_t plain[] = {2, 1}, boosted[] = {1, 2};

    push_ok(q, ent(1, "a", 0, 0, 0));     /* old, low priority */
    push_ok(q, ent(2, "a", 20, 0, 5000)); /* new, priority 20 */
    expect_order(q, 5000, NULL, plain, 2);
    /* +10 per full second waited, at most 25: job 1 gets 25 > 20 */
    ck_assert_int_eq(crater_queue_set_age_boost(q, 1000, 10, 25, &err), 0);
    expect_order(q, 5000, NULL, boosted, 2);
    /* after 1.999 s only one step: 10 < 20 */
    expect_order(q, 1999, NULL, plain, 2);
    /* after 2 s, 20 == 20: tie on priority, age decides */
    expect_order(q, 2000, NULL, boosted, 2);
    /* cap below the gap: never overtakes */
    ck_assert_int_eq(crater_queue_set_age_boost(q, 1000, 10, 19, &err), 0);
    expect_order(q, UINT64_MAX, NULL, plain, 2);
    ck_assert_int_eq(crater_queue_set_age_boost(q, 0, 10, 25, &err), 0);
    expect_order(q, 5000, NULL, plain, 2); /* interval 0: off */
    ck_assert_int_eq(crater_queue_set_age_boost(q, 1000, -1, 25, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ERANGE);
    ck_assert_str_eq(err.field, "ageBoost.step");
    ck_assert_int_eq(crater_queue_set_age_boost(q, 1000, 1, -1, &err), -1);
    ck_assert_str_eq(err.field, "ageBoost.cap");
    crater_queue_destroy(q);
}
END_TEST

/* ---- push / remove ----------------------------------------------------- */

START_TEST(push_duplicate_id_is_an_error)
{
    crater_queue_t *q = crater_queue_create();
    crater_queue_entry_t e = ent(7, "a", 1, 0, 0);
    crater_error_t err;

    push_ok(q, e);
    e.tenant = "b";
    ck_assert_int_eq(crater_queue_push(q, &e, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_EEXIST);
    ck_assert_str_eq(err.field, "id");
    ck_assert_str_eq(err.text, "job 7 is already queued");
    ck_assert_uint_eq(crater_queue_count(q), 1);
    ck_assert_str_eq(crater_queue_get(q, 7)->tenant, "a");
    crater_queue_destroy(q);
}
END_TEST

START_TEST(remove_unknown_id_is_an_error)
{
    crater_queue_t *q = crater_queue_create();
    crater_error_t err;

    ck_assert_int_eq(crater_queue_remove(q, 3, &err), -1); /* empty queue */
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_str_eq(err.text, "job 3 is not queued");
    push_ok(q, ent(3, "a", 0, 0, 0));
    ck_assert_int_eq(crater_queue_remove(q, 4, &err), -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(crater_queue_remove(q, 3, &err), 0);
    ck_assert_int_eq(crater_queue_remove(q, 3, &err), -1);
    ck_assert_uint_eq(crater_queue_count(q), 0);
    ck_assert_ptr_null(crater_queue_get(q, 3));
    crater_queue_destroy(q);
}
END_TEST

START_TEST(push_rejects_bad_entries)
{
    static const struct {
        const char *field;
        crater_errno_t errnum;
    } want[] = {
        {"tenant", CRATER_EINVAL},
        {"tenant", CRATER_EINVAL},
        {"deadline_ms", CRATER_ERANGE},
        {"hard_deadline", CRATER_ECONFLICT},
        {"demand[2]", CRATER_ERANGE},
        {"demand[0]", CRATER_ERANGE},
        {"demand[3]", CRATER_ERANGE},
    };
    crater_queue_entry_t e[7];
    crater_queue_t *q = crater_queue_create();
    crater_error_t err;

    for (size_t i = 0; i < 7; i++)
        e[i] = ent(i + 1, "a", 0, 0, 0);
    e[0].tenant = NULL;
    e[1].tenant = "";
    e[2].deadline_ms = -1;
    e[3].hard_deadline = true;
    e[4].demand[2] = NAN;
    e[5].demand[0] = -0.5;
    e[6].demand[3] = INFINITY;
    for (size_t i = 0; i < 7; i++) {
        ck_assert_int_eq(crater_queue_push(q, &e[i], &err), -1);
        ck_assert_int_eq(err.errnum, want[i].errnum);
        ck_assert_str_eq(err.field, want[i].field);
    }
    ck_assert_str_eq(err.text, "demand inf must be finite and >= 0");
    ck_assert_uint_eq(crater_queue_count(q), 0);
    crater_queue_destroy(q);
}
END_TEST

START_TEST(push_copies_entry)
{
    crater_queue_t *q = crater_queue_create();
    char tenant[8] = "team-x";
    crater_queue_entry_t e = ent(9, tenant, 3, 77, 5);
    const crater_queue_entry_t *got;

    e.hard_deadline = true;
    e.est_runtime_ms = 12;
    e.demand[1] = 2.5;
    push_ok(q, e);
    strcpy(tenant, "zz");
    got = crater_queue_get(q, 9);
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got->tenant, "team-x");
    ck_assert_int_eq(got->priority, 3);
    ck_assert_int_eq(got->deadline_ms, 77);
    ck_assert(got->hard_deadline);
    ck_assert_uint_eq(got->submit_ms, 5);
    ck_assert_uint_eq(got->est_runtime_ms, 12);
    ck_assert(got->demand[1] == 2.5);
    crater_queue_destroy(q);
    crater_queue_destroy(NULL);
}
END_TEST

/* Many pushes and removes through table growth and backward-shift
 * deletion: every survivor is still found, every removed id is gone. */
START_TEST(push_remove_many)
{
    enum {
        N = 20000
    };
    crater_queue_t *q = crater_queue_create();
    crater_error_t err;
    static uint64_t ids[N];

    srand(7);
    for (size_t i = 0; i < N; i++) {
        /* sparse, clustered ids stress probing */
        ids[i] = (uint64_t)i * 1024 + (uint64_t)(rand() % 3);
        push_ok(q, ent(ids[i], i % 2 ? "odd" : "even", 0, 0, 0));
    }
    for (size_t i = 0; i < N; i += 3)
        ck_assert_int_eq(crater_queue_remove(q, ids[i], &err), 0);
    ck_assert_uint_eq(crater_queue_count(q), N - (N + 2) / 3);
    for (size_t i = 0; i < N; i++) {
        const crater_queue_entry_t *e = crater_queue_get(q, ids[i]);
        if (i % 3 == 0) {
            ck_assert_ptr_null(e);
            continue;
        }
        ck_assert_ptr_nonnull(e);
        ck_assert_uint_eq(e->id, ids[i]);
        ck_assert_str_eq(e->tenant, i % 2 ? "odd" : "even");
    }
    crater_queue_destroy(q);
}
END_TEST

/* ---- progressive filling against an O(n^2) reference ------------------- */

typedef struct ref {
    crater_queue_entry_t e;
    char tenant[4];
    bool done;
} ref_t;

/* a "comes before" b with tenant shares sh[] (the definition in queue.h,
 * evaluated directly). */
static bool ref_before(const ref_t *a, const ref_t *b, const double *sh)
{
    const crater_queue_entry_t *x = &a->e, *y = &b->e;
    double sx = sh[x->tenant[0] - 'a'], sy = sh[y->tenant[0] - 'a'];

    if (x->priority != y->priority)
        return x->priority > y->priority;
    if ((x->deadline_ms != 0) != (y->deadline_ms != 0))
        return x->deadline_ms != 0;
    if (x->deadline_ms != y->deadline_ms)
        return x->deadline_ms < y->deadline_ms;
    if (sx != sy)
        return sx < sy;
    if (x->submit_ms != y->submit_ms)
        return x->submit_ms < y->submit_ms;
    return x->id < y->id;
}

static void ref_order(ref_t *r,
                      size_t n,
                      double alloc[][4],
                      const double *cap,
                      const double *w,
                      uint64_t *out)
{
    double sh[5];

    for (size_t k = 0; k < n; k++) {
        for (int t = 0; t < 5; t++)
            sh[t] = crater_weighted_dominant_share(alloc[t], cap, w[t]);
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            if (!r[i].done && (best == n || ref_before(&r[i], &r[best], sh)))
                best = i;
        }
        r[best].done = true;
        out[k] = r[best].e.id;
        for (int d = 0; d < 4; d++)
            alloc[r[best].e.tenant[0] - 'a'][d] += r[best].e.demand[d];
    }
}

static void random_entry(ref_t *r, uint64_t id)
{
    r->tenant[0] = (char)('a' + rand() % 5);
    r->tenant[1] = '\0';
    r->e = ent(id, r->tenant, rand() % 3, rand() % 4 ? 0 : rand() % 4, 0);
    r->e.submit_ms = (uint64_t)(rand() % 50);
    for (int d = 0; d < 4; d++)
        r->e.demand[d] = rand() % 4 == 0 ? 0 : (double)(rand() % 8);
    r->done = false;
}

START_TEST(order_matches_reference)
{
    enum {
        N = 600
    };
    static ref_t r[N];
    static uint64_t got[N], want[N];
    const char *names[] = {"a", "b", "c", "d", "e"};
    double cap[4] = {64, 512, 2048, 0}, w[5] = {1, 2, 0.5, 1, 3};
    crater_tenant_usage_t use[5];
    crater_share_input_t in = {{64, 512, 2048, 0}, use, 5};
    double alloc[5][4];
    crater_error_t err;

    srand(42 + (unsigned)_i);
    crater_queue_t *q = crater_queue_create();
    for (int t = 0; t < 5; t++) {
        use[t].tenant = names[t];
        for (int d = 0; d < 4; d++)
            alloc[t][d] = use[t].alloc[d] = (double)(rand() % 200);
        ck_assert_int_eq(crater_queue_set_tenant_weight(q,
                                                        names[t],
                                                        w[t],
                                                        &err),
                         0);
    }
    for (size_t i = 0; i < N; i++) {
        random_entry(&r[i], (uint64_t)(rand() % 100000) * N + i);
        push_ok(q, r[i].e);
    }
    ck_assert_int_eq(crater_queue_order(q, 0, &in, got, &err), 0);
    ref_order(r, N, alloc, cap, w, want);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(got[i] == want[i], "seed %d position %zu", _i, i);
    crater_queue_destroy(q);
}
END_TEST

/* 100k pending jobs, 100 tenants: the order is a permutation (O(n log n);
 * this must stay well inside the test timeout even under ASan). */
START_TEST(order_large)
{
    enum {
        N = 100000
    };
    crater_queue_t *q = crater_queue_create();
    crater_share_input_t in = {{1e4, 1e6, 1e9, 1e5}, NULL, 0};
    uint64_t *out = malloc(N * sizeof(*out));
    char *seen = calloc(N, 1);
    char name[8];
    crater_error_t err;

    srand(3);
    for (uint64_t i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "t%d", rand() % 100);
        crater_queue_entry_t e =
            ent(i, name, rand() % 4, rand() % 2 ? 0 : rand() % 1000, i % 97);
        e.demand[CRATER_QDIM_GPU] = rand() % 8;
        push_ok(q, e);
    }
    ck_assert_int_eq(crater_queue_order(q, 0, &in, out, &err), 0);
    for (size_t i = 0; i < N; i++) {
        ck_assert_uint_lt(out[i], N);
        ck_assert_int_eq(seen[out[i]], 0);
        seen[out[i]] = 1;
    }
    /* priority never goes up along the order */
    for (size_t i = 1; i < N; i++)
        ck_assert_int_le(crater_queue_get(q, out[i])->priority,
                         crater_queue_get(q, out[i - 1])->priority);
    free(seen);
    free(out);
    crater_queue_destroy(q);
}
END_TEST

/* Without share input and age boost the order is crater_queue_entry_cmp's
 * (what the pass merges by), whatever the tenants. */
START_TEST(entry_cmp_is_the_order)
{
    enum {
        N = 3000
    };
    crater_queue_t *q = crater_queue_create();
    uint64_t *out = malloc(N * sizeof(*out));
    const crater_queue_entry_t **e = malloc(N * sizeof(*e));
    char name[8];
    crater_error_t err;
    size_t n;

    srand(5);
    for (uint64_t i = 1; i <= N; i++) {
        snprintf(name, sizeof(name), "t%d", rand() % 7);
        push_ok(q,
                ent(i * 7919 % 100003,
                    name,
                    (rand() % 3 - 1) * 1000,
                    rand() % 4 ? 0 : 1 + rand() % 50,
                    (uint64_t)(rand() % 40)));
    }
    for (uint64_t i = 1; i <= N; i += 3)
        crater_queue_remove(q, i * 7919 % 100003, NULL);
    n = crater_queue_count(q);
    ck_assert(crater_queue_order_is_static(q));
    ck_assert_int_eq(crater_queue_order(q, 12345, NULL, out, &err), 0);
    for (size_t i = 0; i < n; i++)
        e[i] = crater_queue_get(q, out[i]);
    for (size_t i = 1; i < n; i++)
        ck_assert_int_lt(crater_queue_entry_cmp(e[i - 1], e[i]), 0);
    ck_assert_int_eq(crater_queue_entry_cmp(e[0], e[0]), 0);
    ck_assert_int_eq(crater_queue_set_age_boost(q, 1000, 1, 10, &err), 0);
    ck_assert(!crater_queue_order_is_static(q));
    free(e);
    free(out);
    crater_queue_destroy(q);
}
END_TEST

/* ---- backfill ---------------------------------------------------------- */

START_TEST(backfill_cases)
{
    static const struct {
        const char *why;
        uint64_t now, est;
        double demand[4];
        crater_backfill_verdict_t want;
    } cases[] = {
        {"ends exactly at shadow", 400, 600, {9, 0, 0, 0}, 1},
        {"ends before shadow", 400, 1, {9, 9, 9, 9}, 1},
        {"ends 1 ms after shadow, too big for extra",
         400,
         601,
         {3, 0, 0, 0},
         0},
        {"ends after shadow, fits extra", 400, 601, {2, 16, 0, 0}, 2},
        {"one dimension over extra", 400, 601, {1, 17, 0, 0}, 0},
        {"unknown runtime, fits extra", 400, 0, {1, 0, 0, 0}, 2},
        {"unknown runtime, too big", 400, 0, {3, 0, 0, 0}, 0},
        {"unknown runtime, zero demand", 400, 0, {0, 0, 0, 0}, 2},
        {"shadow already past", 1500, 1, {3, 0, 0, 0}, 0},
        {"now == shadow, runtime 1", 1000, 1, {3, 0, 0, 0}, 0},
        {"huge runtime: no overflow", 400, UINT64_MAX, {3, 0, 0, 0}, 0},
        {"NaN demand never fits", 400, 0, {NAN, 0, 0, 0}, 0},
        {"ends at shadow and fits extra: shadow wins", 0, 1000, {1}, 1},
    };
    crater_backfill_window_t w = {1000, {2, 16, 0, 0}};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(crater_backfill_check(&w,
                                            cases[i].now,
                                            cases[i].est,
                                            cases[i].demand)
                          == cases[i].want,
                      "%s",
                      cases[i].why);
    ck_assert_str_eq(crater_backfill_verdict_name(CRATER_BACKFILL_DENY),
                     "deny");
    ck_assert_str_eq(crater_backfill_verdict_name(
                         CRATER_BACKFILL_BEFORE_SHADOW),
                     "before-shadow");
    ck_assert_str_eq(crater_backfill_verdict_name(CRATER_BACKFILL_EXTRA),
                     "extra");
}
END_TEST

/* Jobs started on the extra use it up; jobs that end before the shadow
 * time do not. */
START_TEST(backfill_commit_consumes_extra)
{
    crater_backfill_window_t w = {1000, {2, 0, 0, 0}};
    double one[4] = {1, 0, 0, 0};
    crater_backfill_verdict_t v;

    v = crater_backfill_check(&w, 0, 500, one);
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    crater_backfill_commit(&w, v, one);
    ck_assert(w.extra[0] == 2);
    for (int i = 0; i < 2; i++) {
        v = crater_backfill_check(&w, 0, 0, one);
        ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
        crater_backfill_commit(&w, v, one);
    }
    ck_assert(w.extra[0] == 0);
    ck_assert_int_eq(crater_backfill_check(&w, 0, 0, one),
                     CRATER_BACKFILL_DENY);
    ck_assert_int_eq(crater_backfill_check(&w, 0, 2000, one),
                     CRATER_BACKFILL_DENY);
    ck_assert_int_eq(crater_backfill_check(&w, 0, 1000, one),
                     CRATER_BACKFILL_BEFORE_SHADOW);
}
END_TEST

/* ---- the worked example in doc/queue.md -------------------------------- */

#define MIN 60000ull /* the doc counts in minutes since 00:00 */

static crater_queue_entry_t doc_job(uint64_t id,
                                    const char *tenant,
                                    const char *cls,
                                    uint64_t submit_min,
                                    double gpu,
                                    double cpu,
                                    double mem)
{
    crater_queue_entry_t e = ent(id, tenant, 0, 0, submit_min * MIN);
    crater_error_t err;

    ck_assert_int_eq(crater_effective_priority(cls, 0, &e.priority, &err), 0);
    e.demand[CRATER_QDIM_GPU] = gpu;
    e.demand[CRATER_QDIM_CPU] = cpu;
    e.demand[CRATER_QDIM_MEM] = mem;
    return e;
}

START_TEST(doc_worked_example_order)
{
    crater_queue_t *q = crater_queue_create();
    crater_tenant_usage_t use[] = {{"vision", {8, 32, 256, 0}},
                                   {"nlp", {2, 96, 512, 0}}};
    crater_share_input_t in = {{16, 256, 2048, 0}, use, 2};
    crater_queue_entry_t e;
    crater_error_t err;
    uint64_t ids[8];
    uint64_t want[] = {101, 102, 104, 105, 106, 107};
    uint64_t by_age[] = {101, 102, 105, 104, 106, 107};

    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "vision", 2, &err), 0);
    push_ok(q, doc_job(101, "nlp", "high", 540, 1, 8, 64));
    e = doc_job(102, "vision", "normal", 570, 2, 8, 64);
    e.deadline_ms = 720 * MIN;
    push_ok(q, e);
    e = doc_job(103, "ops", "normal", 555, 1, 4, 32);
    e.deadline_ms = 660 * MIN;
    e.hard_deadline = true;
    e.est_runtime_ms = 120 * MIN;
    push_ok(q, e);
    push_ok(q, doc_job(104, "vision", "normal", 550, 4, 16, 128));
    push_ok(q, doc_job(105, "nlp", "normal", 545, 1, 8, 64));
    push_ok(q, doc_job(106, "vision", "normal", 560, 4, 16, 128));
    push_ok(q, doc_job(107, "ops", "low", 480, 1, 4, 32));
    ck_assert(crater_weighted_dominant_share(use[0].alloc, in.capacity, 2)
              == 0.25);
    ck_assert(crater_weighted_dominant_share(use[1].alloc, in.capacity, 1)
              == 0.375);
    ck_assert_uint_eq(crater_queue_expired(q, 600 * MIN, ids), 1);
    ck_assert_uint_eq(ids[0], 103);
    ck_assert_int_eq(crater_queue_remove(q, 103, &err), 0);
    expect_order(q, 600 * MIN, &in, want, 6);
    /* without usage and weights the no-deadline group is by age */
    ck_assert_int_eq(crater_queue_set_tenant_weight(q, "vision", 1, &err), 0);
    expect_order(q, 600 * MIN, NULL, by_age, 6);
    crater_queue_destroy(q);
}
END_TEST

START_TEST(doc_worked_example_backfill)
{
    crater_backfill_window_t w = {630 * MIN, {1, 200, 1500, 0}};
    double small[4] = {1, 8, 64, 0};
    uint64_t now = 600 * MIN;
    crater_backfill_verdict_t v;

    v = crater_backfill_check(&w, now, 20 * MIN, small); /* 105 */
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
    crater_backfill_commit(&w, v, small);
    v = crater_backfill_check(&w, now, 60 * MIN, small); /* 201 */
    ck_assert_int_eq(v, CRATER_BACKFILL_EXTRA);
    crater_backfill_commit(&w, v, small);
    ck_assert(w.extra[CRATER_QDIM_GPU] == 0);
    v = crater_backfill_check(&w, now, 0, small); /* 202 */
    ck_assert_int_eq(v, CRATER_BACKFILL_DENY);
    v = crater_backfill_check(&w, now, 30 * MIN, small); /* 203 */
    ck_assert_int_eq(v, CRATER_BACKFILL_BEFORE_SHADOW);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = tcase_create("queue");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, priority_class_lookup);
    tcase_add_test(tc, effective_priority);
    tcase_add_loop_test(tc,
                        order_table,
                        0,
                        sizeof(order_cases) / sizeof(order_cases[0]));
    tcase_add_test(tc, edf_soft_and_hard_deadlines_share_one_order);
    tcase_add_test(tc, expired_hard_deadlines_reported_not_dropped);
    tcase_add_test(tc, dominant_share_formula);
    tcase_add_test(tc, fair_share_weight_two_goes_first);
    tcase_add_test(tc, fair_share_uses_dominant_dimension);
    tcase_add_test(tc, fair_share_progressive_filling);
    tcase_add_test(tc, fair_share_charges_carry_over_groups);
    tcase_add_test(tc, fair_share_below_priority_and_deadline);
    tcase_add_test(tc, share_input_errors);
    tcase_add_test(tc, tenant_weight_errors);
    tcase_add_test(tc, age_boost);
    tcase_add_test(tc, push_duplicate_id_is_an_error);
    tcase_add_test(tc, remove_unknown_id_is_an_error);
    tcase_add_test(tc, push_rejects_bad_entries);
    tcase_add_test(tc, push_copies_entry);
    tcase_add_test(tc, push_remove_many);
    tcase_add_loop_test(tc, order_matches_reference, 0, 5);
    tcase_add_test(tc, order_large);
    tcase_add_test(tc, entry_cmp_is_the_order);
    tcase_add_test(tc, backfill_cases);
    tcase_add_test(tc, backfill_commit_consumes_extra);
    tcase_add_test(tc, doc_worked_example_order);
    tcase_add_test(tc, doc_worked_example_backfill);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
