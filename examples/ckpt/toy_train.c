/* toy_train.c - the C example for libcrater-ckpt: a training loop that
 * survives being killed.
 *
 *   ckpt_toy_train DIR STEPS EVERY [USLEEP]
 *
 * Fits w (256 doubles) to a fixed target by gradient steps, saving
 * {"weights", "step"} into DIR every EVERY steps. On start it resumes from
 * the newest checkpoint that verifies, so killing it at any moment and
 * starting it again reaches the same final weights, bit for bit, as a run
 * that was never interrupted. It prints the SHA-256 of the final weights.
 * USLEEP slows each step down so that a test can kill it mid-run.
 * Under Crater ($CRATER_AGENT_SOCKET set) it reports each checkpoint and
 * its progress to the agent and, after each save, asks whether a
 * preemption notice came; on one it acknowledges it and exits (the job
 * is requeued and resumes from that save). SIGTERM, which comes with the
 * notice, makes it save at the step it reached first. Outside Crater the
 * agent calls are skipped and SIGTERM keeps its default action.
 * Build: cc toy_train.c -lcrater-ckpt (no other dependency).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crater/ckpt.h"

#define DIM 256

static volatile sig_atomic_t term; /* SIGTERM came: save and stop */

static void on_term(int sig)
{
    (void)sig;
    term = 1;
}

static void train_step(double *w, uint64_t step)
{
    for (int i = 0; i < DIM; i++) {
        double target = (double)((i * 7919 + 13) % 101) / 101.0;
        double noise =
            (double)((step * 2654435761u + (uint64_t)i) % 1000) / 1e6;
        w[i] -= 0.01 * (w[i] - target + noise);
    }
}

/* Resume: the step to start from and the weights, or 0 and zeros. */
static uint64_t resume(crater_ckpt_t *ck, double *w)
{
    crater_error_t err;
    crater_ckpt_state_t *st = crater_ckpt_load_latest(ck, &err);
    const crater_ckpt_entry_t *e;
    uint64_t step = 0;

    memset(w, 0, DIM * sizeof(*w));
    if (!st) {
        fprintf(stderr, "toy_train: starting fresh (%s)\n", err.text);
        return 0;
    }
    e = crater_ckpt_state_find(st, "weights");
    if (e && e->size == DIM * sizeof(*w)) {
        memcpy(w, e->data, e->size);
        step = crater_ckpt_state_step(st);
    }
    crater_ckpt_state_destroy(st);
    fprintf(stderr,
            "toy_train: resumed at step %llu\n",
            (unsigned long long)step);
    return step;
}

/* Tell the agent about the save; 1 when a preemption notice came. */
static int tell_agent(const crater_ckpt_stats_t *st)
{
    crater_ckpt_notice_t n;
    crater_error_t err;

    if (!crater_ckpt_agent_available(NULL))
        return 0;
    if (crater_ckpt_agent_report(NULL, st, NULL, &err) < 0
        || crater_ckpt_agent_progress(NULL, st->step, &err) < 0
        || crater_ckpt_agent_wait_notice(NULL, 0, &n, &err) < 0) {
        fprintf(stderr, "toy_train: agent: %s\n", err.text);
        return 0; /* SIGTERM still comes */
    }
    if (!n.preempt)
        return 0;
    fprintf(stderr,
            "toy_train: notice: %s, %lld ms left; saved step %llu\n",
            n.reason,
            (long long)n.deadline_ms,
            (unsigned long long)st->step);
    crater_ckpt_agent_ack(NULL, NULL);
    return 1;
}

/* -1 on failure, 1 when preempted, else 0. */
static int save(crater_ckpt_t *ck, uint64_t step, const double *w)
{
    crater_ckpt_entry_t e[] = {{"weights", w, DIM * sizeof(*w)}};
    crater_ckpt_stats_t st;
    crater_error_t err;

    if (crater_ckpt_save(ck, step, e, 1, &st, &err) < 0) {
        fprintf(stderr, "toy_train: save: %s\n", err.text);
        return -1;
    }
    return tell_agent(&st);
}

int main(int argc, char **argv)
{
    crater_ckpt_opts_t o = {.version = 1, .chunk_size = 1024, .keep_last = 2};
    crater_error_t err;
    double w[DIM];
    char hex[CRATER_CKPT_HASH_HEX];
    crater_ckpt_t *ck;
    uint64_t steps, every, pause, step;

    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: ckpt_toy_train DIR STEPS EVERY [USLEEP]\n");
        return 2;
    }
    steps = strtoull(argv[2], NULL, 10), every = strtoull(argv[3], NULL, 10);
    pause = argc == 5 ? strtoull(argv[4], NULL, 10) : 0;
    if (!every || !(ck = crater_ckpt_open(argv[1], &o, &err)))
        return fprintf(stderr, "toy_train: %s\n", every ? err.text : "EVERY 0"),
               1;
    if (crater_ckpt_agent_available(NULL))
        signal(SIGTERM, on_term);
    for (step = resume(ck, w); step < steps;) {
        int rc = 0;
        train_step(w, step++);
        if (pause)
            usleep((useconds_t)pause);
        if (term || step % every == 0 || step == steps)
            rc = save(ck, step, w);
        if (term && rc == 0)
            rc = 1; /* SIGTERM without a notice: stop all the same */
        if (rc < 0)
            return 1;
        if (rc > 0 && step < steps) { /* preempted: resumes from here */
            crater_ckpt_close(ck);
            return 0;
        }
    }
    crater_ckpt_close(ck);
    crater_ckpt_sha256_hex(w, sizeof(w), hex);
    printf("%s\n", hex);
    return 0;
}
