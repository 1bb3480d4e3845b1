"""tensor-autodiff: reverse-mode differentiation of a tensor graph, in the IR.

Appends to the graph the backward ops that define "grad.<name>", the gradient of the scalar
`of` (default "loss") with respect to the value `name`, for every value on a path from a
parameter to `of`, and so "grad.<param>" for every parameter (a parameter that `of` does not
depend on gets zeros). Contributions of several uses are summed with `add` as soon as the last
one is made, so a parameter's gradient is complete as early as the backward allows (the data
parallel pass all-reduces it from there). The backward ops reuse what the forward kept:
attention and cross-entropy read the probabilities their forward op returned.

A graph that already holds "grad.<of>", or has no value `of`, is left as it is: the pass may
run twice, and `-O2` (every pass) on a training step changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, ClassVar

from hpgrem.ir.core import Module
from hpgrem.ir.tensor import Get, Graph, Op, Param
from hpgrem.ir.tensor.build import GraphBuilder
from hpgrem.ir.tensor.dialect import op_attrs
from hpgrem.passes import Option

GRAD = "grad."


def grad_name(value: str) -> str:
    """The name of the gradient of `value`."""
    return GRAD + value


Make = Callable[[str], str]
"""Builds one gradient contribution under the name it is given; returns that name."""


class _Backward:
    """The state of one differentiation: the builder, which values need gradients, and the
    contributions of each value that are still to come."""

    def __init__(self, graph: Graph, of: str):
        self.b = GraphBuilder.extending(graph)
        self.active = _active(graph, of)
        self.pending: dict[str, int] = {}
        self.parts: dict[str, list[str]] = {}
        self.final: dict[str, str] = {}
        self.tuple_grads: dict[str, dict[int, str]] = {}
        self.gets: dict[tuple[str, int], str] = {}
        for v in graph.values:
            if type(v) is Get:
                self.gets.setdefault((v.source, v.index), v.name)
            if v.name in self.active and type(v) is Op:  # a Get hands its gradient to its op
                for x in _inputs(v):
                    if x in self.active:
                        self.pending[x] = self.pending.get(x, 0) + 1

    def contribute(self, x: str, make: Make) -> None:
        """One contribution to the gradient of `x` (`make` may return an existing value
        instead of making one); the last one completes the gradient, summed under "grad.<x>"."""
        if x not in self.active:
            return
        self.pending[x] -= 1
        parts = self.parts.setdefault(x, [])
        if self.pending[x] == 0 and not parts:
            self.final[x] = make(self.b.fresh(grad_name(x)))
            return
        parts.append(make(self.b.fresh(grad_name(x) + ".part")))
        if self.pending[x] == 0:
            total = parts[0]
            for i, p in enumerate(parts[1:], 1):
                last = i == len(parts) - 1
                total = self.b.op("add", total, p, name=grad_name(x) if last else grad_name(x) + ".sum")
            self.final[x] = total

    def saved(self, source: str, index: int) -> str:
        """The forward op `source`'s component `index` (a Get made if the forward made none)."""
        name = self.gets.get((source, index))
        if name is None:
            name = self.gets[(source, index)] = self.b.get(source, index)
        return name

    def grad(self, x: str) -> str | None:
        """The gradient of `x` when complete (None: `of` does not depend on `x`)."""
        return self.final.get(x)


def _inputs(v) -> tuple[str, ...]:
    if type(v) is Get:
        return (v.source,)
    if type(v) is Op:
        return v.inputs
    return ()


def _active(graph: Graph, of: str) -> set[str]:
    """The values that depend on a parameter and that `of` depends on."""
    depends: set[str] = set()
    for v in graph.values:
        if type(v) is Param or any(x in depends for x in _inputs(v)):
            depends.add(v.name)
    values = graph.value_map()
    reach, todo = {of}, [of]
    while todo:
        for x in _inputs(values[todo.pop()]):
            if x not in reach:
                reach.add(x)
                todo.append(x)
    return depends & reach


