"""Sharded checkpoints of a training run: written atomically, checked before they are trusted.

A checkpoint of step k is the folder DIR/step-0000000k holding one file per rank,
`rank-RRRRR.npz` (numpy's .npz, read without pickle), and `manifest.json`, written last. The
model state is the full GPT-2-named parameters and AdamW's states "m.<param>", "v.<param>";
tensor i of that list (in the model's order) is written by rank i mod ranks, from its own
copy, so the ranks share the writing and a checkpoint does not depend on the layout that wrote
it: a run resumes under any other (dp, tp, pp).

Every file is written to a temporary name, flushed and fsync'd, renamed into place, and its
folder fsync'd; the manifest (shapes, dtypes, layout, each file's size and SHA-256, the step,
the seed and data file, whose batches are functions of (seed, step)) comes only after every
shard is in place, so a folder without a manifest is a checkpoint that never completed. Older
checkpoints beyond `keep` are removed only once the new one is complete.

Reading treats the folder as untrusted input: the manifest's types, shapes, dtypes and file
names are checked (a file name is `rank-RRRRR.npz`, so nothing outside the folder is read),
each file's size and checksum must match before it is parsed, and its arrays must have the
manifest's shapes. A checkpoint that fails any check is skipped with a message naming it;
`--resume` takes the newest one that passes.

Asynchronous writing (`write = "async"`): the values of step k are copied when the step ends,
before the next step's optimizer update changes them, and a writer thread writes the copies
while the next steps run; the manifest follows once every rank's shard is written.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import shutil
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hpgrem.errors import UsageError

FORMAT = "hpgrem-checkpoint"
VERSION = 1
MANIFEST = "manifest.json"
MANIFEST_LIMIT = 64 << 20  # bytes: a manifest is read whole, so its size is bounded first
DTYPES = ("float32", "float64")
_STEP_DIR = re.compile(r"step-(\d{8})")
_SHARD = re.compile(r"rank-(\d{5})\.npz")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_LAYOUT_KEYS = ("dp", "tp", "pp", "zero")
_MODEL_KEYS = ("n_layer", "n_head", "d_model", "seq_len", "vocab")


class CheckpointError(UsageError):
    """A checkpoint that cannot be written or used (one line for the user, exit status 2)."""


@dataclass(frozen=True, slots=True)
class TensorEntry:
    """One tensor of a checkpoint: its shape, dtype and the shard file holding it."""

    shape: tuple[int, ...]
    dtype: str
    file: str


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One shard file: its size in bytes and SHA-256 (hex)."""

    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a checkpoint holds; `model` and `layout` are the configuration's keys."""

    step: int
    seed: int
    data: str | None
    dtype: str
    model: dict[str, int]
    layout: dict[str, int]
    tensors: dict[str, TensorEntry]
    files: dict[str, FileEntry]

    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "version": VERSION, "step": self.step, "seed": self.seed, "data": self.data,
            "dtype": self.dtype, "model": self.model, "layout": self.layout,
            "tensors": {n: {"shape": list(t.shape), "dtype": t.dtype, "file": t.file} for n, t in self.tensors.items()},
            "files": {n: {"bytes": f.bytes, "sha256": f.sha256} for n, f in self.files.items()},
        }, indent=1)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A complete checkpoint read back: its folder, manifest and every tensor by name."""

    path: str
    manifest: Manifest
    values: dict[str, np.ndarray]


def step_dir(root: str, step: int) -> str:
    """The folder of step `step`'s checkpoint under `root`."""
    return os.path.join(root, f"step-{step:08d}")


def shard_name(rank: int) -> str:
    return f"rank-{rank:05d}.npz"


def owners(names: list[str], ranks: int) -> dict[str, int]:
    """Which rank writes each tensor: the i-th name, rank i mod `ranks`."""
    return {name: i % ranks for i, name in enumerate(names)}


# -- writing ---------------------------------------------------------------------------------


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes) -> None:
    """`data` at `path`, whole or not at all: a temporary file in the same folder, fsync'd,
    renamed over `path`, then the folder fsync'd so that the rename itself is durable."""
    folder = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    _fsync_dir(folder)


def write_shard(folder: str, rank: int, values: dict[str, np.ndarray]) -> tuple[str, FileEntry]:
    """Rank `rank`'s tensors as its shard file in `folder` (atomically); its name and entry."""
    buffer = io.BytesIO()
    np.savez(buffer, **values)
    data = buffer.getvalue()
    name = shard_name(rank)
    write_atomically(os.path.join(folder, name), data)
    return name, FileEntry(len(data), hashlib.sha256(data).hexdigest())


