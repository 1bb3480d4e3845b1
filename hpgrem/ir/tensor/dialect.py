"""The tensor dialect's entry in the dialect table (hpgrem/ir/dialects.py): its operations with
their attributes and shape and dtype inference (`OPS`), the representation checks (names
defined once and used after their definition, known ops and attributes, updates of persistent
values) and the type check: every value's declared shape and dtype are what inference gives.

Shapes are tuples of ints; `()` is a scalar. Float ops take inputs of one float dtype
("float32" or "float64"); tokens and targets are "int64". The kernels that compute each op are
pam/tensor/kernels.py's `KERNELS` (the same names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from hpgrem.ir.core import Module
from hpgrem.ir.dialects import DialectSpec
from hpgrem.ir.tensor import DTYPES, TUPLE, Get, Graph, Input, Op, Param, State, AttrValue

Type = tuple[tuple[int, ...], str]
"""A value's type: (shape, dtype)."""
FLOATS = ("float32", "float64")


class ShapeError(ValueError):
    """An op applied to values of shapes or dtypes it does not take (the message says why)."""


@dataclass(frozen=True, slots=True)
class OpSig:
    """What an op takes and gives: `arity` inputs (None: one or more), its attributes with
    their defaults (None: required) and types, and `infer(attrs, input types)`, which returns
    the result's type, or a tuple of types for a tuple-valued op, or raises ShapeError."""

    arity: int | None
    infer: Callable[[dict[str, AttrValue], list[Type]], Type | tuple[Type, ...]]
    attrs: dict[str, tuple[type, AttrValue | None]] = field(default_factory=dict)
    tuple_valued: bool = False
    doc: str = ""


def _float(t: Type, what: str) -> str:
    if t[1] not in FLOATS:
        raise ShapeError(f"{what} must be float32 or float64, not {t[1]}")
    return t[1]


def _same_float(types: list[Type], names: str) -> str:
    dtypes = {t[1] for t in types}
    if len(dtypes) != 1 or next(iter(dtypes)) not in FLOATS:
        raise ShapeError(f"{names} must have one float dtype, not {', '.join(t[1] for t in types)}")
    return types[0][1]


def _rank(t: Type, least: int, what: str) -> tuple[int, ...]:
    if len(t[0]) < least:
        raise ShapeError(f"{what} needs at least {least} dimensions, not shape {list(t[0])}")
    return t[0]


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of two shapes (ShapeError if they do not broadcast)."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ShapeError(f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(reversed(out))


def _elementwise(attrs, ts: list[Type]) -> Type:
    return ts[0][0], _float(ts[0], "the input")


def _add(attrs, ts: list[Type]) -> Type:
    return broadcast(ts[0][0], ts[1][0]), _same_float(ts, "both operands")


def _sum_to(attrs, ts: list[Type]) -> Type:
    shape = tuple(attrs["shape"])
    if broadcast(shape, ts[0][0]) != ts[0][0]:
        raise ShapeError(f"shape {list(ts[0][0])} cannot be summed to {list(shape)}")
    return shape, _float(ts[0], "the input")


def _reshape(attrs, ts: list[Type]) -> Type:
    shape = tuple(attrs["shape"])
    if any(d < 0 for d in shape) or _size(shape) != _size(ts[0][0]):
        raise ShapeError(f"shape {list(ts[0][0])} cannot be reshaped to {list(shape)}")
    return shape, ts[0][1]


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _matmul(attrs, ts: list[Type]) -> Type:
    (a, _), (b, _) = ts
    dtype = _same_float(ts, "both operands")
    if attrs["transpose_a"]:
        # a [*L, K], b [*L, N] -> [K, N]: the leading dims of both are contracted (a weight's gradient)
        if attrs["transpose_b"]:
            raise ShapeError("transpose_a and transpose_b together are not supported")
        if len(a) < 2 or a[:-1] != b[:-1]:
            raise ShapeError(f"with transpose_a the operands' leading dims must agree: {list(a)} and {list(b)}")
        return (a[-1], b[-1]), dtype
    if len(a) < 1 or len(b) != 2:
        raise ShapeError(f"matmul takes a [..., K] and a 2-D b, not {list(a)} and {list(b)}")
    k, n = (b[1], b[0]) if attrs["transpose_b"] else b
    if a[-1] != k:
        raise ShapeError(f"inner dimensions differ: {list(a)} @ {list(b)}{'^T' if attrs['transpose_b'] else ''}")
    return (*a[:-1], n), dtype


