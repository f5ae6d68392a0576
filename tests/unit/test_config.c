/* test_config.c - craterd.yaml: every default, the example file, fractions
 * written as percentages, unknown keys with file:line and a suggestion,
 * the cross-field rules, the encode/decode round trip and doc/config.md
 * staying in sync with the table. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/config.h"
#include "crater/doc.h"

#define SRC CRATER_SOURCE_DIR
#define MS_DAY (86400ull * 1000)

/* Defaults, then decode yaml (named "t.yaml" in messages). Returns the
 * decoder's result; err receives the message. */
static int decode_text(const char *yaml,
                       crater_config_t *c,
                       crater_error_t *err)
{
    crater_doc_t *doc;
    crater_dec_t d;
    int rc;

    ck_assert_int_eq(crater_config_defaults(c), 0);
    if (crater_doc_parse(yaml, strlen(yaml), "t.yaml", &doc, err) < 0)
        return -1;
    crater_dec_init(&d, doc, 0, err);
    rc = crater_config_decode(&d, crater_doc_root(doc, 0), c);
    crater_doc_destroy(doc);
    return rc;
}

static void decode_ok(const char *yaml, crater_config_t *c)
{
    crater_error_t err = {0};

    ck_assert_msg(decode_text(yaml, c, &err) == 0,
                  "'%s' should decode: %s",
                  yaml,
                  err.text);
}

/* The message of a failing decode; c is cleared. */
static const char *decode_bad(const char *yaml, crater_errno_t errnum)
{
    static crater_error_t err;
    crater_config_t c;

    ck_assert_msg(decode_text(yaml, &c, &err) == -1, "'%s' should fail", yaml);
    crater_config_clear(&c);
    ck_assert_msg(err.errnum == errnum,
                  "'%s': %s is %s, expected %s",
                  yaml,
                  err.text,
                  crater_errno_name(err.errnum),
                  crater_errno_name(errnum));
    return err.text;
}

START_TEST(defaults_every_key)
{
    crater_config_t c;

    ck_assert_int_eq(crater_config_defaults(&c), 0);
    ck_assert(c.scheduler.score_weights.gpu == 0.25);
    ck_assert(c.scheduler.score_weights.cpu == 0.25);
    ck_assert(c.scheduler.score_weights.memory == 0.25);
    ck_assert(c.scheduler.score_weights.disk == 0.25);
    ck_assert(c.scheduler.cpu_threshold == 0.8);
    ck_assert(c.scheduler.memory_threshold == 0.8);
    ck_assert_uint_eq(c.scheduler.max_tasks_per_gpu, 8);
    ck_assert(c.scheduler.overcommit_ratio == 1.0);
    ck_assert(c.scheduler.safety_watermark == 0.9);
    ck_assert_uint_eq(c.scheduler.gpu_context_overhead, 300ull << 20);
    ck_assert(!c.scheduler.prefer_low_utilization);
    ck_assert_str_eq(c.scheduler.policy, "crater");
    ck_assert_int_eq(c.scheduler.typical_tasks, CRATER_TYPICAL_LEARNED);
    ck_assert_uint_eq(c.scheduler.typical_half_life, 1000);
    ck_assert_uint_eq(c.scheduler.typical_min_samples, 100);
    ck_assert(c.scheduler.backfill);
    ck_assert_uint_eq(c.scheduler.resource_grace_period_ms, 30000);
    ck_assert_uint_eq(c.scheduler.preemption_min_runtime_ms, 120000);
    ck_assert(c.scheduler.idle_gpu_threshold == 0.05);
    ck_assert_uint_eq(c.scheduler.idle_gpu_window_ms, 0); /* off */
    ck_assert_uint_eq(c.scheduler.idle_gpu_grace_ms, 1800000);
    ck_assert_uint_eq(c.agent.heartbeat_interval_ms, 5000);
    ck_assert_uint_eq(c.agent.heartbeat_timeout_ms, 30000);
    ck_assert_int_eq(c.agent.migration_policy, CRATER_MIGRATION_CONSERVATIVE);
    ck_assert_uint_eq(c.agent.migration_min_runtime_ms, 600000);
    ck_assert_uint_eq(c.agent.grace_period_ms, 30000);
    ck_assert(c.agent.cpu_limit_multiplier == 1.0);
    ck_assert_str_eq(c.agent.task_user, "nobody");
    ck_assert(!c.agent.allow_root_tasks);
    ck_assert(c.agent.tenant_users);
    ck_assert(c.agent.hide_processes);
    ck_assert_str_eq(c.agent.work_root, "/var/lib/crater/work");
    ck_assert_str_eq(c.server.task_uid_range, "200000-299999");
    ck_assert_uint_eq(c.monitoring.sampling_interval_ms, 5000);
    ck_assert_uint_eq(c.monitoring.smoothing_window, 10);
    ck_assert_uint_eq(c.inference.warm_pool_size, 0);
    ck_assert_uint_eq(c.inference.max_batch_size, 32);
    ck_assert_uint_eq(c.inference.batch_timeout_ms, 10);
    ck_assert_str_eq(c.server.listen, "127.0.0.1:7480");
    ck_assert_str_eq(c.server.data_dir, "./var");
    ck_assert_uint_eq(c.server.max_body_bytes, 1ull << 20);
    ck_assert_uint_eq(c.server.decision_log_retention_ms, 30 * MS_DAY);
    ck_assert_uint_eq(c.server.max_connections, 4096);
    ck_assert_uint_eq(c.server.max_connections_per_client, 256);
    ck_assert_uint_eq(c.server.header_timeout_ms, 10000);
    ck_assert(c.server.request_rate == 200);
    ck_assert_uint_eq(c.server.request_burst, 400);
    ck_assert_int_eq(c.store.backend, CRATER_STORE_SQLITE);
    ck_assert_ptr_nonnull(c.store.etcd_endpoints);
    ck_assert_ptr_null(c.store.etcd_endpoints[0]);
    ck_assert(json_is_array(c.kb_override));
    ck_assert_uint_eq(json_array_size(c.kb_override), 0);
    crater_config_clear(&c);
    ck_assert_ptr_null(c.scheduler.policy);
    crater_config_clear(&c); /* twice is harmless */
}
END_TEST

