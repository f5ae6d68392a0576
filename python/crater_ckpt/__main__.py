"""python3 -m crater_ckpt: the crater-ckpt command in Python.

    python3 -m crater_ckpt save [-c CHUNK] [-k KEEP] DIR STEP FILE...
    python3 -m crater_ckpt load DIR OUTDIR | ls DIR | dump DIR [STEP]
    python3 -m crater_ckpt gc DIR KEEP

dump prints what `crater-ckpt dump` prints, line for line.
"""
import hashlib
import sys

from . import CheckpointError, Checkpointer, encode_name


def dump(cp):
    print("step %d" % cp.step)
    print("parent %s" % ("-" if cp.parent is None else cp.parent))
    print("digest %s" % cp.digest)
    for name, data in cp.entries.items():
        print("%s %d %s" % (hashlib.sha256(data).hexdigest(), len(data),
                            encode_name(name)))


def main(argv):
    opts, args = {}, list(argv)
    while len(args) > 1 and args[1] in ("-c", "-k"):
        opts[args[1]] = int(args[2])
        del args[1:3]
    if not args:
        return 2
    cmd, rest = args[0], args[1:]
    ck = Checkpointer(rest[0], chunk_size=opts.get("-c", 4 << 20),
                      keep_last=opts.get("-k", 0)) if rest else None
    if cmd == "save" and len(rest) >= 2:
        st = ck.save_files(int(rest[1]), rest[2:])
        print("step %d: %d of %d bytes written in %.3f s"
              % (st.step, st.bytes_written, st.bytes_total, st.seconds))
    elif cmd in ("load", "dump") and len(rest) in (1, 2):
        cp = ck.load(int(rest[1])) if cmd == "dump" and len(rest) == 2 \
            else ck.load_latest()
        if cp is None:
            print("crater-ckpt: %s: no checkpoint" % rest[0], file=sys.stderr)
            return 1
        if cmd == "load":
            cp.write_files(rest[1])
            print(cp.step)
        else:
            dump(cp)
    elif cmd == "ls" and len(rest) == 1:
        print("\n".join(str(s) for s in ck.steps()))
    elif cmd == "gc" and len(rest) == 2:
        ck.gc(int(rest[1]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (CheckpointError, OSError, ValueError) as e:
        print("crater-ckpt: %s" % e, file=sys.stderr)
        sys.exit(1)
