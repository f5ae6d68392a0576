/* container.h - a task in an OCI container: the pure parts (the podman
 * command line, the container's name, the CDI spec of the node's GPUs).
 * The agent's side (detection, start, stop, exit, sweep) is ctrtask.c;
 * the user's view is doc/containers.md.
 *
 * The agent never implements a runtime: the task's shim execs
 * `podman run` (argv, never a shell) as root, with runc as the OCI
 * runtime where it is installed, and podman's exit status is the task's.
 */
#ifndef CRATER_AGENT_CONTAINER_H
#define CRATER_AGENT_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crater/jobspec.h"
#include "crater/model.h"

/* Every container's label key: the hash of the agent's DATA (ctr_hash()),
 * so a sweep removes only its own agent's containers. */
#define CTR_LABEL_AGENT "crater.agent"

/* What `podman run` needs; borrowed pointers, NULL or 0 = leave out. */
typedef struct ctr_run {
    const char *podman;        /* podman's path */
    const char *oci_runtime;   /* --runtime: "runc", or NULL: podman's */
    bool init;                 /* --init: catatonit forwards SIGTERM */
    const char *name;          /* ctr_name() */
    const char *agent_label;   /* CTR_LABEL_AGENT's value */
    const char *cgroup_parent; /* "/<parent>/<task cgroup>": its limits */
    const char *env_file;      /* the task's variables, KEY=VALUE lines */
    const char *workdir;       /* -w, or NULL: the image's */
    bool set_user;             /* --user uid:gid */
    uid_t uid;
    gid_t gid;
    uint64_t nofile, nproc; /* --ulimit values (the runtime may only lower) */
    crater_pull_policy_t pull;
    const char *const *mounts;  /* "SRC:DST[:ro]" each; NULL-terminated */
    const char *const *devices; /* host device paths, NULL-terminated */
    const char *image;
    char *const *argv; /* the command (replaces the entrypoint), or NULL */
} ctr_run_t;

/* The argv of `podman run` for r: a NULL-terminated vector; caller frees
 * with crater_strv_free(). NULL on ENOMEM. */
char **ctr_argv(const ctr_run_t *r);

/* The --pull value of p: "missing", "always", "never". Static. */
const char *ctr_pull_arg(crater_pull_policy_t p);

/* "crater-<hash>-<job>-<attempt>[-r<replica>]" into buf (n >= 96): the
 * same for the agent that started it and one that adopts it. */
void ctr_name(char *buf,
              size_t n,
              uint32_t hash,
              const char *job,
              uint32_t attempt,
              uint32_t replica);

/* The FNV-1a hash of s (the agent's DATA: ctr_name(), CTR_LABEL_AGENT). */
uint32_t ctr_hash(const char *s);

/* The CDI spec (https://github.com/cncf-tags/container-device-interface)
 * of a node's GPUs: kind "nvidia.com/gpu", one device per GPU named by
 * its index with the node /dev/nvidia<index>, and the control nodes in
 * containerEdits. New reference; NULL on ENOMEM. Pure: the devices need
 * not exist (the stub NVML has none). */
struct json_t;
struct json_t *ctr_cdi_spec(const crater_gpu_t *gpus, size_t ngpus);

#endif /* CRATER_AGENT_CONTAINER_H */