static void check_example(const crater_config_t *c)
{
    ck_assert(c->scheduler.score_weights.gpu == 0.4);
    ck_assert(c->scheduler.score_weights.cpu == 0.3);
    ck_assert(c->scheduler.score_weights.memory == 0.2);
    ck_assert(c->scheduler.score_weights.disk == 0.1);
    ck_assert(c->scheduler.cpu_threshold == 0.7);
    ck_assert(c->scheduler.memory_threshold == 0.85);
    ck_assert_uint_eq(c->scheduler.max_tasks_per_gpu, 6);
    ck_assert(c->scheduler.overcommit_ratio == 1.5);
    ck_assert(c->scheduler.safety_watermark == 0.9);
    ck_assert_uint_eq(c->scheduler.gpu_context_overhead, 520ull << 20);
    ck_assert(c->scheduler.prefer_low_utilization);
    ck_assert_str_eq(c->scheduler.policy, "crater");
    ck_assert(c->scheduler.backfill);
    ck_assert_uint_eq(c->scheduler.resource_grace_period_ms, 15000);
    ck_assert_uint_eq(c->agent.heartbeat_interval_ms, 5000);
    ck_assert_uint_eq(c->agent.heartbeat_timeout_ms, 90000);
    ck_assert_int_eq(c->agent.migration_policy, CRATER_MIGRATION_CONSERVATIVE);
    ck_assert_uint_eq(c->agent.migration_min_runtime_ms, 600000);
    ck_assert_uint_eq(c->agent.grace_period_ms, 120000);
    ck_assert(c->agent.cpu_limit_multiplier == 1.2);
    ck_assert_str_eq(c->agent.task_user, "crater-task");
    ck_assert(!c->agent.allow_root_tasks);
    ck_assert_uint_eq(c->monitoring.sampling_interval_ms, 5000);
    ck_assert_uint_eq(c->monitoring.smoothing_window, 10);
    ck_assert_uint_eq(c->inference.warm_pool_size, 1);
    ck_assert_uint_eq(c->inference.max_batch_size, 32);
    ck_assert_uint_eq(c->inference.batch_timeout_ms, 10);
    ck_assert_str_eq(c->server.listen, "0.0.0.0:7480");
    ck_assert_str_eq(c->server.data_dir, "/var/lib/crater");
    ck_assert_uint_eq(c->server.max_body_bytes, 4ull << 20);
    ck_assert_uint_eq(c->server.decision_log_retention_ms, 30 * MS_DAY);
    ck_assert_int_eq(c->store.backend, CRATER_STORE_SQLITE);
    ck_assert_uint_eq(crater_strv_len(c->store.etcd_endpoints), 0);
    ck_assert_uint_eq(json_array_size(c->kb_override), 1);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_array_get(c->kb_override, 0),
                                         "model")),
                     "epyc-9654");
    ck_assert(json_real_value(json_object_get(json_array_get(c->kb_override, 0),
                                              "ipc_baseline"))
              == 1.82);
}

