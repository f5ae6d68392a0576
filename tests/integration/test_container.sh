#!/usr/bin/env bash
# test_container.sh - jobs with an image through a real `crater up`
# (doc/containers.md): a tiny image built here from busybox-static with
# `podman import` (no registry), then: the OS inside is the image's, the
# task's cgroup limits hold the container and it runs as the task user
# without capabilities, the checkpoint directory is at its own path,
# logs and exit codes come back as for bare tasks, a GPU slice job sees
# its CUDA_VISIBLE_DEVICES, slice file and interposer, a memory hog is
# reported OOM-killed, cancel stops the container (SIGTERM through
# podman and catatonit), a missing image with imagePullPolicy Never fails
# naming the image and `podman load`, volumes (a host path read-only, a
# scratch) are mounted, kill -9 of `crater up` and a restart adopt the
# running container and the cancel after it removes it, and a container
# whose shim died with the agent is removed at the next start. Nothing is
# left (`podman ps -a` of the image is empty, no task cgroup). Then a
# cluster without a runtime (CRATER_PODMAN=) refuses the image with the
# placement's reason. Skips (77) where podman cannot run a container (not
# root, no podman, no busybox-static).
set -uo pipefail
has() { local in; in=$(cat); grep -q "$@" <<<"$in"; }
src=${CRATER_SOURCE_DIR:?} bin=${CRATER_BIN:?}
pass=0 fail=0

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: the agent runs podman as root"
command -v podman >/dev/null || skip "podman is not installed (scripts/deps.sh test)"
bb=""
for b in /bin/busybox /usr/bin/busybox; do
    [ -x "$b" ] && { ldd "$b" 2>&1 || true; } | has 'not a dynamic' && bb=$b && break
done
[ -n "$bb" ] || skip "busybox-static is not installed"

