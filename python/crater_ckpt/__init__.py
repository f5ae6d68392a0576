"""crater_ckpt - crash-safe, incremental training checkpoints (pure Python).

The same on-disk format as libcrater-ckpt (include/crater/ckpt.h); either
one loads what the other saved. doc/checkpoint.md describes the format and
why a crash at any instant leaves the previous or the new checkpoint
loadable. Standard library only; crater_ckpt.torch_helpers adds PyTorch
state dicts when torch imports.

    ck = Checkpointer(os.environ["CRATER_CHECKPOINT_DIR"], keep_last=2)
    ck.save(100, {"model": blob})            # or ck.save_files(100, paths)
    cp = ck.load_latest()                    # None when there is none
    cp.step, cp.entries["model"]

Save order (the crash-safety argument, see ckpt.c in the C library):
chunks (tmp, fsync, rename, fsync chunks/), manifest in step-N.tmp-<pid>/
(fsync file and directory), an existing step-N renamed to
step-N.old-<pid>, rename to step-N (the commit), fsync the directory, then
LATEST by rename. One process saves into a directory at a time (flock on
.lock); save_async() runs at most one save in a thread.
"""
import concurrent.futures
import errno
import fcntl
import hashlib
import os
import re
import threading
import time

FORMAT = 1
CHUNK_DEFAULT = 4 << 20
NAME_MAX = 1024
MANIFEST_MAX = 256 << 20
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
_DIR_RE = re.compile(r"^step-(0|[1-9][0-9]{0,17})(?:\.(old|tmp)-(.+))?$")
_HEX_RE = re.compile(r"^[0-9a-f]{64}$")
_NUM_RE = re.compile(r"^(0|[1-9][0-9]{0,19})$")

__all__ = ["Checkpointer", "Checkpoint", "CheckpointError", "SaveStats",
           "encode_name", "decode_name"]


class CheckpointError(Exception):
    """A checkpoint could not be saved, or none could be loaded."""


class SaveStats:
    """What one save did (sizes in bytes)."""

    def __init__(self, step):
        self.step = step
        self.parent = None
        self.bytes_total = self.bytes_written = self.manifest_bytes = 0
        self.chunks_total = self.chunks_written = 0
        self.seconds = 0.0
        self.digest = ""

    def __repr__(self):
        return ("SaveStats(step=%d, written=%d of %d bytes, %.3f s)"
                % (self.step, self.bytes_written, self.bytes_total, self.seconds))


class Checkpoint:
    """A loaded, verified checkpoint: step, parent (None), digest and
    entries, a dict from name to bytes in saved order."""

    def __init__(self, step, parent, digest, entries):
        self.step, self.parent, self.digest = step, parent, digest
        self.entries = entries

    def write_files(self, directory):
        """Write each entry as directory/<name>, fsynced."""
        for name, data in self.entries.items():
            if "/" in name or name in (".", ".."):
                raise CheckpointError("entry %r is not a file name" % name)
            _write_durable(os.path.join(directory, name), data, True)
        _fsync_dir(directory, True)


def encode_name(name):
    """Percent-encode a name: bytes outside [A-Za-z0-9._-] become %XX."""
    out = []
    for b in name.encode("utf-8"):
        out.append(chr(b) if b in _SAFE else "%%%02X" % b)
    return "".join(out)


def decode_name(text):
    """Inverse of encode_name; ValueError unless text is canonical."""
    out, i = bytearray(), 0
    while i < len(text):
        ch = text[i]
        if ord(ch) < 128 and ord(ch) in _SAFE:
            out.append(ord(ch))
            i += 1
            continue
        h = text[i + 1:i + 3]
        if ch != "%" or len(h) != 2 or not re.fullmatch("[0-9A-F]{2}", h):
            raise ValueError("bad name encoding")
        b = int(h, 16)
        if b == 0 or b in _SAFE:
            raise ValueError("non-canonical name encoding")
        out.append(b)
        i += 3
    if not out or len(out) > NAME_MAX:
        raise ValueError("name empty or too long")
    return out.decode("utf-8", errors="surrogateescape")


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


# --- the manifest -----------------------------------------------------------

def encode_manifest(step, parent, chunk_size, entries):
    """entries: [(name, size, [(hex, len), ...])]. Returns (bytes, digest)."""
    lines = ["crater-ckpt %d" % FORMAT, "step %d" % step,
             "parent %s" % ("-" if parent is None else parent),
             "chunk-size %d" % chunk_size, "entries %d" % len(entries)]
    for name, size, chunks in entries:
        lines.append("entry %s %d %d" % (encode_name(name), size, len(chunks)))
        lines.extend("chunk %s %d" % c for c in chunks)
    body = ("\n".join(lines) + "\n").encode("ascii")
    digest = _sha256(body)
    return body + b"checksum " + digest.encode("ascii") + b"\n", digest


