#!/usr/bin/env python3
"""bench_ckpt.py - checkpoint write throughput, side by side (bench/RESULTS.md B7).

    PYTHONPATH=python /usr/bin/python3 bench/ckpt/bench_ckpt.py \\
        [--sizes 256,1024] [--dir D] [--tool build/crater-ckpt] [--markdown]

For each size (MiB), a state dict of 64 float32 tensors is written by:

  torch.save            one file, no fsync (the data may still be in the
                        page cache when the clock stops)
  torch.save + fsync    the same, the file fsynced before the clock stops
  crater_ckpt full      the Python SDK (torch_helpers.save, 4 MiB chunks,
                        fsync of every chunk, the manifest and directories)
                        into an empty directory
  crater_ckpt incr.     the same after 1% of the elements changed (a
                        contiguous run in one tensor)
  C full / C incr.      libcrater-ckpt through `crater-ckpt save` (fsync on)
                        of the same tensor bytes as one file, the same 1%
                        then changed in place (with --tool)

Before every timed write the script runs sync() (untimed), so no run pays
for another's dirty pages; reads come from the page cache (the state is in
memory, as in training). MB/s is the state's size (1e6 bytes) per second
of the write, so an incremental save is credited with the whole state it
made durable; "written" is what reached the directory (new files' bytes:
chunks, manifest, LATEST), for torch.save the file. C seconds are the
tool's own (`crater-ckpt save` reports them) and its wall time with the
process start and mmap. Prints one JSON object (or --markdown, a table).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from crater_ckpt import Checkpointer  # noqa: E402


def dir_bytes(d):
    n = 0
    for root, _, files in os.walk(d):
        for f in files:
            try:
                n += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return n


def timed(fn):
    os.sync()
    t0 = time.monotonic()
    r = fn()
    return time.monotonic() - t0, r


def torch_save(torch, state, path, fsync):
    def run():
        torch.save(state, path)
        if fsync:
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
    s, _ = timed(run)
    n = os.path.getsize(path)
    os.unlink(path)
    return {"seconds": s, "written": n}


def sdk_save(ct, ck, step, state):
    before = dir_bytes(ck.dir)
    s, st = timed(lambda: ct.save(ck, step, state))
    return {"seconds": s, "written": dir_bytes(ck.dir) - before,
            "sdk_seconds": st.seconds}


def c_save(tool, d, step, blob):
    before = dir_bytes(d) if os.path.isdir(d) else 0
    s, r = timed(lambda: subprocess.run([tool, "save", d, str(step), blob],
                                        check=True, capture_output=True,
                                        text=True))
    m = re.search(r"written in ([0-9.]+) s", r.stdout)
    return {"seconds": float(m.group(1)) if m else s, "wall_seconds": s,
            "written": dir_bytes(d) - before, "report": r.stdout.strip()}


def change_1pct(torch, state, size):
    m = size // 4 // 100  # 1% of the elements, a contiguous run in w00
    with torch.no_grad():
        state["w00"][:m] += 1.0
    return m


def one_size(torch, ct, mib, root, tool):
    os.makedirs(root, exist_ok=True)
    n = mib * (1 << 20) // 4 // 64
    torch.manual_seed(0)
    state = {"w%02d" % i: torch.randn(n) for i in range(64)}
    size = n * 4 * 64
    out = {"state_bytes": size}
    pt = os.path.join(root, "torch.pt")
    out["torch.save"] = torch_save(torch, state, pt, False)
    out["torch.save + fsync"] = torch_save(torch, state, pt, True)
    ck = Checkpointer(os.path.join(root, "ck"))
    out["crater_ckpt full (Python)"] = sdk_save(ct, ck, 1, state)
    if tool:
        blob = os.path.join(root, "tensors.bin")
        with open(blob, "wb") as f:
            f.write(ct.pack_state(state)["tensors.bin"])
        cd = os.path.join(root, "cck")
        out["libcrater-ckpt full (C)"] = c_save(tool, cd, 1, blob)
    m = change_1pct(torch, state, size)
    out["changed_bytes"] = m * 4
    out["crater_ckpt incremental (Python)"] = sdk_save(ct, ck, 2, state)
    if tool:
        with open(blob, "r+b") as f:  # the same run of w00, in place
            f.write(state["w00"][:m].numpy().tobytes())
        out["libcrater-ckpt incremental (C)"] = c_save(tool, cd, 2, blob)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    for k, v in out.items():
        if isinstance(v, dict):
            v["MB_per_s"] = round(size / 1e6 / v["seconds"], 1)
            v["written_fraction"] = round(v["written"] / size, 5)
            for f in ("seconds", "wall_seconds", "sdk_seconds"):
                if f in v:
                    v[f] = round(v[f], 3)
    return out


def markdown(res):
    rows = ["| state | writer | seconds | MB/s | bytes written | of the state |",
            "|---|---|---|---|---|---|"]
    for mib, out in res.items():
        for k, v in out.items():
            if not isinstance(v, dict):
                continue
            wall = (" (wall %.2f)" % v["wall_seconds"]) if "wall_seconds" in v else ""
            rows.append("| %s MiB | %s | %.2f%s | %.0f | %s | %.2f%% |" % (
                mib, k, v["seconds"], wall, v["MB_per_s"],
                format(v["written"], ","), 100 * v["written_fraction"]))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,1024", help="MiB, comma-separated")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--tool", help="build/crater-ckpt: also the C library")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    import torch
    from crater_ckpt import torch_helpers as ct
    torch.set_num_threads(1)
    root = tempfile.mkdtemp(dir=a.dir)
    res = {}
    t0 = time.monotonic()
    try:
        for mib in [int(x) for x in a.sizes.split(",")]:
            res[mib] = one_size(torch, ct, mib, os.path.join(root, "run"), a.tool)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if a.markdown:
        print(markdown(res))
        print("\ntotal %.0f s" % (time.monotonic() - t0))
    else:
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
