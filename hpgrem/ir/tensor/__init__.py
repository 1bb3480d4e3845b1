"""The tensor dialect's node kinds: a training step (or any tensor computation) as one graph.

A module of dialect "tensor" holds one rule, a `tensor.Graph` (key "step"): its values in SSA
form and topological order, each defined once under a unique name and referred to by that name.
A value is a parameter (`Param`, persistent across steps), an input fed each step (`Input`), an
optimizer state (`State`, persistent), an operation of a kernel on earlier values (`Op`), or one
component of a tuple-valued operation (`Get`). Every value carries its shape and dtype; the
dialect's type check (hpgrem/ir/tensor/dialect.py) infers them again from the operations and
refuses a graph whose declared types disagree. The graph names its `outputs` (such as "loss")
and its `updates`: for each persistent value, the value that replaces it after the step.

The values are a flat tuple, not a nested expression, so a graph of many thousands of ops walks,
prints, verifies and round-trips through `.hpg` without deep recursion.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hpgrem.ir.core import IN, NL, NO_SPAN, OUT, Node, Rule, Span, node

DTYPES = ("float32", "float64", "int64")
"""The element types a tensor may have."""
TUPLE = "tuple"
"""The dtype of a tuple-valued op (its shape is `()`): only `Get` reads it."""

AttrValue = bool | int | float | str | tuple[int, ...]
"""What an op attribute may hold."""

_SHORT = {"float32": "f32", "float64": "f64", "int64": "i64", TUPLE: "tuple"}


def type_text(shape: tuple[int, ...], dtype: str) -> str:
    """A value's type as the printer shows it: `f32[2, 8, 32]`, `i64[]`."""
    return f"{_SHORT.get(dtype, dtype)}[{', '.join(map(str, shape))}]"


@node("tensor")
@dataclass(frozen=True, slots=True)
class Param(Node):
    """A parameter: persistent across steps, updated by the graph's `updates`."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def render(self) -> list:
        return [f"param {self.name}: {type_text(self.shape, self.dtype)}"]


@node("tensor")
@dataclass(frozen=True, slots=True)
class Input(Node):
    """A value fed each step (tokens, targets, the learning rate, the step number)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def render(self) -> list:
        return [f"input {self.name}: {type_text(self.shape, self.dtype)}"]


@node("tensor")
@dataclass(frozen=True, slots=True)
class State(Node):
    """Optimizer state: persistent across steps like a parameter, but not trained."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def render(self) -> list:
        return [f"state {self.name}: {type_text(self.shape, self.dtype)}"]


@node("tensor")
@dataclass(frozen=True, slots=True)
class Op(Node):
    """`name = op(inputs...) {attrs}`: the kernel `op` applied to earlier values. A tuple-valued
    op (several results, dtype "tuple", shape ()) is read through `Get`."""

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, AttrValue], ...]
    shape: tuple[int, ...]
    dtype: str

    def attr(self, key: str, default: AttrValue | None = None) -> AttrValue | None:
        """The attribute `key`, or `default`."""
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    def render(self) -> list:
        attrs = " {" + ", ".join(f"{k}={v!r}" for k, v in self.attrs) + "}" if self.attrs else ""
        return [f"{self.name} = {self.op}({', '.join(self.inputs)}){attrs}: {type_text(self.shape, self.dtype)}"]


@node("tensor")
@dataclass(frozen=True, slots=True)
class Get(Node):
    """Component `index` of the tuple-valued op `source`."""

    name: str
    source: str
    index: int
    shape: tuple[int, ...]
    dtype: str

    def render(self) -> list:
        return [f"{self.name} = {self.source}#{self.index}: {type_text(self.shape, self.dtype)}"]


Value = Param | Input | State | Op | Get
"""A value of a graph."""


@node("tensor")
@dataclass(frozen=True, slots=True)
class Graph(Rule):
    """A tensor computation: `values` in topological order (each name defined once, each op's
    inputs defined before it), the `outputs` it reports, and `updates`: (persistent value, the
    value that replaces it after the step) for parameters and optimizer states."""

    key: str
    name: str
    values: tuple[Value, ...]
    outputs: tuple[str, ...]
    updates: tuple[tuple[str, str], ...]
    span: Span = field(default=NO_SPAN, compare=False)
    arity = 0
    inputs = ()
    block_form = True

    def check(self, module) -> list[str]:
        """Names and references are the dialect's `representation` hook (with JSON paths)."""
        return []

    def render(self) -> list:
        out: list = [f"graph {self.key}:", IN]
        for v in self.values:
            out += [NL, v]
        if self.outputs:
            out += [NL, f"outputs {', '.join(self.outputs)}"]
        for target, source in self.updates:
            out += [NL, f"update {target} <- {source}"]
        return out + [OUT]

    def value_map(self) -> dict[str, Value]:
        """The values by name."""
        return {v.name: v for v in self.values}

    def params(self) -> list[Param]:
        """The parameters, in graph order."""
        return [v for v in self.values if type(v) is Param]


STEP = "step"
"""The key of a training step's graph."""


def graph_of(module) -> Graph:
    """The step graph of a module of the tensor dialect (ValueError if it has none)."""
    rule = module.rules.get(STEP)
    if module.dialect != "tensor" or not isinstance(rule, Graph):
        raise ValueError(f"not a tensor module with a graph {STEP!r}")
    return rule