def write_manifest(folder: str, manifest: Manifest) -> None:
    """The manifest, last: from now on the checkpoint is complete."""
    write_atomically(os.path.join(folder, MANIFEST), manifest.to_json().encode("utf-8"))
    _fsync_dir(os.path.dirname(os.path.abspath(folder)))


def prune(root: str, keep: int, newest: int) -> None:
    """Remove the checkpoints under `root` older than the `keep` newest complete ones, and any
    incomplete one older than step `newest` (a write that never finished)."""
    complete = []
    for step, path in reversed(_step_folders(root)):
        if step > newest:
            continue
        if os.path.exists(os.path.join(path, MANIFEST)):
            complete.append(path)
            if len(complete) > keep:
                shutil.rmtree(path, ignore_errors=True)
        elif step < newest:
            shutil.rmtree(path, ignore_errors=True)


@dataclass(slots=True)
class _Pending:
    """A checkpoint being written: its step, folder, the manifest's body, and the shards done."""

    step: int
    folder: str
    tensors: dict[str, TensorEntry]
    files: dict[str, FileEntry] = field(default_factory=dict)
    thread: threading.Thread | None = None
    error: BaseException | None = None


class Writer:
    """Writes the checkpoints of one run: `save(step, copies)` after a step, with `copies`
    (local rank -> that rank's full state by name); `ranks` in all, `comm` under MPI (each
    rank writes its own shard, rank 0 the manifest). `meta` gives the manifest's seed, data,
    dtype, model and layout. With `asynchronous`, the shards are written by a thread from
    copies taken now; `poll()` after each step completes a finished one."""

    def __init__(self, root: str, keep: int, ranks: int, meta: dict, *, comm=None, asynchronous: bool = False,
                 before_write: Callable[[int], None] | None = None):
        self.root, self.keep, self.ranks, self.meta = root, keep, ranks, meta
        self.comm = comm
        self.asynchronous = asynchronous
        self.before_write = before_write  # tests: runs in the writer before its shards (a delay, a crash)
        self.pending: _Pending | None = None
        self.completed: list[int] = []
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            raise CheckpointError(f"{root}: cannot create the checkpoint folder: {e.strerror or e}") from None

    def save(self, step: int, states: dict[int, dict[str, np.ndarray]]) -> None:
        """Checkpoint step `step` from each local rank's state (name -> array, full tensors)."""
        self.wait()
        names = list(next(iter(states.values())))
        owner = owners(names, self.ranks)
        some = next(iter(states.values()))
        tensors = {n: TensorEntry(tuple(int(d) for d in some[n].shape), str(some[n].dtype), shard_name(owner[n]))
                   for n in names}
        # Copies now: the next step's optimizer update must not reach what is written.
        shards = {r: {n: np.array(v[n], copy=True) for n in names if owner[n] == r} for r, v in states.items()}
        folder = step_dir(self.root, step)
        os.makedirs(folder, exist_ok=True)
        pending = _Pending(step, folder, tensors)
        if self.asynchronous:
            pending.thread = threading.Thread(target=self._write, args=(pending, shards), daemon=True,
                                              name=f"checkpoint-{step}")
            self.pending = pending
            pending.thread.start()
        else:
            self._write(pending, shards)
            self.pending = pending
            self._complete()

    def _write(self, pending: _Pending, shards: dict[int, dict[str, np.ndarray]]) -> None:
        try:
            if self.before_write is not None:
                self.before_write(pending.step)
            for rank, values in shards.items():
                name, entry = write_shard(pending.folder, rank, values)
                pending.files[name] = entry
        except BaseException as e:  # reported by the main thread, which owns the run
            pending.error = e

    def poll(self) -> None:
        """After a step: complete an asynchronous checkpoint whose shards are all written (under
        MPI every rank must call this at the same points: the ranks agree by a reduction)."""
        if self.pending is None:
            return
        done = self.pending.thread is None or not self.pending.thread.is_alive()
        if self.comm is not None:
            from mpi4py import MPI
            done = bool(self.comm.allreduce(int(done), op=MPI.MIN))
        if done:
            self._complete()

    def wait(self) -> None:
        """Complete the checkpoint being written, waiting for its thread."""
        if self.pending is None:
            return
        if self.pending.thread is not None:
            self.pending.thread.join()
        self._complete()

    def _complete(self) -> None:
        pending, self.pending = self.pending, None
        e = pending.error
        error = None if e is None else \
            f"{pending.folder}: cannot write the checkpoint: {getattr(e, 'strerror', None) or e}"
        files = pending.files
        if self.comm is not None:  # every rank learns of any rank's failure: none waits for it
            parts = self.comm.allgather((files, error))
            error = next((failed for _, failed in parts if failed), None)
            files = {k: v for part, _ in parts for k, v in part.items()}
        if error is not None:
            raise CheckpointError(error)
        if self.comm is not None and self.comm.Get_rank() != 0:
            self.comm.barrier()
            self.completed.append(pending.step)
            return
        m = self.meta
        manifest = Manifest(pending.step, m["seed"], m["data"], m["dtype"], m["model"], m["layout"],
                            pending.tensors, dict(sorted(files.items())))
        try:
            write_manifest(pending.folder, manifest)
            prune(self.root, self.keep, pending.step)
        except OSError as e:
            raise CheckpointError(f"{pending.folder}: cannot write the checkpoint: {e.strerror or e}") from None
        finally:
            if self.comm is not None:
                self.comm.barrier()
        self.completed.append(pending.step)


