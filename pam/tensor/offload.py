"""The kernels of offloading: `evict` writes a value to the host store, `fetch` brings one back.

The host store is host memory (a numpy copy) or a file-backed store: a numpy memmap in a
temporary directory of this process, its file unlinked as soon as it is mapped (the mapping
keeps the data; nothing is left on disk when it is dropped). A value on the host is a numpy
array like any other, so the runtime's slots, the job's persistent values and checkpoints read
it unchanged; the memory accounting (pam/tensor/memory.py) counts it as host bytes. What is
offloaded, and where the fetches stand (ahead of use), is the lowering's choice
(hpgrem/passes/tensor/offload.py); when a fetch may run is the runtime's back-pressure
(pam/tensor/runtime.py: a device budget).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np

STORES = ("memory", "file")
TRANSFERS = frozenset({"evict", "fetch"})
"""The ops that move a value between the device and the host: the runtime charges their bytes
at a link's byte time, not FLOPs."""
_DIRECTORY: list[str] = []  # the file store's directory, made on first use


def _directory() -> str:
    if not _DIRECTORY:
        path = tempfile.mkdtemp(prefix="hpgrem-offload-")
        atexit.register(shutil.rmtree, path, True)
        _DIRECTORY.append(path)
    return _DIRECTORY[0]


def evict(attrs, x):
    """`x` written to the host store `attrs["store"]` ("memory" or "file")."""
    if attrs.get("store", "memory") == "memory":
        return np.array(x, copy=True)
    fd, path = tempfile.mkstemp(dir=_directory(), suffix=".bin")
    os.close(fd)
    try:
        host = np.memmap(path, dtype=x.dtype, mode="w+", shape=x.shape) if x.size else np.empty_like(x)
    finally:
        os.unlink(path)
    host[...] = x
    return host


def fetch(attrs, x):
    """A device copy of the host value `x`."""
    return np.array(x, copy=True)


__all__ = ["STORES", "TRANSFERS", "evict", "fetch"]
