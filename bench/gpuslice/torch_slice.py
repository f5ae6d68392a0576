#!/usr/bin/env python3
"""torch_slice.py - PyTorch against libcrater-gpuslice.so (run-on-gpu.sh
items 3, 5, 6). The allocator is chosen by PYTORCH_CUDA_ALLOC_CONF, set by
the caller before this process starts.

    torch_slice.py oom GIB_OK GIB_MORE   GIB_OK must fit, GIB_MORE more must
                                         raise torch.OutOfMemoryError
    torch_slice.py control GIB           GIB must fit (run without preload)
    torch_slice.py train STEPS           seconds per step of a small MLP
Prints "key: value" lines; exit 0 when the expectations held.
"""
import os
import sys
import time

import torch

GiB = 1 << 30
MiB = 1 << 20
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def nvml_line(tag):
    """NVML's per-process figure for this pid next to the slice's tracked
    total: the gap is what the interposer cannot see (context, modules)."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        mine = [p.usedGpuMemory for p in
                pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                if p.pid == os.getpid()]
        nv = mine[0] if mine and mine[0] is not None else -1
    except Exception as e:  # report, never fail the check on NVML
        print(f"nvml[{tag}]: unavailable ({e})")
        return
    tracked = -1
    path = os.environ.get("CRATER_GPUSLICE_FILE")
    if path:
        import mkslice
        tracked = mkslice.used(path)[0][2]
    print(f"nvml[{tag}]: process {nv / MiB:.0f} MiB, slice tracked "
          f"{tracked / MiB:.0f} MiB, torch reserved "
          f"{torch.cuda.memory_reserved() / MiB:.0f} MiB, untracked gap "
          f"{(nv - tracked) / MiB:.0f} MiB")


def oom(gib_ok, gib_more):
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "default")
    bad = 0
    x = torch.ones(16, device="cuda")
    nvml_line("first tensor")
    a = torch.ones(4096, 4096, device="cuda")
    (a @ a).sum().item()
    nvml_line("after cuBLAS")
    free, total = torch.cuda.mem_get_info()
    print(f"[{conf}] mem_get_info: free {free / GiB:.2f} GiB total "
          f"{total / GiB:.2f} GiB")
    want = os.environ.get("EXPECT_TOTAL_GIB")
    if want and total != int(want) * GiB:
        print(f"[{conf}] total != {want} GiB: MISMATCH")
        bad = 1
    try:
        big = torch.empty(int(gib_ok * GiB), dtype=torch.uint8, device="cuda")
        print(f"[{conf}] {gib_ok} GiB tensor: ok")
    except torch.OutOfMemoryError as e:
        print(f"[{conf}] {gib_ok} GiB tensor: OutOfMemoryError (MISMATCH) {e}")
        return 1
    nvml_line(f"{gib_ok} GiB tensor")
    try:
        more = torch.empty(int(gib_more * GiB), dtype=torch.uint8,
                           device="cuda")
        print(f"[{conf}] {gib_more} GiB more: allocated (MISMATCH)")
        del more
        bad = 1
    except torch.OutOfMemoryError as e:
        first = str(e).splitlines()[0][:160]
        print(f"[{conf}] {gib_more} GiB more: torch.OutOfMemoryError ok "
              f"({first})")
    del big, x, a
    torch.cuda.empty_cache()
    print(f"[{conf}] oom check: {'FAIL' if bad else 'PASS'}")
    return bad


def control(gib):
    try:
        t = torch.empty(int(gib * GiB), dtype=torch.uint8, device="cuda")
        print(f"control: {gib} GiB without the preload: ok")
        del t
        return 0
    except torch.OutOfMemoryError:
        print(f"control: {gib} GiB without the preload: OutOfMemoryError")
        return 1


def train(steps):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
        torch.nn.Linear(4096, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        # fresh tensors each step: allocator traffic, as in a data loader
        x = torch.randn(256, 1024, device="cuda")
        y = torch.randint(0, 10, (256,), device="cuda")
        opt.zero_grad(set_to_none=True)
        lossf(model(x), y).backward()
        opt.step()

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / steps
    print(f"train: {dt * 1e6:.1f} us/step over {steps} steps")
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "oom":
        sys.exit(oom(float(sys.argv[2]), float(sys.argv[3])))
    if cmd == "control":
        sys.exit(control(float(sys.argv[2])))
    if cmd == "train":
        sys.exit(train(int(sys.argv[2])))
    sys.exit(__doc__)
