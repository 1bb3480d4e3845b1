"""prune-unreachable: drop relations the entry can never call (most of the prelude, usually).

A reachable `call/1` can reach any relation by name at run time, so then nothing is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hpgrem.ir import Module, calls_in


@dataclass(frozen=True)
class PruneUnreachable:
    name: str = "prune-unreachable"

    def apply(self, module: Module) -> Module:
        if module.entry is None:
            return module
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
        return replace(module, relations=kept)
