"""prune-unreachable: drop relations and functions the entry can never reach (most of the
prelude, usually, PARLOG's or ML's).

A reachable `call/1` or `call/3` can reach any relation by name at run time, so then no relation is dropped.
An ML function is reached by a call or by making a closure of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpgrem.ir import Module, walk
from hpgrem.ir.ml import CallKnown, MakeClosure
from hpgrem.ir.parlog import calls_in


@dataclass(frozen=True)
class PruneUnreachable:
    name: str = "prune-unreachable"
    dialects: tuple[str, ...] = ("parlog", "ml")
    # PARLOG estimates stay true (a relation's recursive group is reachable whenever the
    # relation is), and so does what each kept body's goals feed; slots of ML globals are
    # numbered over the functions kept (ml-kinds is not preserved).
    preserves: tuple[str, ...] = ("granularity", "flow")

    def apply(self, module: Module) -> Module:
        if module.entry is None:
            return module
        kept = _reachable_functions(module) if module.dialect == "ml" else _reachable_relations(module)
        return module if kept is None or len(kept) == len(module.rules) else replace(module, rules=kept)


def _reachable_relations(module: Module) -> dict | None:
    """The relations the entry reaches (None when a `call/1` may reach any)."""
    seen = {module.entry.target}
    todo = [module.entry.target]
    while todo:
        rel = module.rules.get(todo.pop())
        if rel is None:
            continue
        for group in rel.groups:
            for clause in group:
                for call in (*clause.guard, *calls_in(clause.body)):
                    if call.target in ("call/1", "call/3"):
                        return None
                    if call.target in module.rules and call.target not in seen:
                        seen.add(call.target)
                        todo.append(call.target)
    return {k: r for k, r in module.rules.items() if k in seen}


def _reachable_functions(module: Module) -> dict:
    seen = {module.entry.target}
    todo = [module.entry.target]
    while todo:
        fn = module.rules.get(todo.pop())
        for x in walk(fn.body) if fn is not None else ():
            if isinstance(x, (CallKnown, MakeClosure)) and x.function not in seen:
                seen.add(x.function)
                todo.append(x.function)
    return {k: f for k, f in module.rules.items() if k in seen}
