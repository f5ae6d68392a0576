/* config.c - craterd.yaml: one table drives defaults, parsing, range
 * checks, the normalised encoding and doc/config.md.
 *
 * Why a table (as Redis does for redis.conf): the key a user writes, its
 * type, where it lands in crater_config_t, its default, its range and its
 * one-line description sit on one row, so the parser, the defaults and the
 * documentation cannot drift apart. Defaults are written as text and go
 * through exactly the parser user input goes through (crater_doc_parse()
 * then the row's type decoder), so a default outside its own range is
 * caught by the tests rather than shipped.
 *
 * Decoding walks the YAML mapping recursively, building the dotted key
 * ("scheduler.scoreWeights.gpu"); a key that is neither a row nor a
 * section is an error with file:line and the closest key in the table.
 * The rules that involve two keys (heartbeatTimeout > heartbeatInterval,
 * ...) run after the walk, on the final values, and name the key the user
 * actually wrote.
 *
 * Workload: loaded once at start-up (and by `crater validate`); nothing
 * here is performance sensitive, so lookups are linear scans of ~40 rows.
 */
#include "crater/config.h"

#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/cost.h"
#include "crater/doc.h"
#include "crater/kb.h"
#include "crater/units.h"

typedef enum row_type {
    T_FRACTION, /* double; 0.8 or "80%" */
    T_DOUBLE,
    T_UINT, /* uint32_t or uint64_t (by the member's size) */
    T_BOOL,
    T_DURATION, /* uint64_t milliseconds; "30s", "10m", bare = seconds */
    T_BYTES,    /* uint64_t bytes; "300Mi", bare = bytes */
    T_STRING,   /* char *, never empty */
    T_ENUM,     /* an enum member, stored as int */
    T_STRV,     /* char **, NULL-terminated */
    T_KB,       /* json_t *, a hardware knowledge base override list */
    T_MAP,      /* json_t *, an object of name: number in [min, max] */
} row_type_t;

enum {
    MIN_EXCL = 1
}; /* range is (min, max] rather than [min, max] */

typedef int (*check_f)(crater_dec_t *d, const void *field);

typedef struct row {
    const char *key;
    row_type_t type;
    size_t off, size;
    const char *def; /* YAML text, parsed like user input */
    double min, max; /* numbers; ms for durations; bytes for sizes */
    unsigned flags;
    const char *const *names; /* T_ENUM, NULL-terminated */
    check_f check;            /* optional extra validation */
    const char *doc;
} row_t;

#define F(m) offsetof(crater_config_t, m), sizeof(((crater_config_t *)0)->m)
#define DAY_MS (86400.0 * 1000)

static const char *const migration_names[] = {"conservative",
                                              "immediate",
                                              "never",
                                              NULL};
static const char *const backend_names[] = {"sqlite", "etcd", NULL};
static const char *const election_names[] = {"auto", "off", NULL};
static const char *const typical_names[] = {"learned", "prior", "off", NULL};
static const char *const basis_names[] = {"allocation",
                                          "usage",
                                          "billing",
                                          NULL};

static int check_listen(crater_dec_t *d, const void *field);
static int check_gateway(crater_dec_t *d, const void *field);
static int check_policy(crater_dec_t *d, const void *field);
static int check_urls(crater_dec_t *d, const void *field);
static int check_uid_range(crater_dec_t *d, const void *field);
static int check_abs_path(crater_dec_t *d, const void *field);
static int check_billing(crater_dec_t *d, const void *field);

/* Section names: mappings that group rows. */
static const char *const sections[] = {"scheduler",
                                       "scheduler.scoreWeights",
                                       "scheduler.pluginWeights",
                                       "scheduler.gpuShare",
                                       "agent",
                                       "monitoring",
                                       "inference",
                                       "server",
                                       "logs",
                                       "store",
                                       "ha",
                                       "cost",
                                       "hardware_knowledge_base",
                                       NULL};

