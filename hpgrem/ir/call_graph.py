"""Strongly connected components of a call graph: the ML type checker's binding groups
(ml_types) and the ML passes' recursion (ml-kinds, ml-inline).

A small iterative Tarjan rather than networkx: importing networkx costs about 0.15 s, which
every `hpgrem run` of an ML program paid (docs/ml.md, start-up)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def components(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of the graph `node -> successors` (every node is a
    key; successors that are not keys are ignored), successors' components first, each in the
    order Tarjan's stack gives. Iterative, so a long chain of calls does not recurse in Python."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    succ = {k: [w for w in vs if w in edges] for k, vs in edges.items()}
    for root in edges:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(succ[root]))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(succ[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out
