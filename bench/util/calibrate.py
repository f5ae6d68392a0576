#!/usr/bin/python3
"""calibrate.py - measure how a training loop's step time depends on the CPU
and the disk bandwidth its data loaders get, to fit the supply curve of the
simulator's utilisation model (src/sim/utilmodel.c, doc/simulator.md
"Measured GPU utilisation").

What runs: a PyTorch (CPU) training loop. The main process stands for the
GPU: it runs the forward/backward/step of a small conv net on one thread
and is never throttled. Its DataLoader workers (2 of them) prepare each
batch (CPU work: an augmentation-like chain of tensor ops per sample) and,
in the IO series, read each sample's bytes from a file with O_DIRECT (no
page cache). Each worker puts itself into a cgroup v1 group
(/sys/fs/cgroup/cpu/crater-calib, /sys/fs/cgroup/blkio/crater-calib) from
worker_init_fn; the script sets the group's CPU quota (cpu.cfs_quota_us)
or read throttle (blkio.throttle.read_bps_device) and measures the mean
step time (data wait + compute) over a fixed number of steps.

Why this shape: the model says a task's achieved GPU rate is its intrinsic
rate times min(1, supply / demand) for each resource feeding it, i.e. the
step time is max(compute, loader work / supply) for a pipelined loader.
The series vary one supply at a time so each demand can be fitted alone.

Output: CSV rows (series, supply, step_s, compute_s) on stdout or --out;
then the fitted demand per series on stderr. Needs root (cgroup v1) and
/usr/bin/python3 with Debian's python3-torch. Run niced; a few minutes.
"""
import argparse
import mmap
import os
import sys
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

CG = "crater-calib"
CPU_DIR = "/sys/fs/cgroup/cpu/" + CG
BLK_DIR = "/sys/fs/cgroup/blkio/" + CG
SAMPLE_BYTES = 64 * 1024
BATCH = 16


def cg_write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def worker_init(_):
    torch.set_num_threads(1)
    pid = os.getpid()
    cg_write(CPU_DIR + "/tasks", pid)
    cg_write(BLK_DIR + "/tasks", pid)


class Samples(Dataset):
    """Each item costs `work` rounds of tensor ops and, if path, one
    O_DIRECT read of SAMPLE_BYTES at a pseudo-random aligned offset."""

    def __init__(self, n, work, path):
        self.n, self.work, self.path = n, work, path
        self.fd, self.buf, self.blocks = None, None, 0

    def __len__(self):
        return self.n

    def read(self, i):
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECT)
            self.buf = mmap.mmap(-1, SAMPLE_BYTES)
            self.blocks = os.fstat(self.fd).st_size // SAMPLE_BYTES
        off = (i * 7919 % self.blocks) * SAMPLE_BYTES
        os.preadv(self.fd, [self.buf], off)

    def __getitem__(self, i):
        if self.path:
            self.read(i)
        x = torch.full((3, 32, 32), float(i % 7))
        for _ in range(self.work):
            x = torch.tanh(x * 1.01 + 0.1).flip(2)
        return x, i % 10


def net():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def run(ds, steps, warm):
    """Mean step time and mean compute time over `steps` after `warm`."""
    model = net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_f = nn.CrossEntropyLoss()
    dl = DataLoader(ds, batch_size=BATCH, num_workers=2, prefetch_factor=2,
                    worker_init_fn=worker_init, persistent_workers=False)
    it = iter(dl)
    total = comp = 0.0
    for k in range(warm + steps):
        t0 = time.perf_counter()
        x, y = next(it)
        t1 = time.perf_counter()
        for _ in range(4):
            opt.zero_grad()
            loss_f(model(x), y).backward()
            opt.step()
        t2 = time.perf_counter()
        if k >= warm:
            total += t2 - t0
            comp += t2 - t1
    del it
    return total / steps, comp / steps


def dev_of(path):
    st = os.stat(path)
    return "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))


def setup(datafile, mib):
    os.makedirs(CPU_DIR, exist_ok=True)
    os.makedirs(BLK_DIR, exist_ok=True)
    if not os.path.exists(datafile) or \
            os.path.getsize(datafile) < mib << 20:
        with open(datafile, "wb") as f:
            for _ in range(mib):
                f.write(os.urandom(1 << 20))


def cpu_series(args, out):
    ds = Samples(100000, args.work, None)
    cg_write(BLK_DIR + "/blkio.throttle.read_bps_device",
             dev_of(args.data) + " 0")
    for q in [None, 1.5, 1.0, 0.7, 0.5, 0.35, 0.25, 0.15]:
        cg_write(CPU_DIR + "/cpu.cfs_quota_us",
                 -1 if q is None else int(q * 100000))
        step, comp = run(ds, args.steps, 5)
        out.write("cpu,%s,%.5f,%.5f\n" % ("inf" if q is None else q,
                                           step, comp))
        out.flush()
    cg_write(CPU_DIR + "/cpu.cfs_quota_us", -1)


def io_series(args, out):
    ds = Samples(100000, args.io_work, args.data)
    dev = dev_of(args.data)
    for mb in [None, 16, 8, 4, 2, 1]:
        bps = 0 if mb is None else int(mb * 1e6)
        cg_write(BLK_DIR + "/blkio.throttle.read_bps_device",
                 "%s %d" % (dev, bps))
        step, comp = run(ds, args.steps, 5)
        out.write("io,%s,%.5f,%.5f\n" % ("inf" if mb is None else mb * 1e6,
                                          step, comp))
        out.flush()
    cg_write(BLK_DIR + "/blkio.throttle.read_bps_device", dev + " 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="-")
    ap.add_argument("--data", default="/var/tmp/crater-calib.bin")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--work", type=int, default=200)
    ap.add_argument("--io-work", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    setup(args.data, 256)
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    out.write("# calibrate.py: batch %d, 2 loader workers, cpu work %d, "
              "io work %d, %d B per sample\n"
              % (BATCH, args.work, args.io_work, SAMPLE_BYTES))
    out.write("series,supply,step_s,compute_s\n")
    cpu_series(args, out)
    io_series(args, out)
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