START_TEST(example_file_exact)
{
    crater_config_t c;
    crater_error_t err = {0};

    ck_assert_msg(crater_config_load(SRC "/examples/craterd.yaml", &c, &err)
                      == 0,
                  "%s",
                  err.text);
    check_example(&c);
    crater_config_clear(&c);
}
END_TEST

START_TEST(fractions_as_percent)
{
    crater_config_t c;

    decode_ok("scheduler:\n  cpuThreshold: 80%\n  memoryThreshold: 12.5%\n"
              "  safetyWatermark: 100%\n"
              "  scoreWeights: {gpu: 40%, cpu: 0%, memory: 0.35, disk: 1}\n",
              &c);
    ck_assert(c.scheduler.cpu_threshold == 0.8); /* exact, not 80 * 0.01 */
    ck_assert(c.scheduler.memory_threshold == 0.125);
    ck_assert(c.scheduler.safety_watermark == 1.0);
    ck_assert(c.scheduler.score_weights.gpu == 0.4);
    ck_assert(c.scheduler.score_weights.cpu == 0.0);
    ck_assert(c.scheduler.score_weights.memory == 0.35);
    ck_assert(c.scheduler.score_weights.disk == 1.0);
    crater_config_clear(&c);
    ck_assert_str_eq(decode_bad("scheduler:\n  cpuThreshold: 120%\n",
                                CRATER_ERANGE),
                     "t.yaml:2:3: scheduler.cpuThreshold: '120%' is out of "
                     "range (0, 1]");
    ck_assert_str_eq(decode_bad("scheduler:\n  cpuThreshold: 80 %\n",
                                CRATER_ETYPE),
                     "t.yaml:2:3: scheduler.cpuThreshold: expected a "
                     "fraction such as 0.8 or 80%, got a string");
    decode_bad("scheduler:\n  cpuThreshold: '%'\n", CRATER_ETYPE);
    decode_bad("scheduler:\n  cpuThreshold: 1.2.3%\n", CRATER_ETYPE);
    decode_bad("scheduler:\n  cpuThreshold: -5%\n", CRATER_ETYPE);
}
END_TEST