class _Lines:
    def __init__(self, text):
        self.lines, self.i = text.split("\n"), 0
        if self.lines[-1] != "":
            raise ValueError("truncated")
        self.lines.pop()

    def keyed(self, key):
        if self.i >= len(self.lines):
            raise ValueError("truncated")
        line = self.lines[self.i]
        self.i += 1
        if not line.startswith(key + " ") or len(line) == len(key) + 1:
            raise ValueError("line %d: %s" % (self.i, key))
        return line[len(key) + 1:]


def _num(s, limit):
    if not _NUM_RE.match(s) or int(s) > limit:
        raise ValueError("bad number %r" % s)
    return int(s)


def _parse_entry(ln, chunk_size, seen):
    name, size, nch = ln.keyed("entry").rsplit(" ", 2)
    name, size, nch = decode_name(name), _num(size, 2**64 - 1), _num(nch, 2**64 - 1)
    if name in seen or nch != (size + chunk_size - 1) // chunk_size:
        raise ValueError("entry %r" % name)
    chunks, total = [], 0
    for k in range(nch):
        h, _, n = ln.keyed("chunk").partition(" ")
        n = _num(n, chunk_size)
        if not _HEX_RE.match(h) or n == 0 or (k + 1 < nch and n != chunk_size):
            raise ValueError("chunk")
        chunks.append((h, n))
        total += n
    if total != size:
        raise ValueError("chunk lengths do not add up")
    return name, size, chunks


def parse_manifest(raw):
    """Strictly parse a manifest; ValueError when it is damaged. Returns a
    dict: step, parent, chunk_size, entries [(name, size, chunks)], digest."""
    if len(raw) > MANIFEST_MAX or b"\0" in raw:
        raise ValueError("not text")
    end = raw.rfind(b"checksum ")
    if end < 0 or (end > 0 and raw[end - 1:end] != b"\n"):
        raise ValueError("no checksum")
    body, digest = raw[:end], _sha256(raw[:end])
    if raw[end:] != b"checksum " + digest.encode("ascii") + b"\n":
        raise ValueError("checksum mismatch")
    ln = _Lines(body.decode("ascii"))
    if ln.keyed("crater-ckpt") != str(FORMAT):
        raise ValueError("unknown format version")
    step = _num(ln.keyed("step"), 2**63 - 1)
    p = ln.keyed("parent")
    parent = None if p == "-" else _num(p, 2**63 - 1)
    chunk_size = _num(ln.keyed("chunk-size"), 1 << 30)
    if chunk_size == 0:
        raise ValueError("chunk-size")
    entries, seen = [], set()
    for _ in range(_num(ln.keyed("entries"), 1 << 20)):
        e = _parse_entry(ln, chunk_size, seen)
        seen.add(e[0])
        entries.append(e)
    if ln.i != len(ln.lines):
        raise ValueError("data after the entries")
    return {"step": step, "parent": parent, "chunk_size": chunk_size,
            "entries": entries, "digest": digest}


# --- durable file operations ------------------------------------------------
# Tests set _fault to a callable(op, path) that may kill the process or
# raise OSError before an operation, as crater__ckpt_fault does in C.
_fault = None


def _hook(op, path):
    if _fault is not None:
        _fault(op, path)