/* clang-format off */
static const row_t rows[] = {
{"scheduler.scoreWeights.gpu", T_FRACTION, F(scheduler.score_weights.gpu),
 "0.25", 0, 1, 0, NULL, NULL,
 "Weight of free GPU capacity in the joint node score "
 "sum(w * (1 - utilisation))."},
{"scheduler.scoreWeights.cpu", T_FRACTION, F(scheduler.score_weights.cpu),
 "0.25", 0, 1, 0, NULL, NULL,
 "Weight of free CPU in the joint node score."},
{"scheduler.scoreWeights.memory", T_FRACTION,
 F(scheduler.score_weights.memory), "0.25", 0, 1, 0, NULL, NULL,
 "Weight of free memory in the joint node score."},
{"scheduler.scoreWeights.disk", T_FRACTION, F(scheduler.score_weights.disk),
 "0.25", 0, 1, 0, NULL, NULL,
 "Weight of free disk bandwidth and IOPS in the joint node score."},
{"scheduler.cpuThreshold", T_FRACTION, F(scheduler.cpu_threshold), "0.8",
 0, 1, MIN_EXCL, NULL, NULL,
 "Measured CPU utilisation above which a node takes no new tasks (0.7 "
 "suits training whose data loading slows before the CPUs saturate)."},
{"scheduler.memoryThreshold", T_FRACTION, F(scheduler.memory_threshold),
 "0.8", 0, 1, MIN_EXCL, NULL, NULL,
 "Measured memory utilisation above which a node takes no new tasks."},
{"scheduler.maxTasksPerGPU", T_UINT, F(scheduler.max_tasks_per_gpu), "8",
 1, 64, 0, NULL, NULL,
 "Most tasks sharing one GPU; each one costs a CUDA context "
 "(gpuContextOverhead)."},
{"scheduler.overcommitRatio", T_DOUBLE, F(scheduler.overcommit_ratio),
 "1.0", 1, 4, 0, NULL, NULL,
 "GPU memory slices on a GPU may add up to this multiple of its memory "
 "(1.0: no overcommit)."},
{"scheduler.safetyWatermark", T_FRACTION, F(scheduler.safety_watermark),
 "0.9", 0, 1, MIN_EXCL, NULL, NULL,
 "Fraction of a GPU's memory that may actually be in use on an "
 "overcommitted GPU."},
{"scheduler.gpuContextOverhead", T_BYTES, F(scheduler.gpu_context_overhead),
 "300Mi", 0, 16.0 * 1024 * 1024 * 1024, 0, NULL, NULL,
 "GPU memory charged per task for its CUDA context (about 300 MB is "
 "typical; a PyTorch context measured 520 MiB on an H200)."},
{"scheduler.preferLowUtilization", T_BOOL, F(scheduler.prefer_low_utilization),
 "false", 0, 0, 0, NULL, NULL,
 "Prefer the least utilised nodes instead of packing (spreads warm "
 "inference replicas)."},
{"scheduler.policy", T_STRING, F(scheduler.policy), "crater", 0, 0, 0, NULL,
 check_policy, "Scheduling policy: crater (fragmentation against the "
 "typical tasks, see typicalTasks; the one that beats FGD), or one of "
 "the FGD paper's baselines for comparison (random, dotprod, "
 "gpuclustering, gpupacking, bestfit, fgd) or k8s (Kubernetes-default-"
 "like)."},
{"scheduler.typicalTasks", T_ENUM, F(scheduler.typical_tasks), "learned",
 0, 0, 0, typical_names, NULL,
 "The typical-task distribution crater and fgd measure fragmentation "
 "against: learned (a decayed histogram of the submissions, after a prior "
 "of 1, 2, 4 and 8 whole GPUs until typicalMinSamples), prior (that prior "
 "only), or off (crater is the plugin scores alone)."},
{"scheduler.typicalHalfLife", T_UINT, F(scheduler.typical_half_life),
 "1000", 1, 10000000, 0, NULL, NULL,
 "Submissions after which a submission weighs half in the learned "
 "typical-task histogram."},
{"scheduler.typicalMinSamples", T_UINT, F(scheduler.typical_min_samples),
 "100", 0, 10000000, 0, NULL, NULL,
 "Submissions seen before the learned typical-task histogram replaces "
 "the prior."},
{"scheduler.backfill", T_BOOL, F(scheduler.backfill), "true", 0, 0, 0, NULL,
 NULL, "Let small jobs start ahead of the queue head when they do not "
 "delay it."},
{"scheduler.pluginWeights.joint", T_DOUBLE,
 F(scheduler.plugin_weights.joint), "0.25", 0, 100, 0, NULL, NULL,
 "Weight of the joint score (scoreWeights over gpu/cpu/memory/disk; "
 "favours the least allocated nodes)."},
{"scheduler.pluginWeights.packing", T_DOUBLE,
 F(scheduler.plugin_weights.packing), "1.0", 0, 100, 0, NULL, NULL,
 "Weight of the fragmentation-aware packing score (favours nodes the "
 "task fills best)."},
{"scheduler.pluginWeights.topology", T_DOUBLE,
 F(scheduler.plugin_weights.topology), "0.5", 0, 100, 0, NULL, NULL,
 "Weight of topology affinity (a job's GPUs on few PCIe switches and "
 "NUMA nodes, its CPUs on theirs)."},
{"scheduler.pluginWeights.locality", T_DOUBLE,
 F(scheduler.plugin_weights.locality), "1.0", 0, 100, 0, NULL, NULL,
 "Weight of preferred data locality (the dataset is cached on the "
 "node)."},
{"scheduler.pluginWeights.lowUtilization", T_DOUBLE,
 F(scheduler.plugin_weights.low_utilization), "1.0", 0, 100, 0, NULL, NULL,
 "Weight of low measured GPU utilisation, for jobs that ask for it and "
 "everywhere when preferLowUtilization is set."},
{"scheduler.minCpuPerGpu", T_DOUBLE, F(scheduler.min_cpu_per_gpu), "0", 0,
 1024, 0, NULL, NULL,
 "Cores a node keeps free for each of its free GPUs, so CPU-heavy work "
 "cannot strand GPUs (0: off)."},
{"scheduler.minMemoryPerGpu", T_BYTES, F(scheduler.min_memory_per_gpu),
 "0", 0, 1099511627776.0, 0, NULL, NULL,
 "Memory a node keeps free for each of its free GPUs (0: off)."},
{"scheduler.pcieThreshold", T_FRACTION, F(scheduler.pcie_threshold), "0.9",
 0, 1, MIN_EXCL, NULL, NULL,
 "Measured PCIe bandwidth use of a root complex above which its GPUs "
 "take no new tasks."},
{"scheduler.maxCheckpointGrace", T_DURATION,
 F(scheduler.max_checkpoint_grace_ms), "10m", 0, 7 * DAY_MS, 0, NULL, NULL,
 "A preempted job that has reported checkpoints gets at least its longest "
 "measured checkpoint time (plus a quarter) between SIGTERM and SIGKILL, "
 "up to this; its gracePeriod when that is longer (0: gracePeriod only)."},
{"scheduler.preemptionMinRuntime", T_DURATION,
 F(scheduler.preemption_min_runtime_ms), "2m", 0, 7 * DAY_MS, 0, NULL, NULL,
 "A task that has run less than this is not preempted, so that short "
 "high-priority jobs cannot preempt the same job over and over (0: off)."},
{"scheduler.resourceGracePeriod", T_DURATION,
 F(scheduler.resource_grace_period_ms), "30s", 0, 3600e3, 0, NULL, NULL,
 "How long a finished task's resources stay reserved so that a quick "
 "restart gets them back."},

{"scheduler.idleGpuThreshold", T_FRACTION, F(scheduler.idle_gpu_threshold),
 "0.05", 0, 1, MIN_EXCL, NULL, NULL,
 "A GPU reads idle while its measured SM utilisation (share of time a "
 "kernel ran) and memory activity (share of time memory was read or "
 "written, not memory held) are both below this."},
{"scheduler.idleGpuWindow", T_DURATION, F(scheduler.idle_gpu_window_ms),
 "0", 0, 30 * DAY_MS, 0, NULL, NULL,
 "A job whose GPUs all read idle this long is warned, then reclaimed "
 "(checkpointing preemption, notice idle, requeued) after "
 "idleGpuGrace (0: off)."},
{"scheduler.idleGpuGrace", T_DURATION, F(scheduler.idle_gpu_grace_ms),
 "30m", 0, 30 * DAY_MS, 0, NULL, NULL,
 "How long a job warned for idle GPUs may stay idle before it is "
 "reclaimed."},

{"scheduler.gpuShare.enabled", T_BOOL, F(scheduler.gpu_share.enabled),
 "false", 0, 0, 0, NULL, NULL,
 "Time-share GPUs between whole-GPU jobs whose measured profile shows low "
 "GPU use: such a job is placed as a memory slice of its measured peak "
 "(enforced like any slice) on a GPU whose tenants' profiled use stays "
 "within maxUtil (doc/scheduling.md \"GPU sharing\")."},
{"scheduler.gpuShare.maxUtil", T_FRACTION, F(scheduler.gpu_share.max_util),
 "0.9", 0, 1, MIN_EXCL, NULL, NULL,
 "Most profiled GPU utilisation the time-sharing jobs of one GPU may add "
 "up to; a job measured at or above it is never shared."},
{"scheduler.gpuShare.memoryMargin", T_DOUBLE,
 F(scheduler.gpu_share.memory_margin), "0.2", 0, 4, 0, NULL, NULL,
 "A shared job's slice is its measured peak GPU memory times (1 + this)."},
{"scheduler.gpuShare.minSamples", T_UINT, F(scheduler.gpu_share.min_samples),
 "12", 1, 1000000, 0, NULL, NULL,
 "Utilisation readings of a job holding its GPUs alone before its profile "
 "counts (a job with fewer is not shared)."},

{"agent.heartbeatInterval", T_DURATION, F(agent.heartbeat_interval_ms), "5s",
 100, 600e3, 0, NULL, NULL, "Time between two heartbeats of an agent."},
{"agent.heartbeatTimeout", T_DURATION, F(agent.heartbeat_timeout_ms), "30s",
 1e3, 3600e3, 0, NULL, NULL,
 "A node that has not heartbeated for this long is NotReady (raise it, "
 "e.g. to 90s, on networks with blips)."},
{"agent.migrationPolicy", T_ENUM, F(agent.migration_policy), "conservative",
 0, 0, 0, migration_names, NULL,
 "What happens to the tasks of a NotReady node: conservative (tasks "
 "running longer than migrationMinRuntime wait for a reconnect), "
 "immediate (requeue), never (mark failed)."},
{"agent.migrationMinRuntime", T_DURATION, F(agent.migration_min_runtime_ms),
 "10m", 0, 7 * DAY_MS, 0, NULL, NULL,
 "Under the conservative policy, tasks that ran longer than this are not "
 "requeued on a heartbeat timeout."},
{"agent.gracePeriod", T_DURATION, F(agent.grace_period_ms), "30s", 0,
 DAY_MS, 0, NULL, NULL,
 "Default time between SIGTERM and SIGKILL when a task is stopped (a "
 "job's gracePeriod overrides it)."},
{"agent.cpuLimitMultiplier", T_DOUBLE, F(agent.cpu_limit_multiplier), "1.0",
 1, 16, 0, NULL, NULL,
 "Default CPU quota as a multiple of the CPU request."},
{"agent.taskUser", T_STRING, F(agent.task_user), "nobody", 0, 0, 0, NULL,
 NULL, "Unprivileged user that tasks run as."},
{"agent.allowRootTasks", T_BOOL, F(agent.allow_root_tasks), "false", 0, 0,
 0, NULL, NULL, "Allow taskUser to be root."},
{"agent.pidsLimit", T_UINT, F(agent.pids_limit), "4096", 0, 4194304, 0, NULL,
 NULL, "Most processes and threads one task may have at once (the pids "
 "controller's pids.max): a fork bomb stops there instead of taking the "
 "node down. 0 = no limit."},
{"agent.spareTasks", T_UINT, F(agent.spare_tasks), "64", 0, 1024, 0, NULL,
 NULL, "Task directories and working directories an agent makes ahead "
 "when it starts (at idle CPU priority), so that a burst of short tasks "
 "takes ready ones instead of creating files; finished tasks' ones are "
 "kept for the next tasks as well, up to 1024 (doc/agent.md)."},
{"agent.tenantUsers", T_BOOL, F(agent.tenant_users), "true", 0, 0, 0, NULL,
 NULL, "Run each tenant's tasks under the tenant's own uid and gid, which "
 "craterd allocates from server.taskUidRange (the same on every node): "
 "one tenant's tasks cannot read another's /proc/PID/environ or signal "
 "them. false: every task runs as taskUser (all tenants share one uid)."},
{"agent.hideProcesses", T_BOOL, F(agent.hide_processes), "true", 0, 0, 0,
 NULL, NULL, "Give each task its own mount of /proc with hidepid=invisible "
 "(a private mount namespace): it sees only its own user's processes, not "
 "other tenants' nor the agent's. Needs Linux 5.8; without it the agent "
 "warns once and tasks see every process."},
{"agent.workRoot", T_STRING, F(agent.work_root), "/var/lib/crater/work", 0,
 0, 0, NULL, check_abs_path, "Where an agent running as root makes "
 "default working directories (made 0711 and root-owned; each task's is "
 "0700 and its own): outside the agent's 0700 data directory, so a task "
 "user reaches its own. An agent that is not root uses DATA/work."},

{"monitoring.sampling_interval_ms", T_UINT, F(monitoring.sampling_interval_ms),
 "5000", 100, 3600e3, 0, NULL, NULL,
 "Milliseconds between two usage samples on an agent (a number, not a "
 "duration string)."},
{"monitoring.smoothing_window", T_UINT, F(monitoring.smoothing_window), "10",
 1, 1000, 0, NULL, NULL,
 "Number of recent samples averaged into the utilisation the scheduler "
 "sees."},

{"inference.warmPoolSize", T_UINT, F(inference.warm_pool_size), "0", 0, 1024,
 0, NULL, NULL,
 "Default number of warm (loaded, idle) replicas per inference service."},
{"inference.maxBatchSize", T_UINT, F(inference.max_batch_size), "32", 1,
 65536, 0, NULL, NULL, "Default largest request batch of an inference "
 "service."},
{"inference.batchTimeout", T_DURATION, F(inference.batch_timeout_ms), "10ms",
 0, 60e3, 0, NULL, NULL,
 "Default longest wait for a batch to fill before it is run."},
{"inference.activationTimeout", T_DURATION,
 F(inference.activation_timeout_ms), "60s", 0, 3600e3, 0, NULL, NULL,
 "How long the gateway holds a request to a service with no ready replica "
 "(scaled to zero, starting) before answering 503; 0 answers 503 at "
 "once."},
{"inference.gateway", T_STRING, F(inference.gateway), "127.0.0.1:7481", 0, 0,
 0, NULL, check_gateway, "Address (HOST:PORT, port 0 = any free one) of "
 "the inference gateway craterd runs for its services, or none."},

{"server.listen", T_STRING, F(server.listen), "127.0.0.1:7480", 0, 0, 0,
 NULL, check_listen, "Address and port (HOST:PORT) of the REST API and "
 "dashboard."},
{"server.dataDir", T_STRING, F(server.data_dir), "./var", 0, 0, 0, NULL,
 NULL, "Directory for the SQLite store and the decision log."},
{"server.taskUidRange", T_STRING, F(server.task_uid_range), "200000-299999",
 0, 0, 0, NULL, check_uid_range, "Uids (and gids) craterd gives tenants, "
 "one each, kept with the tenant in the store: FIRST-LAST, outside every "
 "real user's and /etc/subuid's range; none: no per-tenant users (tasks "
 "run as agent.taskUser)."},
{"server.maxBodySize", T_BYTES, F(server.max_body_bytes), "1Mi", 1024,
 1024.0 * 1024 * 1024, 0, NULL, NULL,
 "Largest request body the API accepts."},
{"server.decisionLogRetention", T_DURATION,
 F(server.decision_log_retention_ms), "30d", 3600e3, 3650 * DAY_MS, 0, NULL,
 NULL, "How long scheduling decisions are kept (30 days leaves time to "
 "investigate intermittent failures)."},
{"server.auditLogRetention", T_DURATION,
 F(server.audit_log_retention_ms), "365d", 3600e3, 3650 * DAY_MS, 0, NULL,
 NULL, "How long the audit log (who submitted, cancelled, drained, made "
 "tokens or changed quotas, from where) is kept."},

{"server.maxConnections", T_UINT, F(server.max_connections), "4096", 16,
 1000000, 0, NULL, NULL,
 "Most open API connections; beyond it new ones wait in the listen "
 "backlog."},
{"server.maxConnectionsPerClient", T_UINT,
 F(server.max_connections_per_client), "256", 0, 1000000, 0, NULL, NULL,
 "Most open API connections from one source address (an agent holds 4); "
 "one more is closed when it is accepted. 0 = no limit."},
{"server.gangPortBase", T_UINT, F(server.gang_port_base), "29500", 1024,
 65535, 0, NULL, NULL,
 "First port craterd gives a multi-replica job as MASTER_PORT (the "
 "rank-0 replica's rendezvous port, torchrun's default 29500)."},
{"server.gangPorts", T_UINT, F(server.gang_ports), "1000", 1, 64512, 0,
 NULL, NULL,
 "How many ports from server.gangPortBase (up to 65535) craterd chooses "
 "MASTER_PORT from: the first one, counting from the job id modulo this "
 "count, that no other placed gang with its rank 0 on the same node "
 "holds and no process there listens on (its agent's heartbeat)."},
{"server.headerTimeout", T_DURATION, F(server.header_timeout_ms), "10s", 0,
 3600e3, 0, NULL, NULL,
 "A request's header must be complete this long after its first line "
 "arrives (after the connection opens, for its first request), however "
 "slowly its bytes keep coming; otherwise the connection is closed. "
 "0 = no header timeout."},
{"server.requestRate", T_DOUBLE, F(server.request_rate), "200", 0, 1e6, 0,
 NULL, NULL,
 "Requests per second one source address may make (a token bucket); "
 "beyond it the API answers 429 with Retry-After. Requests with an "
 "admin or agent token are not counted. 0 = no limit."},
{"server.requestBurst", T_UINT, F(server.request_burst), "400", 1, 10000000,
 0, NULL, NULL,
 "Requests one source address may make at once above requestRate (the "
 "bucket's size)."},

{"server.jobRetention", T_DURATION, F(server.job_retention_ms), "7d",
 1e3, 3650 * DAY_MS, 0, NULL, NULL,
 "How long a finished job (succeeded, failed, cancelled) stays visible, "
 "with its events and logs, before craterd forgets it; a job still named "
 "in a waiting job's \"after\" is kept."},

{"server.defaultCpu", T_DOUBLE, F(server.default_cpu), "1", 0, 1024, 0,
 NULL, NULL,
 "CPU cores a job gets (request and limit) when it asks for none, as a "
 "Kubernetes LimitRange default; a tenant's own default "
 "(PUT /api/v1/tenants) wins. 0: none (such a job runs unlimited)."},
{"server.defaultMemory", T_BYTES, F(server.default_memory), "1Gi", 0,
 1024.0 * 1024 * 1024 * 1024 * 1024, 0, NULL, NULL,
 "Memory a job gets (request and limit) when it asks for none; a "
 "tenant's own default wins. 0: none."},

{"logs.maxBytes", T_BYTES, F(logs.max_bytes), "256Mi", 4096,
 1024.0 * 1024 * 1024 * 1024, 0, NULL, NULL,
 "Most output craterd keeps of each stream (stdout, stderr) of each attempt "
 "of a job; the rest is dropped and a line at the end of the log says so."},

{"store.backend", T_ENUM, F(store.backend), "sqlite", 0, 0, 0, backend_names,
 NULL, "Where the control plane keeps its state: sqlite (embedded, under "
 "dataDir) or etcd (replicated, through etcd's v3 JSON gateway; the "
 "store.etcd* keys, doc/store.md)."},
{"store.etcdEndpoints", T_STRV, F(store.etcd_endpoints), "[]", 0, 0, 0, NULL,
 check_urls, "etcd client URLs (http:// or https://); required when "
 "backend is etcd."},
{"store.etcdPrefix", T_STRING, F(store.etcd_prefix), "/crater/", 0, 0, 0,
 NULL, NULL, "Prefix of every key craterd writes in etcd (several "
 "clusters may share one etcd under different prefixes)."},
{"store.etcdCaFile", T_STRING, F(store.etcd_ca_file), "none", 0, 0, 0, NULL,
 NULL, "CA bundle that verifies etcd's https:// certificate; none: the "
 "system's."},
{"store.etcdCertFile", T_STRING, F(store.etcd_cert_file), "none", 0, 0, 0,
 NULL, NULL, "TLS client certificate for etcd (with etcdKeyFile); none: "
 "no client certificate."},
{"store.etcdKeyFile", T_STRING, F(store.etcd_key_file), "none", 0, 0, 0,
 NULL, NULL, "Private key of etcdCertFile."},
{"store.etcdUser", T_STRING, F(store.etcd_user), "none", 0, 0, 0, NULL, NULL,
 "etcd user (etcd auth enabled); none: no authentication."},
{"store.etcdPassword", T_STRING, F(store.etcd_password), "none", 0, 0, 0,
 NULL, NULL, "Password of etcdUser (keep this file mode 0600)."},
{"store.etcdMaxRequestBytes", T_BYTES, F(store.etcd_max_request_bytes),
 "1536Ki", 65536, 1024.0 * 1024 * 1024, 0, NULL, NULL,
 "etcd's --max-request-bytes: a transaction larger than this (less 8 KiB) "
 "is refused before it is sent, naming its largest key."},
{"store.historyRetention", T_DURATION, F(store.history_retention_ms), "5m", 0,
 3650 * DAY_MS, 0, NULL, NULL,
 "How long the store keeps its change history (every revision of every "
 "key): craterd compacts it to the revision it had this long ago, as etcd's "
 "periodic auto-compaction does; a forgotten job's history goes this long "
 "after it. 0 = never compact (the history grows without bound)."},

{"ha.election", T_ENUM, F(ha.election), "auto", 0, 0, 0, election_names,
 NULL, "Leader election among the craterds sharing one store: auto (with "
 "store.backend etcd: one leader schedules and writes, the others stand by "
 "and take over; with sqlite: none) or off (run exactly one craterd per "
 "store)."},
{"ha.leaseDuration", T_DURATION, F(ha.lease_ms), "3s", 1000, 3600000, 0,
 NULL, NULL, "TTL of the leader's etcd lease (rounded up to whole seconds "
 "by etcd): a standby takes over at most this long after the leader last "
 "renewed it (kill -9: failover in about leaseDuration + retryPeriod)."},
{"ha.renewDeadline", T_DURATION, F(ha.renew_deadline_ms), "2s", 100,
 3600000, 0, NULL, NULL, "A leader that has not renewed its lease for this "
 "long pauses (stops scheduling and answers the API with 503) before the "
 "lease can expire, resumes if a renewal then succeeds, and steps down "
 "after twice leaseDuration; shorter than leaseDuration."},
{"ha.retryPeriod", T_DURATION, F(ha.retry_ms), "500ms", 10, 3600000, 0,
 NULL, NULL, "How often the leader renews its lease and a standby tries to "
 "become leader; shorter than renewDeadline."},
{"ha.advertiseUrl", T_STRING, F(ha.advertise_url), "none", 0, 0, 0, NULL,
 NULL, "URL the other craterds, agents and clients reach this craterd at "
 "(written in the leader key); none: http:// + the listen address (the "
 "host name when it listens on every address)."},
{"ha.warmStandby", T_BOOL, F(ha.warm_standby), "true", 0, 0, 0, NULL, NULL,
 "A standby keeps a copy of the store's records current from the change "
 "feed and, when elected, loads the state from it after catching up (only "
 "the changes since); false: it holds nothing and reads the whole store "
 "when elected (slower failover as the store grows, less memory)."},

{"cost.currency", T_STRING, F(cost.currency), "USD", 0, 0, 0, NULL, NULL,
 "Currency the prices are in (a label: amounts are kept in micro-units "
 "of it, never as floating point)."},
{"cost.basis", T_ENUM, F(cost.basis), "allocation", 0, 0, 0, basis_names,
 NULL, "What costCap, tenant budgets and `crater cost` count by default: "
 "allocation (max of request and measured use), usage (measured use) or "
 "billing (billingWeights units x billingUnitHour)."},
{"cost.gpuHour", T_DOUBLE, F(cost.gpu_hour), "0", 0, 1e6, 0, NULL, NULL,
 "Price of a GPU-hour for models not in gpuModels; 0: derive it from the "
 "GPU's capability (gpuSmHour x SMs + gpuHbmTBpsHour x HBM TB/s)."},
{"cost.gpuSmHour", T_DOUBLE, F(cost.gpu_sm_hour), "0.01", 0, 1e4, 0, NULL,
 NULL, "Derived GPU price: per streaming multiprocessor-hour."},
{"cost.gpuHbmTBpsHour", T_DOUBLE, F(cost.gpu_hbm_tbps_hour), "0.5", 0, 1e4,
 0, NULL, NULL, "Derived GPU price: per TB/s of memory bandwidth-hour."},
{"cost.gpuModels", T_MAP, F(cost.gpu_models), "{}", 0, 1e6, 0, NULL, NULL,
 "Price of a GPU-hour per model (knowledge-base key, e.g. "
 "`{h100-sxm5-80gb: 2.5}`); wins over gpuHour and the derivation."},
{"cost.cpuCoreHour", T_DOUBLE, F(cost.cpu_core_hour), "0.04", 0, 1e4, 0,
 NULL, NULL, "Price of a CPU core-hour (a hardware thread counts as a "
 "core)."},
{"cost.memoryGiBHour", T_DOUBLE, F(cost.memory_gib_hour), "0.005", 0, 1e4,
 0, NULL, NULL, "Price of a GiB-hour of memory."},
{"cost.diskKiopsHour", T_DOUBLE, F(cost.disk_kiops_hour), "0", 0, 1e4, 0,
 NULL, NULL, "Price of 1,000 disk IOPS for an hour."},
{"cost.diskGBpsHour", T_DOUBLE, F(cost.disk_gbps_hour), "0", 0, 1e4, 0,
 NULL, NULL, "Price of 1 GB/s of disk bandwidth for an hour."},
{"cost.tenantRates", T_MAP, F(cost.tenant_rates), "{}", 0, 100, 0, NULL,
 NULL, "Per-tenant price override, as a factor on every price "
 "(`{research: 0.5}`: research pays half); the ledger's invariant is kept "
 "at list prices."},
{"cost.tenantBudgets", T_MAP, F(cost.tenant_budgets), "{}", 0, 1e12, 0,
 NULL, NULL, "Per-tenant budget over budgetWindow (`{research: 1000}`): a "
 "tenant that has spent it has new submissions refused."},
{"cost.budgetWindow", T_DURATION, F(cost.budget_window_ms), "30d", 3600e3,
 3650 * DAY_MS, 0, NULL, NULL, "The window tenantBudgets count over."},
{"cost.billingWeights", T_STRING, F(cost.billing_weights), "none", 0, 0, 0,
 NULL, check_billing, "Slurm TRESBillingWeights for the billing basis, "
 "e.g. `CPU=1.0,Mem=0.25G,GRES/gpu=2.0` (Mem per MB, or per KB..PB with a "
 "suffix); none: no billing basis."},
{"cost.billingMaxTres", T_BOOL, F(cost.billing_max_tres), "false", 0, 0, 0,
 NULL, NULL, "Bill the largest weighted TRES instead of their sum "
 "(Slurm's PriorityFlags=MAX_TRES)."},
{"cost.billingMaxTresGres", T_BOOL, F(cost.billing_max_tres_gres), "false", 0,
 0, 0, NULL, NULL, "Bill the GPUs' weighted count plus the largest of the "
 "other weighted TRES (Slurm's PriorityFlags=MAX_TRES_GRES); not with "
 "billingMaxTres."},
{"cost.billingUnitHour", T_DOUBLE, F(cost.billing_unit_hour), "0", 0, 1e4,
 0, NULL, NULL, "Price of one billing unit for an hour."},
{"cost.retention", T_DURATION, F(cost.retention_ms), "90d", 3600e3,
 3650 * DAY_MS, 0, NULL, NULL, "How long the hourly ledger rows are kept "
 "(a job's totals are kept with it)."},

{"hardware_knowledge_base.override", T_KB, F(kb_override), "[]", 0, 0, 0,
 NULL, NULL, "Knowledge base entries to replace or add; each names its "
 "type (gpu or cpu), its model and the values to set."},
};
/* clang-format on */

