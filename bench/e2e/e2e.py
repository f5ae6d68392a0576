#!/usr/bin/env python3
"""B3 measurements for bench/e2e/run.sh: Crater or Slurm, one system per call.

    e2e.py crater --server URL --token TOK --crater BIN --tmp DIR --out FILE [sizes]
    e2e.py slurm  --tmp DIR --out FILE [sizes]
    e2e.py array  --system crater|slurm --round R --out FILE [--server URL
                  --token TOK --crater BIN] [--idle-pids "P ..."] [--own-pids "P ..."]
    e2e.py table  --crater FILE [--slurm FILE] [--json FILE]

sizes: --jobs N (latency jobs), --loop N (CLI loop), --array N (array size;
0: no array in the crater/slurm phases, run.sh then runs `array` rounds).
`array` runs one array of one system, appends it to FILE's "array_rounds"
and reports the CPU the idle system (--idle-pids) used meanwhile; it first
waits (at most 20 s) until both systems' processes are quiet.
Every wait has a deadline; a phase that misses one is reported, not hung on.
Standard library only (http.client, subprocess).
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse

ACTIVE_CRATER = "pending,bound,running,preempting,preempted"


def now():
    return time.perf_counter()


def pct(xs, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(1, -(-len(s) * p // 100))  # ceil
    return s[int(k) - 1]


def log(msg):
    print("  " + msg, file=sys.stderr, flush=True)


def summary(xs):
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "p50": round(pct(xs, 50), 3), "p99": round(pct(xs, 99), 3),
            "min": round(min(xs), 3), "max": round(max(xs), 3)}


def proc_cpu_s(pids):
    """CPU seconds (user + system, and that of reaped children) the live
    processes among pids have used so far."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                f_ = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(int(x) for x in f_[11:15])  # utime stime cutime cstime
    return total / tick


