/* typhist.h - the typical-task distribution learned from the requests a
 * scheduler has seen: a decayed histogram of request shapes that Crater's
 * policy measures fragmentation against (crater_sched_set_typical()).
 *
 * The histogram is pure (no clock, no I/O, no randomness): the same
 * sequence of observations gives the same weights and the same installed
 * distributions, bit for bit, in craterd and in `crater sim`.
 *
 * Ownership: crater_typhist_create() returns an object the caller frees
 * with crater_typhist_destroy() (NULL is fine). The sched passed to
 * crater_typhist_observe() / crater_typhist_install() is borrowed for the
 * call; the histogram keeps no pointer to it.
 */
#ifndef CRATER_TYPHIST_H
#define CRATER_TYPHIST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "crater/config.h"
#include "crater/error.h"
#include "crater/sched.h"

typedef struct crater_typhist crater_typhist_t;

typedef struct crater_typhist_opts {
    /* submissions after which an observation weighs half; 0 = 1000 */
    uint32_t half_life;
    /* observations before the learned distribution replaces the prior
     * (crater_typhist_prior()); 0 = learned from the first one */
    uint32_t min_samples;
    /* most distinct shapes kept (the lightest is evicted); 0 = 256 */
    uint32_t capacity;
    /* installed: the heaviest shapes making up this % of the weight, as
     * FGD's typical pods; 0 = 95 */
    double pct;
    /* reinstall once the distribution moved this far from the installed
     * one (total variation distance, 0..1); 0 = 0.05 */
    double move;
} crater_typhist_opts_t;

/* The settings of cfg's scheduler.typicalHalfLife and typicalMinSamples
 * (the rest default). */
void crater_typhist_opts_from_config(const crater_config_t *cfg,
                                     crater_typhist_opts_t *o);

/* NULL on ENOMEM. o may be NULL (all defaults). */
crater_typhist_t *crater_typhist_create(const crater_typhist_opts_t *o);
void crater_typhist_destroy(crater_typhist_t *h);

/* The shape of a request as a typical task (weight 1): GPUs, a share's
 * slice in the sched's memory units, CPU, model mask. */
void crater_typhist_shape(const crater_request_t *req, crater_typical_t *t);

/* Add one observation (t's weight is ignored): every weight decays by
 * 2^(-1/half_life), t's grows by 1. -1 on ENOMEM (nothing changed). */
int crater_typhist_add(crater_typhist_t *h,
                       const crater_typical_t *t,
                       crater_error_t *err);

/* The distribution to install into *out (malloc'd, caller frees): the
 * prior while fewer than min_samples observations (or none) were seen, else
 * the heaviest shapes making up pct % of the weight (ties: the larger
 * shape first), weights summing to 1. -1 on ENOMEM. */
int crater_typhist_get(const crater_typhist_t *h,
                       crater_typical_t **out,
                       size_t *n,
                       crater_error_t *err);

/* Total variation distance between the current histogram and the one
 * installed last (1 when nothing was installed yet). */
double crater_typhist_moved(const crater_typhist_t *h);

/* Install crater_typhist_get() into s now and remember it as installed.
 * -1 on ENOMEM (s unchanged). */
int crater_typhist_install(crater_typhist_t *h,
                           crater_sched_t *s,
                           crater_error_t *err);

/* crater_typhist_add() the shape of req, then install into s when the
 * prior just gave way to the learned distribution or the distribution
 * moved by opts.move since the last install. Returns 1 when it installed,
 * 0 when not, -1 on ENOMEM. */
int crater_typhist_observe(crater_typhist_t *h,
                           crater_sched_t *s,
                           const crater_request_t *req,
                           crater_error_t *err);

/* Observations so far, the decayed total weight, installs so far. */
uint64_t crater_typhist_seen(const crater_typhist_t *h);
double crater_typhist_total(const crater_typhist_t *h);
uint64_t crater_typhist_installs(const crater_typhist_t *h);
/* Whether the installed distribution is the prior. */
int crater_typhist_is_prior(const crater_typhist_t *h);

/* The prior: whole-GPU tasks of 1, 2, 4 and 8 GPUs, equally likely, any
 * model, no CPU need (*n = 4). Static storage. */
const crater_typical_t *crater_typhist_prior(size_t *n);

/* {"source": "prior"|"learned", "seen", "installs", "halfLife",
 *  "minSamples", "moved", "shapes": [{"gpus", "slice", "cpuMilli",
 *  "modelMask", "weight"}...]} with the distribution crater_typhist_get()
 * gives. NULL on ENOMEM. Caller must json_decref() it. */
json_t *crater_typhist_json(const crater_typhist_t *h);

#endif /* CRATER_TYPHIST_H */