# -- reading ---------------------------------------------------------------------------------


class Invalid(Exception):
    """Why a checkpoint folder is not a complete, intact checkpoint."""


def _step_folders(root: str) -> list[tuple[int, str]]:
    """(step, folder) of every step-NNNNNNNN folder under `root`, oldest first."""
    try:
        entries = os.listdir(root)
    except OSError:
        return []
    found = [(int(m.group(1)), os.path.join(root, e)) for e in entries if (m := _STEP_DIR.fullmatch(e))]
    return sorted(p for p in found if os.path.isdir(p[1]))


def _int(value, what: str, least: int = 0) -> int:
    if type(value) is not int or value < least:
        raise Invalid(f"{what} must be an integer >= {least}, got {value!r}")
    return value


def parse_manifest(text: bytes) -> Manifest:
    """The manifest in `text`, checked field by field (it is untrusted input); Invalid if not."""
    if len(text) > MANIFEST_LIMIT:
        raise Invalid(f"{MANIFEST} is larger than {MANIFEST_LIMIT >> 20} MiB")
    try:
        body = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Invalid(f"{MANIFEST} is not JSON: {e}") from None
    except RecursionError:
        raise Invalid(f"{MANIFEST} nests too deeply") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise Invalid(f"{MANIFEST} is not an {FORMAT} manifest")
    if body.get("version") != VERSION:
        raise Invalid(f"{MANIFEST} has version {body.get('version')!r}; this hpgrem reads version {VERSION}")
    step, seed = _int(body.get("step"), "step"), _int(body.get("seed"), "seed")
    data = body.get("data")
    if data is not None and not isinstance(data, str):
        raise Invalid("data must be a file name or null")
    dtype = body.get("dtype")
    if dtype not in DTYPES:
        raise Invalid(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    sections = {}
    for key, names in (("model", _MODEL_KEYS), ("layout", _LAYOUT_KEYS)):
        section = body.get(key)
        if not isinstance(section, dict) or set(section) != set(names):
            raise Invalid(f"{key} must hold exactly {', '.join(names)}")
        sections[key] = {n: _int(section[n], f"{key}.{n}") for n in names}
    files_body, tensors_body = body.get("files"), body.get("tensors")
    if not isinstance(files_body, dict) or not isinstance(tensors_body, dict) or not tensors_body:
        raise Invalid("files and tensors must be non-empty objects")
    files = {}
    for name, entry in files_body.items():
        if not _SHARD.fullmatch(name):  # only rank-RRRRR.npz: no path leaves the folder
            raise Invalid(f"file name {name!r} is not a shard's (rank-RRRRR.npz)")
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) \
                or not _SHA256.fullmatch(entry["sha256"]):
            raise Invalid(f"file {name}: sha256 must be 64 lower-case hex digits")
        files[name] = FileEntry(_int(entry.get("bytes"), f"file {name}: bytes"), entry["sha256"])
    tensors = {}
    for name, entry in tensors_body.items():
        if not isinstance(entry, dict):
            raise Invalid(f"tensor {name!r} must be an object")
        shape = entry.get("shape")
        if not isinstance(shape, list) or len(shape) > 8:
            raise Invalid(f"tensor {name!r}: shape must be a list of at most 8 sizes")
        shape = tuple(_int(d, f"tensor {name!r}: a size") for d in shape)
        if entry.get("dtype") != dtype:
            raise Invalid(f"tensor {name!r}: dtype must be the checkpoint's {dtype}, got {entry.get('dtype')!r}")
        if entry.get("file") not in files:
            raise Invalid(f"tensor {name!r}: file {entry.get('file')!r} is not among the manifest's files")
        tensors[name] = TensorEntry(shape, dtype, entry["file"])
    return Manifest(step, seed, data, dtype, sections["model"], sections["layout"], tensors, files)