# ---------------------------------------------------------------------------------------------
# The rules: for an op and the gradient of its result, the contributions to its inputs


GradRule = Callable[[_Backward, Op, dict, "str | dict[int, str]"], None]


def _unbroadcast(bw: _Backward, g: str, x: str) -> Make:
    """The contribution of `g` to `x`, summed over the dims that broadcasting added to `x`."""
    shape = bw.b.type_of(x)[0]
    if bw.b.type_of(g)[0] == shape:
        return lambda name: g
    return lambda name: bw.b.op("sum_to", g, name=name, shape=shape)


def _add(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    for x in op.inputs:
        bw.contribute(x, _unbroadcast(bw, g, x))


def _reshape(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    x = op.inputs[0]
    bw.contribute(x, lambda name: bw.b.op("reshape", g, name=name, shape=bw.b.type_of(x)[0]))


def _matmul(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    a, b = op.inputs
    if attrs["transpose_a"]:
        raise NotImplementedError("tensor-autodiff: no gradient of matmul with transpose_a")
    tb = attrs["transpose_b"]
    bw.contribute(a, lambda name: bw.b.op("matmul", g, b, name=name, transpose_b=not tb))
    if tb:
        bw.contribute(b, lambda name: bw.b.op("matmul", g, a, name=name, transpose_a=True))
    else:
        bw.contribute(b, lambda name: bw.b.op("matmul", a, g, name=name, transpose_a=True))


def _linear(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    x, w, bias = op.inputs
    bw.contribute(x, lambda name: bw.b.op("matmul", g, w, name=name, transpose_b=True))
    bw.contribute(w, lambda name: bw.b.op("matmul", x, g, name=name, transpose_a=True))
    bw.contribute(bias, lambda name: bw.b.op("sum_to", g, name=name, shape=bw.b.type_of(bias)[0]))


def _layernorm(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    x, w, bias = op.inputs
    parts = bw.b.op("layernorm_grad", g, x, w, name=grad_name(op.name) + ".parts", eps=attrs["eps"])
    for i, inp in enumerate((x, w, bias)):
        bw.contribute(inp, lambda name, i=i: bw.b.get(parts, i, name))


def _softmax(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    bw.contribute(op.inputs[0], lambda name: bw.b.op("softmax_grad", g, op.name, name=name))


def _gelu(bw: _Backward, op: Op, attrs: dict, grads: dict[int, str]) -> None:
    if set(grads) != {0}:
        raise NotImplementedError("tensor-autodiff: the tanh that gelu keeps is not differentiable")
    x = op.inputs[0]
    bw.contribute(x, lambda name: bw.b.op("gelu_grad", grads[0], x, bw.saved(op.name, 1), name=name))


def _embedding(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    tokens, table = op.inputs
    vocab = bw.b.type_of(table)[0][0]
    bw.contribute(table, lambda name: bw.b.op("embedding_grad", g, tokens, name=name, vocab=vocab))


def _attention(bw: _Backward, op: Op, attrs: dict, grads: dict[int, str]) -> None:
    if set(grads) != {0}:
        raise NotImplementedError("tensor-autodiff: the attention probabilities are not differentiable")
    probs = bw.saved(op.name, 1)
    bw.contribute(op.inputs[0], lambda name: bw.b.op("causal_attention_grad", grads[0], op.inputs[0], probs,
                                                     name=name, n_head=attrs["n_head"]))


def _cross_entropy(bw: _Backward, op: Op, attrs: dict, grads: dict[int, str]) -> None:
    if set(grads) != {0}:
        raise NotImplementedError("tensor-autodiff: the cross-entropy probabilities are not differentiable")
    logits, targets = op.inputs
    probs = bw.saved(op.name, 1)
    bw.contribute(logits, lambda name: bw.b.op("cross_entropy_grad", grads[0], probs, targets, name=name))


def _allreduce(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    # a sum over the group of values every rank then holds: each rank's part gets the same
    # gradient (Megatron's g: the backward is the identity)
    if attrs["reduce"] != "sum":
        raise NotImplementedError("tensor-autodiff: only an allreduce \"sum\" has a gradient")
    bw.contribute(op.inputs[0], lambda name: g)


def _parallel_copy(bw: _Backward, op: Op, attrs: dict, g: str) -> None:
    # Megatron's f: each rank's use contributes a part; the input's gradient is their sum
    bw.contribute(op.inputs[0], lambda name: bw.b.op("allreduce", g, name=name, group=attrs["group"],
                                                     reduce="sum"))


RULES: dict[str, GradRule] = {
    "add": _add, "reshape": _reshape, "matmul": _matmul, "linear": _linear, "layernorm": _layernorm,
    "gelu": _gelu,
    "softmax": _softmax,
    "embedding": _embedding, "causal_attention": _attention, "cross_entropy": _cross_entropy,
    "allreduce": _allreduce, "parallel_copy": _parallel_copy,
}
"""The ops that can be differentiated; a tuple-valued op's rule takes {component: gradient}."""


def differentiate(module: Module, of: str = "loss") -> Module:
    """`module` with the backward of its graph appended (see the module's docstring)."""
    key, graph = next(iter(module.rules.items()))
    values = graph.value_map()
    if of not in values:
        raise ValueError(f"tensor-autodiff: the graph has no value {of!r} to differentiate")
    if grad_name(of) in values:
        return module
    shape, dtype = values[of].shape, values[of].dtype
    if shape != () or dtype not in ("float32", "float64"):
        raise ValueError(f"tensor-autodiff: {of!r} must be a float scalar, not {dtype} {list(shape)}")
    bw = _Backward(graph, of)
    bw.final[of] = bw.b.op("fill", name=grad_name(of), shape=(), value=1.0, dtype=dtype)
    for v in reversed(graph.values):
        if v.name not in bw.active:
            continue
        g = bw.grad(v.name)
        if type(v) is Get:
            if g is not None:
                known = bw.tuple_grads.setdefault(v.source, {})
                known[v.index] = bw.b.op("add", known[v.index], g) if v.index in known else g
        elif type(v) is Op:
            rule = RULES.get(v.op)
            if rule is None:
                raise NotImplementedError(f"tensor-autodiff: no gradient rule for {v.op!r} ({v.name!r})")
            grads = bw.tuple_grads.get(v.name) if v.dtype == "tuple" else g
            if grads:
                rule(bw, v, op_attrs(v), grads)
    unfinished = [x for x, n in bw.pending.items() if n]
    if unfinished:  # a rule left out an input it should have contributed to
        raise AssertionError(f"tensor-autodiff: the gradient of {unfinished[0]!r} misses contributions")
    for p in graph.params():
        name, g = grad_name(p.name), bw.grad(p.name)
        if g is None:
            bw.b.op("fill", name=name, shape=p.shape, value=0.0, dtype=p.dtype)
        elif g != name:  # the gradient is another value itself: named as a parameter's is
            bw.b.op("reshape", g, name=name, shape=p.shape)
    new = bw.b.graph(graph.outputs, dict(graph.updates), key=graph.key)
    return replace(module, rules={**module.rules, key: replace(new, name=graph.name, span=graph.span)})


@dataclass(frozen=True)
class TensorAutodiff:
    """The pass: `differentiate` every tensor graph with respect to the option `of`."""

    name: ClassVar[str] = "tensor-autodiff"
    dialects: ClassVar[tuple[str, ...]] = ("tensor",)
    options: ClassVar[dict[str, Option]] = {"of": Option("the scalar value to differentiate")}
    of: str = "loss"

    def apply(self, module: Module) -> Module:
        if not module.rules:
            return module
        graph = next(iter(module.rules.values()))
        if self.of not in graph.value_map():
            return module
        return differentiate(module, self.of)