def _linear(attrs, ts: list[Type]) -> Type:
    (x, _), (w, _), (b, _) = ts
    dtype = _same_float(ts, "x, weight and bias")
    if len(w) != 2 or len(x) < 1 or x[-1] != w[0] or b != (w[1],):
        raise ShapeError(f"linear takes x [..., K], weight [K, N], bias [N], not {list(x)}, {list(w)}, {list(b)}")
    return (*x[:-1], w[1]), dtype


def _layernorm(attrs, ts: list[Type]) -> Type:
    (x, _), (w, _), (b, _) = ts
    dtype = _same_float(ts, "x, weight and bias")
    if len(x) < 1 or w != (x[-1],) or b != (x[-1],):
        raise ShapeError(f"layernorm takes x [..., C], weight [C], bias [C], not {list(x)}, {list(w)}, {list(b)}")
    return x, dtype


def _layernorm_grad(attrs, ts: list[Type]) -> tuple[Type, ...]:
    (dy, _), (x, _), (w, _) = ts
    dtype = _same_float(ts, "dy, x and weight")
    if dy != x or w != (x[-1],):
        raise ShapeError(f"layernorm_grad takes dy and x of one shape and weight [C], "
                         f"not {list(dy)}, {list(x)}, {list(w)}")
    return (x, dtype), (w, dtype), (w, dtype)


def _grad_like(attrs, ts: list[Type]) -> Type:
    dtype = _same_float(ts, "the operands")
    if ts[0][0] != ts[1][0]:
        raise ShapeError(f"the gradient {list(ts[0][0])} and the value {list(ts[1][0])} differ in shape")
    return ts[0][0], dtype


def _gelu(attrs, ts: list[Type]) -> tuple[Type, ...]:
    t = (ts[0][0], _float(ts[0], "the input"))
    return t, t


def _gelu_grad(attrs, ts: list[Type]) -> Type:
    dtype = _same_float(ts, "dy, x and tanh")
    if not ts[0][0] == ts[1][0] == ts[2][0]:
        raise ShapeError(f"gelu_grad takes dy, x and tanh of one shape, not {', '.join(str(list(t[0])) for t in ts)}")
    return ts[0][0], dtype


def _heads(attrs, qkv: tuple[int, ...]) -> tuple[int, int, int]:
    if len(qkv) != 3 or qkv[2] % 3:
        raise ShapeError(f"causal attention takes qkv [B, T, 3C], not {list(qkv)}")
    b, t, c = qkv[0], qkv[1], qkv[2] // 3
    h = attrs["n_head"]
    if h < 1 or c % h:
        raise ShapeError(f"width {c} is not divisible by n_head {h}")
    return b, t, c


def _attention(attrs, ts: list[Type]) -> tuple[Type, ...]:
    dtype = _float(ts[0], "qkv")
    b, t, c = _heads(attrs, ts[0][0])
    return ((b, t, c), dtype), ((b, attrs["n_head"], t, t), dtype)


def _attention_grad(attrs, ts: list[Type]) -> Type:
    dtype = _same_float(ts, "dy, qkv and probs")
    b, t, c = _heads(attrs, ts[1][0])
    if ts[0][0] != (b, t, c) or ts[2][0] != (b, attrs["n_head"], t, t):
        raise ShapeError(f"causal_attention_grad: dy {list(ts[0][0])} or probs {list(ts[2][0])} "
                         f"do not fit qkv {list(ts[1][0])}")
    return ts[1][0], dtype