#define NROWS (sizeof(rows) / sizeof(rows[0]))
_Static_assert(sizeof(crater_migration_policy_t) == sizeof(int)
                   && sizeof(crater_store_backend_t) == sizeof(int)
                   && sizeof(crater_ha_election_t) == sizeof(int)
                   && sizeof(crater_typical_mode_t) == sizeof(int)
                   && sizeof(crater_cost_basis_t) == sizeof(int),
               "T_ENUM rows store an int");
#define MAX_STRING 1024
#define MAX_ENDPOINTS 32

/* ---- small helpers ------------------------------------------------------ */

static void *field_at(crater_config_t *c, const row_t *r)
{
    return (char *)c + r->off;
}

static const void *cfield_at(const crater_config_t *c, const row_t *r)
{
    return (const char *)c + r->off;
}

static const row_t *find_row(const char *key)
{
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(rows[i].key, key) == 0)
            return &rows[i];
    return NULL;
}

static int is_section(const char *key)
{
    for (size_t i = 0; sections[i]; i++)
        if (strcmp(sections[i], key) == 0)
            return 1;
    return 0;
}

static size_t enum_count(const row_t *r)
{
    size_t n = 0;

    while (r->names[n])
        n++;
    return n;
}

/* "[0, 1]", "(0, 1]", "[100ms, 10m]", "[1Ki, 1Gi]"; "" when the row has
 * no numeric range. */
