"""A training step as the runtime runs it: value slots, kernel calls and collectives, read once
from a module of the tensor dialect (or built directly, as a test's stand-in).

A `StepGraph` names every value once: the persistent ones (parameters and optimizer state), the
inputs fed each step, and the operations in topological order. An `allreduce` operation is
one member of a bucket (attrs `group`, the name of a group of PEs such as "dp", `bucket` and
`reduce`): the runtime runs all members of a bucket as one collective (runtime.py); a
`reduce_scatter` or `all_gather` is a collective of its own (a `bucket` number of its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field

COLLECTIVES = frozenset({"allreduce", "reduce_scatter", "all_gather"})


@dataclass(frozen=True, slots=True)
class Value:
    """A parameter, state or input: its name, shape and dtype (a numpy dtype name)."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One value defined by a kernel `op` (pam.tensor.kernels) of earlier values. `get` takes
    item `attrs["index"]` of a tuple-valued op's result."""

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: dict = field(hash=False)
    shape: tuple[int, ...] = ()
    dtype: str = "float32"


@dataclass(frozen=True, slots=True)
class StepGraph:
    """One training step: `outputs` names the values it reports (such as "loss" and
    "grad_norm"); `updates` maps each persistent value (parameter or state) to the value that
    replaces it after the step."""

    params: tuple[Value, ...]
    states: tuple[Value, ...]
    inputs: tuple[Value, ...]
    ops: tuple[OpSpec, ...]
    outputs: tuple[str, ...]
    updates: dict = field(hash=False)

    @property
    def persistent(self) -> tuple[Value, ...]:
        return self.params + self.states

    def input(self, name: str) -> Value:
        for v in self.inputs:
            if v.name == name:
                return v
        raise KeyError(name)


def step_graph(module) -> StepGraph:
    """The step graph of `module`: a StepGraph as it is, or read from the `tensor.Graph` rule
    "step" of a module of the tensor dialect (hpgrem/ir/tensor/__init__.py)."""
    if isinstance(module, StepGraph):
        return module
    from hpgrem.ir.tensor import Get, Input, Param, State, graph_of
    from hpgrem.ir.tensor.dialect import op_attrs

    graph = graph_of(module)
    kinds: dict[type, list] = {Param: [], State: [], Input: []}
    ops = []
    for v in graph.values:
        if type(v) in kinds:
            kinds[type(v)].append(Value(v.name, v.shape, v.dtype))
        elif type(v) is Get:
            ops.append(OpSpec(v.name, "get", (v.source,), {"index": v.index}, v.shape, v.dtype))
        else:
            ops.append(OpSpec(v.name, v.op, v.inputs, op_attrs(v), v.shape, v.dtype))
    return StepGraph(tuple(kinds[Param]), tuple(kinds[State]), tuple(kinds[Input]), tuple(ops),
                     tuple(graph.outputs), dict(graph.updates))