def _embedding(attrs, ts: list[Type]) -> Type:
    (tokens, tdt), (table, _) = ts
    if tdt != "int64":
        raise ShapeError(f"tokens must be int64, not {tdt}")
    if len(table) != 2:
        raise ShapeError(f"the embedding table must be 2-D, not {list(table)}")
    return (*tokens, table[1]), _float(ts[1], "the table")


def _embedding_grad(attrs, ts: list[Type]) -> Type:
    (dy, _), (tokens, tdt) = ts
    if tdt != "int64" or dy[:-1] != tokens:
        raise ShapeError(f"embedding_grad takes dy [..., C] and int64 tokens [...], "
                         f"not {list(dy)}, {tdt}{list(tokens)}")
    return (attrs["vocab"], dy[-1]), _float(ts[0], "dy")


def _cross_entropy(attrs, ts: list[Type]) -> tuple[Type, ...]:
    (logits, _), (targets, tdt) = ts
    dtype = _float(ts[0], "logits")
    if tdt != "int64" or logits[:-1] != targets or len(logits) < 2:
        raise ShapeError(f"cross_entropy takes logits [..., V] and int64 targets [...], "
                         f"not {list(logits)}, {tdt}{list(targets)}")
    return ((), dtype), (logits, dtype)


def _cross_entropy_grad(attrs, ts: list[Type]) -> Type:
    (dloss, _), (probs, _), (targets, tdt) = ts
    dtype = _same_float(ts[:2], "dloss and probs")
    if dloss != () or tdt != "int64" or probs[:-1] != targets:
        raise ShapeError("cross_entropy_grad takes a scalar dloss, probs [..., V] and int64 targets [...]")
    return probs, dtype


def _scalar(attrs, ts: list[Type]) -> Type:
    return (), _same_float(ts, "the inputs")


def _fill(attrs, ts: list[Type]) -> Type:
    if attrs["dtype"] not in FLOATS:
        raise ShapeError(f"fill makes float32 or float64, not {attrs['dtype']!r}")
    shape = tuple(attrs["shape"])
    if any(d < 0 for d in shape):
        raise ShapeError(f"a negative dimension in {list(shape)}")
    return shape, attrs["dtype"]


def _clip_scale(attrs, ts: list[Type]) -> Type:
    if ts[0][0] != ():
        raise ShapeError("clip_scale takes the scalar norm")
    return (), _float(ts[0], "the norm")


def _adamw(attrs, ts: list[Type]) -> tuple[Type, ...]:
    (p, _), (g, _), (m, _), (v, _), (scale, _), (lr, _), (step, sdt) = ts
    dtype = _same_float(ts[:6], "param, grad, m, v, scale and lr")
    if not p == g == m == v or scale != () or lr != () or step != () or sdt != "int64":
        raise ShapeError("adamw takes param, grad, m, v of one shape, scalar scale and lr, and the int64 step")
    return (p, dtype), (p, dtype), (p, dtype)


def _collective(attrs, ts: list[Type]) -> Type:
    if attrs["reduce"] not in ("sum", "mean"):
        raise ShapeError(f"reduce is \"sum\" or \"mean\", not {attrs['reduce']!r}")
    return ts[0][0], _float(ts[0], "a collective's operand")


def _parts(attrs, ts: list[Type]) -> tuple[int, ...]:
    shape = _rank(ts[0], 1, "the operand")
    if attrs["ranks"] < 1:
        raise ShapeError("ranks must be at least 1")
    return shape


