"""Compile-time estimates about relations, for the scheduler and the cost model: what one
reduction costs, and whether a call can grow into enough work to be worth sending to another PE.
"""

from __future__ import annotations

import networkx as nx

from hpgrem.ir import Module, Relation, Struct, calls_in
from pam.costs import clause_instructions


def _nodes(terms) -> int:
    n, stack = 0, list(terms)
    while stack:
        t = stack.pop()
        n += 1
        if isinstance(t, Struct):
            stack.extend(t.args)
    return n


def branching_relations(module: Module) -> set[str]:
    """Relations whose calls can fan out into unbounded work: some clause of their recursive
    group calls the group twice or more (fib, a search tree). Only their calls are worth
    sending to another PE: this is the compile-time grain estimate, and everything else
    (linear recursion like append, bounded work) stays local."""
    graph = nx.DiGraph()
    for key, rel in module.relations.items():
        graph.add_node(key)
        for group in rel.groups:
            for c in group:
                for call in calls_in(c.body):
                    if call.target in module.relations:
                        graph.add_edge(key, call.target)
    out: set[str] = set()
    for component in nx.strongly_connected_components(graph):
        fans_out = any(
            sum(call.target in component for call in calls_in(c.body)) >= 2
            for key in component for g in module.relations[key].groups for c in g)
        if fans_out:
            out |= component
    return out


def relation_cost(rel: Relation) -> int:
    """Instructions of one reduction of `rel` for the cost model: the mean over its clauses."""
    costs = []
    for group in rel.groups:
        for c in group:
            calls = calls_in(c.body)
            costs.append(clause_instructions(_nodes(c.head), len(c.guard),
                                             _nodes(a for call in calls for a in call.args), len(calls)))
    return round(sum(costs) / len(costs))