def _write_durable(path, data, sync):
    """Write data to path.tmp-<pid>, fsync, rename to path."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    _hook("open", tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view, off = memoryview(data).cast("B"), 0
        while off < len(view):
            _hook("write", tmp)
            off += os.write(fd, view[off:off + (1 << 30)])
        if sync:
            _hook("fsync", tmp)
            os.fsync(fd)
    finally:
        os.close(fd)
    _hook("rename", path)
    os.rename(tmp, path)


def _fsync_dir(path, sync):
    if not sync:
        return
    _hook("fsync", path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path):
    """Remove a file, or a directory of files; a missing one is fine."""
    _hook("unlink", path)
    try:
        os.unlink(path)
        return
    except FileNotFoundError:
        return
    except (IsADirectoryError, PermissionError):
        pass
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    for n in names:
        _hook("unlink", n)
        try:
            os.unlink(os.path.join(path, n))
        except FileNotFoundError:
            pass
    _hook("rmdir", path)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        pass


def _list_dirs(root):
    """[(step, kind, name)] newest first; kind 0 plain, 1 old, 2 tmp."""
    out = []
    for name in os.listdir(root):
        m = _DIR_RE.match(name)
        if m:
            kind = {None: 0, "old": 1, "tmp": 2}[m.group(2)]
            out.append((int(m.group(1)), kind, name))
    out.sort(key=lambda t: (-t[0], t[1], t[2]))
    return out


class _Lock:
    def __init__(self, root, how):
        self.root, self.how, self.fd = root, how, None

    def __enter__(self):
        path = os.path.join(self.root, ".lock")
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            if self.how == fcntl.LOCK_SH:
                return self  # a read-only directory: load without the lock
            raise
        fcntl.flock(self.fd, self.how)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock


def _chunks_of(data, size):
    view = memoryview(data).cast("B")
    return [view[o:o + size] for o in range(0, len(view), size)]


class Checkpointer:
    """A checkpoint directory. keep_last: after each save keep this many
    checkpoints and collect unreferenced chunks (0 keeps all). hash_threads
    hash chunks in parallel (hashlib releases the GIL)."""

    def __init__(self, directory, chunk_size=CHUNK_DEFAULT, keep_last=0,
                 fsync=True, hash_threads=None):
        if not 0 < chunk_size <= 1 << 30:
            raise ValueError("chunk_size must be in 1 .. 1 GiB")
        self.dir, self.chunk_size, self.keep_last = directory, chunk_size, keep_last
        self.sync = fsync
        self.chunks = os.path.join(directory, "chunks")
        os.makedirs(self.chunks, exist_ok=True)
        self._threads = hash_threads or min(4, os.cpu_count() or 1)
        self._pending = None
        self._pending_lock = threading.Lock()

    # ---- saving ----
    def save(self, step, state):
        """Save state (a dict name -> bytes-like, in order) as checkpoint
        `step`; returns SaveStats. Waits for an async save in flight."""
        self.wait()
        return self._save(step, state)

    def save_files(self, step, paths):
        """Save the files at paths, named by their base names."""
        state = {}
        for p in paths:
            name = os.path.basename(p)
            if name in state:
                raise CheckpointError("two files named %r" % name)
            with open(p, "rb") as f:
                state[name] = f.read()
        return self.save(step, state)

    def save_async(self, step, state, copy=True):
        """Snapshot state (bytes copies) now and save it in a thread; at
        most one save is in flight (this waits for the previous one).
        Returns a Future whose result() is the SaveStats or raises.
        copy=False: the caller hands over buffers it will not change."""
        self.wait()
        snap = {k: bytes(memoryview(v).cast("B")) for k, v in state.items()} \
            if copy else dict(state)
        fut = concurrent.futures.Future()

        def run():
            try:
                fut.set_result(self._save(step, snap))
            except BaseException as e:  # noqa: B036 - handed to the caller
                fut.set_exception(e)
        t = threading.Thread(target=run, name="crater-ckpt-save", daemon=False)
        with self._pending_lock:
            self._pending = fut
        t.start()
        return fut

    def wait(self):
        """Wait for the async save in flight, if any; re-raise its error."""
        with self._pending_lock:
            fut, self._pending = self._pending, None
        if fut is not None:
            fut.result()

    def _check(self, step, state):
        if not 0 <= step < 2**63:
            raise CheckpointError("step out of range")
        for name in state:
            if not isinstance(name, str) or not name or "\0" in name or \
                    len(name.encode("utf-8")) > NAME_MAX:
                raise CheckpointError("bad entry name %r" % (name,))

    def _save(self, step, state):
        self._check(step, state)
        st, t0 = SaveStats(step), time.monotonic()
        with _Lock(self.dir, fcntl.LOCK_EX):
            self._sweep()
            st.parent = self._find_parent(step)
            entries = [self._put_entry(n, d, st) for n, d in state.items()]
            if st.chunks_written:
                _fsync_dir(self.chunks, self.sync)
            raw, st.digest = encode_manifest(step, st.parent, self.chunk_size, entries)
            st.manifest_bytes = len(raw)
            tmp = "step-%d.tmp-%d" % (step, os.getpid())
            self._write_tmp(tmp, raw)
            self._commit(step, tmp)
            if self.keep_last:
                self._gc_locked(self.keep_last)
        st.seconds = time.monotonic() - t0
        return st

    def _hashes(self, pieces):
        if self._threads > 1 and len(pieces) > 1:
            with concurrent.futures.ThreadPoolExecutor(self._threads) as ex:
                return list(ex.map(_sha256, pieces))
        return [_sha256(p) for p in pieces]

    def _put_entry(self, name, data, st):
        pieces = _chunks_of(data, self.chunk_size)
        chunks = []
        for h, piece in zip(self._hashes(pieces), pieces):
            path = os.path.join(self.chunks, h)
            st.chunks_total += 1
            try:
                present = os.lstat(path).st_size == len(piece)
            except FileNotFoundError:
                present = False
            if not present:
                _write_durable(path, piece, self.sync)
                st.chunks_written += 1
                st.bytes_written += len(piece)
            chunks.append((h, len(piece)))
        size = sum(n for _, n in chunks)
        st.bytes_total += size
        return name, size, chunks

    def _find_parent(self, step):
        for s, kind, name in _list_dirs(self.dir):
            if kind == 2 or s >= step:
                continue
            try:
                return self._read_manifest(name)["step"]
            except (OSError, ValueError):
                continue
        return None

    def _write_tmp(self, tmp, raw):
        path = os.path.join(self.dir, tmp)
        _remove(path)
        _hook("mkdir", path)
        os.mkdir(path)
        _write_durable(os.path.join(path, "MANIFEST"), raw, self.sync)
        _fsync_dir(path, self.sync)

    def _commit(self, step, tmp):
        final = os.path.join(self.dir, "step-%d" % step)
        old = "%s.old-%d" % (final, os.getpid())
        had_old = os.path.lexists(final)
        if had_old:
            _remove(old)
            _hook("rename", old)
            os.rename(final, old)
        _hook("rename", final)
        os.rename(os.path.join(self.dir, tmp), final)
        _fsync_dir(self.dir, self.sync)
        _write_durable(os.path.join(self.dir, "LATEST"),
                       b"step-%d\n" % step, self.sync)
        _fsync_dir(self.dir, self.sync)
        if had_old:
            _remove(old)

    # ---- loading ----
    def _read_manifest(self, name):
        path = os.path.join(self.dir, name, "MANIFEST")
        with open(path, "rb") as f:
            raw = f.read(MANIFEST_MAX + 1)
        return parse_manifest(raw)

    def _read_chunk(self, h, n):
        with open(os.path.join(self.chunks, h), "rb") as f:
            data = f.read(n + 1)
        if len(data) != n or _sha256(data) != h:
            raise ValueError("chunk %s: damaged" % h[:12])
        return data

    def _load_dir(self, name):
        m = self._read_manifest(name)
        entries = {}
        for ename, size, chunks in m["entries"]:
            parts = [self._read_chunk(h, n) for h, n in chunks]
            entries[ename] = parts[0] if len(parts) == 1 else b"".join(parts)
        return Checkpoint(m["step"], m["parent"], m["digest"], entries)

    def _load_first(self, want):
        tried, first = 0, None
        for s, kind, name in _list_dirs(self.dir):
            if kind == 2 or (want is not None and s != want):
                continue
            tried += 1
            try:
                return self._load_dir(name)
            except (OSError, ValueError) as e:
                first = first or "%s: %s" % (name, e)
        if tried:
            raise CheckpointError("%s: no loadable checkpoint (%d damaged; "
                                  "newest: %s)" % (self.dir, tried, first))
        return None

    def load_latest(self):
        """The newest checkpoint that verifies (older ones are tried when
        newer ones are damaged); None when there is no checkpoint at all.
        Raises CheckpointError when there are checkpoints but none loads."""
        with _Lock(self.dir, fcntl.LOCK_SH):
            return self._load_first(None)

    def load(self, step):
        """Checkpoint `step`, verified; None when it does not exist."""
        with _Lock(self.dir, fcntl.LOCK_SH):
            return self._load_first(step)

    def steps(self):
        """Committed steps, newest first."""
        out = []
        for s, kind, _ in _list_dirs(self.dir):
            if kind != 2 and (not out or out[-1] != s):
                out.append(s)
        return out

    # ---- collection ----
    def gc(self, keep_last):
        """Keep the keep_last newest valid checkpoints (0: all), remove the
        rest and damaged ones, delete unreferenced chunks."""
        self.wait()
        with _Lock(self.dir, fcntl.LOCK_EX):
            self._gc_locked(keep_last)

    def _sweep(self):
        for d in (self.dir, self.chunks):
            for n in os.listdir(d):
                if ".tmp-" in n:
                    _remove(os.path.join(d, n))

    def _judge(self, name, step, keep_last, kept, live):
        try:
            m = self._read_manifest(name)
        except FileNotFoundError:
            m = None
        except ValueError:
            m = None  # damaged; any other OSError stops the collection
        if m is not None and step != (kept[-1] if kept else None) and \
                (not keep_last or len(kept) < keep_last):
            kept.append(step)
            live.update(h for _, _, chunks in m["entries"] for h, _ in chunks)
        else:
            _remove(os.path.join(self.dir, name))

    def _gc_locked(self, keep_last):
        self._sweep()
        kept, live = [], set()
        for s, kind, name in _list_dirs(self.dir):
            if kind != 2:
                self._judge(name, s, keep_last, kept, live)
        _fsync_dir(self.dir, self.sync)
        removed = 0
        for n in os.listdir(self.chunks):
            if _HEX_RE.match(n) and n not in live:
                _remove(os.path.join(self.chunks, n))
                removed += 1
        if removed:
            _fsync_dir(self.chunks, self.sync)
