/* config.h - the control-plane and agent configuration (craterd.yaml).
 *
 * One table in config.c drives parsing, defaults, validation ranges and
 * the documentation (crater_config_markdown() generates doc/config.md; a
 * test keeps the file in sync). Keys use the source documents' names
 * (scoreWeights, cpuThreshold, maxTasksPerGPU, overcommitRatio ...) grouped
 * in sections; unknown keys are errors with file:line.
 *
 * Durations are stored in milliseconds, sizes in bytes, ratios as
 * fractions (0.8, written "0.8" or "80%").
 */
#ifndef CRATER_CONFIG_H
#define CRATER_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "crater/dec.h"

typedef enum crater_migration_policy {
    CRATER_MIGRATION_CONSERVATIVE, /* jobs running > minRuntime wait for a
                                      reconnect before being requeued */
    CRATER_MIGRATION_IMMEDIATE,    /* requeue on heartbeatTimeout */
    CRATER_MIGRATION_NEVER,        /* mark failed, never requeue */
} crater_migration_policy_t;

/* Where Crater's policy gets its typical-task distribution in craterd
 * (crater/typhist.h). */
typedef enum crater_typical_mode {
    CRATER_TYPICAL_LEARNED, /* the decayed histogram of submissions */
    CRATER_TYPICAL_PRIOR,   /* the fixed prior only */
    CRATER_TYPICAL_OFF,     /* none: the plugin scores alone */
} crater_typical_mode_t;

typedef enum crater_store_backend {
    CRATER_STORE_SQLITE,
    CRATER_STORE_ETCD,
} crater_store_backend_t;

/* ha.election: whether craterd campaigns for leadership before serving. */
typedef enum crater_ha_election {
    CRATER_HA_AUTO, /* with store.backend etcd only (SQLite: never) */
    CRATER_HA_OFF,  /* never: exactly one craterd per store */
} crater_ha_election_t;

/* What a job's cost (its cap, a tenant's budget, the default report) is
 * counted in (crater/cost.h). */
typedef enum crater_cost_basis {
    CRATER_BASIS_ALLOCATION, /* max(request, measured use) */
    CRATER_BASIS_USAGE,      /* measured use */
    CRATER_BASIS_BILLING,    /* Slurm TRESBillingWeights units */
} crater_cost_basis_t;