static char *format_range(const row_t *r, char *buf, size_t size)
{
    char lo[40], hi[40];
    const char *open = r->flags & MIN_EXCL ? "(" : "[";

    switch (r->type) {
    case T_FRACTION:
    case T_DOUBLE:
    case T_MAP:
        snprintf(buf, size, "%s%g, %g]", open, r->min, r->max);
        break;
    case T_UINT:
        snprintf(buf, size, "%s%.0f, %.0f]", open, r->min, r->max);
        break;
    case T_DURATION:
        crater_format_quantity((uint64_t)r->min * 1000000,
                               CRATER_DIM_DURATION,
                               lo,
                               sizeof(lo));
        crater_format_quantity((uint64_t)r->max * 1000000,
                               CRATER_DIM_DURATION,
                               hi,
                               sizeof(hi));
        snprintf(buf, size, "%s%s, %s]", open, lo, hi);
        break;
    case T_BYTES:
        crater_format_quantity((uint64_t)r->min,
                               CRATER_DIM_BYTES,
                               lo,
                               sizeof(lo));
        crater_format_quantity((uint64_t)r->max,
                               CRATER_DIM_BYTES,
                               hi,
                               sizeof(hi));
        snprintf(buf, size, "%s%s, %s]", open, lo, hi);
        break;
    default:
        buf[0] = '\0';
    }
    return buf;
}

