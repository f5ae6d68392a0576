/* test_lifecycle.c - craterd's job lifecycle table (src/daemon/lifecycle.c)
 * without HTTP, a store or a daemon.
 *
 * The table is checked three ways: against this file's own copy of the
 * documented transitions (every pair of state and event: a listed one
 * gives exactly the listed state and effects, every other one is refused
 * and writes nothing); against the rules it must keep whatever its rows
 * (no way out of a final state, every end releases, every requeue queues,
 * every way out of preempting frees the preemptor ...); and against the
 * table printed in doc/queue.md, so the page cannot drift from the code.
 * Then a few lifecycles are walked event by event, the late and
 * duplicate agent reports among them.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lifecycle.h"

#define END (JF_FINISHED | JF_RELEASE | JF_DEQUEUE)
#define REQ (JF_ATTEMPT | JF_RELEASE | JF_QUEUE)

typedef struct want {
    job_state_t from;
    job_ev_t ev;
    job_state_t to;
    unsigned fx;
} want_t;

/* The documented transitions (doc/queue.md "Job lifecycle"). */
static const want_t legal[] = {
    {JS_PENDING, JE_BIND, JS_BOUND, JF_DEQUEUE},
    {JS_PENDING, JE_CANCEL, JS_CANCELLED, JF_CANCEL | END},
    {JS_PENDING, JE_FAIL, JS_FAILED, END},
    {JS_BOUND, JE_START, JS_RUNNING, JF_STARTED},
    {JS_BOUND, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_BOUND, JE_CANCEL, JS_BOUND, JF_CANCEL | JF_STOP},
    {JS_BOUND, JE_PREEMPT, JS_PREEMPTING, JF_STOP},
    {JS_BOUND, JE_REQUEUE, JS_PENDING, REQ},
    {JS_BOUND, JE_FAIL, JS_FAILED, END},
    {JS_BOUND, JE_RESTORE, JS_PENDING, JF_QUEUE},
    {JS_RUNNING, JE_EXIT_OK, JS_SUCCEEDED, END},
    {JS_RUNNING, JE_EXIT_FAIL, JS_FAILED, END},
    {JS_RUNNING, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_RUNNING, JE_CANCEL, JS_RUNNING, JF_CANCEL | JF_STOP},
    {JS_RUNNING, JE_PREEMPT, JS_PREEMPTING, JF_STOP},
    {JS_RUNNING, JE_REQUEUE, JS_PENDING, REQ},
    {JS_RUNNING, JE_NODE_SILENT, JS_LOST, 0},
    {JS_RUNNING, JE_FAIL, JS_FAILED, END},
    {JS_RUNNING, JE_RESTORE, JS_PENDING, JF_QUEUE},
    {JS_PREEMPTING, JE_EXIT_STOPPED, JS_PREEMPTED, JF_UNBLOCK | JF_RELEASE},
    {JS_PREEMPTING, JE_CANCEL, JS_PREEMPTING, JF_CANCEL | JF_STOP},
    {JS_PREEMPTING, JE_REQUEUE, JS_PENDING, JF_UNBLOCK | REQ},
    {JS_PREEMPTING, JE_FAIL, JS_FAILED, JF_UNBLOCK | END},
    {JS_PREEMPTING, JE_RESTORE, JS_PENDING, JF_QUEUE},
    {JS_PREEMPTED, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_PREEMPTED, JE_CANCEL, JS_CANCELLED, JF_CANCEL | END},
    {JS_PREEMPTED, JE_REQUEUE, JS_PENDING, REQ},
    {JS_PREEMPTED, JE_RESTORE, JS_PENDING, JF_QUEUE},
    {JS_LOST, JE_RECONNECT, JS_RUNNING, 0},
    {JS_LOST, JE_EXIT_OK, JS_SUCCEEDED, END},
    {JS_LOST, JE_EXIT_FAIL, JS_FAILED, END},
    {JS_LOST, JE_EXIT_CANCELLED, JS_CANCELLED, END},
    {JS_LOST, JE_CANCEL, JS_CANCELLED, JF_CANCEL | END},
    {JS_LOST, JE_REQUEUE, JS_PENDING, REQ},
    {JS_LOST, JE_FAIL, JS_FAILED, END},
    {JS_LOST, JE_RESTORE, JS_PENDING, JF_QUEUE},
};
#define NLEGAL (sizeof(legal) / sizeof(legal[0]))

static const want_t *find_legal(job_state_t s, job_ev_t e)
{
    for (size_t i = 0; i < NLEGAL; i++)
        if (legal[i].from == s && legal[i].ev == e)
            return &legal[i];
    return NULL;
}

