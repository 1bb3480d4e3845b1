"""The tensor dialect's kernels: numpy code for every op of hpgrem/ir/tensor/dialect.py's `OPS`
(the collectives excepted: the runtime runs those), with the FLOPs each call does (the runtime's
virtual time), and `evaluate`, the sequential reference evaluator of a graph.

`KERNELS[op].run(attrs, *inputs)` takes the op's complete attributes (`op_attrs(op)`: defaults
filled in) and numpy arrays, and returns an array, or a tuple of arrays for a tuple-valued op,
in the inputs' float dtype (float32 or float64). It never writes into its inputs, and no one may
write into its results: they are new arrays, but a reshape's is a view of its input.
`KERNELS[op].flops(attrs, input_shapes)` counts multiply-adds as two FLOPs and elementwise work
as one per element and operation, roughly: a relative cost, not a measurement.

Written for speed on a CPU: matrix products on 2-D views (one BLAS call), attention batched over
batch and heads with no Python loop, softmax and LayerNorm in place on fresh buffers, and the
backward of attention and cross-entropy reusing the probabilities their forward kept. A process
that trains (`hpgrem train`, the benchmark) asks the C library's allocator to keep freed memory
for reuse (`retain_freed_memory`): a step allocates and frees the same large buffers again and
again, and glibc's default gives each one back to the system and faults it in anew (a small
model's step took 0.17 s of CPU so, 0.12 s with the memory kept). Not at import: the setting is
for the whole process, whose memory then never shrinks (a test process that had imported this
module grew to 8 GB and slowed every later test).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hpgrem.ir.tensor import Get, Input, Param, State, graph_of
from hpgrem.ir.tensor.dialect import op_attrs
from pam.tensor import offload

Shapes = list[tuple[int, ...]]

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters


def retain_freed_memory() -> bool:
    """Make glibc's malloc serve large blocks from its heap and keep freed memory (no mmap per
    block, no trimming): True if the C library took the settings (False elsewhere: no glibc)."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return all(mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, 1 << 30), (_M_TRIM_THRESHOLD, (1 << 31) - 1), (_M_TOP_PAD, 64 << 20)))


COLLECTIVES = frozenset({"allreduce", "reduce_scatter", "all_gather"})
"""Ops the runtime carries out itself (between ranks), not a kernel."""


@dataclass(frozen=True, slots=True)
class Kernel:
    """What computes one op: `run(attrs, *inputs)` and `flops(attrs, input_shapes)`."""

    run: Callable[..., np.ndarray | tuple[np.ndarray, ...]]
    flops: Callable[[dict, Shapes], int]