def _reduce_scatter(attrs, ts: list[Type]) -> Type:
    shape = _parts(attrs, ts)
    if attrs["reduce"] not in ("sum", "mean"):
        raise ShapeError(f"reduce is \"sum\" or \"mean\", not {attrs['reduce']!r}")
    return (-(-shape[0] // attrs["ranks"]), *shape[1:]), _float(ts[0], "the operand")


def _all_gather(attrs, ts: list[Type]) -> Type:
    shape = _parts(attrs, ts)
    whole = shape[0] * attrs["ranks"]
    size = attrs["size"] or whole
    if not whole - shape[0] < size <= whole:
        raise ShapeError(f"size {size} does not fit {attrs['ranks']} parts of {shape[0]}")
    return (size, *shape[1:]), _float(ts[0], "the operand")


def _shard(attrs, ts: list[Type]) -> Type:
    shape = _parts(attrs, ts[:1])
    if ts[1] != ((), "int64"):
        raise ShapeError("shard takes the int64 scalar index of the rank's part")
    return (-(-shape[0] // attrs["ranks"]), *shape[1:]), _float(ts[0], "the operand")


_SHAPE = (tuple, None)
_GROUP = {"group": (str, ""), "bucket": (int, 0)}

OPS: dict[str, OpSig] = {
    # forward
    "embedding": OpSig(2, _embedding, doc="(tokens i64[...], table [V, C]) -> table[tokens]: [..., C]"),
    "fill": OpSig(0, _fill, {"shape": _SHAPE, "value": (float, None), "dtype": (str, None)},
                  doc="a new tensor of `shape` and `dtype`, every element `value`"),
    "add": OpSig(2, _add, doc="a + b, broadcast as NumPy does"),
    "sum_to": OpSig(1, _sum_to, {"shape": _SHAPE}, doc="the sum of a broadcast value back to `shape`"),
    "reshape": OpSig(1, _reshape, {"shape": _SHAPE}, doc="the same elements in `shape`"),
    "matmul": OpSig(2, _matmul, {"transpose_a": (bool, False), "transpose_b": (bool, False)},
                    doc="a [..., K] @ b [K, N] (b^T with transpose_b); with transpose_a, a [*L, K]^T @ b [*L, N] "
                        "-> [K, N] summed over the leading dims"),
    "linear": OpSig(3, _linear, doc="x [..., K] @ weight [K, N] + bias [N] (GPT-2's Conv1D layout)"),
    "layernorm": OpSig(3, _layernorm, {"eps": (float, 1e-5)}, doc="LayerNorm over the last dim"),
    "gelu": OpSig(1, _gelu, tuple_valued=True,
                  doc="x -> (GELU(x), tanh(sqrt(2/pi) (x + 0.044715 x^3))): the tanh approximation (GPT-2); "
                      "the tanh is kept for the backward"),
    "softmax": OpSig(1, _elementwise, doc="softmax over the last dim"),
    "causal_attention": OpSig(1, _attention, {"n_head": (int, None)}, tuple_valued=True,
                              doc="qkv [B, T, 3C] -> (y [B, T, C], probs [B, H, T, T]): fused causal "
                                  "multi-head attention; probs are kept for the backward"),
    "cross_entropy": OpSig(2, _cross_entropy, tuple_valued=True,
                           doc="(logits [..., V], targets i64[...]) -> (mean loss [], probs [..., V])"),
    # backward
    "embedding_grad": OpSig(2, _embedding_grad, {"vocab": (int, None)},
                            doc="(dy [..., C], tokens) -> [vocab, C], rows scatter-added"),
    "layernorm_grad": OpSig(3, _layernorm_grad, {"eps": (float, 1e-5)}, tuple_valued=True,
                            doc="(dy, x, weight) -> (dx, dweight, dbias)"),
    "gelu_grad": OpSig(3, _gelu_grad, doc="(dy, x, tanh) -> dx"),
    "softmax_grad": OpSig(2, _grad_like, doc="(dy, y) -> dx, y the softmax"),
    "causal_attention_grad": OpSig(3, _attention_grad, {"n_head": (int, None)},
                                   doc="(dy, qkv, probs) -> dqkv"),
    "cross_entropy_grad": OpSig(3, _cross_entropy_grad, doc="(dloss, probs, targets) -> dlogits"),
    # optimizer
    "global_norm": OpSig(None, _scalar, doc="sqrt of the sum of squares of all inputs"),
    "clip_scale": OpSig(1, _clip_scale, {"clip": (float, 1.0)},
                        doc="min(1, clip / (norm + 1e-6)); clip <= 0: 1 (no clipping)"),
    "adamw": OpSig(7, _adamw, {"beta1": (float, 0.9), "beta2": (float, 0.95), "eps": (float, 1e-8),
                               "weight_decay": (float, 0.0)}, tuple_valued=True,
                   doc="(param, grad, m, v, scale, lr, step) -> (param', m', v'): AdamW on grad * scale"),
    # collectives (inserted by the parallel passes; run by the runtime)
    "allreduce": OpSig(1, _collective, {**_GROUP, "reduce": (str, "mean")},
                       doc="the sum (reduce \"sum\") or mean (\"mean\") of the input over the ranks of `group`; "
                           "the ops of one `bucket` travel as one message"),
    "reduce_scatter": OpSig(1, _reduce_scatter, {**_GROUP, "ranks": (int, None), "reduce": (str, "sum")},
                            doc="the sum (or mean) over the group, each rank keeping its part of dimension 0 "
                                "(zero-padded to a multiple of ranks)"),
    "all_gather": OpSig(1, _all_gather, {**_GROUP, "ranks": (int, None), "size": (int, 0)},
                        doc="the ranks' parts concatenated along dimension 0, cut to `size` (0: all)"),
    "parallel_copy": OpSig(1, _elementwise, {"group": (str, "")},
                           doc="the input itself; its gradient is the sum over `group` (Megatron's f)"),
    # what the parallel passes compute locally
    "shard": OpSig(2, _shard, {"ranks": (int, None)},
                   doc="(x, index) -> part `index` of dimension 0 split in `ranks` (zero-padded)"),
    "sum_squares": OpSig(None, _scalar, doc="the sum of squares of all inputs"),
    "sqrt": OpSig(1, _elementwise, doc="the square root"),
    # offloading (inserted by tensor-offload; pam/tensor/offload.py)
    "evict": OpSig(1, _elementwise, {"store": (str, "memory")},
                   doc="the input written to the host store (\"memory\" or \"file\": a memmap)"),
    "fetch": OpSig(1, _elementwise, doc="a device copy of a value held on the host"),
}
"""Every tensor op: its inputs, attributes and inference."""


def op_attrs(op: Op) -> dict[str, AttrValue]:
    """An op's attributes with the defaults of those it leaves out (its op must be in OPS)."""
    sig = OPS[op.op]
    out = {k: default for k, (_, default) in sig.attrs.items()}
    out.update(op.attrs)
    return out


def infer(op: str, attrs: dict[str, AttrValue], types: list[Type]) -> Type | tuple[Type, ...]:
    """The result type of `op` on values of `types` (attrs complete); ShapeError if none."""
    sig = OPS[op]
    if sig.arity is not None and len(types) != sig.arity:
        raise ShapeError(f"{op} takes {sig.arity} inputs, not {len(types)}")
    if sig.arity is None and not types:
        raise ShapeError(f"{op} takes at least one input")
    return sig.infer(attrs, types)


def _attr_problem(op: Op) -> str | None:
    sig = OPS[op.op]
    keys = [k for k, _ in op.attrs]
    if len(set(keys)) != len(keys):
        return "an attribute given twice"
    for key, value in op.attrs:
        declared = sig.attrs.get(key)
        if declared is None:
            return f"{op.op} has no attribute {key!r} (its attributes: {', '.join(sig.attrs) or 'none'})"
        kind = declared[0]
        ok = type(value) is kind or kind is float and type(value) is int
        if kind is tuple:
            ok = type(value) is tuple and all(type(d) is int for d in value)
        if not ok:
            return f"attribute {key!r} of {op.op} must be {kind.__name__}, not {type(value).__name__}"
    missing = [k for k, (_, default) in sig.attrs.items() if default is None and k not in keys]
    if missing:
        return f"{op.op} needs the attribute {missing[0]!r}"
    return None


def graph_problems(graph: Graph, path: str) -> Iterator[str]:
    """Every problem of `graph` at JSON path `path`: names, references, ops, attributes, and
    types that inference does not give (each at the path of the field that is wrong)."""
    types: dict[str, Type] = {}
    tuples: dict[str, tuple[Type, ...]] = {}
    kinds: dict[str, type] = {}
    for i, v in enumerate(graph.values):
        p = f"{path}.values[{i}]"
        if v.name in kinds or v.name in tuples:
            yield f"at {p}.name: {v.name!r} is defined twice"
            continue
        declared: Type = (v.shape, v.dtype)
        if any(d < 0 for d in v.shape):
            yield f"at {p}.shape: a negative dimension"
            continue
        if type(v) in (Param, Input, State):
            if v.dtype not in DTYPES:
                yield f"at {p}.dtype: {v.dtype!r} is not a dtype ({', '.join(DTYPES)})"
                continue
            if type(v) is not Input and v.dtype not in FLOATS:
                yield f"at {p}.dtype: a {type(v).__name__.lower()} is float32 or float64"
                continue
            kinds[v.name], types[v.name] = type(v), declared
            continue
        if type(v) is Get:
            parts = tuples.get(v.source)
            if parts is None:
                yield f"at {p}.source: {v.source!r} is not a tuple-valued op defined before"
                continue
            if not 0 <= v.index < len(parts):
                yield f"at {p}.index: {v.source!r} has {len(parts)} components"
                continue
            found = parts[v.index]
        else:
            problem, found = _op_type(v, types, p)
            if problem is not None:
                yield problem
                continue
            if OPS[v.op].tuple_valued:
                tuples[v.name], kinds[v.name] = found, Op
                if declared != ((), TUPLE):
                    yield (f"at {p}.dtype: a tuple-valued op has dtype {TUPLE!r} and shape [], "
                           f"not {v.dtype} {list(v.shape)}")
                continue
        if found != declared:
            field = "shape" if found[0] != declared[0] else "dtype"
            yield f"at {p}.{field}: inferred {found[1]} {list(found[0])}, declared {declared[1]} {list(declared[0])}"
        kinds[v.name], types[v.name] = type(v), declared
    yield from _ends(graph, path, types, kinds)


def _op_type(v: Op, types: dict[str, Type], p: str) -> tuple[str | None, Type | tuple[Type, ...]]:
    if v.op not in OPS:
        return f"at {p}.op: unknown op {v.op!r}", ((), "")
    for j, name in enumerate(v.inputs):
        if name not in types:
            return f"at {p}.inputs[{j}]: {name!r} is not a value defined before (a tuple is read with Get)", ((), "")
    problem = _attr_problem(v)
    if problem is not None:
        return f"at {p}.attrs: {problem}", ((), "")
    try:
        found = infer(v.op, op_attrs(v), [types[n] for n in v.inputs])
    except ShapeError as e:
        return f"at {p}: {v.op}: {e}", ((), "")
    return None, found


def _ends(graph: Graph, path: str, types: dict[str, Type], kinds: dict[str, type]) -> Iterator[str]:
    for j, name in enumerate(graph.outputs):
        if name not in types:
            yield f"at {path}.outputs[{j}]: {name!r} is not a value of the graph"
    updated: set[str] = set()
    for j, (target, source) in enumerate(graph.updates):
        if kinds.get(target) not in (Param, State):
            yield f"at {path}.updates[{j}][0]: {target!r} is not a parameter or state"
        elif target in updated:
            yield f"at {path}.updates[{j}][0]: {target!r} is updated twice"
        elif source not in types:
            yield f"at {path}.updates[{j}][1]: {source!r} is not a value of the graph"
        elif types[source] != types[target]:
            yield f"at {path}.updates[{j}][1]: {source!r} has type {types[source]}, {target!r} has {types[target]}"
        updated.add(target)


def representation(rule: Graph, path: str, module: Module) -> Iterator[str]:
    """The graph's problems: what the runtime takes for granted (its types included)."""
    return graph_problems(rule, path)


def type_problem(module: Module) -> str | None:
    """The first type problem of the module's graphs (the `.hpg` reader refuses the file)."""
    for i, rule in enumerate(module.rules.values()):
        for problem in graph_problems(rule, f"$.rules[{i}]"):
            return problem
    return None


DIALECT = DialectSpec("tensor", representation=representation, type_problem=type_problem)