tmp=$(mktemp -d)
chmod 755 "$tmp"
up="" tag="crater-test-$$-$RANDOM"
img="localhost/$tag:1"
runtime=()
command -v runc >/dev/null && runtime=(--runtime runc)
cleanup() { # no process, container, image, cgroup or file left behind
    [ -n "$up" ] && kill -9 "$up" 2>/dev/null
    for c in $(podman ps -aq --filter "ancestor=$img" 2>/dev/null); do
        podman "${runtime[@]}" rm -f -t 0 "$c" >/dev/null 2>&1
    done
    for f in "$tmp"/var/agent-*/tasks/*/task.json; do
        [ -f "$f" ] || continue
        g=$(jq -r .cgroup "$f")
        for d in $(find /sys/fs/cgroup -maxdepth 3 -type d -name "$g" 2>/dev/null); do
            for q in $(cat "$d/cgroup.procs" 2>/dev/null); do kill -9 "$q" 2>/dev/null; done
            find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
        done
    done
    podman rmi -f "$img" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- the image: busybox and an os-release of our own ------------------------------
r=$tmp/rootfs
mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/proc" "$r/sys" "$r/dev" "$r/data" "$r/scratch"
cp "$bb" "$r/bin/busybox"
for c in sh cat echo id grep sleep dd head ls touch true; do ln -s busybox "$r/bin/$c"; done
printf 'NAME="Crater Test"\nID=%s\n' "$tag" >"$r/etc/os-release"
echo 'root:x:0:0:root:/:/bin/sh' >"$r/etc/passwd"
tar -C "$r" -c . | podman import - "$img" >/dev/null 2>&1 || skip "podman import failed"
podman "${runtime[@]}" run --rm --network none --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" \
    --ulimit nproc=1024:1024 "$img" true >"$tmp/probe" 2>&1 ||
    skip "podman cannot run a container here: $(tail -n 1 "$tmp/probe")"

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
c() { "$bin" "$@" --server "$url" --token "$token"; }
job() { c get job "$1" -o json 2>/dev/null; }
wait_for() { # wait_for SECONDS JOB JQ_FILTER
    local t=$(($1 * 10)) i
    for i in $(seq 1 "$t"); do
        job "$2" | jq -e "$3" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "timeout waiting for job $2: $3"
    job "$2" | jq -c '{state, reason, exit, history: [.history[] | .state + ": " + .reason]}'
    return 1
}
until_true() { # until_true SECONDS COMMAND...: poll with a deadline
    local t=$(($1 * 10)) i
    shift
    for i in $(seq 1 "$t"); do "$@" && return 0; sleep 0.1; done
    return 1
}
submit() { # submit YAML_TEXT -> job id
    printf '%s\n' "$1" >"$tmp/j.yaml"
    c submit -f "$tmp/j.yaml" -o json | jq -r .id
}
logs_have() { c logs "$1" 2>/dev/null | has -- "$2"; }
none_left() { [ -z "$(podman ps -aq --filter "ancestor=$img" 2>/dev/null)" ]; }
running() { [ -n "$(podman ps -q --filter "ancestor=$img" 2>/dev/null)" ]; }
cg_gone() { [ -z "$(find /sys/fs/cgroup -maxdepth 3 -type d -name "$1" 2>/dev/null)" ]; }
nodes_ready() {
    [ "$(c get nodes -o json | jq '[.items[] | select(.state == "Ready")] | length')" = 3 ]
}
start_up() { # start_up NAME [ENV...]: crater up on $tmp/var
    local name=$1
    shift
    env "$@" "$bin" up --data "$tmp/var" --listen 127.0.0.1:0 \
        --hardware "$src/tests/data/hw-small.yaml" >"$tmp/$name.out" 2>&1 &
    up=$!
    url=""
    for _ in $(seq 1 300); do
        url=$(sed -n 's/.*API on \(http:[^,]*\),.*/\1/p' "$tmp/$name.out")
        [ -n "$url" ] && break
        kill -0 "$up" 2>/dev/null || break
        sleep 0.1
    done
    [ -n "$url" ] || { echo "crater up did not start:"; cat "$tmp/$name.out"; exit 1; }
    token=$(cat "$tmp/var/admin.token")
    until_true 30 nodes_ready || { echo "nodes not ready"; cat "$tmp/$name.out"; exit 1; }
}
stop_up() {
    kill -INT "$up"
    until_true 20 eval '! kill -0 "$up" 2>/dev/null' || bad "crater up did not stop"
    wait "$up" 2>/dev/null
    up=""
}

cd "$tmp"
mkdir -p "$tmp/host"
echo "from the host" >"$tmp/host/note"
chmod -R a+rX "$tmp/host"
start_up up1
c get nodes -o json | jq -e '[.items[] | .runtimes == ["podman"]] | all' >/dev/null &&
    ok || bad "nodes advertise podman: $(c get nodes -o json | jq -c '[.items[].runtimes]')"

