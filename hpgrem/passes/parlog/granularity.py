"""granularity: compile-time estimates about PARLOG relations, for the scheduler and the cost
model (DESIGN.md, "Distribution"). Annotations, per relation (`granularity.cost`, ...):

- `cost` (int): abstract-machine instructions of one reduction, the mean over its clauses;
- `exportable` (bool): whether its calls can fan out into unbounded work, so that they are
  worth sending to another PE. Everything else (linear recursion like append, bounded work)
  stays local.

(The input positions a call waits for are `Relation.inputs`, a property of the rule itself.)
"""

from __future__ import annotations

from dataclasses import dataclass

from hpgrem.ir import Module
from hpgrem.ir.parlog import Relation, Struct, calls_in
from hpgrem.passes import annotated


@dataclass(frozen=True)
class Granularity:
    name: str = "granularity"
    dialects: tuple[str, ...] = ("parlog",)
    records: tuple[str, ...] = ("cost", "exportable")

    def apply(self, module: Module) -> Module:
        branching = branching_relations(module)
        return annotated(module, self, {key: {"cost": relation_cost(rel), "exportable": key in branching}
                                        for key, rel in module.rules.items()})


def branching_relations(module: Module) -> set[str]:
    """Relations some clause of whose recursive group calls the group twice or more (fib, a
    search tree)."""
    import networkx as nx  # here: importing it costs 0.15 s, and an ML run never needs it

    graph = nx.DiGraph()
    for key, rel in module.rules.items():
        graph.add_node(key)
        for group in rel.groups:
            for c in group:
                for call in calls_in(c.body):
                    if call.target in module.rules:
                        graph.add_edge(key, call.target)
    out: set[str] = set()
    for component in nx.strongly_connected_components(graph):
        fans_out = any(
            sum(call.target in component for call in calls_in(c.body)) >= 2
            for key in component for g in module.rules[key].groups for c in g)
        if fans_out:
            out |= component
    return out


def relation_cost(rel: Relation) -> int:
    """Instructions of one reduction of `rel`: the mean over its clauses."""
    costs = []
    for group in rel.groups:
        for c in group:
            calls = calls_in(c.body)
            costs.append(clause_instructions(_nodes(c.head), len(c.guard),
                                             _nodes(a for call in calls for a in call.args), len(calls)))
    return round(sum(costs) / len(costs))


def clause_instructions(head_nodes: int, guard_goals: int, built_nodes: int, body_goals: int) -> int:
    """Abstract-machine instructions of one clause's reduction, WAM-like: a call and a proceed,
    a get or unify per head node matched, a test per guard goal, a put per node built, and a
    put-arguments-and-spawn per body goal (ours)."""
    return 2 + head_nodes + 2 * guard_goals + built_nodes + 3 * body_goals


def _nodes(terms) -> int:
    """Term nodes in `terms`, counted through structures as the rule compiler builds them: a
    structure used in several places (the IR is a graph) once, its leaves (variables,
    constants) once per place in it; for a tree, every node once. Linear in distinct nodes."""
    n, seen, stack = 0, set(), list(terms)
    while stack:
        t = stack.pop()
        if isinstance(t, Struct):
            if id(t) in seen:
                continue
            seen.add(id(t))
            stack.extend(t.args)
        n += 1
    return n
