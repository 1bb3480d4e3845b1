"""flow: which goals of a PARLOG body feed which, by the modes (an analysis).

A goal produces the variables in its `^` arguments (and the left side of `is`, a new variable
of `=`); it consumes those in its `?` arguments (the operands of `is` and of a test). `Flow`
answers that for one module (order-nodes orders bodies by it); the analysis records what the
rule compiler needs of it, so the machine computes none of it (pam/parlog/clause_code.py):

- `fed` (per relation): a tuple of (clause, goal, feeder) triples, for each clause whose body
  is a flat `,` of calls without placements: goal number `goal` of that body (in `calls_in`
  order) consumes a variable that goal number `feeder` produces. Clauses are numbered as
  `Relation.clauses()` lists them. The schedule pass lets a goal run in its caller's step only
  when no other goal of the body that becomes a task feeds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module, walk
from hpgrem.ir.parlog import Call, Conj, ConjOp, Var, calls_in
from hpgrem.passes import annotated

# Primitives that bind their arguments rather than wait for them.
_BINDERS = ("=/2", "functor/3", "arg/3", "=../2", "atom_codes/2", "number_codes/2", "length/2")


def _vars(terms) -> set[int]:
    return {n.index for t in terms for n in walk(t) if isinstance(n, Var)}


class Flow:
    """What each goal produces and consumes, by the modes of the module's relations."""

    def __init__(self, module: Module):
        self.module = module

    def produces(self, c: Call) -> set[int]:
        rel = self.module.rules.get(c.target)
        if rel is not None:
            return _vars(a for a, m in zip(c.args, rel.modes) if m == "^")
        if c.target == "is/2":
            return _vars(c.args[:1])
        if c.target in _BINDERS:
            return _vars(c.args)
        return set()

    def consumes(self, c: Call) -> set[int]:
        rel = self.module.rules.get(c.target)
        if rel is not None:
            return _vars(a for a, m in zip(c.args, rel.modes) if m == "?")
        if c.target == "is/2":
            return _vars(c.args[1:])
        if c.target in _BINDERS:
            return set()
        return _vars(c.args)  # tests, write/1, call/1: they wait for their arguments

    def order(self, parts: tuple) -> tuple:
        """`parts` (calls and nested conjunctions) producers first, otherwise as written."""
        made = [self.produces(p) if isinstance(p, Call) else set() for p in parts]
        used = [self.consumes(p) if isinstance(p, Call) else set() for p in parts]
        n = len(parts)
        after = [{j for j in range(n) if j != i and used[i] & made[j] and not (used[j] & made[i])} for i in range(n)]
        out: list[int] = []
        placed: set[int] = set()
        while len(out) < n:
            ready = [i for i in range(n) if i not in placed and after[i] <= placed]
            i = ready[0] if ready else min(set(range(n)) - placed)  # a cycle: as written
            out.append(i)
            placed.add(i)
        return tuple(parts[i] for i in out)

    def feeds(self, calls: list[Call]) -> list[tuple[int, int]]:
        """(goal, feeder) for each pair of `calls` where the feeder produces what the goal
        consumes."""
        made = [self.produces(c) for c in calls]
        return [(i, j) for i, c in enumerate(calls) if (used := self.consumes(c))
                for j in range(len(calls)) if j != i and used & made[j]]


def flat_calls(body) -> list[Call] | None:
    """The goals of a body that is a call or a flat `,` of calls without placements (None for
    any other body: the rule compiler plans those another way)."""
    if body is None:
        return None
    if not (isinstance(body, Call) or isinstance(body, Conj) and body.op == ConjOp.PARALLEL
            and all(isinstance(p, Call) for p in body.parts)):
        return None
    calls = calls_in(body)
    return None if any(c.placement is not None for c in calls) else calls


@dataclass(frozen=True)
class DataFlow:
    name: str = "flow"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("fed",)

    def apply(self, module: Module) -> Module:
        flow = Flow(module)
        notes = {}
        for key, rel in module.rules.items():
            fed = []
            for k, clause in enumerate(rel.clauses()):
                calls = flat_calls(clause.body)
                if calls is not None:
                    fed += [(k, i, j) for i, j in flow.feeds(calls)]
            notes[key] = {"fed": tuple(fed)}
        return annotated(module, self, notes)
