/* internal.h - the scheduling core's private state, shared by the files of
 * src/sched and its plugins. Not installed; nothing outside src/sched
 * includes it.
 *
 * Layout. Per-node and per-GPU state live in flat arrays indexed by node id
 * and by a global GPU index (node_static.gpu_first + local index), split
 * into a static half (capacities, topology, models: fixed after add_node)
 * and a dynamic half (reservations, measurements, health). The dynamic
 * half of one node is small and contiguous so that it can be serialised
 * into a "state blob": nodes with the same static type and the same blob
 * form an equivalence class (index.c), which is what lets a decision look
 * at one representative per class instead of every node.
 *
 * All structs that are serialised are zeroed before use so that padding
 * bytes are deterministic.
 */
#ifndef CRATER_SCHED_INTERNAL_H
#define CRATER_SCHED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "crater/sched.h"

#define MAX_GPUS CRATER_MAX_GPUS_PER_NODE
#define MAX_NUMA CRATER_SCHED_MAX_NUMA
#define MAX_DEVS 16 /* storage devices per node the core schedules */

struct sched_model {
    char key[48];
    char vendor[16];
    uint32_t sm, cc;
    uint64_t hbm; /* bytes/s */
};

struct gpu_static {
    uint32_t mem_mib;
    uint16_t model;   /* index into sched.models */
    int8_t numa;      /* -1 unknown */
    uint8_t upstream; /* node-local id of its PCIe switch / root complex */
    uint64_t nvlink;  /* bit i: NVLink to local GPU i */
};

struct gpu_dyn {
    uint32_t reserved_mib; /* sum of charges */
    uint32_t used_mib;     /* measured */
    uint8_t ntasks;
    uint8_t whole;   /* held whole by one task */
    uint8_t nshared; /* of ntasks, time-shared whole-GPU jobs (fit.c) */
    uint8_t pad;
    float util;     /* measured SM utilisation */
    float pcie;     /* measured use of its upstream root */
    uint16_t share; /* their profiled use summed, thousandths */
    uint8_t pad2[2];
};

struct dev_static {
    uint64_t iops, bw;
    uint32_t latency_us;
    uint8_t iface;
    uint8_t pad[3];
};

struct dev_dyn {
    uint64_t iops_free, bw_free;
};

struct node_static {
    uint32_t type; /* static-type id (index.c) */
    uint32_t gpu_first, dev_first;
    uint16_t ngpus, ndevs, nnuma;
    uint64_t cpu_cap, mem_cap;
    uint64_t numa_cpu_cap[MAX_NUMA], numa_mem_cap[MAX_NUMA];
    uint64_t iops_cap, bw_cap;
    uint32_t gpu_mib_total;
};

struct node_dyn {
    uint64_t numa_cpu_free[MAX_NUMA];
    uint64_t numa_mem_free[MAX_NUMA];
    uint64_t cpu_free, mem_free;
    float util_cpu, util_mem, util_disk;
    uint8_t ready, cordoned;
    uint8_t pad[2];
};

struct task {
    uint64_t id;
    int32_t priority;
    bool preemptible;
    uint64_t start_ms;
    uint64_t ckpt_ms; /* last checkpoint; 0 = none (preempt.c) */
    crater_placement_t p;
};

/* The preemptible tasks of one priority on one node, summed (psum.c):
 * the most their release could give back, so that the preemption planner
 * skips a node where even releasing all of them could not make a request
 * fit. */
struct psum {
    int32_t prio;
    uint32_t n;     /* tasks */
    uint32_t ngpus; /* sum of their placements' GPU counts */
    uint64_t cpu, mem;
    uint64_t mib; /* sum of their GPU charges (MiB) */
};

/* The ids of the tasks on one node, in no order (state.c), for the
 * preemption planner. ver changes (to a new value of a sched-wide
 * counter, never reused) whenever the node's state or tasks change. ps
 * holds the node's preemptible tasks by priority, lowest first, one entry
 * per priority present (psum.c). */
