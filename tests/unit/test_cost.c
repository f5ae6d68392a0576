/* test_cost.c - the cost ledger (src/core/cost.c): golden values (whole
 * hours, GPU slices, a price change, the two bases, overcommit), the
 * invariant over random workloads checked against an independent
 * computation of each node's hourly cost, the row JSON round trip, money
 * text, and Slurm's TRESBillingWeights worked examples (slurm.conf(5)). */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "crater/cost.h"

#define H CRATER_COST_HOUR_MS
#define M CRATER_COST_MICRO
#define GPU_PPM 1000000ull

static crater_cost_line_t gpu_line(double price)
{
    return (crater_cost_line_t){CRATER_COST_GPU,
                                crater_cost_from_double(price),
                                GPU_PPM};
}

static const crater_cost_row_t *row_of(const crater_ledger_t *l,
                                       uint32_t node,
                                       int64_t hour)
{
    size_t n;
    const crater_cost_row_t *r = crater_ledger_rows(l, &n);

    for (size_t i = 0; i < n; i++)
        if (r[i].node == node && r[i].hour_ms == hour)
            return &r[i];
    return NULL;
}

static const crater_cost_charge_t *job_of(const crater_cost_row_t *r,
                                          uint64_t job)
{
    for (size_t i = 0; i < r->njobs; i++)
        if (r->jobs[i].job == job)
            return &r->jobs[i];
    return NULL;
}

/* 8 GPUs at 2.50 an hour: exactly 20.000000 for the hour whatever the
 * cadence; a job holding 4 of them the whole hour pays exactly half. */
START_TEST(whole_hour_is_exact_at_any_cadence)
{
    crater_ledger_t *l = crater_ledger_create();
    crater_cost_line_t lines[8];
    crater_cost_use_t u = {.job = 7};
    const crater_cost_row_t *r;
    int64_t t = 5 * H;

    for (int i = 0; i < 8; i++)
        lines[i] = gpu_line(2.5);
    for (int i = 0; i < 4; i++)
        u.alloc[i] = GPU_PPM;
    srand(1);
    while (t < 6 * H) { /* ragged heartbeats: 1 ms to 9 s */
        int64_t next = t + 1 + rand() % 9000;
        next = next > 6 * H ? 6 * H : next;
        ck_assert_int_eq(crater_ledger_accrue(l, 3, lines, 8, &u, 1, t, next),
                         0);
        t = next;
    }
    ck_assert_ptr_nonnull(r = row_of(l, 3, 5 * H));
    ck_assert_int_eq(r->node_cost[CRATER_COST_GPU], 20 * M);
    /* each piece's split floors; the job may lose at most 1 micro-unit a
     * piece to idle, never gain */
    ck_assert_int_le(job_of(r, 7)->alloc[CRATER_COST_GPU], 10 * M);
    ck_assert_int_ge(job_of(r, 7)->alloc[CRATER_COST_GPU], 10 * M - 800);
    ck_assert_int_eq(r->idle.alloc[CRATER_COST_GPU]
                         + job_of(r, 7)->alloc[CRATER_COST_GPU],
                     20 * M);
    crater_ledger_destroy(l);
}
END_TEST

/* Slices of an 80 GiB GPU at 4.00 an hour: 40 GiB pays half, 20 GiB a
 * quarter, the free quarter is idle. */
START_TEST(gpu_slices_pay_their_share)
{
    crater_ledger_t *l = crater_ledger_create();
    crater_cost_line_t ln = gpu_line(4.0);
    crater_cost_use_t u[2] = {{.job = 1}, {.job = 2}};
    const crater_cost_row_t *r;

    u[0].alloc[0] = GPU_PPM / 2;
    u[1].alloc[0] = GPU_PPM / 4;
    u[1].used[0] = GPU_PPM / 8; /* measured: half its slice */
    ck_assert_int_eq(crater_ledger_accrue(l, 0, &ln, 1, u, 2, 0, H), 0);
    r = row_of(l, 0, 0);
    ck_assert_int_eq(job_of(r, 1)->alloc[0], 2 * M);
    ck_assert_int_eq(job_of(r, 2)->alloc[0], 1 * M);
    ck_assert_int_eq(r->idle.alloc[0], 1 * M);
    ck_assert_int_eq(job_of(r, 1)->usage[0], 0);
    ck_assert_int_eq(job_of(r, 2)->usage[0], M / 2);
    ck_assert_int_eq(r->idle.usage[0], 4 * M - M / 2);
    crater_ledger_destroy(l);
}
END_TEST