/* Every (state, event): the documented outcome, or refused untouched. */
START_TEST(test_every_pair)
{
    size_t seen = 0;

    for (int s = 0; s < JS_COUNT; s++)
        for (int e = 0; e < JE_COUNT; e++) {
            const want_t *w = find_legal(s, e);
            job_step_t out = {.to = JS_COUNT, .effects = 0xdead};
            int rc = job_life_step(s, e, &out);
            if (!w) {
                ck_assert_msg(rc == -1 && out.to == JS_COUNT
                                  && out.effects == 0xdead,
                              "%s + %s should be refused",
                              job_state_name(s),
                              job_ev_name(e));
                continue;
            }
            seen++;
            ck_assert_msg(rc == 0,
                          "%s + %s refused",
                          job_state_name(s),
                          job_ev_name(e));
            ck_assert_msg(out.to == w->to && out.effects == w->fx,
                          "%s + %s -> %s (fx %#x), documented %s (fx %#x)",
                          job_state_name(s),
                          job_ev_name(e),
                          job_state_name(out.to),
                          out.effects,
                          job_state_name(w->to),
                          w->fx);
        }
    ck_assert_uint_eq(seen, NLEGAL);
}
END_TEST

/* The rules of lifecycle.c's top, over every legal pair. */
START_TEST(test_rules)
{
    for (int s = 0; s < JS_COUNT; s++)
        for (int e = 0; e < JE_COUNT; e++) {
            job_step_t o;
            if (job_life_step(s, e, &o) < 0)
                continue;
            ck_assert_msg(!job_state_final(s),
                          "a way out of final %s",
                          job_state_name(s));
            ck_assert(!(o.effects & ~JF_ALL));
            if (job_state_final(o.to))
                ck_assert_msg((o.effects & END) == END,
                              "%s + %s ends without releasing",
                              job_state_name(s),
                              job_ev_name(e));
            if (o.to == JS_PENDING) {
                ck_assert(o.effects & JF_QUEUE);
                if (e != JE_RESTORE)
                    ck_assert((o.effects & REQ) == REQ);
            }
            if (s == JS_PREEMPTING && o.to != JS_PREEMPTING && e != JE_RESTORE)
                ck_assert_msg(o.effects & JF_UNBLOCK,
                              "preempting + %s leaves its preemptor waiting",
                              job_ev_name(e));
            if (s != JS_PREEMPTING)
                ck_assert(!(o.effects & JF_UNBLOCK));
            /* a job leaves a holding state for a non-holding one only
             * giving its resources back */
            if (job_state_holds(s) && !job_state_holds(o.to))
                ck_assert_msg(o.effects & (JF_RELEASE | JF_QUEUE),
                              "%s + %s keeps its resources",
                              job_state_name(s),
                              job_ev_name(e));
            if ((int)o.to == s) /* the only stay: a cancel that stops tasks */
                ck_assert(e == JE_CANCEL && o.effects == (JF_CANCEL | JF_STOP));
            if (o.effects & JF_STOP)
                ck_assert(job_state_holds(s));
            if (e == JE_BIND)
                ck_assert(s == JS_PENDING && o.to == JS_BOUND);
        }
}
END_TEST

/* Reports that come late or twice change nothing. */
START_TEST(test_refused)
{
    static const struct {
        job_state_t s;
        job_ev_t e;
    } no[] = {
        {JS_SUCCEEDED, JE_START},     {JS_CANCELLED, JE_START},
        {JS_CANCELLED, JE_REQUEUE},   {JS_CANCELLED, JE_EXIT_FAIL},
        {JS_FAILED, JE_EXIT_OK},      {JS_SUCCEEDED, JE_CANCEL},
        {JS_PENDING, JE_START},       {JS_PENDING, JE_EXIT_OK},
        {JS_PENDING, JE_PREEMPT},     {JS_RUNNING, JE_START},
        {JS_RUNNING, JE_BIND},        {JS_PREEMPTING, JE_PREEMPT},
        {JS_PREEMPTING, JE_START},    {JS_PREEMPTED, JE_START},
        {JS_PREEMPTED, JE_EXIT_OK},   {JS_LOST, JE_PREEMPT},
        {JS_BOUND, JE_EXIT_OK},       {JS_LOST, JE_NODE_SILENT},
        {JS_PENDING, JE_RECONNECT},   {JS_FAILED, JE_RESTORE},
        {JS_COUNT, JE_BIND},          {JS_PENDING, JE_COUNT},
        {(job_state_t)-1, JE_CANCEL}, {JS_RUNNING, (job_ev_t)-1},
    };

    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        job_state_t st = no[i].s;
        unsigned fx = 77;
        ck_assert_int_eq(job_life_apply(&st, no[i].e, &fx), -1);
        ck_assert_int_eq(st, no[i].s);
        ck_assert_uint_eq(fx, 77);
    }
}
END_TEST

static unsigned walk(job_state_t *st, const job_ev_t *evs, size_t n)
{
    unsigned all = 0, fx;

    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(job_life_apply(st, evs[i], &fx) == 0,
                      "step %zu (%s) refused in %s",
                      i,
                      job_ev_name(evs[i]),
                      job_state_name(*st));
        all |= fx;
    }
    return all;
}