static int in_range(const row_t *r, double x)
{
    if (r->flags & MIN_EXCL)
        return x > r->min && x <= r->max;
    return x >= r->min && x <= r->max;
}

static int range_fail(crater_dec_t *d, const row_t *r, const char *shown)
{
    char range[96];

    return crater_dec_fail(d,
                           CRATER_ERANGE,
                           "%s is out of range %s",
                           shown,
                           format_range(r, range, sizeof(range)));
}

/* ---- one value per type ------------------------------------------------- */

/* "80%", "12.5%": digits with at most one '.', then '%'. The decimal
 * point is moved by handing "80e-2" to strtod, so "80%" is exactly the
 * double nearest to 0.8, the same value as writing 0.8. */
static int parse_percent(const char *s, double *out)
{
    size_t n = strlen(s), digits = 0, dots = 0;
    char buf[48], *end;

    if (n < 2 || n > 32 || s[n - 1] != '%')
        return -1;
    for (size_t i = 0; i + 1 < n; i++) {
        if (isdigit((unsigned char)s[i]))
            digits++;
        else if (s[i] != '.' || dots++)
            return -1;
    }
    if (!digits)
        return -1;
    snprintf(buf, sizeof(buf), "%.*se-2", (int)(n - 1), s);
    *out = strtod(buf, &end);
    return *end ? -1 : 0;
}

static int dec_fraction(crater_dec_t *d, const row_t *r, json_t *v, double *x)
{
    char shown[48];

    if (json_is_number(v)) {
        *x = json_number_value(v);
        snprintf(shown, sizeof(shown), "%g", *x);
    } else if (json_is_string(v)
               && parse_percent(json_string_value(v), x) == 0) {
        snprintf(shown, sizeof(shown), "'%s'", json_string_value(v));
    } else {
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a fraction such as 0.8 or 80%%, "
                               "got %s",
                               crater_dec_typename(v));
    }
    if (!isfinite(*x) || !in_range(r, *x))
        return range_fail(d, r, shown);
    return 0;
}

static int dec_double(crater_dec_t *d, const row_t *r, json_t *v, double *x)
{
    char shown[48];

    if (crater_dec_double(d, v, -HUGE_VAL, HUGE_VAL, x) < 0)
        return -1;
    snprintf(shown, sizeof(shown), "%g", *x);
    return in_range(r, *x) ? 0 : range_fail(d, r, shown);
}

static int dec_duration(crater_dec_t *d,
                        const row_t *r,
                        json_t *v,
                        uint64_t *ms)
{
    char shown[48];
    uint64_t ns;

    if (crater_dec_quantity(d, v, CRATER_DIM_DURATION, &ns) < 0)
        return -1;
    crater_format_quantity(ns, CRATER_DIM_DURATION, shown, sizeof(shown));
    if (ns % 1000000)
        return crater_dec_fail(d,
                               CRATER_EUNIT,
                               "%s is not a whole number of milliseconds",
                               shown);
    *ms = ns / 1000000;
    return in_range(r, (double)*ms) ? 0 : range_fail(d, r, shown);
}

static int dec_bytes(crater_dec_t *d, const row_t *r, json_t *v, uint64_t *b)
{
    char shown[48];

    if (crater_dec_quantity(d, v, CRATER_DIM_BYTES, b) < 0)
        return -1;
    crater_format_quantity(*b, CRATER_DIM_BYTES, shown, sizeof(shown));
    return in_range(r, (double)*b) ? 0 : range_fail(d, r, shown);
}

static void store_uint(void *field, size_t size, uint64_t u)
{
    if (size == sizeof(uint32_t))
        *(uint32_t *)field = (uint32_t)u;
    else
        *(uint64_t *)field = u;
}

static int dec_string(crater_dec_t *d, json_t *v, char **out)
{
    if (crater_dec_str(d, v, MAX_STRING, out) < 0)
        return -1;
    if (!**out)
        return crater_dec_fail(d, CRATER_EINVAL, "must not be empty");
    return 0;
}

/* The list is validated against a scratch copy of the built-in knowledge
 * base, so that a bad entry is reported here, with its path and line,
 * rather than when the daemon applies it. */
