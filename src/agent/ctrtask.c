/* ctrtask.c - the agent's side of a task with an image (internal.h,
 * doc/containers.md): finding the runtime, starting, killing, ending and
 * sweeping containers.
 *
 * The runtime is podman, driven through its command line as root, with
 * runc as the OCI runtime where it is installed (crun 1.8 refuses a cgroup
 * v1 host whose cgroup2 mount holds a controller, as this project's test
 * machines do). The task's shim execs `podman run` exactly as it execs a
 * bare task, except that podman stays out of the task's cgroup and creates
 * the container in a child of it (--cgroup-parent), so the task's limits
 * hold the container and nothing else, with its output in
 * the task's log files and podman's exit status as the task's (podman
 * returns the container's). A stop is `podman kill --signal TERM` to
 * catatonit (--init), which passes it to the command (podman's own
 * forwarding loses a SIGTERM that comes right after the start), and
 * `podman kill` again after the grace period: the container's processes
 * are not in the task's process group.
 *
 * Every container is named after its agent's DATA and its task (the same
 * name for the agent that adopts it) and labelled with that hash; after
 * it ends the agent removes it (`podman rm -f`), and an agent starting on
 * a DATA removes every container of that label that no adopted task runs
 * in (the containers of a crashed agent whose shims died with it). These
 * podman calls are synchronous in the supervisor thread (~0.1 s each):
 * containers are for long tasks, and the order (inspect, then remove,
 * then the cgroup) matters more than the tick. The expected load is a
 * few containers per node, not a 1,000-element array.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/container.h"
#include "agent/internal.h"
#include "crater/log.h"

#define CTR_PATH \
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* podman 4.3 lowers its own RLIMIT_NPROC to this when it cannot raise it,
 * and the runtime it starts cannot go back up: a higher --ulimit fails */
#define CTR_NPROC_MAX 32768u
/* the kernel's default fs.nr_open: no process may have more */
#define CTR_NOFILE_MAX 1048576u

static char *const podman_env[] = {CTR_PATH, "LANG=C.UTF-8", NULL};

/* ---- running podman --------------------------------------------------- */

/* Read fd to EOF into out (n bytes, NUL-terminated; more is dropped). */
static void slurp(int fd, char *out, size_t n)
{
    size_t k = 0;
    ssize_t r;
    char sink[512];

    while ((r = read(fd,
                     k + 1 < n ? out + k : sink,
                     k + 1 < n ? n - k - 1 : sizeof(sink)))
               > 0
           || (r < 0 && errno == EINTR))
        if (r > 0 && k + 1 < n)
            k += (size_t)r;
    if (n)
        out[k] = '\0';
}

/* argv with stdin and stderr on /dev/null and stdout into out (n > 0) or
 * /dev/null: its exit status (0-255), or -1 when it did not run. */
