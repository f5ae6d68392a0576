/* gshare.c - GPU sharing in craterd (scheduler.gpuShare, doc/scheduling.md
 * "GPU sharing"): each job's GPU profile, and turning a profiled
 * whole-GPU job into a time-shared one when it is next placed.
 *
 * The profile. Every heartbeat that carries samples is a reading for each
 * running single-replica job it lists whose placement holds its GPUs
 * whole: a GPU held whole has no other tenant, so its SM utilisation and
 * memory in use are the job's own (a GPU's readings cannot be split
 * between the tasks of a shared GPU: idle.c says the same). The profile
 * is the mean of the readings' utilisation (each reading the mean over
 * the job's GPUs) and the peak memory in use on any of its GPUs, summed
 * over all of the job's attempts. A GPU the heartbeat has no reading of
 * makes the whole reading void: no guesses.
 *
 * The decision. When the pass asks for a pending job (loop.c op_job) and
 * its profile has gpuShare.minSamples readings, crater_sched_share()
 * decides (the rule is the core's, so the simulator decides alike): a
 * whole-GPU job whose use is under maxUtil becomes a slice of its peak x
 * (1 + memoryMargin), enforced on the node by the GPU-slice interposer
 * like any slice (the agent gets the slice size in its order), and the
 * placement records its use (stored with it, so a restart charges it
 * back exactly). Once shared, a job stays shared while it succeeds. Gangs
 * (replicas > 1) are never shared: one slow member slows the gang. A shared
 * attempt that fails (the slice from its profile may be what failed it: a job
 * whose GPU memory grew past its peak and margin) gets whole GPUs from
 * then on, and is never shared again (gshare_failed).
 *
 * Why only the job's own earlier attempts: a first attempt has no
 * profile, so it is never shared; the jobs that come back (preempted,
 * reclaimed when idle, requeued after a node loss) are the ones with
 * one. Profiles are kept in memory: a restart starts them over.
 *
 * Everything here runs under d->mu. */
#include <stdio.h>

#include "daemon/internal.h"

/* The reading of j's placement pl in h: mean utilisation and peak memory
 * over its GPUs; false when a GPU has no reading. */
static bool reading(const crater_placement_t *pl,
                    const crater_proto_heartbeat_t *h,
                    double *use,
                    uint64_t *peak_mib)
{
    *use = 0;
    *peak_mib = 0;
    for (uint32_t k = 0; k < pl->ngpus; k++) {
        const crater_proto_gpu_util_t *g = NULL;
        for (uint32_t i = 0; i < h->ngpus && !g; i++)
            if (h->gpus[i].index == pl->gpu[k])
                g = &h->gpus[i];
        if (!g || !(g->util >= 0 && g->util <= 1))
            return false;
        *use += g->util / pl->ngpus;
        if ((g->memory_used_bytes >> 20) > *peak_mib)
            *peak_mib = g->memory_used_bytes >> 20;
    }
    return pl->ngpus > 0;
}

void gshare_observe(crater_daemon_t *d,
                    djob_t *j,
                    uint32_t replica,
                    const crater_proto_heartbeat_t *h)
{
    double use;
    uint64_t peak;

    if (!d->cfg.scheduler.gpu_share.enabled || !h->has_util || j->nrep
        || replica != 0 || j->state != JS_RUNNING || !j->placed || !j->pl.whole
        || !reading(&j->pl, h, &use, &peak))
        return;
    j->gs_samples++;
    j->gs_use_sum += use;
    if (peak > j->gs_peak_mib)
        j->gs_peak_mib = peak;
}

void gshare_prepare(crater_daemon_t *d, djob_t *j)
{
    const char *why = NULL;

    if (!d->cfg.scheduler.gpu_share.enabled || j->req.share_milli || j->nrep
        || j->gs_off)
        return;
    if (j->gs_samples < d->cfg.scheduler.gpu_share.min_samples) {
        j->gs_why = "no profile yet (gpuShare.minSamples readings of the "
                    "job holding its GPUs alone)";
        return;
    }
    crater_sched_share(d->sched,
                       &j->req,
                       j->gs_use_sum / j->gs_samples,
                       j->gs_peak_mib,
                       &why);
    j->gs_why = why;
}

void gshare_failed(djob_t *j)
{
    if (!j->req.share_milli)
        return;
    j->req.share_milli = 0;
    j->req.slice_mib =
        (uint32_t)crater_bytes_to_mib_ceil(j->spec->resources.gpu.memory_bytes);
    j->gs_off = true;
    j->gs_why = "an attempt that ran time-shared failed: whole GPUs from "
                "now on";
}

json_t *gshare_json(const crater_daemon_t *d, const djob_t *j)
{
    json_t *o;

    if (!d->cfg.scheduler.gpu_share.enabled || !j->req.gpus || j->nrep)
        return NULL;
    o = json_pack("{s:b, s:I}",
                  "shared",
                  j->req.share_milli != 0,
                  "samples",
                  (json_int_t)j->gs_samples);
    if (o && j->gs_samples) {
        json_object_set_new(o, "use", json_real(j->gs_use_sum / j->gs_samples));
        json_object_set_new(o,
                            "peak_mib",
                            json_integer((json_int_t)j->gs_peak_mib));
    }
    if (o && j->req.share_milli)
        json_object_set_new(o, "slice_mib", json_integer(j->req.slice_mib));
    if (o && !j->req.share_milli && j->gs_why)
        json_object_set_new(o, "why_not", json_string(j->gs_why));
    return o;
}