struct node_tasks {
    uint64_t *ids;
    uint32_t n, cap;
    uint64_t ver;
    struct psum *ps;
    uint32_t nps, capps;
};

/* A priority with a count (of tasks or of nodes), in lists kept sorted
 * by priority, lowest first (psum.c). */
struct prio_count {
    int32_t prio;
    uint32_t n;
};

/* One node touch: the node got version ver (psum.c's log). */
struct touch {
    uint32_t node;
    uint64_t ver;
};

/* An open-addressing map from a byte blob to a uint32 value. */
struct blobmap {
    uint32_t *slots; /* value + 1, 0 = empty */
    uint32_t size;   /* power of two */
    uint32_t used;
};

/* A class's remembered evaluations for its last CLASS_MEMO request
 * shapes (place.c), keys apart so that a lookup reads only them. */
#define CLASS_MEMO 32
_Static_assert(CLASS_MEMO <= 32, "memo_ok is a 32-bit mask");

/* Live classes by GPU summary and free CPU (index.c): a grid row holds
 * the classes with a given number of free whole GPUs, or with max_room_mib
 * in a given 1 GiB bucket; its cells split them by cpu_free in 2-core
 * buckets (the last cell of a row, like the last room row, holds
 * everything above). nonempty has bit i set when cell i has classes. */
struct cbucket {
    uint32_t *ids;
    uint32_t n, cap;
};
#define ROOM_BUCKETS 128
#define CPU_BUCKETS 64
struct cgrid {
    struct cbucket cell[CPU_BUCKETS];
    uint64_t nonempty;
};

static inline uint32_t sched__room_bucket(uint32_t mib)
{
    uint32_t b = mib >> 10;
    return b < ROOM_BUCKETS - 1 ? b : ROOM_BUCKETS - 1;
}

static inline uint32_t sched__cpu_bucket(uint64_t milli)
{
    uint64_t b = milli / 2000;
    return b < CPU_BUCKETS - 1 ? (uint32_t)b : CPU_BUCKETS - 1;
}

/* Bit count without a libgcc call (no -mpopcnt in portable builds). */
static inline unsigned sched__popcount64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

struct sclass {
    uint64_t hash;
    uint8_t *blob;
    uint32_t bloblen;
    uint32_t *members; /* node ids, ascending */
    uint32_t nmembers, cap;
    uint32_t live_pos;   /* position in sched.live, UINT32_MAX if empty */
    uint32_t wpos, rpos; /* positions in its by_whole / by_room cell */
    /* precheck summary (request-independent upper bounds) */
    uint16_t free_whole;
    uint32_t max_room_mib; /* max over GPUs of admissible new charge */
    uint64_t cpu_free, mem_free;
    uint8_t usable; /* ready and not cordoned */
    uint8_t memo_next;
    uint32_t memo_ok;              /* bit i: memo_key[i] fits */
    uint64_t memo_key[CLASS_MEMO]; /* request shape + epoch; 0 = empty */
    double memo_score[CLASS_MEMO];
};

/* A live class's precheck summary, kept in a dense array parallel to
 * sched.live so that the per-decision scan reads 32 bytes per class. */
struct live_sum {
    uint64_t cpu_free, mem_free;
    uint32_t max_room_mib;
    uint16_t free_whole;
    uint8_t usable;
    uint8_t pad[5];
};

struct stype {
    uint8_t *blob;
    uint32_t bloblen;
    uint64_t hash;
};

struct crater_sched {
    /* configuration (copied) */
    uint32_t max_tasks;
    double overcommit, watermark;
    uint32_t ctx_mib;
    double cpu_thr, mem_thr, pcie_thr;
    double score_w[4]; /* gpu, cpu, memory, disk */
    crater_sched_weights_t w;
    bool prefer_low_util;
    uint64_t min_cpu_per_gpu; /* millicores */
    uint64_t min_mem_per_gpu;
    uint64_t preempt_min_ms; /* a task younger than this is no victim */
    /* scheduler.gpuShare: on, the most profiled use (thousandths) a
     * GPU's time-sharing jobs add up to, the slice margin */
    bool share_on;
    uint16_t share_max;
    double share_margin;
    const crater_kb_t *kb;
    crater_sched_env_t env;