/* The price goes from 2.00 to 4.00 half way through the hour (the caller
 * cuts the interval there): 1 + 2 = 3.00, all the job's. */
START_TEST(price_change_mid_interval)
{
    crater_ledger_t *l = crater_ledger_create();
    crater_cost_line_t a = gpu_line(2.0), b = gpu_line(4.0);
    crater_cost_use_t u = {.job = 9, .alloc = {GPU_PPM}};
    const crater_cost_row_t *r;

    ck_assert_int_eq(crater_ledger_accrue(l, 1, &a, 1, &u, 1, 0, 1000), 0);
    ck_assert_int_eq(crater_ledger_accrue(l, 1, &a, 1, &u, 1, 1000, H / 2), 0);
    ck_assert_int_eq(crater_ledger_accrue(l, 1, &b, 1, &u, 1, H / 2, H - 7), 0);
    ck_assert_int_eq(crater_ledger_accrue(l, 1, &b, 1, &u, 1, H - 7, H), 0);
    r = row_of(l, 1, 0);
    ck_assert_int_eq(r->node_cost[0], 3 * M);
    ck_assert_int_eq(job_of(r, 9)->alloc[0], 3 * M);
    ck_assert_int_eq(crater_ledger_total(l, 9)->alloc, 3 * M);
    crater_ledger_destroy(l);
}
END_TEST

/* 16 cores at 0.10 a core-hour: a job asking 4 that used 6 pays 6 in
 * allocation (max) and in usage; one asking 4 that used 1 pays 4 and 1. */
START_TEST(allocation_and_usage_bases)
{
    crater_ledger_t *l = crater_ledger_create();
    crater_cost_line_t ln = {CRATER_COST_CPU, 100000, 16000};
    crater_cost_use_t u[2] = {{.job = 1, .alloc = {4000}, .used = {6000}},
                              {.job = 2, .alloc = {4000}, .used = {1000}}};
    const crater_cost_row_t *r;

    ck_assert_int_eq(crater_ledger_accrue(l, 0, &ln, 1, u, 2, 0, H), 0);
    r = row_of(l, 0, 0);
    ck_assert_int_eq(r->node_cost[CRATER_COST_CPU], 1600000);
    ck_assert_int_eq(job_of(r, 1)->alloc[CRATER_COST_CPU], 600000);
    ck_assert_int_eq(job_of(r, 1)->usage[CRATER_COST_CPU], 600000);
    ck_assert_int_eq(job_of(r, 2)->alloc[CRATER_COST_CPU], 400000);
    ck_assert_int_eq(job_of(r, 2)->usage[CRATER_COST_CPU], 100000);
    ck_assert_int_eq(r->idle.alloc[CRATER_COST_CPU], 600000);
    ck_assert_int_eq(r->idle.usage[CRATER_COST_CPU], 900000);
    crater_ledger_destroy(l);
}
END_TEST

/* Memory overcommitted 1.5x: the jobs share the node's cost by their
 * shares of the sum; idle is 0 (never negative). */
START_TEST(overcommit_never_charges_more_than_the_node)
{
    crater_ledger_t *l = crater_ledger_create();
    crater_cost_line_t ln = {CRATER_COST_MEMORY, 30000, 64ull << 30};
    crater_cost_use_t u[2] = {{.job = 1, .alloc = {64ull << 30}},
                              {.job = 2, .alloc = {32ull << 30}}};
    const crater_cost_row_t *r;

    ck_assert_int_eq(crater_ledger_accrue(l, 0, &ln, 1, u, 2, 0, H), 0);
    r = row_of(l, 0, 0);
    ck_assert_int_eq(r->node_cost[CRATER_COST_MEMORY], 64 * 30000);
    ck_assert_int_eq(job_of(r, 1)->alloc[CRATER_COST_MEMORY], 1280000);
    ck_assert_int_eq(job_of(r, 2)->alloc[CRATER_COST_MEMORY], 640000);
    ck_assert_int_eq(r->idle.alloc[CRATER_COST_MEMORY], 0);
    crater_ledger_destroy(l);
}
END_TEST

