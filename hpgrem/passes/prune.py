"""prune-unreachable: drop relations and functions the entry can never reach (most of the
prelude, usually, PARLOG's or ML's).

A reachable `call/1` can reach any relation by name at run time, so then no relation is dropped.
An ML function is reached by a call or by making a closure of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpgrem.ir import CallKnown, MakeClosure, Module, calls_in, walk


@dataclass(frozen=True)
class PruneUnreachable:
    name: str = "prune-unreachable"
    requires: tuple[str, ...] = ()
    # Slots of ML globals are numbered over the functions kept; PARLOG estimates stay true (a
    # relation's recursive group is reachable whenever the relation is).
    invalidates: tuple[str, ...] = ("ml-kinds",)

    def apply(self, module: Module) -> Module:
        if module.entry is None:
            return module
        if module.functions:
            return replace(module, rules=_reachable_functions(module))
        seen = {module.entry.target}
        todo = [module.entry.target]
        while todo:
            rel = module.relations.get(todo.pop())
            if rel is None:
                continue
            for group in rel.groups:
                for clause in group:
                    for call in (*clause.guard, *calls_in(clause.body)):
                        if call.target == "call/1":
                            return module
                        if call.target in module.relations and call.target not in seen:
                            seen.add(call.target)
                            todo.append(call.target)
        kept = {k: r for k, r in module.relations.items() if k in seen}
        return replace(module, rules=kept)


def _reachable_functions(module: Module) -> dict:
    seen = {module.entry.target}
    todo = [module.entry.target]
    while todo:
        fn = module.functions.get(todo.pop())
        for x in walk(fn.body) if fn is not None else ():
            if isinstance(x, (CallKnown, MakeClosure)) and x.function not in seen:
                seen.add(x.function)
                todo.append(x.function)
    return {k: f for k, f in module.functions.items() if k in seen}
