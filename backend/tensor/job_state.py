"""A training job's model state as whole GPT-2-named tensors, and back into its ranks.

The state is every parameter and AdamW's states "m.<param>", "v.<param>". A rank may hold a
part of a tensor (tensor parallelism, ZeRO) or none of it (another pipeline stage):
`full_state` puts the parts together with the layout's `unshard` (under MPI after an allgather
of the parts), `restore` gives each local rank its part again with `shard`, so a state saved
under one (dp, tp, pp) is restored under any other. A job without a layout, or with a layout
that replicates everything (pure data parallelism), holds whole tensors on every rank.
"""

from __future__ import annotations

import numpy as np


def state_shapes(param_shapes: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """The whole shape of every tensor of the state: the parameters, then "m.<p>", then "v.<p>"."""
    out = dict(param_shapes)
    for k in ("m", "v"):
        out.update({f"{k}.{name}": shape for name, shape in param_shapes.items()})
    return out


def _replicas(job) -> dict[int, dict[str, np.ndarray]]:
    """Each local rank's persistent tensors (rank -> name -> its part)."""
    return {pe.number: job.runtime.replicas[pe.number].persistent for pe in job.local_pes}


def _sharded(layout) -> bool:
    return layout is not None and (layout.tp > 1 or layout.pp > 1 or layout.zero > 0)


def local_states(job, shapes: dict[str, tuple[int, ...]]) -> dict[int, dict[str, np.ndarray]]:
    """For each local rank, the whole state as that rank can give it: its own tensors where it
    holds whole copies (no copy is made), else the tensors put together from every rank's parts."""
    layout = getattr(job, "layout", None)
    mine = _replicas(job)
    if not _sharded(layout):
        return {r: {n: values[n] for n in shapes} for r, values in mine.items()}
    from backend.tensor.shards import unshard
    parts = mine
    if getattr(job, "comm", None) is not None:
        parts = {r: v for gathered in job.comm.allgather(mine) for r, v in gathered.items()}
    whole = {}
    for name, shape in shapes.items():
        holders = {r: v[name] for r, v in parts.items() if name in v}
        stage = layout.coordinates(min(holders)).pp
        whole[name] = unshard(name, holders, shape, layout, stage)
    return {r: whole for r in mine}


def restore(job, values: dict[str, np.ndarray]) -> None:
    """Every local rank's tensors from the whole `values` (each rank its part, of its dtype)."""
    layout = getattr(job, "layout", None)
    for rank, persistent in _replicas(job).items():
        for name, old in persistent.items():
            if name not in values:
                continue
            if _sharded(layout):
                from backend.tensor.shards import shard
                part = shard(name, values[name], layout, rank)
            else:
                part = values[name]
            persistent[name] = np.array(part, dtype=old.dtype)