START_TEST(interval_across_hours_makes_two_rows)
{
    crater_ledger_t *l = crater_ledger_create();
    crater_cost_line_t ln = gpu_line(3.6); /* 1 micro-unit per ms */
    crater_cost_use_t u = {.job = 4, .alloc = {GPU_PPM}};

    ck_assert_int_eq(crater_ledger_accrue(l,
                                          2,
                                          &ln,
                                          1,
                                          &u,
                                          1,
                                          H - 1000,
                                          H + 500),
                     0);
    ck_assert_int_eq(row_of(l, 2, 0)->node_cost[0], 1000);
    ck_assert_int_eq(row_of(l, 2, H)->node_cost[0], 500);
    ck_assert_int_eq(crater_ledger_total(l, 4)->alloc, 1500);
    crater_ledger_destroy(l);
}
END_TEST

/* ---- the invariant over random workloads ---- */

#define NODES 4
#define NJOBS 12

typedef struct sim {
    crater_cost_line_t lines[NODES][6];
    size_t nlines[NODES];
    /* independent: expected node cost per node, hour (0..5), resource */
    int64_t expect[NODES][6][CRATER_COST_NRES];
} sim_t;

static void random_lines(sim_t *s, uint32_t n)
{
    static const crater_cost_res_t res[6] = {CRATER_COST_GPU,
                                             CRATER_COST_GPU,
                                             CRATER_COST_CPU,
                                             CRATER_COST_MEMORY,
                                             CRATER_COST_DISK_IOPS,
                                             CRATER_COST_DISK_BW};
    static const uint64_t cap[6] =
        {GPU_PPM, GPU_PPM, 64000, 512ull << 30, 800000, 6000000000ull};

    s->nlines[n] = 6;
    for (int i = 0; i < 6; i++)
        s->lines[n][i] = (crater_cost_line_t){res[i], rand() % 5000001, cap[i]};
}

static void random_use(crater_cost_use_t *u, uint64_t job, const sim_t *s)
{
    memset(u, 0, sizeof(*u));
    u->job = job;
    for (int i = 0; i < 6; i++) {
        uint64_t cap = s->lines[0][i].cap;
        if (rand() % 3 == 0)
            continue;
        u->alloc[i] = (uint64_t)rand() % (cap / 2 + 1);
        u->used[i] = (uint64_t)rand() % (cap * 3 / 4 + 1); /* may exceed */
    }
}

/* Segment [a, b) of node n at its current prices, counted the obvious
 * way: floor(price * cap * ms / (hour * scale)) from the segment start. */
static void expect_segment(sim_t *s, uint32_t n, int64_t a, int64_t b)
{
    for (size_t i = 0; i < s->nlines[n]; i++) {
        const crater_cost_line_t *ln = &s->lines[n][i];
        long double x = (long double)ln->price * ln->cap * (b - a)
                        / ((long double)H * crater_cost_res_scale(ln->res));
        s->expect[n][a / H][ln->res] += (int64_t)x;
    }
}

static void check_row(const crater_cost_row_t *r, const sim_t *s)
{
    for (int k = 0; k < CRATER_COST_NRES; k++) {
        int64_t sa = r->idle.alloc[k], su = r->idle.usage[k];
        ck_assert_int_ge(r->idle.alloc[k], 0);
        ck_assert_int_ge(r->idle.usage[k], 0);
        for (size_t j = 0; j < r->njobs; j++) {
            ck_assert_int_ge(r->jobs[j].alloc[k], 0);
            ck_assert_int_ge(r->jobs[j].usage[k], 0);
            sa += r->jobs[j].alloc[k];
            su += r->jobs[j].usage[k];
        }
        ck_assert_int_eq(sa, r->node_cost[k]);
        ck_assert_int_eq(su, r->node_cost[k]);
        ck_assert_int_eq(r->node_cost[k],
                         s->expect[r->node][r->hour_ms / H][k]);
    }
}

