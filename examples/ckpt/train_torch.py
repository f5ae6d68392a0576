#!/usr/bin/env python3
"""train_torch.py - a PyTorch training loop (CPU) that survives being killed.

    PYTHONPATH=python python3 examples/ckpt/train_torch.py --dir D --steps 200

Trains a small MLP on synthetic data with Adam, checkpointing model and
optimizer with crater_ckpt every --every steps (async: the snapshot is taken
at the step, the write overlaps the next steps). On start it resumes from
the newest checkpoint that verifies. SIGTERM (what Crater sends on
preemption) saves the current step synchronously and exits 0, so a
requeued job resumes at exactly that step. The batch of step s is drawn
from a generator seeded with s, so an interrupted and resumed run ends with
the same weights, bit for bit, as one that never stopped: the last line
printed is the SHA-256 of the final weights.

--dir defaults to $CRATER_CHECKPOINT_DIR. Under Crater ($CRATER_AGENT_SOCKET
set) it also long-polls the agent for a preemption notice (which comes
with SIGTERM), reports every checkpoint it finishes (step, directory,
digest, bytes written, seconds) and its progress.
"""
import argparse
import hashlib
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
import torch  # noqa: E402

from crater_ckpt import Checkpointer  # noqa: E402
from crater_ckpt import torch_helpers as ct  # noqa: E402
from crater_ckpt.agent import AgentClient  # noqa: E402


def build():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 1))
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(64, 32, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def weights_hash(model):
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode())
        h.update(v.contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.environ.get("CRATER_CHECKPOINT_DIR"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds per step")
    a = ap.parse_args()
    if not a.dir:
        ap.error("--dir or CRATER_CHECKPOINT_DIR is required")
    torch.set_num_threads(1)
    model, opt = build()
    ck = Checkpointer(a.dir, chunk_size=64 << 10, keep_last=2)
    step, state = ct.load_latest(ck)
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        print("resumed at step %d" % step, flush=True)
    step = step or 0
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    agent = AgentClient()

    def noticed(info):
        print("notice: %s, %d ms left" % (info["reason"], info["deadline_ms"]),
              flush=True)
        stop.append(1)

    def report(st):
        try:
            agent.report_checkpoint(st, path=os.path.join(a.dir, "step-%d" % st.step))
            agent.report_progress(st.step)
        except Exception as e:  # noqa: BLE001 - reporting is best effort
            print("report failed: %s" % e, file=sys.stderr, flush=True)
    if agent.available:
        agent.watch(noticed)
    while step < a.steps and not stop:
        x, y = batch(step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        step += 1
        if step % a.every == 0:
            fut = ct.save_async(ck, step, {"model": model.state_dict(),
                                           "opt": opt.state_dict()})
            fut.add_done_callback(lambda f: f.exception() or report(f.result()))
        time.sleep(a.sleep)
    ck.wait()
    if stop or (step == a.steps and step % a.every):
        report(ct.save(ck, step, {"model": model.state_dict(),
                                  "opt": opt.state_dict()}))
    if stop:
        print("preempted: saved step %d" % step, flush=True)
        return 0
    print(weights_hash(model), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