    struct sched_model models[CRATER_SCHED_MAX_MODELS];
    uint32_t nmodels;

    uint32_t n, ncap;
    crater_node_t *nodes; /* deep copies: labels, taints, datasets */
    struct node_static *st;
    struct node_dyn *dyn;
    uint32_t ngpu, gcap;
    struct gpu_static *gs;
    struct gpu_dyn *gd;
    uint32_t ndev, dcap;
    struct dev_static *ds;
    struct dev_dyn *dd;

    struct task *tasks; /* open addressing by id; id 0 = empty slot */
    uint32_t tsize, tused;
    /* The preemptible tasks' priorities with how many hold each, lowest
     * first (few distinct: the classes), so that the victim floor the
     * pass asks for on every pass is the first one, not a scan of every
     * task (6% of a time-limited 300-node replay). */
    struct prio_count *pcount;
    uint32_t npcount, pcountcap;
    /* psum.c: the nodes by their lowest preemptible task's priority (how
     * many nodes hold a candidate for a request of a given priority), the
     * log of node touches in ver order (which nodes changed since a
     * failed plan), the ver of the last touch the log missed for lack of
     * memory (0: none), and the latest start or checkpoint recorded */
    struct prio_count *pnodes;
    uint32_t npnodes, pnodescap;
    struct touch *tlog;
    uint32_t ntlog, tlogcap;
    uint64_t tlog_lost;
    uint64_t since_max;

    /* index.c */
    struct blobmap namemap;
    struct stype *types;
    uint32_t ntypes, typecap;
    struct blobmap typemap;
    struct sclass *classes;
    uint32_t nclasses, classcap;
    struct blobmap classmap;
    uint32_t *free_classes;
    uint32_t nfree_classes, freecap;
    uint32_t *live;        /* ids of classes with members */
    struct live_sum *lsum; /* lsum[i] summarises classes[live[i]] */
    uint32_t lsumcap;
    uint32_t nlive, livecap;
    /* the live classes again, by free_whole and by room bucket (each
     * split by free CPU), so that a decision visits only the cells whose
     * classes its precheck could pass */
    struct cgrid by_whole[MAX_GPUS + 1];
    struct cgrid by_room[ROOM_BUCKETS];
    uint32_t *node_class; /* class of each node; nccap entries */
    uint32_t nccap;
    uint8_t *scratch; /* blob scratch buffer */
    uint32_t scratchcap;

    /* place.c: bumped whenever something besides a class's own state
     * could change an evaluation (weights, policy, typical pods, nodes) */
    uint64_t memo_epoch;
    /* state.c: tasks by node (ntcap entries, zeroed past the last node
     * that ever held a task) and the counter their ver values come from */
    struct node_tasks *ntasks;
    uint32_t ntcap;
    uint64_t ver_clock;
    /* preempt.c: the planner's per-node bounds and buffers */
    struct sched_pre *pre;
    /* gang.c: while its search runs, the GPUs (of the node evaluated) a
     * request may take; 0 = any. sched__pick_gpus() applies it. */
    uint64_t gpu_allow;
    /* policy.c */
    const struct sched_policy_ops *policy; /* NULL: "crater" */
    crater_typical_t *typical;             /* FGD's task distribution */
    size_t ntypical;
    /* per model: GPU demand of the typical tasks restricted to it (shared
     * among the models they allow) over its share of the cluster's GPUs;
     * computed by crater_sched_set_typical() */
    double scarcity[CRATER_SCHED_MAX_MODELS];
    /* sum over the typical tasks of weight x GPU demand^-0.6: the
     * normaliser of the "crater" policy's task weights (policy_frag.c);
     * computed by crater_sched_set_typical() */
    double crater_wsum;
    /* memory units of one GPU for a share's GPU demand (slice / unit):
     * the mean GPU memory of the cluster, 1000 in the FGD protocol's
     * milli-GPUs; computed by crater_sched_set_typical() */
    double typical_unit;
};

