"""order-nodes: inside each `,` of a PARLOG body (never across `&`, which orders by itself, nor
across clauses), producers before consumers, by the modes.

A goal produces the variables in its `^` arguments and consumes those in its `?` arguments
(hpgrem/passes/parlog/flow.py says which for primitives). The goals are put in a stable topological
order (the written order wherever no dependency says otherwise; a cycle keeps it). The first relation call runs first, in the committing task, and
the others in order after it, so a consumer placed after its producer finds its input bound
more often instead of suspending.

It records `arith_tasks` for every relation: `X is E` whose operands wait for goals of the
same body becomes a task of its own, in its place in that order, with a step made for its
expression (pam/parlog/rules.py), instead of the generic evaluator suspending at commit (once per
operand).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpgrem.ir import Module, transform
from hpgrem.ir.parlog import AllSolutions, Conj, ConjOp
from hpgrem.passes import annotated
from hpgrem.passes.parlog.flow import Flow


@dataclass(frozen=True)
class OrderNodes:
    name: str = "order-nodes"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("arith_tasks",)
    preserves: tuple[str, ...] = ()  # bodies change order: goals' numbers (flow); costs stay, but be safe

    def apply(self, module: Module) -> Module:
        flow = Flow(module)

        def reorder(node):  # once, bottom up (a cycle's order is not a fixpoint to rewrite to)
            if not isinstance(node, Conj) or node.op != ConjOp.PARALLEL:
                return node
            parts = flow.order(node.parts)
            return node if all(a is b for a, b in zip(parts, node.parts)) else replace(node, parts=parts)

        # a search runs its bodies left to right (spec/parlog.md): their order is its meaning
        rules = {key: rel if isinstance(rel, AllSolutions) else transform(rel, reorder)
                 for key, rel in module.rules.items()}
        if any(rules[k] is not r for k, r in module.rules.items()):
            module = replace(module, rules=rules)
        return annotated(module, self, {key: {"arith_tasks": True} for key in module.rules})
