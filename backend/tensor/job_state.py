"""A training job's model state as whole GPT-2-named tensors, and back into its ranks.

The state is every parameter and AdamW's states "m.<param>", "v.<param>". A rank may hold a
part of a tensor (tensor parallelism, ZeRO) or none of it (another pipeline stage):
`local_states` puts the parts together (the job's gathering, the layout's `unshard`), `restore`
gives each local rank its part again with `shard`, so a state saved under one (dp, tp, pp) is
restored under any other. Under pure data parallelism every rank holds whole tensors.
"""

from __future__ import annotations

import numpy as np

from backend.tensor.shards import shard


def state_shapes(param_shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The whole shape of every tensor of the state: the parameters, then "m.<p>", then "v.<p>"."""
    out = dict(param_shapes)
    for k in ("m", "v"):
        out.update({f"{k}.{name}": shape for name, shape in param_shapes.items()})
    return out


def _replicas(job) -> dict[int, dict[str, np.ndarray]]:
    """Each local rank's persistent tensors (rank -> name -> its part)."""
    return {pe.number: job.replica_of(pe.number).persistent for pe in job.local_pes}


def _sharded(layout) -> bool:
    return (layout.tp > 1 or layout.pp > 1 or layout.zero > 0)


def local_states(job, shapes: dict[str, tuple[int, ...]]) -> dict[int, dict[str, np.ndarray]]:
    """For each local rank, the whole state as that rank can give it: its own tensors where it
    holds whole copies (no copy is made), else the tensors put together from every rank's parts
    (the job's `parameters` and `optimizer_states`: under MPI every rank must call this)."""
    mine = _replicas(job)
    if not _sharded(job.layout):
        return {r: {n: values[n] for n in shapes} for r, values in mine.items()}
    whole = {**job.parameters(), **job.optimizer_states()}  # gathered from every rank's part
    return {r: whole for r in mine}


def restore(job, values: dict[str, np.ndarray]) -> None:
    """Every local rank's tensors from the whole `values` (each rank its part, of its dtype)."""
    for rank, persistent in _replicas(job).items():
        for name, old in persistent.items():
            if name not in values:
                continue
            part = shard(name, values[name], job.layout, rank) if _sharded(job.layout) else values[name]
            persistent[name] = np.array(part, dtype=old.dtype)
