/* container.c - the pure parts of running a task in a container
 * (container.h): podman's command line, the container's name, the CDI
 * spec of the node's GPUs. No I/O, so unit tests check them exactly.
 *
 * The command line is built so that the container is the task as a bare
 * task would be: --cgroup-parent puts it inside the task's cgroup (the
 * limits the agent wrote there apply to everything in it, and usage and
 * kills count there), --cgroup-manager cgroupfs because the agent
 * manages cgroups by hand, not through systemd; podman is not in the
 * task's cgroup (task.c) and --cgroups no-conmon keeps its monitor with
 * it, so only the container counts against the task's limits (the two
 * hold ~17 MB, half of a 32 MiB task); --ulimit passes the
 * agent's own limits, because podman asks for more than an unprivileged
 * container host grants and the runtime then fails (doc/containers.md);
 * the task user gets no capability and no setuid binary of the image
 * can give it one (--cap-drop=all, no-new-privileges), as for a bare
 * task; the task's variables come in a root-owned file (--env-file), never on
 * the command line (`ps` shows it) nor in podman's own environment
 * (CONTAINERS_CONF and friends would reconfigure podman running as root).
 */
#include "agent/container.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crater/dec.h"

/* A growing argv; ok turns false on the first failed allocation. */
typedef struct vec {
    char **v;
    size_t n, cap;
    bool ok;
} vec_t;

static void add(vec_t *a, const char *s)
{
    char *d = s ? strdup(s) : NULL;

    if (!a->ok || !s || !d) {
        free(d);
        a->ok = a->ok && s;
        return;
    }
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        char **n = realloc(a->v, cap * sizeof(*n));
        if (!n) {
            free(d);
            a->ok = false;
            return;
        }
        a->v = n;
        a->cap = cap;
    }
    a->v[a->n++] = d;
    a->v[a->n] = NULL;
}

static void addf(vec_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void addf(vec_t *a, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    if (!s)
        a->ok = false;
    add(a, s);
    free(s);
}

static void add2(vec_t *a, const char *flag, const char *val)
{
    add(a, flag);
    add(a, val);
}

const char *ctr_pull_arg(crater_pull_policy_t p)
{
    return p == CRATER_PULL_ALWAYS  ? "always"
           : p == CRATER_PULL_NEVER ? "never"
                                    : "missing";
}

/* podman's global flags, `run` and the options that make it the task. */
static void head(vec_t *a, const ctr_run_t *r)
{
    add(a, r->podman);
    if (r->oci_runtime)
        add2(a, "--runtime", r->oci_runtime);
    add2(a, "--cgroup-manager", "cgroupfs");
    add(a, "run");
    add2(a, "--name", r->name);
    addf(a, "--label=%s=%s", CTR_LABEL_AGENT, r->agent_label);
    add2(a, "--pull", ctr_pull_arg(r->pull));
    add2(a, "--network", "host");
    add2(a, "--log-driver", "none"); /* the shim's files hold the output */
    add(a, "--sig-proxy=true");
    if (r->init)
        add(a, "--init");
    if (r->cgroup_parent) {
        add2(a, "--cgroup-parent", r->cgroup_parent);
        add2(a, "--cgroups", "no-conmon");
    }
}

static void limits(vec_t *a, const ctr_run_t *r)
{
    if (r->nofile)
        addf(a, "--ulimit=nofile=%" PRIu64 ":%" PRIu64, r->nofile, r->nofile);
    if (r->nproc)
        addf(a, "--ulimit=nproc=%" PRIu64 ":%" PRIu64, r->nproc, r->nproc);
    /* no more than a bare task: no capability for a task user, and no
     * setuid binary of the image lifts it (they would reach the volumes
     * as root) */
    add(a, "--security-opt=no-new-privileges");
    if (r->set_user) {
        addf(a, "--user=%lu:%lu", (unsigned long)r->uid, (unsigned long)r->gid);
        if (r->uid != 0)
            add(a, "--cap-drop=all");
    }
    if (r->env_file)
        add2(a, "--env-file", r->env_file);
    if (r->workdir)
        add2(a, "--workdir", r->workdir);
    for (size_t i = 0; r->mounts && r->mounts[i]; i++)
        add2(a, "--volume", r->mounts[i]);
    for (size_t i = 0; r->devices && r->devices[i]; i++)
        add2(a, "--device", r->devices[i]);
}

char **ctr_argv(const ctr_run_t *r)
{
    vec_t a = {.ok = true};

    head(&a, r);
    limits(&a, r);
    if (r->argv && r->argv[0])
        add2(&a, "--entrypoint", ""); /* command replaces the entrypoint */
    add(&a, r->image);
    for (size_t i = 0; r->argv && r->argv[i]; i++)
        add(&a, r->argv[i]);
    if (a.ok)
        return a.v;
    crater_strv_free(a.v);
    return NULL;
}

uint32_t ctr_hash(const char *s)
{
    uint32_t h = 2166136261u;

    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

void ctr_name(char *buf,
              size_t n,
              uint32_t hash,
              const char *job,
              uint32_t attempt,
              uint32_t replica)
{
    if (replica)
        snprintf(buf, n, "crater-%08x-%s-%u-r%u", hash, job, attempt, replica);
    else
        snprintf(buf, n, "crater-%08x-%s-%u", hash, job, attempt);
}

/* One GPU: its index as the device name, /dev/nvidia<index> its node. */
static json_t *cdi_device(size_t index)
{
    char name[24], path[48];

    snprintf(name, sizeof(name), "%zu", index);
    snprintf(path, sizeof(path), "/dev/nvidia%zu", index);
    return json_pack("{s:s, s:{s:[{s:s}]}}",
                     "name",
                     name,
                     "containerEdits",
                     "deviceNodes",
                     "path",
                     path);
}

json_t *ctr_cdi_spec(const crater_gpu_t *gpus, size_t ngpus)
{
    json_t *devs = json_array();

    (void)gpus; /* the index is the device: NVML numbers them */
    for (size_t i = 0; devs && i < ngpus; i++)
        if (json_array_append_new(devs, cdi_device(i)) < 0) {
            json_decref(devs);
            return NULL;
        }
    if (!devs)
        return NULL;
    return json_pack("{s:s, s:s, s:o, s:{s:[{s:s}, {s:s}, {s:s}]}}",
                     "cdiVersion",
                     "0.5.0",
                     "kind",
                     "nvidia.com/gpu",
                     "devices",
                     devs,
                     "containerEdits",
                     "deviceNodes",
                     "path",
                     "/dev/nvidiactl",
                     "path",
                     "/dev/nvidia-uvm",
                     "path",
                     "/dev/nvidia-uvm-tools");
}
