/* sim.h - trace loaders and the simulator's shared types.
 *
 * The simulator drives the same scheduler core as the control plane
 * (sched.h) with a simulated clock. This header is the contract between
 * the trace loaders (src/sim/openb.c, joblist.c, synth.c) and the drivers
 * (src/sim/fgd.c for the FGD protocol, src/sim/replay.c for real-time
 * replay). Arrays returned by loaders are owned by the caller and freed
 * with crater_trace_free() / crater_trace_nodes_free().
 */
#ifndef CRATER_SIM_H
#define CRATER_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "crater/error.h"
#include "crater/kb.h"
#include "crater/model.h"
#include "crater/sched.h"

typedef enum crater_qos {
    CRATER_QOS_LS,         /* latency-sensitive: high priority */
    CRATER_QOS_GUARANTEED, /* high priority */
    CRATER_QOS_BURSTABLE,
    CRATER_QOS_BE, /* best effort: low priority, preemptible */
} crater_qos_t;

/* One node row of an openb node list (sn,cpu_milli,memory_mib,gpu,model). */
typedef struct crater_trace_node {
    char name[48];
    uint32_t cpu_milli;
    uint64_t memory_mib;
    uint32_t gpus;
    char model[24]; /* as in the trace: "V100M32", "T4", "G2" ... */
} crater_trace_node_t;

/* One pod / job of a trace. Times are seconds from the trace start. */
typedef struct crater_trace_pod {
    char name[48];
    uint32_t cpu_milli;
    uint64_t memory_mib;
    uint32_t num_gpu;
    uint32_t gpu_milli; /* share of one GPU, exact; 1000 = whole */
    char gpu_spec[64];  /* allowed models separated by '|', "" = any */
    crater_qos_t qos;
    int64_t creation, deletion, scheduled; /* -1 when absent */
} crater_trace_pod_t;

/* Loaders: malformed rows are errors naming file:line and the column. */
int crater_openb_load_nodes(const char *path,
                            crater_trace_node_t **nodes,
                            size_t *n,
                            crater_error_t *err);
int crater_openb_load_pods(const char *path,
                           crater_trace_pod_t **pods,
                           size_t *n,
                           crater_error_t *err);
void crater_trace_nodes_free(crater_trace_node_t *nodes);
void crater_trace_free(crater_trace_pod_t *pods);

/* Build scheduler nodes from trace nodes. milli != 0: every GPU has 1000
 * memory units ("MiB" to the core) so gpu_milli shares stay exact, as the
 * FGD protocol needs. milli == 0: GPU memory comes from the knowledge base
 * for known models (a share becomes share x memory); unknown models (the
 * trace's G2, G3) fall back to 1000 units, and the caller should say so.
 * Caller frees with crater_cluster_destroy(). */
int crater_openb_cluster(const crater_trace_node_t *nodes,
                         size_t n,
                         const crater_kb_t *kb,
                         int milli,
                         crater_cluster_t **out,
                         crater_error_t *err);

/* A scheduler request for one replica of pod p on s (milli as above). */
int crater_openb_request(const crater_sched_t *s,
                         const crater_trace_pod_t *p,
                         int milli,
                         crater_request_t *r,
                         crater_error_t *err);

/* Locate the openb data: $CRATER_OPENB_DIR, else ../shared/data/openb
 * relative to the working directory, else relative to the source tree.
 * Returns a static path or NULL when absent. */
const char *crater_openb_dir(void);

#endif /* CRATER_SIM_H */
