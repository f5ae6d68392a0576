#!/usr/bin/env python3
"""bench_ckpt.py - checkpoint write throughput and incremental bytes.

    PYTHONPATH=python /usr/bin/python3 bench/ckpt/bench_ckpt.py [--gib 1] [--dir D]
        [--tool build/crater-ckpt]

A state of --gib GiB of float32 tensors (64 tensors) is saved with
crater_ckpt (torch_helpers, 4 MiB chunks, fsync on): a full save into an
empty directory, then an incremental save after changing 1% of the
elements (1% of the tensors, rewritten in place). Reported: bytes written
(new chunk bytes + manifest) against the state's size, and seconds/GB/s.
With torch, the same state is written by torch.save to one file (plus
fsync, so the comparison is fair). With --tool, the C library saves the
same bytes (the tensors.bin file) through crater-ckpt save. Prints one
JSON object.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from crater_ckpt import Checkpointer  # noqa: E402


def drop_dir(d):
    shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--tool")
    a = ap.parse_args()
    import torch
    from crater_ckpt import torch_helpers as ct
    n = int(a.gib * (1 << 30)) // 4 // 64
    torch.manual_seed(0)
    state = {"w%02d" % i: torch.randn(n) for i in range(64)}
    size = sum(t.numel() * 4 for t in state.values())
    root = tempfile.mkdtemp(dir=a.dir)
    out = {"state_bytes": size}
    ck = Checkpointer(os.path.join(root, "ck"))
    t0 = time.monotonic()
    st = ct.save(ck, 1, state)
    out["full"] = {"seconds": round(time.monotonic() - t0, 3),
                   "bytes_written": st.bytes_written + st.manifest_bytes}
    m = size // 4 // 100  # 1% of the elements, a contiguous run in w00
    with torch.no_grad():
        state["w00"][:m] += 1.0
    t0 = time.monotonic()
    st = ct.save(ck, 2, state)
    out["incremental"] = {"seconds": round(time.monotonic() - t0, 3),
                          "changed_bytes": m * 4,
                          "bytes_written": st.bytes_written + st.manifest_bytes}
    out["incremental"]["fraction_written"] = round(
        out["incremental"]["bytes_written"] / size, 5)
    t0 = time.monotonic()
    path = os.path.join(root, "torch.pt")
    torch.save(state, path)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    out["torch_save"] = {"seconds": round(time.monotonic() - t0, 3),
                         "bytes_written": os.path.getsize(path)}
    if a.tool:
        blob = os.path.join(root, "tensors.bin")
        with open(blob, "wb") as f:
            f.write(ct.pack_state(state)["tensors.bin"])
        t0 = time.monotonic()
        subprocess.run([a.tool, "save", os.path.join(root, "cck"), "1", blob],
                       check=True, capture_output=True)
        out["c_full"] = {"seconds": round(time.monotonic() - t0, 3)}
        with open(blob, "r+b") as f:
            f.seek(4 * n * 5)
            f.write(os.urandom(m * 4))
        t0 = time.monotonic()
        r = subprocess.run([a.tool, "save", os.path.join(root, "cck"), "2", blob],
                           check=True, capture_output=True, text=True)
        out["c_incremental"] = {"seconds": round(time.monotonic() - t0, 3),
                                "report": r.stdout.strip()}
    for k in ("full", "incremental", "torch_save", "c_full", "c_incremental"):
        if k in out:
            out[k]["GB_per_s"] = round(size / 1e9 / out[k]["seconds"], 3)
    drop_dir(root)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