def _read_limited(path: str, limit: int) -> bytes:
    """At most `limit` + 1 bytes of `path` (a manifest's claim of a size is not trusted)."""
    with open(path, "rb") as f:
        return f.read(limit + 1)


def read_checkpoint(folder: str) -> Checkpoint:
    """The checkpoint in `folder`, every file's size and checksum checked before it is parsed;
    Invalid naming what is wrong."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.isfile(path):
        raise Invalid(f"no {MANIFEST} (the checkpoint did not complete)")
    try:
        manifest = parse_manifest(_read_limited(path, MANIFEST_LIMIT))
    except OSError as e:
        raise Invalid(f"cannot read {MANIFEST}: {e.strerror or e}") from None
    values: dict[str, np.ndarray] = {}
    real = os.path.realpath(folder)
    for name, entry in manifest.files.items():
        shard = os.path.join(folder, name)
        if os.path.dirname(os.path.realpath(shard)) != real:
            raise Invalid(f"{name} lies outside the checkpoint's folder")
        try:
            data = _read_limited(shard, entry.bytes)
        except FileNotFoundError:
            raise Invalid(f"{name} is missing") from None
        except OSError as e:
            raise Invalid(f"cannot read {name}: {e.strerror or e}") from None
        if len(data) != entry.bytes:
            raise Invalid(f"{name} has {len(data)}{'+' if len(data) > entry.bytes else ''} bytes, the manifest "
                          f"says {entry.bytes} (truncated or changed)")
        if hashlib.sha256(data).hexdigest() != entry.sha256:
            raise Invalid(f"{name} does not match its SHA-256 checksum (corrupted)")
        try:
            values.update(_read_shard(data, name, {n: t for n, t in manifest.tensors.items() if t.file == name}))
        except Invalid:
            raise
        except Exception as e:  # a file whose checksum matches a manifest that lies about it
            raise Invalid(f"{name} is not a readable .npz: {e}") from None
    return Checkpoint(folder, manifest, values)


def _read_shard(data: bytes, name: str, tensors: dict[str, TensorEntry]) -> dict[str, np.ndarray]:
    """The tensors of one shard file. Each array's header is read first: its members must be
    stored uncompressed and hold what the manifest says, so an array is only allocated when
    the file really holds its bytes (no zip bomb, no header claiming a huge shape)."""
    out = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for tensor, t in tensors.items():
            try:
                info = z.getinfo(tensor + ".npy")
            except KeyError:
                raise Invalid(f"{name} lacks the tensor {tensor!r}") from None
            if info.compress_type != zipfile.ZIP_STORED:
                raise Invalid(f"{name}: tensor {tensor!r} is compressed (hpgrem writes them stored)")
            with z.open(info) as f:
                version = np.lib.format.read_magic(f)
                read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                    else np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(f)
                if shape != t.shape or str(dtype) != t.dtype:
                    raise Invalid(f"{name}: tensor {tensor!r} is {dtype}{list(shape)}, the manifest says "
                                  f"{t.dtype}{list(t.shape)}")
                if math.prod(shape) * dtype.itemsize > info.file_size:
                    raise Invalid(f"{name}: tensor {tensor!r} claims more bytes than its file holds")
            with z.open(info) as f:
                out[tensor] = np.lib.format.read_array(f, allow_pickle=False)
    return out


def latest(root: str, report: Callable[[str], None] | None = None) -> Checkpoint | None:
    """The newest complete, intact checkpoint under `root`, or None; each newer one that fails
    its checks is skipped, and `report` (stderr by default) told which and why."""
    say = report or (lambda text: print(text, file=sys.stderr, flush=True))
    for _, folder in reversed(_step_folders(root)):
        try:
            return read_checkpoint(folder)
        except Invalid as e:
            say(f"hpgrem: checkpoint {folder} skipped: {e}")
    return None


__all__ = ["Checkpoint", "CheckpointError", "Invalid", "Manifest", "Writer", "latest", "owners",
           "read_checkpoint", "step_dir", "write_atomically"]