START_TEST(invariant_over_random_workloads)
{
    for (unsigned seed = 1; seed <= 20; seed++) {
        crater_ledger_t *l = crater_ledger_create();
        static sim_t s;
        crater_cost_use_t uses[NJOBS];
        size_t nrows;
        const crater_cost_row_t *rows;

        srand(seed);
        memset(&s, 0, sizeof(s));
        for (uint32_t n = 0; n < NODES; n++) {
            int64_t t = 0, seg = 0;
            random_lines(&s, n);
            while (t < 5 * H) {
                int64_t next = t + 1 + rand() % (20 * 60000);
                size_t nu = (size_t)rand() % 4;
                next = next > 5 * H ? 5 * H : next;
                for (size_t k = 0; k < nu; k++)
                    random_use(&uses[k], 1 + (uint64_t)rand() % NJOBS, &s);
                ck_assert_int_eq(crater_ledger_accrue(l,
                                                      n,
                                                      s.lines[n],
                                                      6,
                                                      uses,
                                                      nu,
                                                      t,
                                                      next),
                                 0);
                t = next;
                bool change = rand() % 10 == 0;
                if (change || t % H == 0 || t == 5 * H) {
                    /* a price segment ends here (or an hour does) */
                    for (int64_t a = seg, b; a < t; a = b) {
                        b = (a / H + 1) * H < t ? (a / H + 1) * H : t;
                        expect_segment(&s, n, a, b);
                    }
                    seg = t;
                    if (change)
                        random_lines(&s, n); /* mid-hour price change */
                }
            }
        }
        rows = crater_ledger_rows(l, &nrows);
        ck_assert_int_eq(nrows, NODES * 5);
        for (size_t i = 0; i < nrows; i++)
            check_row(&rows[i], &s);
        crater_ledger_destroy(l);
    }
}
END_TEST

START_TEST(rows_round_trip_through_json)
{
    crater_ledger_t *a = crater_ledger_create(), *b = crater_ledger_create();
    crater_cost_line_t ln = gpu_line(2.0);
    crater_cost_use_t u = {.job = 5, .alloc = {GPU_PPM / 3}, .used = {1}};
    crater_error_t err;
    const crater_cost_row_t *rows;
    size_t n;

    crater_ledger_accrue(a, 1, &ln, 1, &u, 1, 0, 2 * H + 5);
    rows = crater_ledger_rows(a, &n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = crater_cost_row_json(&rows[i]);
        ck_assert_int_eq(crater_ledger_load_row(b, v, &err), 0);
        json_decref(v);
    }
    ck_assert_int_eq(crater_ledger_total(b, 5)->alloc,
                     crater_ledger_total(a, 5)->alloc);
    ck_assert_int_eq(crater_ledger_total(b, 5)->usage,
                     crater_ledger_total(a, 5)->usage);
    json_t *bad = json_pack("{s:I, s:I}", "hour_ms", (json_int_t)17, "node", 1);
    ck_assert_int_eq(crater_ledger_load_row(b, bad, &err), -1);
    ck_assert_str_eq(err.text, "cost row: bad hour_ms/node");
    json_decref(bad);
    ck_assert_uint_eq(crater_ledger_expire(b, 2 * H), 2);
    crater_ledger_destroy(a);
    crater_ledger_destroy(b);
}
END_TEST

START_TEST(money_text)
{
    char buf[32];
    int64_t m;

    ck_assert_str_eq(crater_cost_format(12345678, buf, sizeof(buf)),
                     "12.345678");
    ck_assert_str_eq(crater_cost_format(-5, buf, sizeof(buf)), "-0.000005");
    ck_assert_int_eq(crater_cost_parse("2.5", &m), 0);
    ck_assert_int_eq(m, 2500000);
    ck_assert_int_eq(crater_cost_parse("0.000001", &m), 0);
    ck_assert_int_eq(m, 1);
    ck_assert_int_eq(crater_cost_parse("0.0000001", &m), -1);
    ck_assert_int_eq(crater_cost_parse("1e3", &m), -1);
    ck_assert_int_eq(crater_cost_parse("", &m), -1);
    ck_assert_int_eq(crater_cost_from_double(2.5), 2500000);
    ck_assert_int_eq(crater_cost_from_double(0.1), 100000);
}
END_TEST

