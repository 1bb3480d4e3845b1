"""order-nodes: inside each `,` of a PARLOG body (never across `&`, which orders by itself, nor
across clauses), producers before consumers, by the modes.

A goal produces the variables in its `^` arguments (and the left side of `is`, a new variable
of `=`); it consumes those in its `?` arguments (the operands of `is` and of a test). The goals
are put in a stable topological order (the written order wherever no dependency says
otherwise; a cycle keeps it). The first relation call runs first, in the committing task, and
the others in order after it, so a consumer placed after its producer finds its input bound
more often instead of suspending.

It records `arith_tasks` for every relation: `X is E` whose operands wait for goals of the
same body becomes a task of its own, in its place in that order, with a step made for its
expression (pam/parlog/rules.py), instead of the generic evaluator suspending at commit (once per
operand).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpgrem.ir import Call, Conj, ConjOp, Dialect, Module, Relation, Var, transform, walk
from hpgrem.passes import annotated


def _vars(terms) -> set[int]:
    return {n.index for t in terms for n in walk(t) if isinstance(n, Var)}


class Flow:
    """What each goal produces and consumes, by the modes of the module's relations."""

    def __init__(self, module: Module):
        self.module = module

    def produces(self, c: Call) -> set[int]:
        rel = self.module.relations.get(c.target)
        if rel is not None:
            return _vars(a for a, m in zip(c.args, rel.modes) if m == "^")
        if c.target == "is/2":
            return _vars(c.args[:1])
        if c.target in ("=/2", "functor/3", "arg/3", "=../2", "atom_codes/2", "number_codes/2", "length/2"):
            return _vars(c.args)
        return set()

    def consumes(self, c: Call) -> set[int]:
        rel = self.module.relations.get(c.target)
        if rel is not None:
            return _vars(a for a, m in zip(c.args, rel.modes) if m == "?")
        if c.target == "is/2":
            return _vars(c.args[1:])
        if c.target in ("=/2", "functor/3", "arg/3", "=../2", "atom_codes/2", "number_codes/2", "length/2"):
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


@dataclass
class OrderNodes:
    name: str = "order-nodes"
    requires: tuple[str, ...] = ()
    invalidates: tuple[str, ...] = ("granularity",)  # bodies change order (costs stay; be safe)

    def apply(self, module: Module) -> Module:
        if module.dialect != Dialect.PARLOG:
            return module
        flow = Flow(module)

        def reorder(node):  # once, bottom up (a cycle's order is not a fixpoint to rewrite to)
            if not isinstance(node, Conj) or node.op != ConjOp.PARALLEL:
                return node
            parts = flow.order(node.parts)
            return node if all(a is b for a, b in zip(parts, node.parts)) else replace(node, parts=parts)

        rules = {key: transform(rel, reorder) if isinstance(rel, Relation) else rel for key, rel in module.rules.items()}
        module = replace(module, rules=rules)
        return annotated(module, {key: {"arith_tasks": True} for key in module.relations})
