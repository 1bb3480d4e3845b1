"""Building tensor graphs: `GraphBuilder` appends values with their types inferred (the model
builder, the autodiff and optimizer passes, and tests use it), so a graph it builds passes the
dialect's type check by construction."""

from __future__ import annotations

from hpgrem.ir.core import Module
from hpgrem.ir.tensor import STEP, TUPLE, AttrValue, Get, Graph, Input, Op, Param, State, Value
from hpgrem.ir.tensor.dialect import OPS, ShapeError, Type, infer, op_attrs


class GraphBuilder:
    """Values appended in order; each method returns the new value's name."""

    def __init__(self, values: tuple[Value, ...] | list[Value] = ()) -> None:
        self.values: list[Value] = []
        self.types: dict[str, Type] = {}
        self.parts: dict[str, tuple[Type, ...]] = {}
        self._counts: dict[str, int] = {}
        for v in values:
            self._append(v)

    @classmethod
    def extending(cls, graph: Graph) -> GraphBuilder:
        """A builder that continues `graph`'s values."""
        return cls(graph.values)

    def _append(self, v: Value) -> str:
        if v.name in self.types or v.name in self.parts:
            raise ValueError(f"value {v.name!r} is defined twice")
        self.values.append(v)
        if v.dtype == TUPLE:
            self.parts[v.name] = self._tuple_types(v)
        else:
            self.types[v.name] = (v.shape, v.dtype)
        return v.name

    def _tuple_types(self, v: Op) -> tuple[Type, ...]:
        return infer(v.op, op_attrs(v), [self.types[n] for n in v.inputs])  # type: ignore[return-value]

    def fresh(self, prefix: str) -> str:
        """A name not yet used, `prefix` itself if free."""
        name = prefix
        while name in self.types or name in self.parts:
            self._counts[prefix] = n = self._counts.get(prefix, 0) + 1
            name = f"{prefix}.{n}"
        return name

    def param(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        return self._append(Param(name, tuple(shape), dtype))

    def input(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        return self._append(Input(name, tuple(shape), dtype))

    def state(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        return self._append(State(name, tuple(shape), dtype))

    def op(self, op: str, *inputs: str, name: str | None = None, **attrs: AttrValue) -> str:
        """`name = op(inputs) {attrs}` (a fresh name from the op's when none is given); a
        tuple-valued op's components are read with `get` (or use `op_parts`)."""
        sig = OPS[op]
        full = {k: d for k, (_, d) in sig.attrs.items()}
        full.update(attrs)
        missing = [k for k, v in full.items() if v is None]
        if missing:
            raise ShapeError(f"{op} needs the attribute {missing[0]!r}")
        for n in inputs:
            if n not in self.types:
                raise ValueError(f"{op}: {n!r} is not a value defined before")
        result = infer(op, full, [self.types[n] for n in inputs])
        stored = tuple(sorted(full.items()))  # complete: a kernel reads every attribute
        shape, dtype = ((), TUPLE) if sig.tuple_valued else result
        return self._append(Op(self.fresh(name or op), op, tuple(inputs), stored, shape, dtype))

    def get(self, source: str, index: int, name: str | None = None) -> str:
        shape, dtype = self.parts[source][index]
        return self._append(Get(self.fresh(name or f"{source}#{index}"), source, index, shape, dtype))

    def op_parts(self, op: str, *inputs: str, names: tuple[str, ...], name: str | None = None,
                 **attrs: AttrValue) -> list[str]:
        """A tuple-valued op and a `Get` of each of its first `len(names)` components."""
        source = self.op(op, *inputs, name=name, **attrs)
        return [self.get(source, i, n) for i, n in enumerate(names)]

    def type_of(self, name: str) -> Type:
        return self.types[name]

    def graph(self, outputs: tuple[str, ...] | list[str] = (), updates: dict[str, str] | None = None,
              key: str = STEP) -> Graph:
        """The graph built so far."""
        return Graph(key, key, tuple(self.values), tuple(outputs), tuple((updates or {}).items()))

    def module(self, source: str, outputs: tuple[str, ...] | list[str] = (),
               updates: dict[str, str] | None = None) -> Module:
        """A tensor module holding the graph under its key."""
        g = self.graph(outputs, updates)
        return Module(source, {g.key: g}, None, "tensor")