def _size(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _elements(per: int) -> Callable[[dict, Shapes], int]:
    return lambda attrs, shapes: per * _size(shapes[0])


# ---------------------------------------------------------------------------------------------
# Elementwise, shapes, products


def _add(attrs, a, b):
    return a + b


def _sum_to(attrs, g):
    shape = tuple(attrs["shape"])
    lead = g.ndim - len(shape)
    out = g.sum(axis=tuple(range(lead))) if lead else g
    ones = tuple(i for i, d in enumerate(shape) if d == 1 and out.shape[i] != 1)
    if ones:
        out = out.sum(axis=ones, keepdims=True)
    return np.ascontiguousarray(out.reshape(shape))


def _reshape(attrs, x):
    return x.reshape(tuple(attrs["shape"]))


def _fill(attrs):
    return np.full(tuple(attrs["shape"]), attrs["value"], dtype=attrs["dtype"])


def _matmul(attrs, a, b):
    if attrs["transpose_a"]:
        return a.reshape(-1, a.shape[-1]).T @ b.reshape(-1, b.shape[-1])
    rhs = b.T if attrs["transpose_b"] else b
    return (a.reshape(-1, a.shape[-1]) @ rhs).reshape(*a.shape[:-1], rhs.shape[1])


def _matmul_flops(attrs, shapes: Shapes) -> int:
    a, b = shapes
    if attrs["transpose_a"]:
        return 2 * _size(a) * b[-1]
    return 2 * _size(a) * (b[0] if attrs["transpose_b"] else b[1])


def _linear(attrs, x, w, b):
    y = x.reshape(-1, x.shape[-1]) @ w
    y += b
    return y.reshape(*x.shape[:-1], w.shape[1])


def _linear_flops(attrs, shapes: Shapes) -> int:
    x, w, _ = shapes
    return 2 * _size(x) * w[1] + _size(x) // x[-1] * w[1]


# ---------------------------------------------------------------------------------------------
# LayerNorm


def _normalized(x, eps: float):
    """(x - mean) * rstd and rstd [..., 1], over the last dim (the biased variance, as PyTorch)."""
    xhat = x - x.mean(axis=-1, keepdims=True)
    rstd = np.einsum("...i,...i->...", xhat, xhat)[..., None]
    rstd *= 1.0 / x.shape[-1]
    rstd += eps
    np.sqrt(rstd, out=rstd)
    np.divide(1.0, rstd, out=rstd)
    xhat *= rstd
    return xhat, rstd


def _layernorm(attrs, x, w, b):
    y, _ = _normalized(x, attrs["eps"])
    y *= w
    y += b
    return y


def _layernorm_grad(attrs, dy, x, w):
    xhat, rstd = _normalized(x, attrs["eps"])
    c = x.shape[-1]
    dy2, xhat2 = dy.reshape(-1, c), xhat.reshape(-1, c)
    db = dy2.sum(axis=0)
    dw = np.einsum("nc,nc->c", dy2, xhat2)
    g = dy * w
    # dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    dot = np.einsum("...i,...i->...", g, xhat)[..., None]
    dot *= 1.0 / c
    mean = g.mean(axis=-1, keepdims=True)
    xhat *= dot
    g -= mean
    g -= xhat
    g *= rstd
    return g, dw, db


# ---------------------------------------------------------------------------------------------
# GELU (tanh approximation) and softmax

_GELU_S = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


def _gelu(attrs, x):
    """(GELU(x), t) with t = tanh(s (x + c x^3)) = tanh(x (s + s c x^2)), kept for the backward."""
    t = x * x
    t *= _GELU_S * _GELU_C
    t += _GELU_S
    t *= x
    np.tanh(t, out=t)
    y = t + 1.0
    y *= x
    y *= 0.5
    return y, t


def _gelu_slope(x, t):
    # d/dx 0.5 x (1 + t) = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 c x^2)
    a = x * x
    a *= 1.5 * _GELU_S * _GELU_C
    a += 0.5 * _GELU_S
    a *= x
    sq = t * t
    np.subtract(1.0, sq, out=sq)
    a *= sq
    np.multiply(t, 0.5, out=sq)
    a += sq
    a += 0.5
    return a


def _gelu_grad(attrs, dy, x, t):
    a = _gelu_slope(x, t)
    a *= dy
    return a


def _gelu_grad_into(dy, x, t):
    """`gelu_grad` written into `dy` (the same bits: the product is the same either way round)."""
    return np.multiply(dy, _gelu_slope(x, t), out=dy)


def _add_into(total, contribution):
    """`add` written into `total` (the same bits)."""
    return np.add(total, contribution, out=total)


INTO = {"add": _add_into, "gelu_grad": _gelu_grad_into}
"""Kernels that can write their result into their first input's array, when that input dies
at them (pam/tensor/runtime.py decides): a gradient's running sum, the GELU's incoming gradient."""


def _softmax_in_place(x):
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def _softmax(attrs, x):
    return _softmax_in_place(x.copy())


def _softmax_grad(attrs, dy, y):
    g = dy - np.sum(dy * y, axis=-1, keepdims=True)
    g *= y
    return g


# ---------------------------------------------------------------------------------------------
# Causal multi-head attention

_MASKS: dict[tuple[int, str], np.ndarray] = {}


def _causal_mask(t: int, dtype) -> np.ndarray:
    """[T, T]: 0 on and below the diagonal, -inf above (added to the scores)."""
    key = (t, np.dtype(dtype).name)
    mask = _MASKS.get(key)
    if mask is None:
        mask = _MASKS[key] = np.triu(np.full((t, t), -np.inf, dtype=dtype), k=1)
    return mask


def _split(qkv, n_head: int):
    """qkv [B, T, 3C] as [B, T, 3, H, D] (a view)."""
    b, t, c3 = qkv.shape
    return qkv.reshape(b, t, 3, n_head, c3 // 3 // n_head)


def _transposed(x, axes) -> np.ndarray:
    out = np.empty(tuple(x.shape[a] for a in axes), dtype=x.dtype)
    np.copyto(out, x.transpose(axes))
    return out


# numpy's stacked matmul is fast when its second operand is contiguous (a transposed first
# operand is fine): q @ k^T takes k^T as a contiguous copy, not a view.


def _attention(attrs, qkv):
    h = attrs["n_head"]
    b, t, c3 = qkv.shape
    parts = _split(qkv, h)
    q = _transposed(parts[:, :, 0], (0, 2, 1, 3))
    q *= 1.0 / math.sqrt(c3 // 3 // h)  # on q: T / D times fewer elements than on the scores
    scores = q @ _transposed(parts[:, :, 1], (0, 2, 3, 1))
    scores += _causal_mask(t, qkv.dtype)
    probs = _softmax_in_place(scores)
    y = np.matmul(probs, _transposed(parts[:, :, 2], (0, 2, 1, 3)), out=q)
    return _transposed(y, (0, 2, 1, 3)).reshape(b, t, c3 // 3), probs


def _attention_grad(attrs, dy, qkv, probs):
    h = attrs["n_head"]
    b, t, c3 = qkv.shape
    d = c3 // 3 // h
    parts = _split(qkv, h)
    dyh = _transposed(dy.reshape(b, t, h, d), (0, 2, 1, 3))
    out = np.empty((b, t, 3, h, d), dtype=qkv.dtype)
    dv = probs.transpose(0, 1, 3, 2) @ dyh
    dp = np.matmul(dyh, _transposed(parts[:, :, 2], (0, 2, 3, 1)))
    # the softmax's backward: ds = p * (dp - sum(dp * p)); masked entries have p = 0
    dot = np.einsum("bhij,bhij->bhi", dp, probs)
    dp -= dot[..., None]
    dp *= probs
    dp *= 1.0 / math.sqrt(d)
    dq = dp @ _transposed(parts[:, :, 1], (0, 2, 1, 3))
    dk = dp.transpose(0, 1, 3, 2) @ _transposed(parts[:, :, 0], (0, 2, 1, 3))
    for i, g in enumerate((dq, dk, dv)):
        np.copyto(out[:, :, i], g.transpose(0, 2, 1, 3))
    return out.reshape(b, t, c3)


def _attention_flops(attrs, shapes: Shapes) -> int:
    b, t, c3 = shapes[0]
    return 2 * 2 * b * t * t * (c3 // 3) + 5 * b * attrs["n_head"] * t * t


def _attention_grad_flops(attrs, shapes: Shapes) -> int:
    return 2 * _attention_flops(attrs, shapes[1:2])


# ---------------------------------------------------------------------------------------------
# Embedding and cross-entropy


def _embedding(attrs, tokens, table):
    return np.take(table, tokens, axis=0)


def _embedding_grad(attrs, dy, tokens):
    c = dy.shape[-1]
    out = np.zeros((attrs["vocab"], c), dtype=dy.dtype)
    np.add.at(out, tokens.reshape(-1), dy.reshape(-1, c))
    return out


def _cross_entropy(attrs, logits, targets):
    v = logits.shape[-1]
    flat = logits.reshape(-1, v)
    rows = np.arange(flat.shape[0])
    probs = flat - flat.max(axis=-1, keepdims=True)
    picked = probs[rows, targets.reshape(-1)]
    np.exp(probs, out=probs)
    total = probs.sum(axis=-1, keepdims=True)
    loss = np.mean(np.log(total[:, 0]) - picked)
    probs /= total
    return np.asarray(loss, dtype=logits.dtype), probs.reshape(logits.shape)


def _cross_entropy_grad(attrs, dloss, probs, targets):
    v = probs.shape[-1]
    g = probs.reshape(-1, v).copy()
    g[np.arange(g.shape[0]), targets.reshape(-1)] -= 1.0
    g *= dloss / g.shape[0]
    return g.reshape(probs.shape)


# ---------------------------------------------------------------------------------------------
# The optimizer: global norm, clipping, AdamW (as torch.optim.AdamW computes it)


def _global_norm(attrs, *grads):
    total = sum(float(np.vdot(g, g)) for g in grads)
    return np.asarray(math.sqrt(total), dtype=grads[0].dtype)


def _sum_squares(attrs, *xs):
    total = sum(float(np.vdot(x, x)) for x in xs)
    return np.asarray(total, dtype=xs[0].dtype)


def _sqrt(attrs, x):
    return np.sqrt(x)


def _shard(attrs, x, index):
    """Part `index` of x's dimension 0 split in `ranks` equal parts, zero-padded."""
    ranks = attrs["ranks"]
    s = -(-x.shape[0] // ranks)
    part = x[int(index) * s:(int(index) + 1) * s]
    if part.shape[0] == s:
        return part.copy()
    out = np.zeros((s, *x.shape[1:]), x.dtype)
    out[:part.shape[0]] = part
    return out


def _clip_scale(attrs, norm):
    clip = attrs["clip"]
    scale = 1.0 if clip <= 0 else min(clip / (float(norm) + 1e-6), 1.0)
    return np.asarray(scale, dtype=norm.dtype)


def _adamw(attrs, p, g, m, v, scale, lr, step):
    beta1, beta2, eps, decay = attrs["beta1"], attrs["beta2"], attrs["eps"], attrs["weight_decay"]
    lr, t = float(lr), int(step)
    g = g * scale
    new_m = g - m  # m + (1 - beta1) (g - m): torch's lerp
    new_m *= 1.0 - beta1
    new_m += m
    new_v = v * beta2
    g *= g
    g *= 1.0 - beta2
    new_v += g
    denom = np.sqrt(new_v, out=g)
    denom *= 1.0 / math.sqrt(1.0 - beta2 ** t)
    denom += eps
    update = np.divide(new_m, denom, out=denom)
    update *= lr / (1.0 - beta1 ** t)
    new_p = p * (1.0 - lr * decay) if decay else p.copy()
    new_p -= update
    return new_p, new_m, new_v


KERNELS: dict[str, Kernel] = {
    "embedding": Kernel(_embedding, lambda a, s: 0),
    "fill": Kernel(_fill, lambda a, s: 0),
    "add": Kernel(_add, lambda a, s: max(_size(s[0]), _size(s[1]))),
    "sum_to": Kernel(_sum_to, _elements(1)),
    "reshape": Kernel(_reshape, lambda a, s: 0),
    "matmul": Kernel(_matmul, _matmul_flops),
    "linear": Kernel(_linear, _linear_flops),
    "layernorm": Kernel(_layernorm, _elements(8)),
    "gelu": Kernel(_gelu, _elements(8)),
    "softmax": Kernel(_softmax, _elements(4)),
    "causal_attention": Kernel(_attention, _attention_flops),
    "cross_entropy": Kernel(_cross_entropy, _elements(4)),
    "embedding_grad": Kernel(_embedding_grad, lambda a, s: _size(s[0])),
    "layernorm_grad": Kernel(_layernorm_grad, _elements(16)),
    "gelu_grad": Kernel(_gelu_grad, _elements(11)),
    "softmax_grad": Kernel(_softmax_grad, _elements(4)),
    "causal_attention_grad": Kernel(_attention_grad, _attention_grad_flops),
    "cross_entropy_grad": Kernel(_cross_entropy_grad, lambda a, s: 2 * _size(s[1])),
    "global_norm": Kernel(_global_norm, lambda a, s: sum(2 * _size(x) for x in s)),
    "clip_scale": Kernel(_clip_scale, lambda a, s: 1),
    "sum_squares": Kernel(_sum_squares, lambda a, s: sum(2 * _size(x) for x in s)),
    "sqrt": Kernel(_sqrt, _elements(1)),
    "shard": Kernel(_shard, lambda a, s: 0),
    "parallel_copy": Kernel(lambda attrs, x: x, lambda a, s: 0),
    "evict": Kernel(offload.evict, lambda a, s: 0),
    "fetch": Kernel(offload.fetch, lambda a, s: 0),
    "adamw": Kernel(_adamw, lambda a, s: 14 * _size(s[0])),
}
"""The kernel of every op but the collectives."""


def evaluate(module, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the module's graph once, op after op: `values` holds every parameter, state and
    input by name; returns every value of the graph by name (a tuple-valued op's as a tuple).
    An `allreduce` is over a group of one rank here: its input unchanged."""
    graph = graph_of(module)
    env: dict[str, np.ndarray] = {}
    for v in graph.values:
        kind = type(v)
        if kind is Get:
            env[v.name] = env[v.source][v.index]
        elif kind is Param or kind is Input or kind is State:
            if v.name not in values:
                raise ValueError(f"no value given for {kind.__name__.lower()} {v.name!r}")
            env[v.name] = values[v.name]
        elif v.op == "allreduce":
            env[v.name] = env[v.inputs[0]]
        elif v.op in COLLECTIVES:
            raise ValueError(f"{v.op} {v.name!r} needs the runtime's ranks (evaluate runs one)")
        else:
            env[v.name] = KERNELS[v.op].run(op_attrs(v), *[env[n] for n in v.inputs])
    return env