typedef struct crater_config {
    struct {
        struct {
            double gpu, cpu, memory, disk;
        } score_weights;               /* scheduler.scoreWeights */
        double cpu_threshold;          /* scheduler.cpuThreshold */
        double memory_threshold;       /* scheduler.memoryThreshold */
        uint32_t max_tasks_per_gpu;    /* scheduler.maxTasksPerGPU */
        double overcommit_ratio;       /* scheduler.overcommitRatio */
        double safety_watermark;       /* scheduler.safetyWatermark */
        uint64_t gpu_context_overhead; /* scheduler.gpuContextOverhead, B */
        bool prefer_low_utilization;   /* scheduler.preferLowUtilization */
        char *policy;                  /* scheduler.policy */
        crater_typical_mode_t typical_tasks; /* scheduler.typicalTasks */
        uint32_t typical_half_life;          /* scheduler.typicalHalfLife */
        uint32_t typical_min_samples;        /* scheduler.typicalMinSamples */
        bool backfill;                       /* scheduler.backfill */
        uint64_t resource_grace_period_ms;   /* scheduler.resourceGracePeriod */
        uint64_t preemption_min_runtime_ms;  /* preemptionMinRuntime */
        uint64_t max_checkpoint_grace_ms;    /* maxCheckpointGrace */
        struct {
            double joint, packing, topology, locality, low_utilization;
        } plugin_weights;            /* scheduler.pluginWeights */
        double min_cpu_per_gpu;      /* scheduler.minCpuPerGpu, cores */
        uint64_t min_memory_per_gpu; /* scheduler.minMemoryPerGpu, B */
        double pcie_threshold;       /* scheduler.pcieThreshold */
        double idle_gpu_threshold;   /* scheduler.idleGpuThreshold */
        uint64_t idle_gpu_window_ms; /* scheduler.idleGpuWindow, 0 = off */
        uint64_t idle_gpu_grace_ms;  /* scheduler.idleGpuGrace */
        struct {
            bool enabled;
            double max_util;      /* sum of profiled use per GPU */
            double memory_margin; /* slice = peak x (1 + margin) */
            uint32_t min_samples; /* readings before a profile counts */
        } gpu_share;              /* scheduler.gpuShare */
    } scheduler;
    struct {
        uint64_t heartbeat_interval_ms; /* agent.heartbeatInterval */
        uint64_t heartbeat_timeout_ms;  /* agent.heartbeatTimeout */
        crater_migration_policy_t migration_policy;
        uint64_t migration_min_runtime_ms; /* agent.migrationMinRuntime */
        uint64_t grace_period_ms;          /* agent.gracePeriod (default) */
        double cpu_limit_multiplier;       /* agent.cpuLimitMultiplier */
        char *task_user;                   /* agent.taskUser */
        bool allow_root_tasks;             /* agent.allowRootTasks */
        uint32_t pids_limit;               /* agent.pidsLimit, 0 = none */
        uint32_t spare_tasks;              /* agent.spareTasks */
        bool tenant_users;                 /* agent.tenantUsers */
        bool hide_processes;               /* agent.hideProcesses */
        char *work_root;                   /* agent.workRoot */
    } agent;
    struct {
        uint64_t sampling_interval_ms; /* monitoring.sampling_interval_ms */
        uint32_t smoothing_window;     /* monitoring.smoothing_window */
    } monitoring;
    struct {
        uint32_t warm_pool_size;        /* inference.warmPoolSize */
        uint32_t max_batch_size;        /* inference.maxBatchSize */
        uint64_t batch_timeout_ms;      /* inference.batchTimeout */
        uint64_t activation_timeout_ms; /* inference.activationTimeout */
        char *gateway;                  /* inference.gateway, HOST:PORT|none */
    } inference;
    struct {
        char *listen;            /* server.listen, "127.0.0.1:7480" */
        char *data_dir;          /* server.dataDir, "./var" */
        char *task_uid_range;    /* server.taskUidRange, "FIRST-LAST"|none */
        uint64_t max_body_bytes; /* server.maxBodySize */
        uint64_t decision_log_retention_ms;  /* server.decisionLogRetention */
        uint64_t audit_log_retention_ms;     /* server.auditLogRetention */
        uint64_t job_retention_ms;           /* server.jobRetention */
        uint32_t max_connections;            /* server.maxConnections */
        uint32_t max_connections_per_client; /* ...PerClient, 0 = none */
        uint64_t header_timeout_ms; /* server.headerTimeout, 0 = none */
        double request_rate;        /* server.requestRate, 0 = none */
        uint32_t request_burst;     /* server.requestBurst */
        double default_cpu;         /* server.defaultCpu, cores; 0 = none */
        uint64_t default_memory;    /* server.defaultMemory; 0 = none */
        uint32_t gang_port_base;    /* server.gangPortBase */
        uint32_t gang_ports;        /* server.gangPorts */
    } server;
    struct {
        uint64_t max_bytes; /* logs.maxBytes (per stream and attempt) */
    } logs;
    struct {
        crater_store_backend_t backend;  /* store.backend */
        char **etcd_endpoints;           /* store.etcdEndpoints */
        char *etcd_prefix;               /* store.etcdPrefix */
        char *etcd_ca_file;              /* store.etcdCaFile, "none" */
        char *etcd_cert_file;            /* store.etcdCertFile, "none" */
        char *etcd_key_file;             /* store.etcdKeyFile, "none" */
        char *etcd_user;                 /* store.etcdUser, "none" */
        char *etcd_password;             /* store.etcdPassword, "none" */
        uint64_t etcd_max_request_bytes; /* store.etcdMaxRequestBytes */
        uint64_t history_retention_ms;   /* store.historyRetention, 0 = all */
    } store;
    struct {
        crater_ha_election_t election; /* ha.election */
        uint64_t lease_ms;             /* ha.leaseDuration */
        uint64_t renew_deadline_ms;    /* ha.renewDeadline < leaseDuration */
        uint64_t retry_ms;             /* ha.retryPeriod < renewDeadline */
        char *advertise_url;           /* ha.advertiseUrl, "none" */
        bool warm_standby;             /* ha.warmStandby */
    } ha;
    struct {
        char *currency;             /* cost.currency */
        crater_cost_basis_t basis;  /* cost.basis */
        double gpu_hour;            /* cost.gpuHour, 0 = derive */
        double gpu_sm_hour;         /* cost.gpuSmHour */
        double gpu_hbm_tbps_hour;   /* cost.gpuHbmTBpsHour */
        json_t *gpu_models;         /* cost.gpuModels {model: price} */
        double cpu_core_hour;       /* cost.cpuCoreHour */
        double memory_gib_hour;     /* cost.memoryGiBHour */
        double disk_kiops_hour;     /* cost.diskKiopsHour */
        double disk_gbps_hour;      /* cost.diskGBpsHour */
        json_t *tenant_rates;       /* cost.tenantRates {tenant: factor} */
        json_t *tenant_budgets;     /* cost.tenantBudgets {tenant: amount} */
        uint64_t budget_window_ms;  /* cost.budgetWindow */
        char *billing_weights;      /* cost.billingWeights, "none" */
        bool billing_max_tres;      /* cost.billingMaxTres */
        bool billing_max_tres_gres; /* cost.billingMaxTresGres */
        double billing_unit_hour;   /* cost.billingUnitHour */
        uint64_t retention_ms;      /* cost.retention */
    } cost;
    json_t *kb_override; /* hardware_knowledge_base.override, raw; applied
                            with crater_kb_override() (owned reference) */
} crater_config_t;

/* Fill c with every default (strings malloc'd). Returns -1 on ENOMEM. */
int crater_config_defaults(crater_config_t *c);
/* Free what c holds (not c itself). */
void crater_config_clear(crater_config_t *c);

/* Decode a config document over the values already in c (call
 * crater_config_defaults() first). Checks ranges and cross-field rules
 * (heartbeatTimeout > heartbeatInterval, weights sum > 0 ...). On error c
 * may be partly updated; discard it. */
int crater_config_decode(crater_dec_t *d, json_t *root, crater_config_t *c);

/* Defaults, then the file. */
int crater_config_load(const char *path,
                       crater_config_t *c,
                       crater_error_t *err);

/* Normalised document (base units). New reference; NULL on ENOMEM. */
json_t *crater_config_encode(const crater_config_t *c);

/* doc/config.md text, generated from the table. Caller frees. */
char *crater_config_markdown(void);

/* server.taskUidRange's text as numbers: 1 and *first <= *last (1 to
 * 2^32-2) for "FIRST-LAST", 0 for "none", -1 when malformed. */
int crater_config_uid_range(const char *text, uint32_t *first, uint32_t *last);

/* The scheduling policies scheduler.policy may name, default first,
 * NULL-terminated (static). The scheduler implements each of them
 * (crater_sched_policy_names() returns this list). */
const char *const *crater_config_policy_names(void);

#endif /* CRATER_CONFIG_H */