/* Whole lifecycles, each step legal, and what may not follow. */
START_TEST(test_walks)
{
    job_state_t st = JS_PENDING;
    const job_ev_t ok[] = {JE_BIND, JE_START, JE_EXIT_OK};
    const job_ev_t pre[] = {JE_BIND,
                            JE_START,
                            JE_PREEMPT,
                            JE_EXIT_STOPPED,
                            JE_REQUEUE,
                            JE_BIND,
                            JE_START,
                            JE_EXIT_FAIL};
    const job_ev_t lost[] = {JE_BIND,
                             JE_START,
                             JE_NODE_SILENT,
                             JE_RECONNECT,
                             JE_NODE_SILENT,
                             JE_REQUEUE};
    const job_ev_t cancel[] = {JE_BIND, JE_START, JE_CANCEL, JE_EXIT_CANCELLED};
    unsigned fx;

    walk(&st, ok, 3);
    ck_assert_int_eq(st, JS_SUCCEEDED);
    st = JS_PENDING;
    fx = walk(&st, pre, 8);
    ck_assert_int_eq(st, JS_FAILED);
    ck_assert(fx & JF_UNBLOCK);
    st = JS_PENDING;
    walk(&st, lost, 6);
    ck_assert_int_eq(st, JS_PENDING);
    st = JS_PENDING;
    fx = walk(&st, cancel, 4);
    ck_assert_int_eq(st, JS_CANCELLED);
    ck_assert(fx & JF_CANCEL);
    /* the late "started" of the cancelled job, a second exit */
    ck_assert_int_eq(job_life_apply(&st, JE_START, NULL), -1);
    ck_assert_int_eq(job_life_apply(&st, JE_EXIT_OK, NULL), -1);
    ck_assert_int_eq(st, JS_CANCELLED);
    /* a victim force-released while stopping frees its preemptor */
    st = JS_PREEMPTING;
    ck_assert_int_eq(job_life_apply(&st, JE_REQUEUE, &fx), 0);
    ck_assert(fx & JF_UNBLOCK);
}
END_TEST

START_TEST(test_names)
{
    for (int s = 0; s < JS_COUNT; s++)
        ck_assert_int_eq(job_state_parse(job_state_name(s)), s);
    ck_assert_int_eq(job_state_parse("running "), -1);
    ck_assert_str_eq(job_state_name(JS_COUNT), "unknown");
    ck_assert_str_eq(job_ev_name(JE_COUNT), "unknown");
    for (int a = 0; a < JE_COUNT; a++)
        for (int b = a + 1; b < JE_COUNT; b++)
            ck_assert_str_ne(job_ev_name(a), job_ev_name(b));
    for (unsigned b = 1; b & JF_ALL; b <<= 1)
        ck_assert_str_ne(job_fx_name(b), "unknown");
    ck_assert_str_eq(job_fx_name(JF_ALL + 1), "unknown");
    ck_assert_str_eq(job_fx_name(JF_STOP | JF_QUEUE), "unknown");
}
END_TEST

/* ---- doc/queue.md ---------------------------------------------------------
 */

static int name_index(const char *name, const char *(*fn)(int), int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(fn(i), name) == 0)
            return i;
    return -1;
}

static const char *sname(int i)
{
    return job_state_name(i);
}

static const char *ename(int i)
{
    return job_ev_name(i);
}

/* "release, queue" (or "-") -> effect bits; -1 on an unknown name. */
static long parse_fx(char *list)
{
    long fx = 0;

    for (char *t = strtok(list, ", "); t; t = strtok(NULL, ", ")) {
        if (strcmp(t, "-") == 0)
            continue;
        unsigned b = 1;
        while ((b & JF_ALL) && strcmp(job_fx_name(b), t) != 0)
            b <<= 1;
        if (!(b & JF_ALL))
            return -1;
        fx |= b;
    }
    return fx;
}

/* A row "| `from` | `event` | `to` | effects |" of the doc's table. */
static int doc_row(char *line, want_t *w)
{
    char f[32], e[32], t[32], fx[200];
    long bits;

    if (sscanf(line,
               "| `%31[a-z-]` | `%31[a-z-]` | `%31[a-z-]` | %199[^|]|",
               f,
               e,
               t,
               fx)
        != 4)
        return 0;
    w->from = name_index(f, sname, JS_COUNT);
    w->ev = name_index(e, ename, JE_COUNT);
    w->to = name_index(t, sname, JS_COUNT);
    ck_assert_msg((int)w->from >= 0 && (int)w->ev >= 0 && (int)w->to >= 0,
                  "doc row: %s",
                  line);
    bits = parse_fx(fx);
    ck_assert_msg(bits >= 0, "doc row effects: %s", line);
    w->fx = (unsigned)bits;
    return 1;
}

START_TEST(test_doc_table)
{
    FILE *f = fopen(CRATER_SOURCE_DIR "/doc/queue.md", "r");
    char line[512];
    size_t rows = 0;

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f)) {
        want_t w;
        job_step_t o;
        if (!doc_row(line, &w))
            continue;
        rows++;
        ck_assert_msg(job_life_step(w.from, w.ev, &o) == 0 && o.to == w.to
                          && o.effects == w.fx,
                      "doc/queue.md disagrees with the table: %s",
                      line);
    }
    fclose(f);
    ck_assert_uint_eq(rows, NLEGAL); /* and lists every legal pair */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("table");
    SRunner *sr;
    int nf;

    tcase_add_test(tc, test_every_pair);
    tcase_add_test(tc, test_rules);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_walks);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_doc_table);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