/* index.c */
int sched__type_of(crater_sched_t *s, uint32_t node);
int sched__reindex(crater_sched_t *s, uint32_t node);
int sched__name_add(crater_sched_t *s, uint32_t node);
void sched__index_free(crater_sched_t *s);
uint64_t sched__hash(const uint8_t *p, size_t n);

/* state.c */
struct task *sched__task_find(const crater_sched_t *s, uint64_t id);
uint32_t sched__room_mib(const crater_sched_t *s, uint32_t g);
/* Charge (sign +1) or return (-1) p on its node's dynamic state, exactly:
 * no task record changes and no reindexing (the caller restores it). */
void sched__apply(crater_sched_t *s, const crater_placement_t *p, int sign);
/* Give node a new ver: its state or its tasks changed. */
void sched__node_touch(crater_sched_t *s, uint32_t node);

/* preempt.c */
void sched__pre_free(crater_sched_t *s);

/* psum.c */
/* A sorted priority count list: room for one more entry (-1 ENOMEM). */
int sched__pcount_need(struct prio_count **v, uint32_t *cap, uint32_t n);
/* One more (sign +1) or one less (-1) at prio; the room was made. */
void sched__pcount_add(struct prio_count *v,
                       uint32_t *n,
                       int32_t prio,
                       int sign);
/* Room for one more preemptible task on node (listed in ntasks). */
int sched__psum_need(crater_sched_t *s, uint32_t node);
/* Preemptible task t came (+1) or went (-1): its node's sums. */
void sched__psum_add(crater_sched_t *s, const struct task *t, int sign);
/* Record that node got version ver (sched__node_touch). */
void sched__touch_log(crater_sched_t *s, uint32_t node, uint64_t ver);
/* The first log position whose ver is above ver; a node touched since is
 * at a position p from there with tlog[p].ver == ntasks[node].ver. */
uint32_t sched__touched_since(const crater_sched_t *s, uint64_t ver);
void sched__psum_free(crater_sched_t *s);

/* Per-evaluation context: what the filters have chosen so far. */
struct sched_ctx {
    crater_sched_t *s;
    uint32_t node;
    const crater_request_t *req;
    crater_placement_t p;              /* built up by the filters */
    uint64_t eligible;                 /* GPUs passing the capability filter */
    uint32_t numa_used, upstream_used; /* counts, for topology score */
    /* failure detail for explain */
    const char *why; /* static reason text */
    uint64_t need, have;
    int unit;      /* enum sched_unit: how need/have print */
    double pscore; /* set by a policy's pick_gpus for its score */
    double raw;    /* sched__eval: the score before the first-fit bias */
};

enum sched_unit {
    U_NONE,
    U_COUNT,
    U_MIB,
    U_MILLI,
    U_BYTES,
    U_PERCENT
};

/* Plugins: versioned ops structs in a static registry (plugins/registry.c),
 * one file each. A filter returns 0 to pass or -1 after setting c->why
 * (and need/have/unit when a quantity was short); it may add to c->p. A
 * score returns a value in [0, 1]; weight() gives its weight for this
 * request (0 skips it). */
#define SCHED_PLUGIN_VERSION 1

typedef struct sched_filter_ops {
    int version;
    const char *name;
    int (*filter)(struct sched_ctx *c);
} sched_filter_ops_t;

typedef struct sched_score_ops {
    int version;
    const char *name;
    double (*weight)(const crater_sched_t *s, const crater_request_t *r);
    double (*score)(const struct sched_ctx *c);
} sched_score_ops_t;

