"""prune-unreachable's PARLOG side (the pass: hpgrem/passes/prune.py)."""

from __future__ import annotations

from hpgrem.ir import Module
from hpgrem.ir.parlog import calls_in


def reachable(module: Module) -> dict | None:
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