static int dec_kb(crater_dec_t *d, json_t *v, json_t **out)
{
    crater_kb_t *kb;
    int rc;

    if (!json_is_array(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a list, got %s",
                               crater_dec_typename(v));
    if (json_array_size(v) > 0) {
        if (!(kb = crater_kb_create()))
            return crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
        rc = crater_kb_override(kb, d, v);
        crater_kb_destroy(kb);
        if (rc < 0)
            return -1;
    }
    json_decref(*out);
    *out = json_incref(v);
    return 0;
}

/* {name: number}: names non-empty, numbers in the row's range. */
static int dec_map(crater_dec_t *d, const row_t *r, json_t *v, json_t **out)
{
    const char *name;
    json_t *x;

    if (!json_is_object(v))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping of name: number, got %s",
                               crater_dec_typename(v));
    json_object_foreach(v, name, x)
    {
        size_t mark = crater_dec_push_key(d, name);
        double f;
        if (!*name)
            return crater_dec_fail(d, CRATER_EINVAL, "empty name");
        if (dec_double(d, r, x, &f) < 0)
            return -1;
        crater_dec_pop(d, mark);
    }
    json_decref(*out);
    *out = json_deep_copy(v);
    return *out ? 0 : crater_dec_fail(d, CRATER_ENOMEM, "out of memory");
}

static int dec_value(crater_dec_t *d, const row_t *r, json_t *v, void *field)
{
    uint64_t u;
    int e;

    switch (r->type) {
    case T_FRACTION:
        return dec_fraction(d, r, v, field);
    case T_DOUBLE:
        return dec_double(d, r, v, field);
    case T_UINT:
        if (crater_dec_uint(d, v, (uint64_t)r->min, (uint64_t)r->max, &u) < 0)
            return -1;
        store_uint(field, r->size, u);
        return 0;
    case T_BOOL:
        return crater_dec_bool(d, v, field);
    case T_DURATION:
        return dec_duration(d, r, v, field);
    case T_BYTES:
        return dec_bytes(d, r, v, field);
    case T_STRING:
        return dec_string(d, v, field);
    case T_ENUM:
        if (crater_dec_enum(d, v, r->names, enum_count(r), &e) < 0)
            return -1;
        *(int *)field = e;
        return 0;
    case T_STRV:
        return crater_dec_strv(d, v, MAX_ENDPOINTS, MAX_STRING, field, NULL);
    case T_KB:
        return dec_kb(d, v, field);
    case T_MAP:
        return dec_map(d, r, v, field);
    }
    return crater_dec_fail(d, CRATER_EINTERNAL, "bad row type");
}

static int dec_row(crater_dec_t *d,
                   const row_t *r,
                   json_t *v,
                   crater_config_t *c)
{
    void *field = field_at(c, r);

    if (dec_value(d, r, v, field) < 0)
        return -1;
    return r->check ? r->check(d, field) : 0;
}

/* ---- per-key checks ----------------------------------------------------- */

/* HOST:PORT with a port in 1..65535 ("127.0.0.1:7480", "[::1]:7480",
 * ":7480" for every address). */
const char *const *crater_config_policy_names(void)
{
    static const char *const names[] = {
        "crater",
        "random",
        "dotprod",
        "gpuclustering",
        "gpupacking",
        "bestfit",
        "fgd",
        "k8s",
        NULL,
    };

    return names;
}

/* scheduler.policy must name a policy the core implements. */
static int check_policy(crater_dec_t *d, const void *field)
{
    const char *s = *(char *const *)field;
    const char *const *names = crater_config_policy_names();
    char list[256] = "";
    size_t len = 0;

    for (size_t i = 0; names[i]; i++) {
        if (strcmp(names[i], s) == 0)
            return 0;
        len += (size_t)snprintf(list + len,
                                sizeof(list) - len,
                                "%s%s",
                                i ? ", " : "",
                                names[i]);
        if (len >= sizeof(list))
            break;
    }
    return crater_dec_fail(d,
                           CRATER_EINVAL,
                           "unknown policy '%s' (one of: %s)",
                           s,
                           list);
}

static int check_gateway(crater_dec_t *d, const void *field)
{
    const char *s = *(char *const *)field, *colon = strrchr(s, ':');

    if (strcmp(s, "none") == 0 || (colon && strcmp(colon, ":0") == 0))
        return 0;
    return check_listen(d, field);
}

static int check_listen(crater_dec_t *d, const void *field)
{
    const char *s = *(char *const *)field, *colon = strrchr(s, ':');
    char *end;
    long port;

    if (!colon || !colon[1] || !isdigit((unsigned char)colon[1]))
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not HOST:PORT (e.g. 127.0.0.1:7480)",
                               s);
    port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s': port must be 1 to 65535",
                               s);
    return 0;
}

int crater_config_uid_range(const char *text, uint32_t *first, uint32_t *last)
{
    unsigned long long a, b;
    int n = 0;

    if (strcmp(text, "none") == 0)
        return 0;
    if (sscanf(text, "%llu-%llu%n", &a, &b, &n) != 2 || text[n]
        || !isdigit((unsigned char)text[0]) || a < 1 || b < a
        || b > UINT32_MAX - 1)
        return -1;
    *first = (uint32_t)a;
    *last = (uint32_t)b;
    return 1;
}

static int check_uid_range(crater_dec_t *d, const void *field)
{
    const char *s = *(char *const *)field;
    uint32_t a, b;

    if (crater_config_uid_range(s, &a, &b) < 0)
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not FIRST-LAST (1 <= FIRST <= LAST "
                               "< 4294967295, e.g. 200000-299999) or none",
                               s);
    return 0;
}

static int check_abs_path(crater_dec_t *d, const void *field)
{
    const char *s = *(char *const *)field;

    if (s[0] != '/')
        return crater_dec_fail(d,
                               CRATER_EINVAL,
                               "'%s' is not an absolute path",
                               s);
    return 0;
}

/* cost.billingWeights must parse as Slurm writes it. */
static int check_billing(crater_dec_t *d, const void *field)
{
    crater_billing_t b;
    crater_error_t err;

    if (crater_billing_parse(*(char *const *)field, false, &b, &err) < 0)
        return crater_dec_fail(d, CRATER_EINVAL, "%s", err.text);
    return 0;
}

static int check_urls(crater_dec_t *d, const void *field)
{
    char *const *v = *(char **const *)field;

    for (size_t i = 0; v && v[i]; i++) {
        const char *s = v[i];
        size_t skip = strncmp(s, "http://", 7) == 0    ? 7
                      : strncmp(s, "https://", 8) == 0 ? 8
                                                       : 0;
        if (!skip || !s[skip]) {
            size_t mark = crater_dec_push_index(d, i);
            int rc = crater_dec_fail(d,
                                     CRATER_EINVAL,
                                     "'%s' is not an http:// or https:// URL",
                                     s);
            crater_dec_pop(d, mark);
            return rc;
        }
    }
    return 0;
}

/* ---- defaults and clear ------------------------------------------------- */

static int default_row(const row_t *r, crater_config_t *c)
{
    crater_doc_t *doc;
    crater_error_t err;
    crater_dec_t d;
    int rc;

    if (crater_doc_parse(r->def, strlen(r->def), "<default>", &doc, &err) < 0)
        return -1;
    crater_dec_init(&d, doc, 0, &err);
    crater_dec_push_key(&d, r->key);
    rc = dec_row(&d, r, crater_doc_root(doc, 0), c);
    crater_doc_destroy(doc);
    return rc;
}

int crater_config_defaults(crater_config_t *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < NROWS; i++) {
        if (default_row(&rows[i], c) < 0) {
            crater_config_clear(c);
            return -1;
        }
    }
    return 0;
}

void crater_config_clear(crater_config_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < NROWS; i++) {
        void *field = field_at(c, &rows[i]);
        if (rows[i].type == T_STRING)
            free(*(char **)field);
        else if (rows[i].type == T_STRV)
            crater_strv_free(*(char ***)field);
        else if (rows[i].type == T_KB || rows[i].type == T_MAP)
            json_decref(*(json_t **)field);
    }
    memset(c, 0, sizeof(*c));
}