START_TEST(values_by_type)
{
    crater_config_t c;

    decode_ok("agent:\n  gracePeriod: 300\n  heartbeatTimeout: 1h\n"
              "  migrationPolicy: never\n  allowRootTasks: true\n"
              "  taskUser: root\nscheduler:\n  gpuContextOverhead: 300MB\n"
              "monitoring:\n  sampling_interval_ms: 1000\n"
              "store:\n  etcdEndpoints: https://etcd:2379\n",
              &c);
    ck_assert_uint_eq(c.agent.grace_period_ms, 300000); /* bare = seconds */
    ck_assert_uint_eq(c.agent.heartbeat_timeout_ms, 3600000);
    ck_assert_int_eq(c.agent.migration_policy, CRATER_MIGRATION_NEVER);
    ck_assert_uint_eq(c.scheduler.gpu_context_overhead, 300000000);
    ck_assert_uint_eq(c.monitoring.sampling_interval_ms, 1000);
    ck_assert_str_eq(c.store.etcd_endpoints[0], "https://etcd:2379");
    ck_assert_ptr_null(c.store.etcd_endpoints[1]);
    crater_config_clear(&c);

    ck_assert_str_eq(decode_bad("agent:\n  gracePeriod: 1500us\n",
                                CRATER_EUNIT),
                     "t.yaml:2:3: agent.gracePeriod: 1500us is not a whole "
                     "number of milliseconds");
    ck_assert_str_eq(decode_bad("agent:\n  heartbeatInterval: 50ms\n",
                                CRATER_ERANGE),
                     "t.yaml:2:3: agent.heartbeatInterval: 50ms is out of "
                     "range [100ms, 10m]");
    ck_assert_str_eq(decode_bad("scheduler:\n  maxTasksPerGPU: 0\n",
                                CRATER_ERANGE),
                     "t.yaml:2:3: scheduler.maxTasksPerGPU: 0 is out of "
                     "range [1, 64]");
    ck_assert_str_eq(decode_bad("scheduler:\n  gpuContextOverhead: 20GB/s\n",
                                CRATER_EUNIT),
                     "t.yaml:2:3: scheduler.gpuContextOverhead: '20GB/s': "
                     "'GB/s' is a bandwidth unit, expected a memory size (e.g. "
                     "20Gi or 20GB)");
    ck_assert_str_eq(decode_bad("server:\n  taskUidRange: 0-10\n",
                                CRATER_EINVAL),
                     "t.yaml:2:3: server.taskUidRange: '0-10' is not "
                     "FIRST-LAST (1 <= FIRST <= LAST < 4294967295, e.g. "
                     "200000-299999) or none");
    ck_assert_str_eq(decode_bad("agent:\n  workRoot: work\n", CRATER_EINVAL),
                     "t.yaml:2:3: agent.workRoot: 'work' is not an absolute "
                     "path");
    ck_assert_str_eq(decode_bad("agent:\n  migrationPolicy: eager\n",
                                CRATER_EINVAL),
                     "t.yaml:2:3: agent.migrationPolicy: 'eager' is not one "
                     "of: conservative, immediate, never");
    ck_assert_str_eq(decode_bad("monitoring:\n  sampling_interval_ms: 5s\n",
                                CRATER_ETYPE),
                     "t.yaml:2:3: monitoring.sampling_interval_ms: expected "
                     "an integer, got a string");
    ck_assert_str_eq(decode_bad("server:\n  listen: localhost\n",
                                CRATER_EINVAL),
                     "t.yaml:2:3: server.listen: 'localhost' is not "
                     "HOST:PORT (e.g. 127.0.0.1:7480)");
    decode_bad("server:\n  listen: ':70000'\n", CRATER_EINVAL);
    decode_bad("server:\n  dataDir: ''\n", CRATER_EINVAL);
    decode_bad("scheduler:\n  backfill: yes\n", CRATER_ETYPE);
    ck_assert_str_eq(decode_bad("store:\n  etcdEndpoints: [etcd:2379]\n",
                                CRATER_EINVAL),
                     "t.yaml:2:19: store.etcdEndpoints[0]: 'etcd:2379' is not "
                     "an "
                     "http:// or https:// URL");
    ck_assert_str_eq(decode_bad("scheduler: 3\n", CRATER_ETYPE),
                     "t.yaml:1:1: scheduler: expected a mapping, got an "
                     "integer");
}
END_TEST