extern const sched_filter_ops_t *const sched__filters[];
extern const sched_score_ops_t *const sched__scores[];

/* fit.c: the reservation helpers filters share */
int sched__pick_gpus(struct sched_ctx *c, uint64_t cand);
int sched__pick_cpu_mem(struct sched_ctx *c);
uint64_t sched__gpu_mask_on_numa(const crater_sched_t *s,
                                 uint32_t node,
                                 int numa);
/* The charge a slice of slice MiB puts on GPU g (slice + context), or 0
 * when g cannot take it (room, task limit, the watermark when the charge
 * would go past physical memory, or the sharing rule: a time-shared
 * request (share > 0, its profiled use in thousandths) needs a GPU whose
 * tenants are all time-shared and whose profiled use plus share stays
 * within gpuShare.maxUtil; a plain slice (share 0) needs a GPU with no
 * time-shared tenant). */
uint32_t sched__slice_charge(const crater_sched_t *s,
                             uint32_t g,
                             uint32_t slice,
                             uint16_t share);
/* The sharing rule of sched__slice_charge alone. */
int sched__share_ok(const crater_sched_t *s, uint32_t g, uint16_t share);
/* 1 when charging charge MiB more on GPU g goes past its physical memory;
 * for a placement, when any of its slices does (whole GPUs never do). */
int sched__overcommits(const crater_sched_t *s, uint32_t g, uint32_t charge);
int sched__placement_overcommits(const crater_sched_t *s,
                                 const crater_placement_t *p);
/* What sched__eval() takes off the score of a placement that overcommits:
 * more than any policy's score range, so such placements rank last. */
#define SCHED_OVERCOMMIT_PENALTY 1e6
/* 1 when time-shared placement p joins tenants on one of its GPUs. */
int sched__placement_joins(const crater_sched_t *s,
                           const crater_placement_t *p);
/* What it takes off the score of a time-shared placement that joins
 * tenants: below every placement on empty GPUs, above any overcommit. */
#define SCHED_JOIN_PENALTY 1e5

/* Policies (policy.c): how feasible nodes rank and, optionally, which
 * GPUs a request takes in a node. score NULL: the weighted plugin scores;
 * pick_gpus NULL: fit.c (same contract as sched__pick_gpus). random_ties:
 * equal scores are broken uniformly at random over nodes with env.random
 * (place.c weights classes by their member count). */
#define SCHED_POLICY_VERSION 1

typedef struct sched_policy_ops {
    int version;
    const char *name;
    double (*score)(const struct sched_ctx *c);
    int (*pick_gpus)(struct sched_ctx *c, uint64_t cand);
    bool random_ties;
    bool uniform; /* every feasible node scores the same: place.c may
                     draw nodes uniformly and take the first that fits */
    /* First fit: a node's score is lowered by order_bias(s) x node id /
     * node count, so that near-equal nodes fill in id order (NULL: 0).
     * Applied by sched__eval(), outside the class memo (place.c). */
    double (*order_bias)(const crater_sched_t *s);
} sched_policy_ops_t;

void sched__policy_init(crater_sched_t *s, const char *name);
/* place.c: the weighted plugin scores (the "crater" ranking) */
double sched__plugin_score(const struct sched_ctx *c);
/* fit.c's GPU choice, without the policy override */
int sched__pick_gpus_default(struct sched_ctx *c, uint64_t cand);
/* policy_frag.c: node fragmentation with GPU free amounts left[] and free
 * CPU cpu (the FGD definition) */
double sched__frag(const crater_sched_t *s,
                   uint32_t node,
                   const uint32_t *left,
                   uint64_t cpu);
/* free GPU units per local GPU of node (0 for a GPU held whole) */
void sched__gpu_left(const crater_sched_t *s, uint32_t node, uint32_t *left);

#endif /* CRATER_SCHED_INTERNAL_H */
