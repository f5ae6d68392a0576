/* disk.c - filter and reservation: a storage device with the requested
 * interface, latency, free IOPS and bandwidth; best fit (least IOPS left
 * after), ties to the lowest index. Jobs without disk needs get none. */
#include "sched/internal.h"

static int dev_ok(const crater_sched_t *s,
                  uint32_t dv,
                  const crater_request_t *r)
{
    const struct dev_static *d = &s->ds[dv];

    if (r->disk_iface != CRATER_IFACE_UNKNOWN && d->iface != r->disk_iface)
        return 0;
    if (r->disk_max_latency_us
        && (d->latency_us == 0 || d->latency_us > r->disk_max_latency_us))
        return 0;
    return s->dd[dv].iops_free >= r->disk_iops
           && s->dd[dv].bw_free >= r->disk_bw;
}

static int disk_filter(struct sched_ctx *c)
{
    const crater_request_t *r = c->req;
    const struct node_static *st = &c->s->st[c->node];
    int best = -1;
    uint64_t bestleft = UINT64_MAX, most = 0;

    c->p.storage = -1;
    if (!r->disk_iops && !r->disk_bw && r->disk_iface == CRATER_IFACE_UNKNOWN
        && !r->disk_max_latency_us)
        return 0;
    for (uint32_t i = 0; i < st->ndevs; i++) {
        uint32_t dv = st->dev_first + i;
        uint64_t left = c->s->dd[dv].iops_free - r->disk_iops;
        most = c->s->dd[dv].iops_free > most ? c->s->dd[dv].iops_free : most;
        if (dev_ok(c->s, dv, r) && (best < 0 || left < bestleft)) {
            best = (int)i;
            bestleft = left;
        }
    }
    if (best < 0) {
        c->why = "no storage device with the interface, latency, IOPS and "
                 "bandwidth asked";
        c->need = r->disk_iops;
        c->have = most;
        c->unit = U_COUNT;
        return -1;
    }
    c->p.storage = best;
    c->p.disk_iops = r->disk_iops;
    c->p.disk_bw = r->disk_bw;
    return 0;
}

const sched_filter_ops_t sched__filter_disk = {
    SCHED_PLUGIN_VERSION,
    "disk",
    disk_filter,
};