START_TEST(unknown_key_file_line)
{
    crater_config_t c;
    crater_error_t err = {0};

    ck_assert_int_eq(crater_config_load(SRC "/tests/data/config/bad-typo.yaml",
                                        &c,
                                        &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_EFIELD);
    ck_assert_str_eq(err.field, "scheduler.maxTaskPerGPU");
    ck_assert_str_eq(err.text,
                     SRC "/tests/data/config/bad-typo.yaml:5:3: "
                         "scheduler.maxTaskPerGPU: unknown key "
                         "'maxTaskPerGPU' (did you mean "
                         "'maxTasksPerGPU'?)");
    ck_assert_ptr_null(c.scheduler.policy); /* cleared on failure */

    /* a key from another section is suggested with its full path */
    ck_assert_str_eq(decode_bad("scheduler:\n  gracePeriod: 30s\n",
                                CRATER_EFIELD),
                     "t.yaml:2:3: scheduler.gracePeriod: unknown key "
                     "'gracePeriod' (did you mean 'agent.gracePeriod'?)");
    ck_assert_str_eq(decode_bad("schedular:\n  backfill: false\n",
                                CRATER_EFIELD),
                     "t.yaml:1:1: schedular: unknown key 'schedular' (did "
                     "you mean 'scheduler'?)");
    ck_assert_str_eq(decode_bad("colour: blue\n", CRATER_EFIELD),
                     "t.yaml:1:1: colour: unknown key 'colour'");
    ck_assert_str_eq(decode_bad("scheduler.backfill: false\n", CRATER_EFIELD),
                     "t.yaml:1:1: scheduler.backfill: unknown key "
                     "'scheduler.backfill' (write nested mappings, not "
                     "dotted keys)");
}
END_TEST

START_TEST(empty_and_null_sections)
{
    crater_config_t c;

    decode_ok("apiVersion: crater/v1\nkind: Config\n", &c);
    crater_config_clear(&c);
    ck_assert_str_eq(decode_bad("kind: Job\n", CRATER_EINVAL),
                     "t.yaml:1:1: kind: 'Job' is not supported here (expected "
                     "Config)");
    decode_bad("scheduler:\n  kind: Config\n", CRATER_EFIELD);

    decode_ok("{}\n", &c);
    ck_assert(c.scheduler.cpu_threshold == 0.8);
    crater_config_clear(&c);
    decode_ok("scheduler:\nagent:\n  gracePeriod: 1m\n", &c);
    ck_assert_uint_eq(c.agent.grace_period_ms, 60000);
    crater_config_clear(&c);
}
END_TEST

START_TEST(rule_heartbeat)
{
    crater_config_t c;
    crater_error_t err = {0};

    /* only the interval is in the file, so the error points at it */
    ck_assert_int_eq(crater_config_load(SRC "/tests/data/config/"
                                            "bad-heartbeat.yaml",
                                        &c,
                                        &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ECONFLICT);
    ck_assert_str_eq(err.field, "agent.heartbeatInterval");
    ck_assert_str_eq(err.text,
                     SRC "/tests/data/config/bad-heartbeat.yaml:3:3: "
                         "agent.heartbeatInterval: "
                         "heartbeatTimeout (30s) must be longer "
                         "than heartbeatInterval (45s)");
    ck_assert_str_eq(decode_bad("agent:\n  heartbeatInterval: 10s\n"
                                "  heartbeatTimeout: 10s\n",
                                CRATER_ECONFLICT),
                     "t.yaml:3:3: agent.heartbeatTimeout: heartbeatTimeout "
                     "(10s) must be longer than heartbeatInterval (10s)");
    decode_ok("agent:\n  heartbeatInterval: 10s\n  heartbeatTimeout: 11s\n",
              &c);
    crater_config_clear(&c);
}
END_TEST

START_TEST(rule_billing_flags)
{
    crater_config_t c;

    ck_assert_str_eq(decode_bad("cost:\n  billingMaxTres: true\n"
                                "  billingMaxTresGres: true\n",
                                CRATER_ECONFLICT),
                     "t.yaml:3:3: cost.billingMaxTresGres: billingMaxTres "
                     "and billingMaxTresGres are two ways to bill (Slurm's "
                     "MAX_TRES and MAX_TRES_GRES): set one");
    decode_ok("cost:\n  billingMaxTresGres: true\n", &c);
    ck_assert(c.cost.billing_max_tres_gres && !c.cost.billing_max_tres);
    crater_config_clear(&c);
}
END_TEST

START_TEST(rule_weights)
{
    crater_config_t c;

    ck_assert_str_eq(decode_bad("scheduler:\n  scoreWeights: {gpu: 0, cpu: 0, "
                                "memory: 0, disk: 0}\n",
                                CRATER_ECONFLICT),
                     "t.yaml:2:3: scheduler.scoreWeights: the weights add "
                     "up to 0; at least one must be positive");
    ck_assert_str_eq(decode_bad("scheduler:\n  scoreWeights: {gpu: -0.1}\n",
                                CRATER_ERANGE),
                     "t.yaml:2:18: scheduler.scoreWeights.gpu: -0.1 is out "
                     "of range [0, 1]");
    decode_ok("scheduler:\n  scoreWeights: {gpu: 1, cpu: 0, memory: 0, "
              "disk: 0}\n",
              &c);
    crater_config_clear(&c);
}
END_TEST

START_TEST(rule_thresholds)
{
    crater_config_t c;

    ck_assert_str_eq(decode_bad("scheduler:\n  memoryThreshold: 0\n",
                                CRATER_ERANGE),
                     "t.yaml:2:3: scheduler.memoryThreshold: 0 is out of "
                     "range (0, 1]");
    decode_bad("scheduler:\n  cpuThreshold: 0%\n", CRATER_ERANGE);
    decode_bad("scheduler:\n  cpuThreshold: 1.01\n", CRATER_ERANGE);
    ck_assert_str_eq(decode_bad("scheduler:\n  safetyWatermark: 0.0\n",
                                CRATER_ERANGE),
                     "t.yaml:2:3: scheduler.safetyWatermark: 0 is out of "
                     "range (0, 1]");
    ck_assert_str_eq(decode_bad("scheduler:\n  overcommitRatio: 0.5\n",
                                CRATER_ERANGE),
                     "t.yaml:2:3: scheduler.overcommitRatio: 0.5 is out of "
                     "range [1, 4]");
    decode_bad("scheduler:\n  overcommitRatio: 4.5\n", CRATER_ERANGE);
    decode_ok("scheduler:\n  cpuThreshold: 1\n  safetyWatermark: 100%\n"
              "  overcommitRatio: 4\n",
              &c);
    ck_assert(c.scheduler.overcommit_ratio == 4.0);
    crater_config_clear(&c);
}
END_TEST

START_TEST(rule_etcd_and_root)
{
    crater_config_t c;

    ck_assert_str_eq(decode_bad("store:\n  backend: etcd\n", CRATER_ECONFLICT),
                     "t.yaml:2:3: store.backend: backend etcd needs at "
                     "least one endpoint");
    ck_assert_str_eq(decode_bad("store:\n  backend: etcd\n  etcdEndpoints: "
                                "[]\n",
                                CRATER_ECONFLICT),
                     "t.yaml:3:3: store.etcdEndpoints: backend etcd needs "
                     "at least one endpoint");
    decode_ok("store:\n  etcdEndpoints: [http://a:2379, http://b:2379]\n"
              "  backend: etcd\n",
              &c);
    ck_assert_int_eq(c.store.backend, CRATER_STORE_ETCD);
    ck_assert_uint_eq(crater_strv_len(c.store.etcd_endpoints), 2);
    ck_assert_str_eq(c.store.etcd_endpoints[1], "http://b:2379");
    crater_config_clear(&c);
    ck_assert_str_eq(decode_bad("agent:\n  taskUser: root\n", CRATER_ECONFLICT),
                     "t.yaml:2:3: agent.taskUser: tasks run as root only "
                     "with allowRootTasks: true");
}
END_TEST

/* ha.retryPeriod < ha.renewDeadline < ha.leaseDuration, refused at load
 * naming the field the file sets. */
START_TEST(rule_ha)
{
    crater_config_t c;

    ck_assert_int_eq(crater_config_defaults(&c), 0);
    ck_assert_int_eq(c.ha.election, CRATER_HA_AUTO);
    ck_assert_uint_eq(c.ha.lease_ms, 3000);
    ck_assert_uint_eq(c.ha.renew_deadline_ms, 2000);
    ck_assert_uint_eq(c.ha.retry_ms, 500);
    ck_assert_str_eq(c.ha.advertise_url, "none");
    crater_config_clear(&c);
    ck_assert_str_eq(decode_bad("ha:\n  renewDeadline: 3s\n", CRATER_ECONFLICT),
                     "t.yaml:2:3: ha.renewDeadline: renewDeadline (3s) must "
                     "be shorter than leaseDuration (3s)");
    ck_assert_str_eq(decode_bad("ha:\n  leaseDuration: 2s\n", CRATER_ECONFLICT),
                     "t.yaml:2:3: ha.leaseDuration: renewDeadline (2s) must "
                     "be shorter than leaseDuration (2s)");
    ck_assert_str_eq(decode_bad("ha:\n  retryPeriod: 2s\n", CRATER_ECONFLICT),
                     "t.yaml:2:3: ha.retryPeriod: retryPeriod (2s) must be "
                     "shorter than renewDeadline (2s)");
    ck_assert_str_eq(decode_bad("ha:\n  leaseDuration: 500ms\n", CRATER_ERANGE),
                     "t.yaml:2:3: ha.leaseDuration: 500ms is out of range "
                     "[1s, 1h]");
    decode_bad("ha:\n  election: on\n", CRATER_EINVAL);
    decode_ok("ha:\n  leaseDuration: 10s\n  renewDeadline: 6s\n"
              "  retryPeriod: 1s\n  election: off\n"
              "  advertiseUrl: http://10.0.0.1:7480\n",
              &c);
    ck_assert_int_eq(c.ha.election, CRATER_HA_OFF);
    ck_assert_uint_eq(c.ha.renew_deadline_ms, 6000);
    ck_assert_str_eq(c.ha.advertise_url, "http://10.0.0.1:7480");
    crater_config_clear(&c);
}
END_TEST

START_TEST(kb_override_checked)
{
    crater_error_t err = {0};
    crater_config_t c;

    ck_assert_int_eq(decode_text("hardware_knowledge_base:\n  override:\n"
                                 "    - vendor: amd\n      model: epyc-9654\n"
                                 "      type: cpu\n      ipc_baseline: fast\n",
                                 &c,
                                 &err),
                     -1);
    crater_config_clear(&c);
    ck_assert_msg(strncmp(err.field, "hardware_knowledge_base.override[0]", 35)
                      == 0,
                  "field '%s' (%s)",
                  err.field,
                  err.text);
    ck_assert_str_eq(decode_bad("hardware_knowledge_base:\n  override: {}\n",
                                CRATER_ETYPE),
                     "t.yaml:2:3: hardware_knowledge_base.override: expected "
                     "a list, got a mapping");
}
END_TEST

static crater_config_t roundtrip(json_t *enc)
{
    crater_config_t c;
    crater_error_t err = {0};
    crater_dec_t d;

    ck_assert_int_eq(crater_config_defaults(&c), 0);
    crater_dec_init(&d, NULL, 0, &err);
    ck_assert_msg(crater_config_decode(&d, enc, &c) == 0, "%s", err.text);
    return c;
}

START_TEST(encode_decode_roundtrip)
{
    crater_config_t a, b;
    crater_error_t err = {0};
    crater_doc_t *doc;
    json_t *ea, *eb, *ec;
    char *text;

    ck_assert_int_eq(crater_config_load(SRC "/examples/craterd.yaml", &a, &err),
                     0);
    ea = crater_config_encode(&a);
    ck_assert_ptr_nonnull(ea);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(ea, "agent"),
                                         "heartbeatTimeout")),
                     "90000ms");
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_object_get(ea, "scheduler"),
                                         "gpuContextOverhead")),
                     520ll << 20);
    b = roundtrip(ea);
    check_example(&b);
    eb = crater_config_encode(&b);
    ck_assert(json_equal(ea, eb));

    /* and through JSON text, as `crater validate -o json` prints it */
    text = json_dumps(ea, JSON_INDENT(2));
    ck_assert_int_eq(crater_doc_parse(text,
                                      strlen(text),
                                      "enc.json",
                                      &doc,
                                      &err),
                     0);
    crater_config_clear(&b);
    b = roundtrip(crater_doc_root(doc, 0));
    ec = crater_config_encode(&b);
    ck_assert(json_equal(ea, ec));
    free(text);
    crater_doc_destroy(doc);
    json_decref(ea);
    json_decref(eb);
    json_decref(ec);
    crater_config_clear(&a);
    crater_config_clear(&b);
}
END_TEST