def machine_cpu():
    """(busy, steal, total) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    steal = v[7] if len(v) > 7 else 0
    return sum(v[:8]) - idle - steal, steal, sum(v[:8])


def wait_quiet(pids, max_s=20.0, window=0.5, frac=0.1):
    """Seconds until pids used under frac of one CPU over one window (None:
    still busy after max_s): the previous round's tail (logs shipping, the
    task reserve refilling, slurmctld's bookkeeping) must not overlap the
    next array."""
    t0 = now()
    while now() - t0 < max_s:
        c0 = proc_cpu_s(pids)
        time.sleep(window)
        if proc_cpu_s(pids) - c0 < frac * window:
            return round(now() - t0, 2)
    return None


def pid_list(text):
    return [int(x) for x in (text or "").split() if x.isdigit()]


# ---------------------------------------------------------------- Crater

class Api:
    """A persistent HTTP/1.1 connection to craterd; reconnects once if the
    server closed it (idle keep-alive timeout)."""

    def __init__(self, url, token):
        u = urllib.parse.urlparse(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise SystemExit("e2e: only loopback servers (got %s)" % url)
        self.host, self.port = u.hostname, u.port
        self.h = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
        self.c = None

    def call(self, method, path, body=None):
        for attempt in (0, 1):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection(self.host, self.port, timeout=30)
                self.c.request(method, path, body, self.h)
                r = self.c.getresponse()
                data = r.read()
                return r.status, (json.loads(data) if data and data[:1] in b"{[" else data)
            except (http.client.HTTPException, ConnectionError, BrokenPipeError, OSError):
                if self.c:
                    self.c.close()
                self.c = None
                if attempt:
                    raise

    def metric_jobs(self):
        st, body = self.call("GET", "/metrics")
        out = {}
        for line in body.decode().splitlines():
            m = re.match(r'crater_jobs\{state="(\w+)"\} (\d+)', line)
            if m:
                out[m.group(1)] = int(m.group(2))
        return out

    def active(self):
        st, body = self.call("GET", "/api/v1/jobs?state=%s&limit=1" % ACTIVE_CRATER)
        if st != 200:
            raise RuntimeError("list jobs: HTTP %s %s" % (st, body))
        return len(body["items"])


def crater_wait_idle(api, deadline_s, poll_s=0.01):
    """Seconds until no job is pending/bound/running (None: deadline)."""
    t0 = now()
    while now() - t0 < deadline_s:
        if api.active() == 0:
            return now() - t0
        time.sleep(poll_s)
    return None


def crater_wait_nodes(api, want, deadline_s=30):
    t0 = now()
    ready = 0
    while now() - t0 < deadline_s:
        st, body = api.call("GET", "/api/v1/nodes?limit=1000")
        if st == 200:
            ready = sum(1 for n in body["items"] if n["state"] == "Ready")
            if ready >= want:
                return ready
        time.sleep(0.1)
    raise SystemExit("e2e: only %d of %d Crater nodes Ready after %ds" % (ready, want, deadline_s))


def crater_latency(api, n, poll_sleep, deadline_s=10):
    spec = json.dumps({"apiVersion": "crater/v1", "kind": "Job", "name": "e2e-latency",
                       "gracePeriod": "1s", "resources": {"cpu": "1", "memory": "16Mi"},
                       "command": ["sleep", "30"]})
    lat, ack, rtt, ids, errors, timeouts = [], [], [], [], 0, 0
    for i in range(n):
        t0 = now()
        st, job = api.call("POST", "/api/v1/jobs", spec)
        t1 = now()
        if st not in (200, 201):
            errors += 1
            log("crater submit: HTTP %s %s" % (st, job))
            continue
        ack.append((t1 - t0) * 1e3)
        jid = job["id"]
        ids.append(jid)
        state = job.get("state")
        while state in ("pending", "bound") and now() - t0 < deadline_s:
            if poll_sleep:
                time.sleep(poll_sleep)
            p0 = now()
            st, j = api.call("GET", "/api/v1/jobs/" + jid)
            rtt.append((now() - p0) * 1e3)
            state = j.get("state") if st == 200 else state
        t2 = now()
        if state in ("pending", "bound"):
            timeouts += 1
            log("crater job %s not running after %ds" % (jid, deadline_s))
        else:
            lat.append((t2 - t0) * 1e3)
        api.call("POST", "/api/v1/jobs/%s/cancel" % jid, "{}")
    idle = crater_wait_idle(api, 60)
    # A cancel that reaches a task in its first milliseconds has been seen
    # to lose its SIGTERM (the task then ends by SIGKILL at gracePeriod).
    # The server's own view, from each job's history: submitted -> bound
    # (scheduler) and submitted -> running (the agent's start event).
    sigkill, bound, running = 0, [], []
    for jid in ids:
        st, j = api.call("GET", "/api/v1/jobs/" + jid)
        if st != 200:
            continue
        if (j.get("exit") or {}).get("signal") == 9:
            sigkill += 1
        t = {}
        for h in j.get("history") or []:
            t.setdefault(h.get("state"), h.get("time_ms"))
        if t.get("pending") is not None and t.get("bound") is not None:
            bound.append(t["bound"] - t["pending"])
        if t.get("pending") is not None and t.get("running") is not None:
            running.append(t["running"] - t["pending"])
    return {"submit_to_running_ms": summary(lat), "submit_ack_ms": summary(ack),
            "poll_rtt_ms": summary(rtt),
            "history_submitted_to_bound_ms": summary(bound),
            "history_submitted_to_running_ms": summary(running),
            "poll": "GET /api/v1/jobs/{id}, one persistent "
            "HTTP/1.1 connection, %g ms sleep between polls" % (poll_sleep * 1e3),
            "errors": errors, "timeouts": timeouts, "cancel_ended_by_sigkill": sigkill,
            "idle_after_s": idle}


def crater_env(a):
    env = dict(os.environ, CRATER_SERVER=a.server, CRATER_TOKEN=a.token)
    return env


def crater_loop(a, api, n, deadline_s):
    env = crater_env(a)
    before = api.metric_jobs()
    fails = 0
    t0 = now()
    for i in range(n):
        r = subprocess.run([a.crater, "run", "--cpu", "100m", "--mem", "16Mi", "--", "true"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           cwd=a.tmp, timeout=30)
        if r.returncode:
            fails += 1
            if fails <= 3:
                log("crater run failed (%d): %s" % (r.returncode, r.stderr.decode().strip()))
        if now() - t0 > deadline_s:
            log("crater loop: deadline after %d submissions" % (i + 1))
            break
    t1 = now()
    done = crater_wait_idle(api, max(1, deadline_s - (t1 - t0)))
    t2 = now()
    after = api.metric_jobs()
    return {"jobs": n, "submit_failures": fails, "submit_s": round(t1 - t0, 3),
            "all_done_s": round(t2 - t0, 3) if done is not None else None,
            "succeeded": after.get("succeeded", 0) - before.get("succeeded", 0),
            "failed": after.get("failed", 0) - before.get("failed", 0)}


JOB_DOC = """apiVersion: crater/v1
kind: Job
name: e2e-array-{i}
resources: {{cpu: 100m, memory: 16Mi}}
command: ["true"]
"""


def crater_array(a, api, n, deadline_s):
    env = crater_env(a)
    # Prepared before the clock starts: the fallback's job files.
    one = os.path.join(a.tmp, "array-all.yaml")
    with open(one, "w") as f:
        f.write("---\n".join(JOB_DOC.format(i=i) for i in range(n)))
    v = subprocess.run([a.crater, "validate", one], capture_output=True, cwd=a.tmp, timeout=60)
    if v.returncode == 0:
        files = [one]
    else:  # the loader takes at most 256 documents per stream (CRATER_DOC_MAX_DOCS)
        files = []
        for k in range(0, n, 250):
            p = os.path.join(a.tmp, "array-%04d.yaml" % k)
            with open(p, "w") as f:
                f.write("---\n".join(JOB_DOC.format(i=i) for i in range(k, min(n, k + 250))))
            files.append(p)
    before = api.metric_jobs()
    t0 = now()
    r = subprocess.run([a.crater, "run", "--array", "0-%d" % (n - 1), "--cpu", "100m",
                        "--mem", "16Mi", "--", "true"], env=env, capture_output=True,
                       cwd=a.tmp, timeout=120)
    err = r.stderr.decode()
    if r.returncode == 0:
        path = "crater run --array 0-%d --cpu 100m --mem 16Mi -- true" % (n - 1)
    elif "unknown option" in err and "--array" in err:
        log("crater run: --array is not supported yet (%s); falling back" % err.strip().splitlines()[0])
        cmd = [a.crater, "submit"]
        for p in files:
            cmd += ["-f", p]
        path = ("crater submit -f FILE (one command, %d file%s of <= %d Job documents; "
                "no --array in this build)" % (len(files), "" if len(files) == 1 else "s",
                                               min(n, 250 if len(files) > 1 else n)))
        t0 = now()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           cwd=a.tmp, timeout=deadline_s)
        err = r.stderr.decode()
    else:
        path = "crater run --array (failed)"
    t1 = now()
    if r.returncode:
        log("crater array submit failed (%d): %s" % (r.returncode, err.strip()[:500]))
    done = crater_wait_idle(api, max(1, deadline_s - (t1 - t0)))
    t2 = now()
    after = api.metric_jobs()
    return {"jobs": n, "path": path, "submit_rc": r.returncode, "submit_s": round(t1 - t0, 3),
            "all_done_s": round(t2 - t0, 3) if done is not None else None,
            "succeeded": after.get("succeeded", 0) - before.get("succeeded", 0),
            "failed": after.get("failed", 0) - before.get("failed", 0)}


def run_crater(a):
    api = Api(a.server, a.token)
    res = {"system": "crater", "server": a.server}
    log("crater: waiting for %d nodes Ready" % a.nodes)
    res["nodes_ready"] = crater_wait_nodes(api, a.nodes)
    log("crater: submit -> running, %d jobs" % a.jobs)
    res["latency"] = crater_latency(api, a.jobs, a.poll_ms / 1e3)
    log("crater: CLI loop, %d jobs" % a.loop)
    res["loop"] = crater_loop(a, api, a.loop, a.deadline)
    if a.array:
        log("crater: array of %d" % a.array)
        res["array"] = crater_array(a, api, a.array, a.deadline)
    return res


# ---------------------------------------------------------------- Slurm

class Scontrol:
    """One long-lived `scontrol -o` reading commands from stdin (no process
    start per poll). It echoes a prompt plus the command; the answer is the
    next line starting with JobId= or an error line."""

    def __init__(self):
        self.p = subprocess.Popen(["stdbuf", "-oL", "-eL", "scontrol", "-o"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1)

    def state(self, jid):
        self.p.stdin.write("show job %s\n" % jid)
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("scontrol exited")
            m = re.search(r"JobState=(\S+)", line)
            if m and line.startswith("JobId=%s " % jid):
                return m.group(1)
            if "error" in line:
                return "UNKNOWN"

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(5)
        except Exception:
            self.p.kill()


def sh(cmd, timeout=30):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def slurm_queue_len():
    r = sh(["squeue", "-h", "-o", "%i"])
    return len(r.stdout.split()) if r.returncode == 0 else -1


def slurm_wait_idle(deadline_s, poll_s=0.02):
    t0 = now()
    while now() - t0 < deadline_s:
        if slurm_queue_len() == 0:
            return now() - t0
        time.sleep(poll_s)
    return None


def slurm_states(ids):
    """COMPLETED/FAILED/... counts for ids (slurmctld keeps finished jobs
    MinJobAge = 30 s); array elements are listed as ID_I."""
    r = sh(["squeue", "-h", "-t", "all", "-o", "%i %T"], timeout=60)
    want = set(ids)
    out = {}
    for line in r.stdout.splitlines():
        jid, _, st = line.partition(" ")
        if jid in want or jid.split("_")[0] in want:
            out[st] = out.get(st, 0) + 1
    return out


def slurm_latency(n, poll_sleep, deadline_s=10):
    sc = Scontrol()
    lat, ack, rtt, errors, timeouts = [], [], [], 0, 0
    for i in range(n):
        t0 = now()
        r = sh(["sbatch", "--parsable", "-o", "/dev/null", "-c", "1", "--wrap", "exec sleep 30"])
        t1 = now()
        jid = r.stdout.strip().split(";")[0]
        if r.returncode or not jid.isdigit():
            errors += 1
            log("sbatch failed: %s" % r.stderr.strip())
            continue
        ack.append((t1 - t0) * 1e3)
        state = "PENDING"
        while state in ("PENDING", "UNKNOWN") and now() - t0 < deadline_s:
            if poll_sleep:
                time.sleep(poll_sleep)
            p0 = now()
            state = sc.state(jid)
            rtt.append((now() - p0) * 1e3)
        t2 = now()
        if state in ("PENDING", "UNKNOWN"):
            timeouts += 1
            log("slurm job %s still %s after %ds" % (jid, state, deadline_s))
        else:
            lat.append((t2 - t0) * 1e3)
        sh(["scancel", jid])
    sc.close()
    # The cost of the one-process-per-poll alternative, for reference.
    sq = []
    for i in range(20):
        p0 = now()
        sh(["squeue", "-h", "-j", "1", "-o", "%T"])
        sq.append((now() - p0) * 1e3)
    idle = slurm_wait_idle(60)
    return {"submit_to_running_ms": summary(lat), "submit_ack_ms": summary(ack),
            "poll_rtt_ms": summary(rtt), "squeue_process_ms": summary(sq),
            "poll": "one long-lived `scontrol -o` fed 'show job ID' on stdin, "
            "%g ms sleep between polls; submit = the sbatch process" % (poll_sleep * 1e3),
            "errors": errors, "timeouts": timeouts, "idle_after_s": idle}


def slurm_loop(a, n, deadline_s):
    ids, fails = [], 0
    t0 = now()
    for i in range(n):
        r = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true"],
                           capture_output=True, text=True, cwd=a.tmp, timeout=30)
        if r.returncode:
            fails += 1
            if fails <= 3:
                log("sbatch failed: %s" % r.stderr.strip())
        else:
            ids.append(r.stdout.strip().split(";")[0])
        if now() - t0 > deadline_s:
            log("slurm loop: deadline after %d submissions" % (i + 1))
            break
    t1 = now()
    done = slurm_wait_idle(max(1, deadline_s - (t1 - t0)))
    t2 = now()
    st = slurm_states(ids)
    return {"jobs": n, "submit_failures": fails, "submit_s": round(t1 - t0, 3),
            "all_done_s": round(t2 - t0, 3) if done is not None else None,
            "succeeded": st.get("COMPLETED", 0),
            "failed": sum(v for k, v in st.items() if k != "COMPLETED")}


def slurm_array(a, n, deadline_s):
    t0 = now()
    r = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "--array=0-%d" % (n - 1),
                        "--wrap", "true"], capture_output=True, text=True, cwd=a.tmp,
                       timeout=60)
    t1 = now()
    if r.returncode:
        log("sbatch --array failed: %s" % r.stderr.strip())
    done = slurm_wait_idle(max(1, deadline_s - (t1 - t0)))
    t2 = now()
    st = slurm_states([r.stdout.strip().split(";")[0]])
    return {"jobs": n, "path": "sbatch --array=0-%d --wrap true" % (n - 1),
            "submit_rc": r.returncode, "submit_s": round(t1 - t0, 3),
            "all_done_s": round(t2 - t0, 3) if done is not None else None,
            "succeeded": st.get("COMPLETED", 0),
            "failed": sum(v for k, v in st.items() if k != "COMPLETED")}


def run_slurm(a):
    res = {"system": "slurm", "version": sh(["sinfo", "--version"]).stdout.strip()}
    idle, c0, t0 = pid_list(a.idle_pids), proc_cpu_s(pid_list(a.idle_pids)), now()
    if slurm_wait_idle(60) is None:
        raise SystemExit("e2e: the Slurm queue is not empty; another run?")
    log("slurm: submit -> running, %d jobs" % a.jobs)
    res["latency"] = slurm_latency(a.jobs, a.poll_ms / 1e3)
    log("slurm: CLI loop, %d jobs" % a.loop)
    res["loop"] = slurm_loop(a, a.loop, a.deadline)
    if a.array:
        log("slurm: array of %d" % a.array)
        res["array"] = slurm_array(a, a.array, a.deadline)
    if idle:
        res["idle_system"] = {"cpu_s": round(proc_cpu_s(idle) - c0, 3),
                              "over_s": round(now() - t0, 1)}
    return res


def run_array(a):
    """One round of the interleaved arrays (see run.sh): quiet first, then
    the array, with the CPU the other (idle) system used meanwhile."""
    idle, own = pid_list(a.idle_pids), pid_list(a.own_pids)
    quiet = wait_quiet(idle + own)
    c0, m0 = proc_cpu_s(idle), machine_cpu()
    if a.system == "crater":
        api = Api(a.server, a.token)
        r = crater_array(a, api, a.array, a.deadline)
    else:
        r = slurm_array(a, a.array, a.deadline)
    c1, m1 = proc_cpu_s(idle), machine_cpu()
    span = max(1e-9, m1[2] - m0[2])
    r.update({"round": a.round, "quiet_wait_s": quiet,
              "idle_system_cpu_s": round(c1 - c0, 3) if idle else None,
              "machine_busy": round((m1[0] - m0[0]) / span, 3),
              "machine_steal": round((m1[1] - m0[1]) / span, 3)})
    res = json.load(open(a.out)) if os.path.exists(a.out) else {"system": a.system}
    res.setdefault("array_rounds", []).append(r)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    log("%s array, round %d: %s s (idle system: %s CPU-s)" %
        (a.system, a.round, r["all_done_s"], r["idle_system_cpu_s"]))


# ---------------------------------------------------------------- table

def fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        v = ("%.1f" % v) if v >= 10 else ("%.2f" % v)
    return "%s%s" % (v, unit)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return None if n == 0 else (s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2)


def fold_rounds(c, s):
    """Interleaved array rounds -> "array" of each system (medians) and the
    per-round ratios (Slurm's round r / Crater's round r)."""
    cr = {r["round"]: r for r in c.get("array_rounds", [])}
    sr = {r["round"]: r for r in (s or {}).get("array_rounds", [])}
    if not cr:
        return None
    for d, rs in ((c, cr), (s, sr)):
        if d is None or not rs:
            continue
        vals = [r["all_done_s"] for r in rs.values()]
        one = dict(next(iter(rs.values())))
        for k in ("round", "quiet_wait_s", "idle_system_cpu_s", "machine_busy", "machine_steal"):
            one.pop(k, None)
        one["all_done_s"] = None if None in vals else round(median(vals), 3)
        one["submit_s"] = round(median([r["submit_s"] for r in rs.values()]), 3)
        for k in ("succeeded", "failed"):
            one[k] = sum(r.get(k) or 0 for r in rs.values())
        one["rounds"] = len(rs)
        d["array"] = one
    ratios = []
    for k in sorted(cr):
        x, y = cr[k].get("all_done_s"), (sr.get(k) or {}).get("all_done_s")
        ratios.append({"round": k, "crater_s": x, "slurm_s": y,
                       "ratio": round(y / x, 2) if x and y else None,
                       "crater_idle_cpu_s": (sr.get(k) or {}).get("idle_system_cpu_s"),
                       "slurm_idle_cpu_s": cr[k].get("idle_system_cpu_s")})
    return ratios


def table(a):
    c = json.load(open(a.crater))
    s = json.load(open(a.slurm)) if a.slurm and os.path.exists(a.slurm) else None
    rounds = fold_rounds(c, s)
    g = lambda d, *ks: (None if d is None else _get(d, ks))
    rows = []

    def ratio(x, y):  # how many times faster Crater is (Slurm time / Crater time)
        return None if not x or not y else y / x

    cl, sl = g(c, "latency"), g(s, "latency")
    for k, lbl in (("p50", "p50"), ("p99", "p99")):
        cv, sv = g(cl, "submit_to_running_ms", k), g(sl, "submit_to_running_ms", k)
        goal = ""
        if k == "p50":
            goal = "<= 5 ms: %s" % ("met" if cv is not None and cv <= 5 else "NOT met")
        rows.append(("submit -> running %s (%s jobs)" % (lbl, g(cl, "submit_to_running_ms", "n")),
                     fmt(cv, " ms"), fmt(sv, " ms"), fmt(ratio(cv, sv), "x"), goal))
    rows.append(("  submit acknowledged p50", fmt(g(cl, "submit_ack_ms", "p50"), " ms"),
                 fmt(g(sl, "submit_ack_ms", "p50"), " ms"), "", "API POST / sbatch process"))
    rows.append(("  one status poll p50", fmt(g(cl, "poll_rtt_ms", "p50"), " ms"),
                 fmt(g(sl, "poll_rtt_ms", "p50"), " ms"), "",
                 "squeue process: %s" % fmt(g(sl, "squeue_process_ms", "p50"), " ms")))
    rows.append(("  job history: submitted -> bound / running p50",
                 "%s / %s" % (fmt(g(cl, "history_submitted_to_bound_ms", "p50"), " ms"),
                              fmt(g(cl, "history_submitted_to_running_ms", "p50"), " ms")),
                 "", "", "server clock, ms resolution"))
    for key, lbl, goal_x in (("loop", "CLI loop", 1.0), ("array", "array", 10.0)):
        cv, sv = g(c, key, "all_done_s"), g(s, key, "all_done_s")
        r = ratio(cv, sv)
        if key == "array" and rounds and s is not None:
            rs = [x["ratio"] for x in rounds]
            r = None if None in rs else median(rs)
            lbl = "array (median of %d interleaved rounds)" % len(rounds)
        goal = ">= %gx Slurm: %s" % (goal_x, "-" if s is None else ("met" if r and r >= goal_x
                                                                     else "NOT met"))
        if key == "loop":
            goal = "as fast as sbatch: %s" % ("-" if s is None else ("met" if r and r >= 1
                                                                    else "NOT met"))
        rows.append(("%s, %s jobs: submit -> all done" % (lbl, g(c, key, "jobs")),
                     fmt(cv, " s"), fmt(sv, " s"), fmt(r, "x"), goal))
        rows.append(("  submit only", fmt(g(c, key, "submit_s"), " s"),
                     fmt(g(s, key, "submit_s"), " s"), "", ""))
        rows.append(("  succeeded / failed", "%s / %s" % (g(c, key, "succeeded"), g(c, key, "failed")),
                     "%s / %s" % (g(s, key, "succeeded"), g(s, key, "failed")) if s else "-",
                     "", ""))
    hdr = ("measurement", "Crater", "Slurm", "Crater faster by", "goal")
    w = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(5)]
    line = lambda r: "| " + " | ".join(str(r[i]).ljust(w[i]) for i in range(5)) + " |"
    print(line(hdr))
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print(line(r))
    print()
    if rounds:
        print("Array rounds, interleaved (Crater's then Slurm's, the other system up and idle):")
        for x in rounds:
            print("  round %d: Crater %s, Slurm %s: %s (idle CPU meanwhile: Slurm %s, "
                  "Crater %s)" % (x["round"], fmt(x["crater_s"], " s"), fmt(x["slurm_s"], " s"),
                                  fmt(x["ratio"], "x"), fmt(x["slurm_idle_cpu_s"], " CPU-s"),
                                  fmt(x["crater_idle_cpu_s"], " CPU-s")))
        rs = [x["ratio"] for x in rounds if x["ratio"]]
        if rs:
            print("  ratio: median %.2fx, min %.2fx, max %.2fx" % (median(rs), min(rs), max(rs)))
    print("Crater array path: %s" % g(c, "array", "path"))
    if s:
        print("Slurm array path:  %s" % g(s, "array", "path"))
    print("Crater poll: %s" % g(cl, "poll"))
    if s:
        print("Slurm poll:  %s" % g(sl, "poll"))
    else:
        print("Slurm: not measured (%s)" % (a.slurm_reason or "skipped"))
    notes = []
    if g(cl, "cancel_ended_by_sigkill"):
        notes.append("%s of %s cancelled Crater latency jobs ended by SIGKILL at gracePeriod "
                     "(their SIGTERM was lost)" % (cl["cancel_ended_by_sigkill"],
                                                   g(cl, "submit_to_running_ms", "n")))
    for d, name in ((c, "Crater"), (s, "Slurm")):
        if d is None:
            continue
        for k in ("latency", "loop", "array"):
            x = d.get(k, {})
            for f in ("errors", "timeouts", "submit_failures"):
                if x.get(f):
                    notes.append("%s %s: %s %s" % (name, k, x[f], f))
            if k != "latency" and x.get("all_done_s") is None:
                notes.append("%s %s: not all done before the deadline" % (name, k))
    if g(s, "idle_system"):
        notes.append("Crater was up and idle during Slurm's latency and loop phases: it used "
                     "%s CPU-s in those %s s" % (s["idle_system"]["cpu_s"],
                                                 s["idle_system"]["over_s"]))
    for n in notes:
        print("note: " + n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"crater": c, "slurm": s, "array_ratios": rounds}, f, indent=1)
        print("results: %s" % a.json)


def _get(d, ks):
    for k in ks:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("crater", "slurm", "array", "table"))
    ap.add_argument("--system", choices=("crater", "slurm"))
    ap.add_argument("--round", type=int, default=1)
    ap.add_argument("--idle-pids", default="")
    ap.add_argument("--own-pids", default="")
    ap.add_argument("--server")
    ap.add_argument("--token")
    ap.add_argument("--crater", default="./build/crater")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--out")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--loop", type=int, default=1000)
    ap.add_argument("--array", type=int, default=1000)
    ap.add_argument("--poll-ms", type=float, default=1.0)
    ap.add_argument("--deadline", type=float, default=300, help="seconds per phase")
    ap.add_argument("--slurm")
    ap.add_argument("--slurm-reason")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.what == "table":
        return table(a)
    if a.what == "array":
        return run_array(a)
    res = run_crater(a) if a.what == "crater" else run_slurm(a)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
