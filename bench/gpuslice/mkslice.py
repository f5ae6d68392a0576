#!/usr/bin/env python3
"""mkslice.py - create or read a crater slice file (include/crater/gpuslice.h,
version 1) without building libcrater, for bench/gpuslice/run-on-gpu.sh.

    mkslice.py create PATH GPU-UUID LIMIT_BYTES [GPU-UUID LIMIT_BYTES]...
    mkslice.py used PATH         prints "UUID LIMIT USED" per GPU
Layout: header (magic, version, ngpus, size: 4 x u32), 16 GPU records
(uuid[16], limit u64, used u64), 256 process records (pid i64, start u64,
bytes[16] u64): 37392 bytes on x86-64.
"""
import os
import struct
import sys

MAGIC, VERSION, MAX_GPUS, MAX_PROCS = 0x31534743, 1, 16, 256
GPU_REC, PROC_REC = 32, 8 + 8 + 8 * MAX_GPUS
SIZE = 16 + MAX_GPUS * GPU_REC + MAX_PROCS * PROC_REC


def parse_uuid(text):
    t = text[4:] if text.upper().startswith("GPU-") else text
    raw = bytes.fromhex(t.replace("-", ""))
    if len(raw) != 16:
        raise SystemExit(f"mkslice: bad GPU UUID {text!r}")
    return raw


def create(path, pairs):
    buf = bytearray(SIZE)
    struct.pack_into("<IIII", buf, 0, MAGIC, VERSION, len(pairs), SIZE)
    for i, (uuid, limit) in enumerate(pairs):
        struct.pack_into("<16sQQ", buf, 16 + i * GPU_REC, parse_uuid(uuid),
                         int(limit), 0)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(buf)
    os.chmod(tmp, 0o600)
    os.rename(tmp, path)


def used(path):
    with open(path, "rb") as f:
        buf = f.read()
    magic, version, n, size = struct.unpack_from("<IIII", buf, 0)
    if (magic, version, size) != (MAGIC, VERSION, SIZE):
        raise SystemExit(f"mkslice: {path}: not a version 1 slice file")
    out = []
    for i in range(n):
        uuid, limit, use = struct.unpack_from("<16sQQ", buf, 16 + i * GPU_REC)
        h = uuid.hex()
        out.append((f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}",
                    limit, use))
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "create":
        a = sys.argv[3:]
        create(sys.argv[2], list(zip(a[0::2], a[1::2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "used":
        for u, lim, use in used(sys.argv[2]):
            print(u, lim, use)
    else:
        raise SystemExit(__doc__)