# ---- the OS is the image's; limits; the task user; logs --------------------------------
id=$(submit "name: inside
image: $img
imagePullPolicy: Never
command: [sh, -c, 'cat /etc/os-release; echo uid=\$(id -u); grep -E \"^hierarchical_memory_limit\" /sys/fs/cgroup/memory/memory.stat; grep :memory: /proc/self/cgroup; grep -E \"^(CapEff|NoNewPrivs)\" /proc/self/status; echo to-stderr >&2']
resources: {cpu: 1, memory: 96Mi}")
wait_for 60 "$id" '.state == "succeeded" and .exit.code == 0' && ok || bad "container job succeeded"
until_true 10 logs_have "$id" "ID=$tag" && ok || { bad "the image's os-release"; c logs "$id"; }
logs_have "$id" "hierarchical_memory_limit $((96 * 1048576))" && ok || bad "memory limit inside = request"
logs_have "$id" "/crater/job-$id-1-" && ok || bad "container inside the task's cgroup"
c logs "$id" | grep -q '^uid=0$' && bad "runs as root inside" || ok
logs_have "$id" "^CapEff:[[:space:]]*0000000000000000$" && ok || bad "no capability inside"
logs_have "$id" "^NoNewPrivs:[[:space:]]*1$" && ok || bad "no new privileges inside"
c logs "$id" --stream stderr 2>/dev/null | has to-stderr && ok || bad "stderr log"
until_true 10 none_left && ok || bad "container removed after the job"
g1=$(c logs "$id" | sed -n 's|.*:memory:/crater/\(job-[^/]*\)/.*|\1|p')

# ---- a GPU slice: CUDA_VISIBLE_DEVICES, the slice file and the interposer inside ----------
# (the stub GPUs of hw-small have no device nodes: /dev/nvidia* are not passed)
id=$(submit "name: gpu
image: $img
imagePullPolicy: Never
command: [sh, -c, 'echo devices=\$CUDA_VISIBLE_DEVICES; test -f \"\$CRATER_GPUSLICE_FILE\" && echo slice-file; test -f \"\${LD_PRELOAD%%:*}\" && echo interposer']
resources: {gpu: {count: 1, memory: 10Gi}, cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "succeeded"' && ok || { bad "GPU slice job"; c logs "$id" --stream stderr; }
uuid=$(job "$id" | jq -r '.placement.gpus[0].uuid')
until_true 10 logs_have "$id" "devices=$uuid" && ok || { bad "CUDA_VISIBLE_DEVICES=$uuid"; c logs "$id"; }
logs_have "$id" "^slice-file$" && ok || bad "slice file mounted"
logs_have "$id" "^interposer$" && ok || bad "interposer mounted"

# ---- exit code -------------------------------------------------------------------------
id=$(submit "name: seven
image: $img
imagePullPolicy: Never
command: [sh, -c, 'exit 7']
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "failed" and .exit.code == 7' && ok || bad "exit code 7"

# ---- volumes: a host path read-only, a scratch -----------------------------------------
id=$(submit "name: vols
image: $img
imagePullPolicy: Never
command: [sh, -c, 'cat /data/note; touch /data/x 2>/dev/null && echo rw || echo ro; echo s > /scratch/f && cat /scratch/f']
volumes:
  - {hostPath: $tmp/host, mountPath: /data, readOnly: true}
  - {scratch: work, mountPath: /scratch}
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "succeeded"' && ok || { bad "volume job"; c logs "$id" --stream stderr; }
until_true 10 logs_have "$id" "from the host" && ok || bad "hostPath mounted"
logs_have "$id" "^ro$" && ok || bad "readOnly honoured"
logs_have "$id" "^s$" && ok || bad "scratch writable"

# ---- the checkpoint directory, at its own path ------------------------------------------
mkdir -p "$tmp/ck"
chmod 777 "$tmp/ck"
id=$(submit "name: ckpt
image: $img
imagePullPolicy: Never
command: [sh, -c, 'echo step > \$CRATER_CHECKPOINT_DIR/state']
checkpoint: {dir: $tmp/ck/job}
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "succeeded"' && ok || { bad "checkpoint job"; c logs "$id" --stream stderr; }
[ "$(cat "$tmp/ck/job/state" 2>/dev/null)" = step ] && ok || bad "checkpoint written to the host's directory"

# ---- the request is the container's: podman's memory is not charged to it -------------
id=$(submit "name: fits
image: $img
imagePullPolicy: Never
command: [dd, if=/dev/zero, of=/dev/null, bs=24M, count=1]
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "succeeded"' && ok || bad "24 MiB fit in a 32 MiB container"

# ---- OOM -------------------------------------------------------------------------------
id=$(submit "name: hog
image: $img
imagePullPolicy: Never
command: [dd, if=/dev/zero, of=/dev/null, bs=256M, count=1]
resources: {cpu: 100m, memory: 64Mi}")
wait_for 60 "$id" '.state == "failed" and .exit.oom' && ok || bad "container OOM reported"

# ---- missing image, Never: a clear error -----------------------------------------------
id=$(submit "name: missing
image: localhost/$tag-absent:1
imagePullPolicy: Never
command: [true]
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "failed"' && ok || bad "missing image fails"
job "$id" | jq -r '[.history[].reason] | join(" ")' | has "localhost/$tag-absent:1.*podman load" &&
    ok || bad "error names the image and podman load: $(job "$id" | jq -c '[.history[].reason]')"

# ---- cancel stops the container -------------------------------------------------------
id=$(submit "name: sleeper
image: $img
imagePullPolicy: Never
command: [sleep, '300']
gracePeriod: 20s
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "running"' && ok || bad "sleeper running"
until_true 20 running && ok || bad "container running"
t0=$(date +%s%N)
c cancel "$id" >/dev/null
wait_for 30 "$id" '.state == "cancelled"' && ok || bad "sleeper cancelled"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 15000 ] && ok || bad "SIGTERM did not stop it: ${ms} ms (grace 20 s)"
until_true 10 none_left && ok || { bad "container left after cancel"; podman ps -a; }

# ---- kill -9 of crater up: adopted, then cancelled ------------------------------------
id=$(submit "name: survivor
image: $img
imagePullPolicy: Never
command: [sleep, '300']
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "running"' && ok || bad "survivor running"
until_true 20 running || bad "survivor container"
kill -9 "$up"; wait "$up" 2>/dev/null; up=""
start_up up2
wait_for 30 "$id" '.state == "running"' && ok || bad "survivor adopted"
running && ok || bad "adopted container kept"
c cancel "$id" >/dev/null
wait_for 30 "$id" '.state == "cancelled"' && ok || bad "adopted container cancelled"
until_true 10 none_left && ok || { bad "container left after the adopted cancel"; podman ps -a; }

# ---- kill -9 with its shim: removed at the next start ---------------------------------
id=$(submit "name: orphan
image: $img
imagePullPolicy: Never
command: [sleep, '300']
resources: {cpu: 100m, memory: 32Mi}")
wait_for 60 "$id" '.state == "running"' && ok || bad "orphan running"
until_true 20 running || bad "orphan container"
pid=$(job "$id" | jq -r '.pid // empty')
[ -z "$pid" ] && pid=$(job "$id" | jq -r '[.history[].reason | capture("pid (?<p>[0-9]+)").p][0] // empty')
g2=$(jq -r .cgroup "$tmp"/var/agent-*/tasks/"$id".1/task.json 2>/dev/null)
kill -9 "$up"; wait "$up" 2>/dev/null; up=""
if [ -n "$pid" ]; then
    shim=$(ps -o ppid= -p "$pid" | tr -d ' ')
    kill -9 "$pid" ${shim:+"$shim"} 2>/dev/null
fi
start_up up3
until_true 30 none_left && ok || { bad "orphan container not removed"; podman ps -a; }
stop_up
none_left && ok || bad "containers left after Ctrl-C"
[ -n "$g1" ] && [ -n "$g2" ] && ok || bad "task cgroup names seen ('$g1', '$g2')"
for g in $g1 $g2; do
    until_true 10 cg_gone "$g" && ok || bad "cgroup $g left: $(find /sys/fs/cgroup -maxdepth 4 -path "*$g*")"
done

# ---- no runtime: refused at placement, never run on the host ---------------------------
# no node of this cluster could ever run it: refused at submission, with
# the placement's reason
rm -rf "$tmp/var"
start_up up4 CRATER_PODMAN=
c get nodes -o json | jq -e '[.items[] | .runtimes == []] | all' >/dev/null &&
    ok || bad "no runtimes advertised"
printf 'name: refused\nimage: %s\ncommand: [sh, -c, "echo ran on the host"]\nresources: {cpu: 100m, memory: 32Mi}\n' \
    "$img" >"$tmp/j.yaml"
c submit -f "$tmp/j.yaml" >"$tmp/refused" 2>&1 && bad "image job accepted without a runtime" || ok
has "no container runtime for image" <"$tmp/refused" && ok || bad "reason: $(cat "$tmp/refused")"
stop_up

grep -l 'Sanitizer' "$tmp"/up*.out 2>/dev/null | has . && { bad "sanitizer report"; cat "$tmp"/up*.out; } || ok

echo "test_container: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