START_TEST(encode_defaults_has_every_key)
{
    crater_config_t a, b;
    json_t *ea, *eb;

    ck_assert_int_eq(crater_config_defaults(&a), 0);
    ea = crater_config_encode(&a);
    ck_assert_uint_eq(json_object_size(ea), 10);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "ha")), 6);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "logs")), 1);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "scheduler")), 24);
    ck_assert_uint_eq(json_object_size(
                          json_object_get(json_object_get(ea, "scheduler"),
                                          "gpuShare")),
                      4);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "agent")), 13);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "server")), 16);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "cost")), 18);
    ck_assert_uint_eq(json_object_size(json_object_get(ea, "store")), 10);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(ea, "store"),
                                         "backend")),
                     "sqlite");
    b = roundtrip(ea);
    eb = crater_config_encode(&b);
    ck_assert(json_equal(ea, eb));
    json_decref(ea);
    json_decref(eb);
    crater_config_clear(&a);
    crater_config_clear(&b);
}
END_TEST

static char *read_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0;
    long n;

    if (!fp)
        return NULL;
    if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0
        && fseek(fp, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
        len = fread(buf, 1, (size_t)n, fp);
        buf[len] = '\0';
    }
    fclose(fp);
    return buf;
}

/* doc/config.md is generated from the table. To regenerate it after
 * changing the table: CRATER_REGEN_DOCS=1 build/tests/test_config (or
 * `crater config --markdown > doc/config.md`). */