/* ---- decoding ----------------------------------------------------------- */

/* Leaf name of a dotted key. */
static const char *leaf(const char *key)
{
    const char *dot = strrchr(key, '.');

    return dot ? dot + 1 : key;
}

static size_t parent_len(const char *key)
{
    const char *dot = strrchr(key, '.');

    return dot ? (size_t)(dot - key) : 0;
}

/* The closest known key: a near miss of the whole dotted key, else the
 * same leaf name in another section ("scheduler.gracePeriod" ->
 * "agent.gracePeriod"). */
static const char *suggest(const char *key)
{
    const char *best = NULL;
    unsigned bestd = 4, dist;

    for (size_t i = 0; i < NROWS; i++) {
        if ((dist = crater_edit_distance(key, rows[i].key)) < bestd) {
            bestd = dist;
            best = rows[i].key;
        }
    }
    for (size_t i = 0; sections[i]; i++) {
        if ((dist = crater_edit_distance(key, sections[i])) < bestd) {
            bestd = dist;
            best = sections[i];
        }
    }
    for (size_t i = 0; !best && i < NROWS; i++)
        if (crater_edit_distance(leaf(key), leaf(rows[i].key)) <= 1)
            best = rows[i].key;
    return best;
}

/* The suggestion is shown relative to the section when it stays in the
 * same one ("cpuThreshold"), as a whole key otherwise. */
static int unknown_key(crater_dec_t *d, const char *key, const char *name)
{
    const char *best = suggest(key);
    size_t plen = parent_len(key);

    if (!best)
        return crater_dec_fail(d, CRATER_EFIELD, "unknown key '%s'", name);
    if (plen && parent_len(best) == plen && strncmp(best, key, plen) == 0)
        best = leaf(best);
    return crater_dec_fail(d,
                           CRATER_EFIELD,
                           "unknown key '%s' (did you mean '%s'?)",
                           name,
                           best);
}

/* The optional document header shared with the other kinds of file
 * (`kind: Config`, `apiVersion: crater/v1`); it is not stored. */
static int dec_header(crater_dec_t *d, const char *key, json_t *v)
{
    return crater_dec_literal(d, v, *key == 'k' ? "Config" : "crater/v1");
}

static int walk(crater_dec_t *d, size_t base, json_t *obj, crater_config_t *c);

static int dec_key(crater_dec_t *d,
                   size_t base,
                   const char *name,
                   json_t *v,
                   crater_config_t *c)
{
    const char *key = d->path + base + (base ? 1 : 0);
    const row_t *r;

    if (strchr(name, '.'))
        return crater_dec_fail(d,
                               CRATER_EFIELD,
                               "unknown key '%s' (write nested mappings, "
                               "not dotted keys)",
                               name);
    if ((r = find_row(key)))
        return dec_row(d, r, v, c);
    if (strcmp(key, "kind") == 0 || strcmp(key, "apiVersion") == 0)
        return dec_header(d, key, v);
    if (!is_section(key))
        return unknown_key(d, key, name);
    if (json_is_null(v)) /* a section whose keys are all commented out */
        return 0;
    return walk(d, base, v, c);
}

static int walk(crater_dec_t *d, size_t base, json_t *obj, crater_config_t *c)
{
    const char *name;
    json_t *v;

    if (!json_is_object(obj))
        return crater_dec_fail(d,
                               CRATER_ETYPE,
                               "expected a mapping, got %s",
                               crater_dec_typename(obj));
    json_object_foreach(obj, name, v)
    {
        size_t mark = crater_dec_push_key(d, name);
        if (dec_key(d, base, name, v, c) < 0)
            return -1;
        crater_dec_pop(d, mark);
    }
    return 0;
}

/* ---- rules between keys ------------------------------------------------- */

/* Whether the document sets the dotted key. */
static int doc_sets(json_t *root, const char *key)
{
    char part[64];

    while (json_is_object(root) && *key) {
        size_t n = strcspn(key, ".");
        if (n >= sizeof(part))
            return 0;
        memcpy(part, key, n);
        part[n] = '\0';
        root = json_object_get(root, part);
        key += n + (key[n] == '.');
    }
    return root && !*key;
}

/* Fail at key a, or at b when only b appears in the document, so that the
 * line number points at what the user wrote. */
static int rule_fail(crater_dec_t *d,
                     size_t base,
                     json_t *root,
                     const char *a,
                     const char *b,
                     const char *fmt,
                     ...) __attribute__((format(printf, 6, 7)));

static int rule_fail(crater_dec_t *d,
                     size_t base,
                     json_t *root,
                     const char *a,
                     const char *b,
                     const char *fmt,
                     ...)
{
    const char *key = !doc_sets(root, a) && b && doc_sets(root, b) ? b : a;
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    crater_dec_pop(d, base);
    crater_dec_push_key(d, key);
    return crater_dec_fail(d, CRATER_ECONFLICT, "%s", msg);
}

static char *ms_text(uint64_t ms, char *buf, size_t size)
{
    return crater_format_quantity(ms * 1000000, CRATER_DIM_DURATION, buf, size);
}

/* ha.retryPeriod < ha.renewDeadline < ha.leaseDuration: a leader renews
 * several times before it gives up, and gives up before its lease can
 * expire (so it has stopped writing when a standby takes over). */
static int check_ha(crater_dec_t *d,
                    size_t base,
                    json_t *root,
                    const crater_config_t *c)
{
    char a[32], b[32];

    if (c->ha.renew_deadline_ms >= c->ha.lease_ms)
        return rule_fail(d,
                         base,
                         root,
                         "ha.renewDeadline",
                         "ha.leaseDuration",
                         "renewDeadline (%s) must be shorter than "
                         "leaseDuration (%s)",
                         ms_text(c->ha.renew_deadline_ms, a, sizeof(a)),
                         ms_text(c->ha.lease_ms, b, sizeof(b)));
    if (c->ha.retry_ms >= c->ha.renew_deadline_ms)
        return rule_fail(d,
                         base,
                         root,
                         "ha.retryPeriod",
                         "ha.renewDeadline",
                         "retryPeriod (%s) must be shorter than "
                         "renewDeadline (%s)",
                         ms_text(c->ha.retry_ms, a, sizeof(a)),
                         ms_text(c->ha.renew_deadline_ms, b, sizeof(b)));
    return 0;
}

static int check_rules(crater_dec_t *d,
                       size_t base,
                       json_t *root,
                       const crater_config_t *c)
{
    const double *w = &c->scheduler.score_weights.gpu;
    char t[32], i[32];

    if (w[0] + w[1] + w[2] + w[3] <= 0)
        return rule_fail(d,
                         base,
                         root,
                         "scheduler.scoreWeights",
                         NULL,
                         "the weights add up to 0; at least one must be "
                         "positive");
    if (c->agent.heartbeat_timeout_ms <= c->agent.heartbeat_interval_ms)
        return rule_fail(d,
                         base,
                         root,
                         "agent.heartbeatTimeout",
                         "agent.heartbeatInterval",
                         "heartbeatTimeout (%s) must be longer than "
                         "heartbeatInterval (%s)",
                         ms_text(c->agent.heartbeat_timeout_ms, t, sizeof(t)),
                         ms_text(c->agent.heartbeat_interval_ms, i, sizeof(i)));
    if (c->store.backend == CRATER_STORE_ETCD
        && crater_strv_len(c->store.etcd_endpoints) == 0)
        return rule_fail(d,
                         base,
                         root,
                         "store.etcdEndpoints",
                         "store.backend",
                         "backend etcd needs at least one endpoint");
    if (check_ha(d, base, root, c) < 0)
        return -1;
    if (strcmp(c->agent.task_user, "root") == 0 && !c->agent.allow_root_tasks)
        return rule_fail(d,
                         base,
                         root,
                         "agent.taskUser",
                         NULL,
                         "tasks run as root only with allowRootTasks: true");
    if (c->cost.billing_max_tres && c->cost.billing_max_tres_gres)
        return rule_fail(d,
                         base,
                         root,
                         "cost.billingMaxTresGres",
                         "cost.billingMaxTres",
                         "billingMaxTres and billingMaxTresGres are two ways "
                         "to bill (Slurm's MAX_TRES and MAX_TRES_GRES): set "
                         "one");
    return 0;
}

