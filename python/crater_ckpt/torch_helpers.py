"""crater_ckpt.torch_helpers - PyTorch state dicts in crater checkpoints.

    from crater_ckpt import Checkpointer
    from crater_ckpt import torch_helpers as ct
    ck = Checkpointer(dir, keep_last=2)
    step, state = ct.load_latest(ck)          # (None, None) when none
    ct.save(ck, step, {"model": m.state_dict(), "opt": o.state_dict()})
    ct.save_async(ck, step, state)            # snapshot now, write in a thread

A state (any picklable nesting of dicts, lists and tensors) becomes two
entries: "tensors.bin", every tensor's bytes at 64-byte aligned offsets in
a fixed order, and "state.pkl", the state pickled with each tensor replaced
by a reference (offset, dtype, shape). A training step changes tensor
values but not their sizes, so offsets stay put and an incremental save
writes only the chunks of the tensors that changed, unlike one torch.save
file. Tensors come back on the CPU; move them with load_state_dict.
Importing this module needs torch.
"""
import io
import pickle

import torch

ALIGN = 64


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.numel() == 0:
        return t, b""
    return t, t.reshape(-1).view(torch.uint8).numpy()


class _Packer(pickle.Pickler):
    def __init__(self, f):
        super().__init__(f, protocol=4)
        self.tensors = []

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):
            self.tensors.append(obj)
            return ("tensor", len(self.tensors) - 1)
        return None


def pack_state(obj):
    """obj -> {"state.pkl": bytes, "tensors.bin": bytearray} (a snapshot:
    later changes to the tensors do not reach it)."""
    f = io.BytesIO()
    p = _Packer(f)
    p.dump(obj)
    metas, off, views = [], 0, []
    for t in p.tensors:
        t, raw = _tensor_bytes(t)
        metas.append((off, len(raw), str(t.dtype).replace("torch.", ""),
                      tuple(t.shape), t.requires_grad))
        views.append((off, raw))
        off += (len(raw) + ALIGN - 1) // ALIGN * ALIGN
    blob = bytearray(off)
    for o, raw in views:
        blob[o:o + len(raw)] = memoryview(raw).cast("B") if len(raw) else b""
    head = pickle.dumps((metas, f.getvalue()), protocol=4)
    return {"state.pkl": head, "tensors.bin": blob}


class _Unpacker(pickle.Unpickler):
    def __init__(self, f, tensors):
        super().__init__(f)
        self.tensors = tensors

    def persistent_load(self, pid):
        return self.tensors[pid[1]]


def unpack_state(entries):
    """Inverse of pack_state."""
    metas, body = pickle.loads(entries["state.pkl"])
    blob = bytearray(entries["tensors.bin"])
    tensors = []
    for off, n, dtype, shape, grad in metas:
        dt = getattr(torch, dtype)
        if n == 0:
            t = torch.empty(shape, dtype=dt)
        else:
            t = torch.frombuffer(blob, dtype=torch.uint8, count=n, offset=off)
            t = t.view(dt).reshape(shape)
        tensors.append(t.requires_grad_(grad) if grad else t)
    return _Unpacker(io.BytesIO(body), tensors).load()


def save(ck, step, obj):
    """Save a state; returns the SaveStats."""
    return ck.save(step, pack_state(obj))


def save_async(ck, step, obj):
    """Snapshot obj now (one copy of its tensors) and save it in a thread;
    returns the Future (at most one in flight per Checkpointer)."""
    return ck.save_async(step, pack_state(obj), copy=False)


def load_latest(ck):
    """(step, state) of the newest checkpoint that verifies, or (None,
    None) when there is none."""
    cp = ck.load_latest()
    if cp is None:
        return None, None
    return cp.step, unpack_state(cp.entries)