/* The cost section: prices, per-model and per-tenant mappings, Slurm
 * weights; a bad entry names its key and the reason. */
START_TEST(cost_section)
{
    crater_config_t c;

    decode_ok("cost:\n  gpuModels: {h100-sxm5-80gb: 2.5}\n"
              "  tenantRates: {research: 0.5}\n"
              "  billingWeights: CPU=1.0,Mem=0.25G,GRES/gpu=2.0\n"
              "  basis: usage\n",
              &c);
    ck_assert(
        json_real_value(json_object_get(c.cost.gpu_models, "h100-sxm5-80gb"))
        == 2.5);
    ck_assert_int_eq(c.cost.basis, CRATER_BASIS_USAGE);
    crater_config_clear(&c);
    ck_assert_str_eq(decode_bad("cost:\n  tenantRates: {research: -1}\n",
                                CRATER_ERANGE),
                     "t.yaml:2:17: cost.tenantRates.research: -1 is out of "
                     "range [0, 100]");
    ck_assert_str_eq(decode_bad("cost:\n  gpuModels: [a]\n", CRATER_ETYPE),
                     "t.yaml:2:3: cost.gpuModels: expected a mapping of "
                     "name: number, got a list");
    ck_assert_str_eq(decode_bad("cost:\n  billingWeights: CPU=1,Disk=2\n",
                                CRATER_EINVAL),
                     "t.yaml:2:3: cost.billingWeights: unknown TRES 'Disk' "
                     "(one of CPU, Mem, GRES/gpu)");
}
END_TEST

