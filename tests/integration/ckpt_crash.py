"""ckpt_crash.py - kill the Python SDK while it saves (ckpt_crash.py ROUNDS
CRATER_CKPT_BIN): the Python twin of tests/unit/test_ckpt_crash.c.

A forked child resumes from the newest checkpoint, sometimes saves that
step again, then saves four more (keep_last 2, 4 KiB chunks, incremental
with a full save every 7th step); it is SIGKILLed before its k-th file
operation (crater_ckpt._fault) or after a random delay. After each round
the state is loaded and checked byte for byte against what the child
saved for that step, and must not be older than the last save that
returned. Every fourth round the C library (crater-ckpt dump) must load
the same checkpoint with the same digest. Prints the tallies; exit 1 on
any corrupt load."""
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import crater_ckpt as cc

BASE = random.Random(1).randbytes(64 << 10)


def gen(step, variant):
    r = random.Random(step * 1000003 + variant)
    if step % 7 == 0:
        a = r.randbytes(len(BASE))
    else:
        at = (step * 997) % (len(BASE) - 655)
        a = BASE[:at] + r.randbytes(655) + BASE[at + 655:]
    return {"hdr": b"%d %d" % (step, variant), "a": a, "c": r.randbytes(9000)}


def child(d, kill_op, rnd, w):
    ops = [0]

    def fault(op, path):
        ops[0] += 1
        if ops[0] == kill_op:
            os.kill(os.getpid(), signal.SIGKILL)
    cc._fault = fault
    ck = cc.Checkpointer(d, chunk_size=4096, keep_last=2, fsync=False,
                         hash_threads=1)
    cp = ck.load_latest()
    start = cp.step if cp else 0
    steps = ([start] if start and rnd % 3 == 0 else []) + \
        list(range(start + 1, start + 5))
    for s in steps:
        ck.save(s, gen(s, rnd))
        os.write(w, b"%d\n" % s)
    os.write(w, b"ops %d\n" % ops[0])
    os._exit(0)


def run_round(d, rnd, kill_op, delay, t):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            child(d, kill_op, rnd, w)
        finally:
            os._exit(3)
    os.close(w)
    t0 = time.monotonic()
    if delay is not None:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    out = b""
    while True:
        b = os.read(r, 4096)
        if not b:
            break
        out += b
    os.close(r)
    _, status = os.waitpid(pid, 0)
    for line in out.decode().splitlines():
        if line.startswith("ops "):
            t["ops"] = int(line[4:])
        else:
            t["acked"] = max(t["acked"], int(line))
    if os.WIFEXITED(status):
        assert os.WEXITSTATUS(status) == 0, "child failed"
        t["secs"] = time.monotonic() - t0
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def verify(d, t, tool, rnd):
    t["loads"] += 1
    try:
        cp = cc.Checkpointer(d, chunk_size=4096).load_latest()
    except cc.CheckpointError as e:
        cp = None
        print("load failed:", e)
    if cp is None:
        if t["acked"] >= 0:
            t["corrupt"] += 1
        return
    step, variant = map(int, cp.entries["hdr"].split())
    if step != cp.step or cp.entries != gen(step, variant) or step < t["acked"]:
        print("bad checkpoint: step %d acked %d" % (cp.step, t["acked"]))
        t["corrupt"] += 1
    if tool and rnd % 4 == 0:
        out = subprocess.run([tool, "dump", d], capture_output=True, text=True)
        if out.returncode or "digest %s\n" % cp.digest not in out.stdout:
            print("C load differs:", out.stdout, out.stderr)
            t["corrupt"] += 1
        t["c_loads"] += 1


def main():
    want = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    tool = sys.argv[2] if len(sys.argv) > 2 else None
    d = tempfile.mkdtemp()
    t = {"acked": -1, "ops": 0, "secs": 0.0, "loads": 0, "c_loads": 0,
         "corrupt": 0, "kills": 0, "by_op": 0}
    run_round(d, 0, 0, None, t)
    verify(d, t, tool, 0)
    rnd = 1
    while t["kills"] < want:
        by_op = rnd % 2 == 0
        killed = run_round(d, rnd, random.randint(1, t["ops"]) if by_op else 0,
                           None if by_op else random.uniform(0, t["secs"]), t)
        verify(d, t, tool, rnd)
        t["kills"] += killed
        t["by_op"] += killed and by_op
        rnd += 1
    subprocess.run(["rm", "-rf", d])
    print("python ckpt crash: %d kill points (%d before the k-th of %d file "
          "operations), %d loads (%d also by the C library), %d corrupt"
          % (t["kills"], t["by_op"], t["ops"], t["loads"], t["c_loads"],
             t["corrupt"]))
    return 1 if t["corrupt"] else 0


if __name__ == "__main__":
    sys.exit(main())
