"""Which part of each GPT-2-named tensor a rank holds under a layout, and back.

Tensor parallelism (Megatron) splits the attention's and the MLP's linear layers: a
*column-parallel* weight keeps its output columns of the rank's heads (c_attn: q, k and v of the
same heads, so the [C, 3C] weight is split as [C, 3, tp, C/tp]) or of its slice of the MLP
(c_fc); a *row-parallel* weight (attn.c_proj, mlp.c_proj) keeps the matching input rows. Their
biases follow the columns (c_attn, c_fc) or are replicated (c_proj: added once, after the
all-reduce). LayerNorms and embeddings are replicated. AdamW's states "m.<p>", "v.<p>" are split
as their parameter.

ZeRO then splits a tensor-parallel shard among the data-parallel ranks: flattened, padded with
zeros to a multiple of dp, rank dp = j keeping the j-th of dp equal chunks (the optimizer states
from stage 1, the parameters too at stage 3).

`shard(name, value, layout, rank)` is the rank's part; `unshard(name, parts, layout)` the whole
from the parts of every rank (indexed by rank). Checkpoints and resume under another layout use
both.
"""

from __future__ import annotations

import math

import numpy as np

from backend.layout import Layout

COLUMN = {"attn.c_attn.weight": 3, "attn.c_attn.bias": 3, "mlp.c_fc.weight": 1, "mlp.c_fc.bias": 1}
"""Column-parallel tensors: how many blocks (q|k|v) their last dimension holds, each split."""
ROW = ("attn.c_proj.weight", "mlp.c_proj.weight")
"""Row-parallel weights: split along dimension 0."""


def parameter_of(name: str) -> str:
    """The parameter a tensor belongs to ("m.h.0.ln_1.weight" -> "h.0.ln_1.weight")."""
    return name[2:] if name.startswith(("m.", "v.")) else name


def tp_axis(name: str) -> tuple[int, int] | None:
    """(axis, blocks) of a tensor split by tensor parallelism, None for a replicated one."""
    param = parameter_of(name)
    if not param.startswith("h."):
        return None
    suffix = param.split(".", 2)[2]
    if suffix in COLUMN:
        return -1, COLUMN[suffix]
    if suffix in ROW:
        return 0, 1
    return None


def zero_sharded(name: str, layout: Layout) -> bool:
    """Whether ZeRO splits this tensor among the dp ranks: optimizer states from stage 1,
    parameters at stage 3."""
    if layout.zero == 0 or layout.dp == 1:
        return False
    return layout.zero == 3 or name != parameter_of(name)


def tp_shard(name: str, value: np.ndarray, tp: int, k: int) -> np.ndarray:
    """Tensor-parallel rank k's part of `value`."""
    split = tp_axis(name)
    if split is None or tp == 1:
        return value
    axis, blocks = split
    moved = np.moveaxis(value, axis, -1)
    n = moved.shape[-1]
    if n % (blocks * tp):
        raise ValueError(f"{name}: {n} columns do not split among tp = {tp}")
    part = moved.reshape(*moved.shape[:-1], blocks, tp, n // (blocks * tp))[..., k, :]
    return np.ascontiguousarray(np.moveaxis(part.reshape(*moved.shape[:-1], n // tp), -1, axis))


def tp_unshard(name: str, parts: list[np.ndarray]) -> np.ndarray:
    """The whole tensor from the parts of tensor-parallel ranks 0..tp-1."""
    split = tp_axis(name)
    tp = len(parts)
    if split is None or tp == 1:
        return parts[0]
    axis, blocks = split
    moved = [np.moveaxis(p, axis, -1) for p in parts]
    m = moved[0].shape[-1]
    stacked = np.stack([p.reshape(*p.shape[:-1], blocks, m // blocks) for p in moved], axis=-2)
    whole = stacked.reshape(*moved[0].shape[:-1], m * tp)
    return np.ascontiguousarray(np.moveaxis(whole, -1, axis))


def chunk(size: int, ranks: int) -> int:
    """The elements of each rank's chunk of a flat tensor of `size` padded for `ranks`."""
    return -(-size // ranks)


def zero_shard(value: np.ndarray, dp: int, j: int) -> np.ndarray:
    """Data-parallel rank j's chunk of `value` flattened (zero-padded to dp equal chunks)."""
    flat = value.reshape(-1)
    s = chunk(flat.size, dp)
    out = np.zeros(s, value.dtype)
    part = flat[j * s:(j + 1) * s]
    out[:part.size] = part
    return out


def zero_unshard(parts: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """The tensor of `shape` from the chunks of data-parallel ranks 0..dp-1."""
    return np.concatenate(parts)[:math.prod(shape)].reshape(shape)


def shard(name: str, value: np.ndarray, layout: Layout, rank: int) -> np.ndarray:
    """Rank `rank`'s part of the whole tensor `name` under `layout`."""
    c = layout.coordinates(rank)
    part = tp_shard(name, np.asarray(value), layout.tp, c.tp)
    return zero_shard(part, layout.dp, c.dp) if zero_sharded(name, layout) else part


def unshard(name: str, parts: dict[int, np.ndarray], shape: tuple[int, ...], layout: Layout,
            pp: int = 0) -> np.ndarray:
    """The whole tensor `name` of `shape` from the parts of the ranks (rank -> part) of
    pipeline stage `pp` that holds it."""
    tp_parts = []
    for k in range(layout.tp):
        local = tp_shard(name, np.zeros(shape, np.int8), layout.tp, k).shape
        if zero_sharded(name, layout):
            chunks = [parts[layout.rank(j, k, pp)] for j in range(layout.dp)]
            tp_parts.append(zero_unshard(chunks, local))
        else:
            tp_parts.append(parts[layout.rank(0, k, pp)])
    return tp_unshard(name, tp_parts)


__all__ = ["chunk", "parameter_of", "shard", "tp_axis", "tp_shard", "tp_unshard", "unshard",
           "zero_shard", "zero_sharded", "zero_unshard"]