static int run(char *const *argv, char *out, size_t n)
{
    posix_spawn_file_actions_t fa;
    int p[2] = {-1, -1}, st = 0, rc;
    pid_t pid;

    if (n && pipe2(p, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (n)
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    else
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, podman_env);
    posix_spawn_file_actions_destroy(&fa);
    if (n)
        close(p[1]);
    if (rc == 0 && n)
        slurp(p[0], out, n);
    if (n)
        close(p[0]);
    if (rc != 0)
        return -1;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* podman CMD NAME (with the agent's --runtime): its exit status. */
static int podman3(const crater_agent_t *a,
                   const char *c1,
                   const char *c2,
                   const char *c3,
                   const char *name)
{
    char *v[10];
    int k = 0;

    v[k++] = (char *)a->ctr->podman;
    if (a->ctr->runtime[0]) {
        v[k++] = "--runtime";
        v[k++] = (char *)a->ctr->runtime;
    }
    v[k++] = "--cgroup-manager";
    v[k++] = "cgroupfs";
    v[k++] = (char *)c1;
    if (c2)
        v[k++] = (char *)c2;
    if (c3)
        v[k++] = (char *)c3;
    v[k++] = (char *)name;
    v[k] = NULL;
    return run(v, NULL, 0);
}

/* ---- detection --------------------------------------------------------- */

static ctr_host_t host;
static bool host_ok;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static const char *first_x(const char *const *paths)
{
    for (; *paths; paths++)
        if (access(*paths, X_OK) == 0)
            return *paths;
    return NULL;
}

/* $CRATER_PODMAN (empty: containers off), else podman on the usual paths;
 * root only (podman runs the container as root, --user drops to the task
 * user); `podman info` must work. */
static void detect(void)
{
    static const char *const podmans[] = {"/usr/bin/podman",
                                          "/usr/local/bin/podman",
                                          NULL};
    static const char *const runcs[] = {"/usr/bin/runc",
                                        "/usr/sbin/runc",
                                        NULL};
    static const char *const inits[] = {"/usr/bin/catatonit",
                                        "/usr/libexec/podman/catatonit",
                                        NULL};
    const char *p = getenv("CRATER_PODMAN"), *r = getenv("CRATER_OCI_RUNTIME");
    char *v[] = {host.podman,
                 "info",
                 "--format",
                 "{{.Host.OCIRuntime.Name}}",
                 NULL};
    char out[64];

    if ((p && !*p) || geteuid() != 0 || !(p = p ? p : first_x(podmans))
        || access(p, X_OK) != 0)
        return;
    snprintf(host.podman, sizeof(host.podman), "%s", p);
    snprintf(host.runtime,
             sizeof(host.runtime),
             "%s",
             r                ? r
             : first_x(runcs) ? "runc"
                              : "");
    host.init = first_x(inits) != NULL;
    host_ok = run(v, out, sizeof(out)) == 0;
}

/* The node's label key set to value, or removed (value NULL): what the
 * agent found is what craterd sees, whatever its hardware file said. */
static int set_label(crater_node_t *n, const char *key, const char *value)
{
    crater_kv_t *l;
    size_t i = 0;

    while (i < n->nlabels && strcmp(n->labels[i].key, key) != 0)
        i++;
    if (i < n->nlabels) {
        free(n->labels[i].key);
        free(n->labels[i].value);
        n->labels[i] = n->labels[--n->nlabels];
    }
    if (!value)
        return 0;
    if (!(l = realloc(n->labels, (n->nlabels + 1) * sizeof(*l))))
        return -1;
    n->labels = l;
    l[n->nlabels].key = strdup(key);
    l[n->nlabels].value = strdup(value);
    if (!l[n->nlabels].key || !l[n->nlabels].value) {
        free(l[n->nlabels].key);
        free(l[n->nlabels].value);
        return -1;
    }
    n->nlabels++;
    return 0;
}

/* DATA/cdi/crater-gpus.json: the CDI spec of this node's GPUs, for an
 * operator who points podman's cdi_spec_dirs at it (doc/containers.md). */
static void write_cdi(crater_agent_t *a)
{
    json_t *spec = ctr_cdi_spec(a->node.gpus, a->node.ngpus);
    char path[4200];

    snprintf(path, sizeof(path), "%s/cdi", a->data_dir);
    if (spec && (mkdir(path, 0755) == 0 || errno == EEXIST)) {
        snprintf(path, sizeof(path), "%s/cdi/crater-gpus.json", a->data_dir);
        if (json_dump_file(spec, path, JSON_INDENT(2)) < 0)
            crater_log(LOG_WARNING, "%s: cannot write the CDI spec", path);
    }
    json_decref(spec);
}

int ctr_setup(crater_agent_t *a, crater_error_t *err)
{
    a->ctr_hash = ctr_hash(a->data_dir);
    pthread_once(&host_once, detect);
    if (!host_ok || crater_cg_version(a->cg) == CRATER_CG_NONE) {
        crater_log(LOG_INFO,
                   "node %s: no container runtime (podman as root with "
                   "cgroups): jobs with an image are not placed here",
                   a->node.name);
        return set_label(&a->node, CRATER_LABEL_RUNTIMES, NULL);
    }
    if (set_label(&a->node, CRATER_LABEL_RUNTIMES, "podman") < 0)
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    a->ctr = &host;
    if (a->node.ngpus)
        write_cdi(a);
    return 0;
}

/* ---- start ------------------------------------------------------------- */

/* The task's variables, KEY=VALUE a line, in t->dir/ctr.env (0600, as
 * root): --env-file. A value with a newline cannot be written so. */
static int env_file(const atask_t *t,
                    const crater_proto_task_t *task,
                    char *path,
                    size_t n,
                    crater_error_t *err)
{
    FILE *f;

    snprintf(path, n, "%s/ctr.env", t->dir);
    for (size_t i = 0; i < task->nenv; i++)
        if (strchr(task->env[i].value, '\n'))
            return crater_errorf_field(err,
                                       CRATER_EINVAL,
                                       "env",
                                       "env.%s: a newline in a value cannot "
                                       "reach a container",
                                       task->env[i].key);
    if (!(f = fopen(path, "we")))
        return crater_errorf(err, CRATER_EIO, "%s: %s", path, strerror(errno));
    for (size_t i = 0; i < task->nenv; i++)
        fprintf(f, "%s=%s\n", task->env[i].key, task->env[i].value);
    if (fclose(f) != 0)
        return crater_errorf(err, CRATER_EIO, "%s: %s", path, strerror(errno));
    return 0;
}

/* DATA/scratch/<container>/<name>, made for the task user. */
static int scratch_dir(crater_agent_t *a,
                       const atask_t *t,
                       const char *name,
                       char *out,
                       size_t n,
                       crater_error_t *err)
{
    const char *parts[] = {"scratch", t->ctr, name};
    size_t k = (size_t)snprintf(out, n, "%s", a->data_dir);

    for (size_t i = 0; i < 3 && k < n; i++) {
        k += (size_t)snprintf(out + k, n - k, "/%s", parts[i]);
        if (mkdir(out, i == 2 ? 0700 : 0711) < 0 && errno != EEXIST)
            return crater_errorf(err,
                                 CRATER_EIO,
                                 "%s: %s",
                                 out,
                                 strerror(errno));
    }
    if (t->switch_user && chown(out, t->uid, t->gid) < 0)
        return crater_errorf(err, CRATER_EIO, "%s: %s", out, strerror(errno));
    return 0;
}

/* A NULL-terminated list of strings, grown one at a time. */
typedef struct list {
    char *v[CRATER_JOB_MAX_LIST + 8];
    size_t n;
} list_t;

static int listf(
    list_t *l, const char *fmt, const char *a, const char *b, const char *c)
{
    if (l->n + 1 >= sizeof(l->v) / sizeof(l->v[0])
        || asprintf(&l->v[l->n], fmt, a, b, c) < 0)
        return -1;
    l->v[++l->n] = NULL;
    return 0;
}

static void list_free(list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

/* The volumes, the checkpoint directory and the GPU slice's files, each at
 * its own path inside. */
static int mounts(crater_agent_t *a,
                  const atask_t *t,
                  const crater_proto_task_t *task,
                  list_t *m,
                  crater_error_t *err)
{
    const char *pre = crater_proto_task_getenv(task, "LD_PRELOAD");
    char dir[4200];
    int rc = 0;

    for (size_t i = 0; i < task->nvolumes && rc == 0; i++) {
        const crater_volume_t *v = &task->volumes[i];
        if (v->scratch
            && scratch_dir(a, t, v->scratch, dir, sizeof(dir), err) < 0)
            return -1;
        rc = listf(m,
                   "%s:%s%s",
                   v->scratch ? dir : v->host_path,
                   v->mount_path,
                   v->read_only ? ":ro" : "");
    }
    if (rc == 0 && task->checkpoint_dir)
        rc =
            listf(m, "%s:%s%s", task->checkpoint_dir, task->checkpoint_dir, "");
    if (rc == 0 && t->slice_path)
        rc = listf(m, "%s:%s%s", t->slice_path, t->slice_path, "");
    if (rc == 0 && pre && t->slice_path && agent_gpuslice_lib())
        rc = listf(m,
                   "%s:%s%s",
                   agent_gpuslice_lib(),
                   agent_gpuslice_lib(),
                   ":ro");
    return rc < 0 ? crater_errorf(err, CRATER_ENOMEM, "out of memory") : 0;
}

/* The placement's GPUs and the driver's control nodes that exist here. */
static int devices(const atask_t *t, list_t *d)
{
    static const char *const ctl[] = {"/dev/nvidiactl",
                                      "/dev/nvidia-uvm",
                                      "/dev/nvidia-uvm-tools",
                                      NULL};
    char path[48];

    for (uint32_t i = 0; i < t->ngpus; i++) {
        snprintf(path, sizeof(path), "/dev/nvidia%u", t->gpu[i]);
        if (access(path, F_OK) == 0 && listf(d, "%s%s%s", path, "", "") < 0)
            return -1;
    }
    for (size_t i = 0; t->ngpus && ctl[i]; i++)
        if (access(ctl[i], F_OK) == 0 && listf(d, "%s%s%s", ctl[i], "", "") < 0)
            return -1;
    return 0;
}

static uint64_t hard_limit(int resource, uint64_t cap)
{
    struct rlimit rl;

    if (getrlimit(resource, &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
        return cap;
    return (uint64_t)rl.rlim_max < cap ? (uint64_t)rl.rlim_max : cap;
}

static int build(crater_agent_t *a,
                 atask_t *t,
                 const crater_proto_task_t *task,
                 char ***argv,
                 crater_error_t *err)
{
    char envf[4200], parent[256], label[16];
    list_t m = {.n = 0}, d = {.n = 0};
    ctr_run_t r = {
        .podman = a->ctr->podman,
        .oci_runtime = a->ctr->runtime[0] ? a->ctr->runtime : NULL,
        .init = a->ctr->init,
        .name = t->ctr,
        .agent_label = label,
        .cgroup_parent = parent,
        .env_file = envf,
        .workdir = task->working_dir,
        .set_user = t->switch_user,
        .uid = t->uid,
        .gid = t->gid,
        .nofile = hard_limit(RLIMIT_NOFILE, CTR_NOFILE_MAX),
        .nproc = hard_limit(RLIMIT_NPROC, CTR_NPROC_MAX),
        .pull = task->image_pull,
        .image = task->image,
        .argv = task->argv,
    };

    snprintf(label, sizeof(label), "%08x", a->ctr_hash);
    snprintf(parent, sizeof(parent), "/%s/%s", a->cg_parent, t->cg);
    if (env_file(t, task, envf, sizeof(envf), err) < 0
        || mounts(a, t, task, &m, err) < 0)
        goto out;
    if (devices(t, &d) < 0) {
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
        goto out;
    }
    r.mounts = (const char *const *)m.v;
    r.devices = (const char *const *)d.v;
    m.v[m.n] = d.v[d.n] = NULL;
    if (!(*argv = ctr_argv(&r)))
        crater_errorf(err, CRATER_ENOMEM, "out of memory");
out:
    list_free(&m);
    list_free(&d);
    return *argv ? 0 : -1;
}

int ctr_prepare(crater_agent_t *a,
                atask_t *t,
                const crater_proto_task_t *task,
                char ***argv,
                char ***env,
                crater_error_t *err)
{
    char name[128];

    *argv = *env = NULL;
    if (!a->ctr)
        return crater_errorf_field(err,
                                   CRATER_EUNAVAIL,
                                   "image",
                                   "node %s has no container runtime for "
                                   "image %s",
                                   a->node.name,
                                   task->image);
    ctr_name(name, sizeof(name), a->ctr_hash, t->job, t->attempt, t->replica);
    if (!(t->ctr = strdup(name)) || !(t->ctr_image = strdup(task->image))
        || !(*env = crater_strv_dup(podman_env)))
        return crater_errorf(err, CRATER_ENOMEM, "out of memory");
    return build(a, t, task, argv, err);
}

/* ---- stop, exit, sweep ------------------------------------------------- */

int ctr_term(crater_agent_t *a, const atask_t *t)
{
    if (!a->ctr || !t->ctr)
        return -1;
    return podman3(a, "kill", "--signal", "TERM", t->ctr) == 0 ? 0 : -1;
}

void ctr_kill(crater_agent_t *a, const atask_t *t)
{
    if (a->ctr && t->ctr)
        podman3(a, "kill", "--signal", "KILL", t->ctr);
}

/* Killed (137) by nobody but the kernel, with the task's memory at its
 * limit: the container's OOM (crater_cg_mem_peak()). */
static bool oom_guess(crater_agent_t *a, const atask_t *t, int status)
{
    uint64_t peak = 0;

    return WIFEXITED(status) && WEXITSTATUS(status) == 137 && !t->killed
           && !t->stop_requested && t->mem_limit
           && crater_cg_mem_peak(a->cg, t->cg, &peak, NULL) == 0
           && peak + (t->mem_limit >> 5) >= t->mem_limit;
}

/* podman could not start it (125): say why when the image is missing. */
static void image_error(crater_agent_t *a, atask_t *t)
{
    char buf[400];

    if (t->error || !t->ctr_image
        || podman3(a, "image", "exists", NULL, t->ctr_image) == 0)
        return;
    snprintf(buf,
             sizeof(buf),
             "image %s is not on node %s and could not be pulled: load it "
             "there with `podman load -i FILE` (or `podman import`), or "
             "make its registry reachable",
             t->ctr_image,
             a->node.name);
    t->error = strdup(buf);
}

/* The directories of <root>/<hierarchy>/<parent>/<task>: the
 * container's own (libpod-<id>, left when its monitor was killed), and the
 * task's in hierarchies the agent does not manage (podman made them);
 * the agent's own are removed with its cgroup later (ENOENT is fine). */
static void cgroup_dirs(crater_agent_t *a, const atask_t *t)
{
    DIR *root = opendir(a->cg_root), *dir;
    struct dirent *h, *e;
    char path[4200], sub[4500];

    while (root && (h = readdir(root))) {
        if (h->d_name[0] == '.')
            continue;
        snprintf(path,
                 sizeof(path),
                 "%s/%s/%s/%s",
                 a->cg_root,
                 h->d_name,
                 a->cg_parent,
                 t->cg);
        if (!(dir = opendir(path)))
            continue;
        while ((e = readdir(dir)))
            if (e->d_type == DT_DIR && e->d_name[0] != '.') {
                snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
                rmdir(sub);
            }
        closedir(dir);
        rmdir(path);
    }
    if (root)
        closedir(root);
}

void ctr_exited(crater_agent_t *a, atask_t *t, int status)
{
    char envf[4200];

    if (!t->ctr || !a->ctr)
        return;
    if (status >= 0 && !t->oom && oom_guess(a, t, status))
        t->oom = true;
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 125)
        image_error(a, t);
    if (podman3(a, "rm", "-f", NULL, t->ctr) != 0)
        crater_log(LOG_WARNING, "job %s: podman rm %s failed", t->job, t->ctr);
    cgroup_dirs(a, t);
    snprintf(envf, sizeof(envf), "%s/ctr.env", t->dir);
    unlink(envf); /* the directory may be recycled (spare.c) */
}

static bool ours_running(const crater_agent_t *a, const char *name)
{
    for (size_t i = 0; i < a->ntasks; i++)
        if (a->tasks[i]->ctr && a->tasks[i]->state == AT_RUNNING
            && strcmp(a->tasks[i]->ctr, name) == 0)
            return true;
    return false;
}

void ctr_sweep(crater_agent_t *a)
{
    char filter[64], out[16384], *save = NULL, *name;
    char *v[] =
        {NULL, "ps", "-a", "--filter", filter, "--format", "{{.Names}}", NULL};

    if (!a->ctr)
        return;
    v[0] = (char *)a->ctr->podman;
    snprintf(filter,
             sizeof(filter),
             "label=%s=%08x",
             CTR_LABEL_AGENT,
             a->ctr_hash);
    if (run(v, out, sizeof(out)) != 0)
        return;
    for (name = strtok_r(out, "\n", &save); name;
         name = strtok_r(NULL, "\n", &save))
        if (!ours_running(a, name)) {
            crater_log(LOG_INFO,
                       "removing container %s of an earlier agent",
                       name);
            podman3(a, "rm", "-f", NULL, name);
        }
}

static int rm_one(const char *path,
                  const struct stat *st,
                  int flag,
                  struct FTW *f)
{
    (void)st;
    (void)f;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 ? 0 : 0;
}

void ctr_cleanup(crater_agent_t *a, const atask_t *t)
{
    char path[4200];

    if (!t->ctr)
        return;
    snprintf(path, sizeof(path), "%s/scratch/%s", a->data_dir, t->ctr);
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