int crater_config_decode(crater_dec_t *d, json_t *root, crater_config_t *c)
{
    size_t base = d->len;

    if (json_is_null(root)) /* an empty file: every default */
        return check_rules(d, base, root, c);
    if (walk(d, base, root, c) < 0)
        return -1;
    return check_rules(d, base, root, c);
}

int crater_config_load(const char *path,
                       crater_config_t *c,
                       crater_error_t *err)
{
    crater_doc_t *doc = NULL;
    crater_dec_t d;
    int rc = -1;

    if (crater_config_defaults(c) < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    if (crater_doc_load(path, &doc, err) < 0)
        goto out;
    if (crater_doc_count(doc) != 1) {
        crater_errorf(err,
                      CRATER_EINVAL,
                      "%s: a config file holds one document, not %zu",
                      crater_doc_name(doc),
                      crater_doc_count(doc));
        goto out;
    }
    crater_dec_init(&d, doc, 0, err);
    rc = crater_config_decode(&d, crater_doc_root(doc, 0), c);
out:
    crater_doc_destroy(doc);
    if (rc < 0)
        crater_config_clear(c);
    return rc;
}

/* ---- encoding ----------------------------------------------------------- */

static json_t *enc_strv(char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; a && v && v[i]; i++) {
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static uint64_t load_uint(const void *field, size_t size)
{
    if (size == sizeof(uint32_t))
        return *(const uint32_t *)field;
    return *(const uint64_t *)field;
}

static json_t *enc_value(const row_t *r, const void *field)
{
    char buf[32];

    switch (r->type) {
    case T_FRACTION:
    case T_DOUBLE:
        return json_real(*(const double *)field);
    case T_UINT:
        return json_integer((json_int_t)load_uint(field, r->size));
    case T_BOOL:
        return json_boolean(*(const bool *)field);
    case T_DURATION: /* a bare number would mean seconds */
        snprintf(buf, sizeof(buf), "%" PRIu64 "ms", *(const uint64_t *)field);
        return json_string(buf);
    case T_BYTES:
        return json_integer((json_int_t)load_uint(field, r->size));
    case T_STRING:
        return json_string(*(char *const *)field ? *(char *const *)field : "");
    case T_ENUM:
        return json_string(r->names[*(const int *)field]);
    case T_STRV:
        return enc_strv(*(char **const *)field);
    case T_KB:
        return *(json_t *const *)field ? json_incref(*(json_t *const *)field)
                                       : json_array();
    case T_MAP:
        return *(json_t *const *)field ? json_incref(*(json_t *const *)field)
                                       : json_object();
    }
    return NULL;
}

/* Set root[a][b]...[leaf] = v (stolen), creating the sections. */
static int set_path(json_t *root, const char *key, json_t *v)
{
    char part[64];

    for (const char *dot; v && (dot = strchr(key, '.')); key = dot + 1) {
        size_t n = (size_t)(dot - key);
        json_t *sub;
        assert(n < sizeof(part));
        memcpy(part, key, n);
        part[n] = '\0';
        if (!(sub = json_object_get(root, part))) {
            if (json_object_set_new(root, part, sub = json_object()) < 0)
                break;
        }
        root = sub;
    }
    if (!v || !root) {
        json_decref(v);
        return -1;
    }
    return json_object_set_new(root, key, v);
}

json_t *crater_config_encode(const crater_config_t *c)
{
    json_t *root = json_object();

    for (size_t i = 0; root && i < NROWS; i++) {
        if (set_path(root,
                     rows[i].key,
                     enc_value(&rows[i], cfield_at(c, &rows[i])))
            < 0) {
            json_decref(root);
            return NULL;
        }
    }
    return root;
}

/* ---- documentation ------------------------------------------------------ */

static const char *type_name(row_type_t t)
{
    static const char *const names[] = {[T_FRACTION] = "fraction",
                                        [T_DOUBLE] = "number",
                                        [T_UINT] = "integer",
                                        [T_BOOL] = "boolean",
                                        [T_DURATION] = "duration",
                                        [T_BYTES] = "size",
                                        [T_STRING] = "string",
                                        [T_ENUM] = "enum",
                                        [T_STRV] = "string list",
                                        [T_KB] = "list",
                                        [T_MAP] = "mapping"};

    return names[t];
}

static const char intro[] =
    "# Configuration reference\n"
    "\n"
    "<!-- Generated from the table in src/core/config.c by "
    "crater_config_markdown();\n"
    "     do not edit by hand (tests/unit/test_config.c checks it). -->\n"
    "\n"
    "`craterd --config craterd.yaml` reads one YAML (or JSON) document. "
    "Every key\n"
    "is optional and has the default listed below. Keys are grouped in "
    "sections and\n"
    "written as nested mappings (`scheduler:` then `cpuThreshold: 0.7` "
    "indented\n"
    "under it). A key that is not in this table is an error that names the "
    "file,\n"
    "the line and the closest known key. The document may start with\n"
    "`apiVersion: crater/v1` and `kind: Config`. `examples/craterd.yaml` is "
    "a\n"
    "commented example.\n"
    "\n"
    "Values:\n"
    "\n"
    "- *fraction*: `0.8` or `80%` (the same value).\n"
    "- *duration*: `500ms`, `30s`, `10m`, `2h`, `30d` or compound `1h30m`; a "
    "bare\n"
    "  number means seconds. Kept in whole milliseconds.\n"
    "- *size*: `300Mi`, `1Gi` (binary) or `300M`, `1G`, `20000MB` "
    "(decimal); a\n"
    "  bare number means bytes.\n"
    "- *range*: `[a, b]` includes both ends, `(a, b]` excludes `a`.\n"
    "\n"
    "Rules that involve several keys:\n"
    "\n"
    "- `agent.heartbeatTimeout` must be longer than "
    "`agent.heartbeatInterval`.\n"
    "- The four `scheduler.scoreWeights` must not all be 0.\n"
    "- `store.backend: etcd` needs at least one `store.etcdEndpoints` "
    "entry.\n"
    "- `ha.retryPeriod` < `ha.renewDeadline` < `ha.leaseDuration`.\n"
    "- `agent.taskUser: root` needs `agent.allowRootTasks: true`.\n"
    "- Each `hardware_knowledge_base.override` entry is checked against the "
    "built-in\n"
    "  knowledge base when the file is loaded.\n";

static void md_row(FILE *fp, const row_t *r)
{
    char range[96];

    if (r->type == T_ENUM) {
        range[0] = '\0';
        for (size_t i = 0; r->names[i]; i++)
            snprintf(range + strlen(range),
                     sizeof(range) - strlen(range),
                     "%s`%s`",
                     i ? ", " : "",
                     r->names[i]);
    } else {
        format_range(r, range, sizeof(range));
    }
    fprintf(fp,
            "| `%s` | %s | `%s` | %s | %s |\n",
            r->key,
            type_name(r->type),
            r->def,
            range,
            r->doc);
}

char *crater_config_markdown(void)
{
    char *buf = NULL;
    size_t len = 0, seclen = 0;
    FILE *fp = open_memstream(&buf, &len);

    if (!fp)
        return NULL;
    fputs(intro, fp);
    for (size_t i = 0; i < NROWS; i++) {
        const char *key = rows[i].key;
        size_t n = strcspn(key, ".");
        if (i == 0 || n != seclen || strncmp(key, rows[i - 1].key, n) != 0) {
            fprintf(fp, "\n## %.*s\n\n", (int)n, key);
            fputs("| key | type | default | range | description |\n"
                  "|---|---|---|---|---|\n",
                  fp);
            seclen = n;
        }
        md_row(fp, &rows[i]);
    }
    if (ferror(fp) | fclose(fp)) {
        free(buf);
        return NULL;
    }
    return buf;
}