/* slurm.conf(5), TRESBillingWeights: "a memory weight of mem=.25 on a job
 * allocated 8GB will be billed 2048 (8192MB *.25) units. A memory weight
 * of mem=.25G on the same job will be billed 2 (8192MB * (.25/1024))
 * units"; the default sums the weighted TRES, PriorityFlags=MAX_TRES
 * takes the largest. */
START_TEST(slurm_billing_weights)
{
    crater_billing_t b;
    crater_error_t err;

    ck_assert_int_eq(crater_billing_parse("mem=.25", false, &b, &err), 0);
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 0, 8ull << 30, 0),
                      2048 * GPU_PPM);
    ck_assert_int_eq(crater_billing_parse("mem=.25G", false, &b, &err), 0);
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 0, 8ull << 30, 0),
                      2 * GPU_PPM);
    /* CPU=1.0,Mem=0.25G,GRES/gpu=2.0 on 4 CPUs, 8 GB, 2 GPUs */
    ck_assert_int_eq(crater_billing_parse("CPU=1.0,Mem=0.25G,GRES/gpu=2.0",
                                          false,
                                          &b,
                                          &err),
                     0);
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 4000, 8ull << 30, 2000000),
                      10 * GPU_PPM); /* 4 + 2 + 4 */
    b.max_tres = true;
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 4000, 8ull << 30, 2000000),
                      4 * GPU_PPM); /* MAX(4, 2, 4) */
    /* half a GPU counts half */
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 0, 0, 500000), GPU_PPM);
    /* Slurm's "Trackable RESources" page (doc/html/tres.shtml), with
     * TRESBillingWeights="CPU=1.0,Mem=0.25G,GRES/gpu=2.0" (its license
     * term left out: Crater has no licenses): a job of 1 CPU and 8 GiB is
     * billed (1*1.0) + (8*0.25) + (0*2.0) = 3.0; with MAX_TRES
     * MAX(1*1.0, 8*0.25, 0*2.0) = 2.0; with MAX_TRES_GRES
     * (0*2.0) + MAX(1*1.0, 8*0.25) = 2.0, and with a GPU added
     * "(1*2.0) + MAX(1*1.0, 8*0.25) + (0*1.5) = 3.0" as printed there,
     * though its terms add up to 4.0: the formula is what is followed.
     * Slurm then truncates the job's billing to an integer (4.5 => 4);
     * Crater keeps the fraction, since its CPUs and GPUs come in
     * fractions (a 100m task would otherwise be free). */
    b.max_tres = false;
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 1000, 8ull << 30, 0),
                      3 * GPU_PPM);
    b.max_tres = true;
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 1000, 8ull << 30, 0),
                      2 * GPU_PPM);
    b.max_tres = false;
    b.max_tres_gres = true;
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 1000, 8ull << 30, 0),
                      2 * GPU_PPM);
    ck_assert_uint_eq(crater_billing_units_ppm(&b, 1000, 8ull << 30, GPU_PPM),
                      4 * GPU_PPM);
    b.max_tres_gres = false;
    ck_assert_int_eq(crater_billing_parse("CPU=1,Foo=2", false, &b, &err), -1);
    ck_assert_str_eq(err.text,
                     "unknown TRES 'Foo' (one of CPU, Mem, GRES/gpu)");
    ck_assert_int_eq(crater_billing_parse("CPU=2G", false, &b, &err), -1);
    ck_assert_int_eq(crater_billing_parse("none", false, &b, &err), 0);
    ck_assert(!b.set);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cost");
    TCase *tc = tcase_create("ledger");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, whole_hour_is_exact_at_any_cadence);
    tcase_add_test(tc, gpu_slices_pay_their_share);
    tcase_add_test(tc, price_change_mid_interval);
    tcase_add_test(tc, allocation_and_usage_bases);
    tcase_add_test(tc, overcommit_never_charges_more_than_the_node);
    tcase_add_test(tc, interval_across_hours_makes_two_rows);
    tcase_add_test(tc, invariant_over_random_workloads);
    tcase_add_test(tc, rows_round_trip_through_json);
    tcase_add_test(tc, money_text);
    tcase_add_test(tc, slurm_billing_weights);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
