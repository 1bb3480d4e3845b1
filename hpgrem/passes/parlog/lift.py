"""lift: granularity estimation as a function of input size, and node lifting (PARLOG).

The `granularity` analysis marks a relation `exportable` when its recursive group fans out
(calls itself twice or more in a clause). For such a relation this pass looks for an integer
input that every self call decreases by a constant (`N1 is N - 1, ..., p(N1, ...)`): the work
of a call then grows as base^N, base being the root of sum(x^-d) = 1 over the decrements d of
the fanning clause (fib: 1 and 2, the golden ratio). It records `lift.lift` = (position, base): at
run time a goal of the relation is lifted into a task worth exporting (pam/parlog/goal.py) only when
cost * base^N reaches a threshold made from the link's cost (a message costs as much as that
much work); below it the goal stays on its PE and runs there, with no message. A relation
whose size cannot be found keeps the plain rule (every goal of it may be exported).
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module
from hpgrem.ir.parlog import Clause, Int, Relation, Struct, Var, calls_in
from hpgrem.passes import annotated


def _decrement(clause: Clause, position: int, arg) -> int | None:
    """How much `arg` (a self call's argument) is below the head's argument `position`."""
    head = clause.head[position]
    if not isinstance(head, Var) or not isinstance(arg, Var):
        return None
    for g in (*clause.guard, *calls_in(clause.body)):
        if g.target == "is/2" and g.args[0] == arg:
            e = g.args[1]
            if isinstance(e, Struct) and e.name == "-" and len(e.args) == 2 and e.args[0] == head \
                    and isinstance(e.args[1], Int) and e.args[1].value > 0:
                return e.args[1].value
    return None


def growth(decrements: list[int]) -> float:
    """The x > 1 with sum(x ** -d) = 1: how the number of calls grows per unit of size."""
    lo, hi = 1.0, 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid ** -d for d in decrements) > 1:
            lo = mid
        else:
            hi = mid
    return round(hi, 4)


def size_argument(rel: Relation) -> tuple[int, float] | None:
    """The input that every self call decreases, and the growth of the fanning clauses."""
    for i, mode in enumerate(rel.modes):
        if mode != "?":
            continue
        widest: list[int] = []
        ok = True
        for clause in rel.clauses():
            calls = [c for c in calls_in(clause.body) if c.target == rel.key]
            ds = [_decrement(clause, i, c.args[i]) for c in calls]
            if None in ds:
                ok = False
                break
            if len(ds) > len(widest):
                widest = ds
        if ok and len(widest) >= 2:
            return i, growth(widest)
    return None


@dataclass(frozen=True)
class Lift:
    name: str = "lift"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("lift",)

    def apply(self, module: Module) -> Module:
        notes = {}
        for key, rel in module.rules.items():
            found = size_argument(rel)
            if found is not None:
                notes[key] = {"lift": found}
        return annotated(module, self, notes)