START_TEST(doc_config_md_in_sync)
{
    const char *path = SRC "/doc/config.md";
    char *want = crater_config_markdown(), *have;
    FILE *fp;

    ck_assert_ptr_nonnull(want);
    if (getenv("CRATER_REGEN_DOCS") && (fp = fopen(path, "wb"))) {
        fputs(want, fp);
        fclose(fp);
    }
    have = read_file(path);
    ck_assert_msg(have && strcmp(have, want) == 0,
                  "%s is out of date with the table in src/core/config.c; "
                  "regenerate it with `CRATER_REGEN_DOCS=1 "
                  "tests/test_config` in the build directory (or `crater "
                  "config --markdown > doc/config.md`)",
                  path);
    ck_assert_ptr_nonnull(strstr(want,
                                 "| `scheduler.cpuThreshold` | fraction "
                                 "| `0.8` | (0, 1] |"));
    free(want);
    free(have);
}
END_TEST

START_TEST(load_errors)
{
    crater_config_t c;
    crater_error_t err = {0};

    ck_assert_int_eq(crater_config_load(SRC "/tests/data/config/none.yaml",
                                        &c,
                                        &err),
                     -1);
    ck_assert_int_eq(err.errnum, CRATER_ENOENT);
    ck_assert_int_eq(crater_config_load(SRC "/tests/data/config/two-docs.yaml",
                                        &c,
                                        &err),
                     -1);
    ck_assert_str_eq(err.text,
                     SRC "/tests/data/config/two-docs.yaml: a "
                         "config file holds one document, not 2");
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");

    tcase_add_test(tc, defaults_every_key);
    tcase_add_test(tc, example_file_exact);
    tcase_add_test(tc, fractions_as_percent);
    tcase_add_test(tc, values_by_type);
    tcase_add_test(tc, unknown_key_file_line);
    tcase_add_test(tc, empty_and_null_sections);
    tcase_add_test(tc, rule_heartbeat);
    tcase_add_test(tc, rule_weights);
    tcase_add_test(tc, rule_billing_flags);
    tcase_add_test(tc, rule_thresholds);
    tcase_add_test(tc, rule_etcd_and_root);
    tcase_add_test(tc, rule_ha);
    tcase_add_test(tc, kb_override_checked);
    tcase_add_test(tc, encode_decode_roundtrip);
    tcase_add_test(tc, encode_defaults_has_every_key);
    tcase_add_test(tc, cost_section);
    tcase_add_test(tc, doc_config_md_in_sync);
    tcase_add_test(tc, load_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    int failures;

    srunner_run_all(sr, CK_NORMAL);
    failures = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failures ? 1 : 0;
}
